/* hvd/config.c: the HVD_* environment variables, parsed once by hvd_init
 * from one table, and the log they set the level of. A bad value is an
 * error naming the variable and what it expects, never a silent default. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "hvd/hvd_internal.h"

hvd__log_level_t hvd__log_level = HVD__LOG_WARNING;

static const char *const hvd__level_names[] = {"error", "warning", "info",
                                               "debug", NULL};

double hvd__now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void hvd__log(hvd__log_level_t level, const char *fmt, ...)
{
    if (level > hvd__log_level) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line, so lines of different ranks do not interleave. */
    fprintf(stderr, "hvd[%d] %s: %s\n", hvd__engine.rank,
            hvd__level_names[level], line);
}

/* ---- parsers: text -> field, 0 or -1 ---- */

/* Bytes, with an optional K, M or G (powers of 1024). */
static int hvd__parse_bytes(const char *text, void *field)
{
    return ring_parse_bytes(text, field) == RING_OK ? 0 : -1;
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

static int hvd__parse_path(const char *text, void *field)
{
    if (strlen(text) >= sizeof ((hvd__config_t *)0)->timeline) return -1;
    strcpy(field, text);
    return 0;
}

/* The index of text among the NULL-ended names, ignoring case; -1 when
 * none. */
static int hvd__name_index(const char *text, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcasecmp(text, names[i]) == 0) return i;
    return -1;
}

/* ---- the table ---- */

/* A setting is parsed by `parse`, or, when that is NULL, is one of `names`
 * (any case), stored as its index in an enum field. */
static const char *const hvd__bind_names[] = {"core", "numa", "none", NULL};
static const char *const hvd__intranode_names[] = {"auto", "shm", "ring", NULL};
static const char *const hvd__bool_names[] = {"0", "1", NULL};

static const struct hvd__setting {
    const char *name, *fallback, *expects;
    size_t offset;
    int (*parse)(const char *text, void *field);
    const char *const *names;
} hvd__settings[] = {
    {"HVD_FUSION_THRESHOLD", "128M", "bytes such as 0, 64K or 128M",
     offsetof(hvd__config_t, fusion_threshold), hvd__parse_bytes, NULL},
    {"HVD_CYCLE_TIME", "1", "milliseconds from 0 to 60000",
     offsetof(hvd__config_t, cycle_time_s), hvd__parse_millis, NULL},
    {"HVD_TIMELINE", "", "a file path",
     offsetof(hvd__config_t, timeline), hvd__parse_path, NULL},
    {"HVD_STALL_CHECK_TIME", "60", "seconds, 0 or more",
     offsetof(hvd__config_t, stall_check_s), hvd__parse_seconds, NULL},
    {"HVD_STALL_SHUTDOWN_TIME", "0", "seconds, 0 (off) or more",
     offsetof(hvd__config_t, stall_shutdown_s), hvd__parse_seconds, NULL},
    {"HVD_LOG_LEVEL", "warning", "error, warning, info or debug",
     offsetof(hvd__config_t, log_level), NULL, hvd__level_names},
    {"HVD_BIND", "core", "core, numa or none",
     offsetof(hvd__config_t, bind), NULL, hvd__bind_names},
    {"HVD_INTRANODE", "auto", "auto, shm or ring",
     offsetof(hvd__config_t, intranode), NULL, hvd__intranode_names},
    {"HVD_HIERARCHICAL_ALLREDUCE", "0", "0 or 1",
     offsetof(hvd__config_t, hierarchical), NULL, hvd__bool_names},
    /* 1 ms spans an mlp step, so neither thread sleeps while it trains. */
    {"HVD_SPIN_TIME", "1", "milliseconds from 0 to 60000",
     offsetof(hvd__config_t, spin_s), hvd__parse_millis, NULL},
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
    if (s->parse) return s->parse(text, field);
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
            fprintf(stderr, "hvd: %s=\"%s\" is not valid: expected %s\n",
                    s->name, text, s->expects);
            return HVD_ERR_ARG;
        }
    }
    hvd__log_level = config->log_level;
    return HVD_OK;
}

void hvd__config_print(void)
{
    for (int i = 0; i < HVD__NSETTINGS; i++) {
        const char *text = getenv(hvd__settings[i].name);
        int from_env = text && *text;
        hvd__log(HVD__LOG_INFO, "%-24s %-12s %s", hvd__settings[i].name,
                 from_env ? text : hvd__settings[i].fallback,
                 from_env ? "(environment)" : "(default)");
    }
}
