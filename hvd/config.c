/* hvd/config.c: the HVD_* environment variables, parsed once by hvd_init
 * from one table, the check that the ranks agree on those that must, and
 * the log they set the level of (every message of hvd/ goes through it).
 * A bad value is an error naming the variable and what it expects, never
 * a silent default. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "hvd/config.h"

hvd__log_level_t hvd__log_level = HVD__LOG_WARNING;
int hvd__log_rank = -1;

static const char *const hvd__level_names[] = {"error", "warning", "info",
                                               "debug", NULL};

double hvd__now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static _Thread_local char hvd__last_error[1024];

const char *hvd__thread_error(void) { return hvd__last_error; }

void hvd__set_thread_error(const char *text)
{
    snprintf(hvd__last_error, sizeof hvd__last_error, "%s", text);
}

void hvd__log(hvd__log_level_t level, const char *fmt, ...)
{
    if (level > hvd__log_level) return;
    char line[8192]; /* a whole HVD_TIMELINE path, quoted back, fits */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (level == HVD__LOG_ERROR) hvd__set_thread_error(line);
    /* One fprintf per line, so lines of different ranks do not interleave. */
    if (hvd__log_rank < 0)
        fprintf(stderr, "hvd %s: %s\n", hvd__level_names[level], line);
    else
        fprintf(stderr, "hvd[%d] %s: %s\n", hvd__log_rank,
                hvd__level_names[level], line);
}

void hvd__log_mpi_error(int rc, const char *call, const char *file, int line)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    hvd__log(HVD__LOG_ERROR, "%s:%d: %s failed: %s", file, line, call, text);
}

/* ---- types: text -> field (0 or -1), and field -> canonical text ---- */

/* The canonical text is what ranks compare (hvd__config_agree): one
 * spelling per value, so "128M" and "134217728", or "SHM" and "shm",
 * agree. */
typedef struct {
    int (*parse)(const char *text, void *field);
    void (*print)(const void *field, char *out, size_t nbytes);
} hvd__type_t;

/* Bytes, with an optional K, M or G (powers of 1024). */
static int hvd__parse_bytes(const char *text, void *field)
{
    return ring_parse_bytes(text, field) == RING_OK ? 0 : -1;
}

static void hvd__print_bytes(const void *field, char *out, size_t nbytes)
{
    snprintf(out, nbytes, "%zu", *(const size_t *)field);
}

/* A non-negative decimal number; scaled to seconds by the caller's table. */
static int hvd__parse_number(const char *text, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(text, &end);
    return errno || end == text || *end || !isfinite(*v) || *v < 0 ? -1 : 0;
}

static int hvd__parse_seconds(const char *text, void *field)
{
    return hvd__parse_number(text, field);
}

static int hvd__parse_millis(const char *text, void *field)
{
    double ms;
    if (hvd__parse_number(text, &ms) || ms > 60e3) return -1;
    *(double *)field = ms * 1e-3;
    return 0;
}

/* Seconds, however they were given: enough digits to tell any two apart. */
static void hvd__print_seconds(const void *field, char *out, size_t nbytes)
{
    snprintf(out, nbytes, "%.17g s", *(const double *)field);
}

static int hvd__parse_path(const char *text, void *field)
{
    if (strlen(text) >= sizeof ((hvd__config_t *)0)->timeline) return -1;
    strcpy(field, text);
    return 0;
}

static void hvd__print_path(const void *field, char *out, size_t nbytes)
{
    snprintf(out, nbytes, "%s", (const char *)field);
}

static const hvd__type_t hvd__bytes = {hvd__parse_bytes, hvd__print_bytes};
static const hvd__type_t hvd__seconds = {hvd__parse_seconds,
                                         hvd__print_seconds};
static const hvd__type_t hvd__millis = {hvd__parse_millis,
                                        hvd__print_seconds};
static const hvd__type_t hvd__path = {hvd__parse_path, hvd__print_path};

/* The index of text among the NULL-ended names, ignoring case; -1 when
 * none. */
static int hvd__name_index(const char *text, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcasecmp(text, names[i]) == 0) return i;
    return -1;
}

/* ---- the table ---- */

/* A setting is of `type`, or, when that is NULL, is one of `names` (any
 * case), stored as its index in an enum field.
 *
 * agree: whether every rank must have the same value, because it decides
 * what the ranks send or how their messages pair up; hvd_init checks
 * these (hvd__config_agree). The fusion threshold groups requests (each
 * rank groups cached ones itself, and it sizes the shared window); the
 * intra-node path and the hierarchical allreduce choose which
 * communicators and windows an allreduce uses. The others only tune this
 * rank or are read on rank 0 alone (the timeline, and the stall times:
 * rank 0's coordinator decides stalls), so they may differ. */
static const char *const hvd__bind_names[] = {"core", "numa", "none", NULL};
static const char *const hvd__intranode_names[] = {"auto", "shm", "ring", NULL};
static const char *const hvd__bool_names[] = {"0", "1", NULL};

