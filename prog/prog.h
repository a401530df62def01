/* prog/prog.h: what every program (examples/, bench/, test/) shares and
 * the library does not: one command-line grammar (getopt_long, "--flag
 * value" and "--flag=value", rank 0 alone speaking, exit 2 on a bad flag)
 * with its value parsers and refusal messages, a monotonic clock, and
 * elements of any dtype read and written as doubles. Prefix prog_.
 *
 * Depends on libc and ring/ only (never hvd/, models/, examples/ or
 * bench/), so that the programs of every layer above can use it. Left
 * out: MPI calls (the caller says which rank it is), fatal checks (each
 * folder's programs word their own), and anything about one program's
 * flags.
 */
#ifndef HVD_PROG_PROG_H
#define HVD_PROG_PROG_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ring/ring.h"

/* ---- who is speaking ---- */

/* Set by prog_identify(); until then the program is "prog" and rank 0.
 * Every rank reads the same argv, so rank 0 alone prints what is wrong
 * with it. */
extern const char *prog_name; /* "allreduce_perf": starts every message */
extern int prog_rank;          /* in MPI_COMM_WORLD; 0 without MPI */

void prog_identify(const char *name, int rank);

/* ---- the clock ---- */

/* Seconds on a monotonic clock. */
double prog_now(void);

/* ---- the command line ---- */

/* The last row of a long_options table: --help (-h), then the end. */
#define PROG_END_LONG_OPTIONS                                                  \
    {"help", no_argument, NULL, 'h'},                                          \
    {NULL, 0, NULL, 0}

/* A program's command line: what getopt reads and what -h prints. */
typedef struct {
    const char *optstring; /* getopt's, starting with ':' and holding 'h' */
    const struct option *long_options; /* ends in PROG_END_LONG_OPTIONS */
    /* The usage text: "Usage: PROG " and usage_args, then the option
     * lines, the -h line and the notes (or ""); each ends in a newline. */
    const char *usage_args, *usage_options, *usage_notes;
} prog_cli_t;

/* The usage text of cli, to out. */
void prog_print_usage(FILE *out, const prog_cli_t *cli);

/* What prog_getopt() returns besides an option. */
enum {
    PROG_OPT_END = -1,  /* all read, no stray argument */
    PROG_OPT_HELP = -2, /* -h: usage printed on stdout (rank 0) */
    PROG_OPT_BAD = -3,  /* refused (prog_refuse), with the usage */
};

/* getopt_long() with rank 0 alone speaking: the next option (its value in
 * optarg), or one of PROG_OPT_*. "PROG: unknown option '--x'", "missing
 * value for '--x'", "'--x' takes no value", "unexpected argument 'x'". */
int prog_getopt(int argc, char **argv, const prog_cli_t *cli);

/* Refuses the command line: keeps "MESSAGE" (printf's format) for
 * prog_refusal(), rank 0 prints "PROG: MESSAGE" on stderr. Returns -1,
 * so that callers can `return prog_refuse(...)`. */
int prog_refuse(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/* The last refusal's message (without "PROG: "), "" when none: for a
 * program whose ranks may have been given different command lines, to
 * tell another rank's refusal. */
const char *prog_refusal(void);

/* prog_refuse("invalid value 'VALUE' for -n/--iters: WANT"), naming opt
 * as long_options does. Returns -1. */
int prog_bad_value(const struct option *long_options, int opt,
                   const char *value, const char *want);

/* Value parsers: 0 and *out set, or -1 (nothing printed). Integers are
 * decimal and nothing else ("010" is 10, "0x10" refused). */
int prog_parse_int(const char *text, long min, long max, int *out);
int prog_parse_ll(const char *text, long long min, long long max,
                  long long *out);
int prog_parse_u64(const char *text, uint64_t *out); /* no sign */
int prog_parse_double(const char *text, double *out); /* finite */

/* Index of text in the NULL-terminated list words, or -1. */
int prog_parse_word(const char *text, const char *const *words);

/* ---- elements of any dtype as doubles ---- */

/* Element idx of buf, of type dtype, as a double and back (0 for an
 * unknown dtype). Integer types wrap as the integer reductions do (modulo
 * 2^bits); halves round as the reductions do. Every value the benchmarks
 * and tests use is exact in a double. */
void prog_value_store(void *buf, size_t idx, ring_dtype_t dtype, double v);
double prog_value_load(const void *buf, size_t idx, ring_dtype_t dtype);

#endif /* HVD_PROG_PROG_H */
