/* prog/prog.c: the programs' command-line grammar, value parsers and
 * clock (contracts in prog/prog.h).
 *
 * Left out: elements as doubles (prog/values.c).
 */
#define _POSIX_C_SOURCE 200809L

#include "prog/prog.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- who is speaking ---- */

const char *prog_name = "prog";
int prog_rank = 0;

void prog_identify(const char *name, int rank)
{
    prog_name = name;
    prog_rank = rank;
}

/* ---- the clock ---- */

double prog_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- refusals ---- */

static char refusal[512];

int prog_refuse(const char *format, ...)
{
    va_list ap;

    va_start(ap, format);
    vsnprintf(refusal, sizeof refusal, format, ap);
    va_end(ap);
    if (prog_rank == 0)
        fprintf(stderr, "%s: %s\n", prog_name, refusal);
    return -1;
}

const char *prog_refusal(void)
{
    return refusal;
}

/* "-b/--minbytes" or "--impl", for messages. */
static const char *flag_name(const struct option *long_options, int opt)
{
    static char text[64];

    for (const struct option *lo = long_options; lo->name != NULL; lo++)
        if (lo->val == opt) {
            if (opt < 256)
                snprintf(text, sizeof text, "-%c/--%s", opt, lo->name);
            else
                snprintf(text, sizeof text, "--%s", lo->name);
            return text;
        }
    return "?";
}

int prog_bad_value(const struct option *long_options, int opt,
                   const char *value, const char *want)
{
    return prog_refuse("invalid value '%s' for %s: %s", value,
                       flag_name(long_options, opt), want);
}

/* ---- the command line ---- */

void prog_print_usage(FILE *out, const prog_cli_t *cli)
{
    fprintf(out, "Usage: %s %s%s"
            "  -h, --help               this text\n%s", prog_name,
            cli->usage_args, cli->usage_options, cli->usage_notes);
}

/* Whether arg is "--NAME=..." for a NAME of long_options that takes no
 * value: getopt calls that an unknown option too ('?'). */
static int value_on_switch(const char *arg, const struct option *lo)
{
    const char *eq = strchr(arg, '=');

    if (strncmp(arg, "--", 2) != 0 || eq == NULL)
        return 0;
    for (; lo->name != NULL; lo++)
        if (lo->has_arg == no_argument &&
            strlen(lo->name) == (size_t)(eq - arg - 2) &&
            strncmp(lo->name, arg + 2, (size_t)(eq - arg - 2)) == 0)
            return 1;
    return 0;
}

int prog_getopt(int argc, char **argv, const prog_cli_t *cli)
{
    int opt;

    opterr = 0; /* getopt would speak on every rank; prog_refuse does not */
    opt = getopt_long(argc, argv, cli->optstring, cli->long_options, NULL);
    if (opt == 'h') {
        if (prog_rank == 0)
            prog_print_usage(stdout, cli);
        return PROG_OPT_HELP;
    }
    if (opt == '?' || opt == ':') {
        const char *arg = argv[optind - 1];

        if (opt == ':')
            prog_refuse("missing value for '%s'", arg);
        else if (value_on_switch(arg, cli->long_options))
            prog_refuse("'%.*s' takes no value", (int)strcspn(arg, "="),
                        arg);
        else
            prog_refuse("unknown option '%s'", arg);
        if (prog_rank == 0)
            prog_print_usage(stderr, cli);
        return PROG_OPT_BAD;
    }
    if (opt == -1 && optind < argc) {
        prog_refuse("unexpected argument '%s'", argv[optind]);
        return PROG_OPT_BAD;
    }
    return opt == -1 ? PROG_OPT_END : opt;
}

/* ---- values ---- */

int prog_parse_ll(const char *text, long long min, long long max,
                  long long *out)
{
    char *end;
    long long value;

    errno = 0;
    value = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE || value < min ||
        value > max)
        return -1;
    *out = value;
    return 0;
}

int prog_parse_int(const char *text, long min, long max, int *out)
{
    long long value;

    if (prog_parse_ll(text, min, max, &value) != 0)
        return -1;
    *out = (int)value;
    return 0;
}

int prog_parse_u64(const char *text, uint64_t *out)
{
    char *end;
    unsigned long long value;

    /* strtoull takes "-1" as 2^64 - 1. */
    if (text[strspn(text, " \t")] == '-')
        return -1;
    errno = 0;
    value = strtoull(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE)
        return -1;
    *out = (uint64_t)value;
    return 0;
}

int prog_parse_double(const char *text, double *out)
{
    char *end;
    double value;

    errno = 0;
    value = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(value))
        return -1;
    *out = value;
    return 0;
}

int prog_parse_word(const char *text, const char *const *words)
{
    for (int i = 0; words[i] != NULL; i++)
        if (strcmp(text, words[i]) == 0)
            return i;
    return -1;
}