static const struct hvd__setting {
    const char *name, *fallback, *expects;
    size_t offset;
    const hvd__type_t *type;
    const char *const *names;
    int agree;
} hvd__settings[] = {
    {"HVD_FUSION_THRESHOLD", "128M", "bytes such as 0, 64K or 128M",
     offsetof(hvd__config_t, fusion_threshold), &hvd__bytes, NULL, 1},
    {"HVD_CYCLE_TIME", "1", "milliseconds from 0 to 60000",
     offsetof(hvd__config_t, cycle_time_s), &hvd__millis, NULL, 0},
    {"HVD_TIMELINE", "", "a file path",
     offsetof(hvd__config_t, timeline), &hvd__path, NULL, 0},
    {"HVD_STALL_CHECK_TIME", "60", "seconds, 0 or more",
     offsetof(hvd__config_t, stall_check_s), &hvd__seconds, NULL, 0},
    /* Finite, so that a rank that never makes a collective fails the job
     * with the stall report instead of holding every rank's allocation
     * for ever: 10 minutes, PyTorch's default process-group timeout for
     * NCCL (gloo's is 30). Ten stall warnings come first, and work one
     * rank does alone (rank 0 writing a checkpoint, evaluating) takes
     * less; a job that needs longer raises it, and 0 still turns it
     * off. */
    {"HVD_STALL_SHUTDOWN_TIME", "600", "seconds, 0 (off) or more",
     offsetof(hvd__config_t, stall_shutdown_s), &hvd__seconds, NULL, 0},
    {"HVD_LOG_LEVEL", "warning", "error, warning, info or debug",
     offsetof(hvd__config_t, log_level), NULL, hvd__level_names, 0},
    {"HVD_BIND", "core", "core, numa or none",
     offsetof(hvd__config_t, bind), NULL, hvd__bind_names, 0},
    {"HVD_INTRANODE", "auto", "auto, shm or ring",
     offsetof(hvd__config_t, intranode), NULL, hvd__intranode_names, 1},
    {"HVD_HIERARCHICAL_ALLREDUCE", "0", "0 or 1",
     offsetof(hvd__config_t, hierarchical), NULL, hvd__bool_names, 1},
    /* 1 ms spans an mlp step, so neither thread sleeps while it trains. */
    {"HVD_SPIN_TIME", "1", "milliseconds from 0 to 60000",
     offsetof(hvd__config_t, spin_s), &hvd__millis, NULL, 0},
};
enum { HVD__NSETTINGS = sizeof hvd__settings / sizeof hvd__settings[0] };

/* Enum fields are stored through an int. */
_Static_assert(sizeof(hvd__log_level_t) == sizeof(int) &&
                   sizeof(((hvd__config_t *)0)->hierarchical) == sizeof(int) &&
                   sizeof(hvd__bind_t) == sizeof(int) &&
                   sizeof(hvd__intranode_t) == sizeof(int),
               "enum settings are int-sized");

static int hvd__parse_setting(const struct hvd__setting *s, const char *text,
                              void *field)
{
    if (s->type) return s->type->parse(text, field);
    int i = hvd__name_index(text, s->names);
    if (i < 0) return -1;
    *(int *)field = i;
    return 0;
}

int hvd__config_read(hvd__config_t *config)
{
    memset(config, 0, sizeof *config);
    for (int i = 0; i < HVD__NSETTINGS; i++) {
        const struct hvd__setting *s = &hvd__settings[i];
        const char *text = getenv(s->name);
        int from_env = text && *text;
        if (hvd__parse_setting(s, from_env ? text : s->fallback,
                               (char *)config + s->offset) != 0) {
            hvd__log(HVD__LOG_ERROR, "%s=\"%s\" is not valid: expected %s",
                     s->name, text, s->expects);
            return HVD_ERR_ARG;
        }
    }
    hvd__log_level = config->log_level;
    return HVD_OK;
}

/* A setting's parsed value in config as its canonical text. */
static void hvd__setting_text(const struct hvd__setting *s,
                              const hvd__config_t *config, char *out,
                              size_t nbytes)
{
    const void *field = (const char *)config + s->offset;
    if (s->type)
        s->type->print(field, out, nbytes);
    else
        snprintf(out, nbytes, "%s", s->names[*(const int *)field]);
}

void hvd__config_print(const hvd__config_t *config)
{
    for (int i = 0; i < HVD__NSETTINGS; i++) {
        const char *text = getenv(hvd__settings[i].name);
        char value[64];
        hvd__setting_text(&hvd__settings[i], config, value, sizeof value);
        hvd__log(HVD__LOG_INFO, "%-26s %-14s %s%s%s", hvd__settings[i].name,
                 value, text && *text ? "(environment: " : "(default)",
                 text && *text ? text : "", text && *text ? ")" : "");
    }
}

int hvd__config_agree(MPI_Comm comm, const hvd__config_t *config)
{
    /* Texts of numbers and names: the settings that must agree. */
    char texts[HVD__NSETTINGS][64];
    const char *names[HVD__NSETTINGS], *values[HVD__NSETTINGS];
    int n = 0;
    for (int i = 0; i < HVD__NSETTINGS; i++) {
        const struct hvd__setting *s = &hvd__settings[i];
        if (!s->agree) continue;
        hvd__setting_text(s, config, texts[n], sizeof texts[n]);
        names[n] = s->name;
        values[n] = texts[n];
        n++;
    }
    return ring_settings_agree(comm, n, names, values);
}
