/* test/fuzz/fuzz_env.c: the environment's parsers: hvd's HVD_* settings
 * (hvd/config.c, hvd__config_read at hvd_init) and ring's tuning
 * (ring/status.c, ring__tuning_parse, as the first collective or
 * ring_check_env reads it), and the models' HVD_CONV and HVD_CONV_TF32
 * (models/backend.c, model__conv_ask, as a model's table opens).
 *
 * Input: text lines NAME=VALUE; each NAME of ours is set to VALUE (up to
 * the line's end), the others are left unset, and lines naming other
 * variables are ignored. Each parser must accept exactly the environments
 * whose every set variable is valid by its documented rule, written again
 * here (test/README.md's table): sizes are digits with an optional K/M/G
 * (ring's also within 64 (0 for HVD_RING_SMALL_BYTES) .. 2^30); times are numbers >= 0 (cycle time at most 60000 ms); names one
 * of the listed words (any case for hvd, exact for ring's algorithm and
 * HVD_RING_CHECK, and for the models');
 * paths under 4096 bytes. An accepted environment must give exactly those
 * values, and the defaults for what is unset or empty; a refused one a
 * message on stderr naming the first bad variable (captured here, which
 * also keeps millions of them out of the fuzzer's log).
 */
#define _GNU_SOURCE /* setenv, memfd_create */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>
#include "hvd/config.h"
#include "models/backend.h"
#include "ring/ring_internal.h"
#include "test/fuzz/fuzz.h"

static const char *const vars[] = {"HVD_FUSION_THRESHOLD",
                                   "HVD_CYCLE_TIME",
                                   "HVD_TIMELINE",
                                   "HVD_STALL_CHECK_TIME",
                                   "HVD_STALL_SHUTDOWN_TIME",
                                   "HVD_LOG_LEVEL",
                                   "HVD_BIND",
                                   "HVD_INTRANODE",
                                   "HVD_HIERARCHICAL_ALLREDUCE",
                                   "HVD_SPIN_TIME",
                                   "HVD_RING_CHECK",
                                   "HVD_ALLREDUCE_ALGO",
                                   "HVD_RING_SEGMENT_BYTES",
                                   "HVD_RING_SMALL_BYTES",
                                   "HVD_SHM_SEGMENT_BYTES",
                                   "HVD_SHM_STREAM",
                                   "HVD_RING_IPC_WAIT",
                                   "HVD_CONV",
                                   "HVD_CONV_TF32",
                                   NULL};

/* Sets the input's variables of ours; unsets the rest of them. */
static void set_env(const uint8_t *data, size_t size)
{
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    char *text = malloc(size + 1);
    FUZZ_CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = 0;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = 0;
        for (int i = 0; vars[i]; i++)
            if (strcmp(line, vars[i]) == 0) setenv(line, eq + 1, 1);
    }
    free(text);
}

/* What is written on stderr from stderr_begin to stderr_end, which
 * returns it (NUL-terminated, its first 8 KiB). */
static int stderr_saved = -1;
static int stderr_file = -1;

static void stderr_begin(void)
{
    if (stderr_file < 0) stderr_file = memfd_create("stderr", 0);
    FUZZ_CHECK(stderr_file >= 0 && ftruncate(stderr_file, 0) == 0 &&
               lseek(stderr_file, 0, SEEK_SET) == 0);
    fflush(stderr);
    stderr_saved = dup(2);
    FUZZ_CHECK(stderr_saved >= 0 && dup2(stderr_file, 2) == 2);
}

static const char *stderr_end(void)
{
    static char text[8192];
    fflush(stderr);
    FUZZ_CHECK(dup2(stderr_saved, 2) == 2 && close(stderr_saved) == 0);
    ssize_t n = pread(stderr_file, text, sizeof text - 1, 0);
    FUZZ_CHECK(n >= 0);
    text[n] = 0;
    return text;
}

/* The variable's text, or NULL when unset or empty (both mean default). */
static const char *value_of(const char *name)
{
    const char *text = getenv(name);
    return text && *text ? text : NULL;
}

/* Decimal digits only, no overflow of uint64_t. */
static int digits(const char *text, const char *end, uint64_t *v)
{
    *v = 0;
    if (text == end) return 0;
    for (const char *p = text; p < end; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (*p < '0' || *p > '9' || *v > (UINT64_MAX - d) / 10) return 0;
        *v = *v * 10 + d;
    }
    return 1;
}

/* hvd's bytes: digits, then K, M or G (any case) or nothing. */
static int bytes_rule(const char *text, size_t *v)
{
    size_t len = strlen(text);
    const char *units = "kmg";
    const char *unit = len ? strchr(units, text[len - 1] | 0x20) : NULL;
    int shift = unit ? 10 * (int)(unit - units + 1) : 0;
    uint64_t n;
    if (!digits(text, text + len - (shift != 0), &n) || n > SIZE_MAX >> shift)
        return 0;
    *v = (size_t)(n << shift);
    return 1;
}

/* Bytes as hvd's, within min..2^30, as ring reads its sizes. */
static int ring_size_rule(const char *text, size_t min, size_t *v)
{
    size_t n;
    if (!bytes_rule(text, &n) || n < min || n > (1u << 30)) return 0;
    *v = n;
    return 1;
}

/* A finite number >= 0 and <= max, all of the text, as strtod reads it. */
static int number_rule(const char *text, double max, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(text, &end);
    return !errno && end != text && !*end && isfinite(*v) && *v >= 0 &&
           *v <= max;
}

/* The index of text among names, in any case (exactly when exact). */
static int name_rule(const char *text, const char *const *names, int exact,
                     int *v)
{
    for (*v = 0; names[*v]; ++*v)
        if (exact ? strcmp(text, names[*v]) == 0
                  : strcasecmp(text, names[*v]) == 0)
            return 1;
    return 0;
}

/* Checks a parser's status against the rules' verdict, bad (the first
 * variable they refuse, or NULL), and that a refusal's message, said,
 * names it as "NAME=" (so that HVD_CONV is not found in HVD_CONV_TF32's).
 * Returns whether the values are to be compared. */
_Static_assert((int)RING_OK == (int)HVD_OK &&
                   (int)RING_ERR_ARG == (int)HVD_ERR_ARG,
               "ring and hvd share their status codes");
static int judged(int status, const char *bad, const char *said)
{
    char named[64];
    FUZZ_CHECK(status == (bad ? HVD_ERR_ARG : HVD_OK));
    if (!bad) return 1;
    snprintf(named, sizeof named, "%s=", bad);
    FUZZ_CHECK(strstr(said, named) != NULL);
    return 0;
}

/* For variable name: t = its text (NULL when unset); when set, evaluates
 * valid, which may store the value in want, and notes name in bad when it
 * is the first one that is not valid. */
#define RULE(name, valid)                                                      \
    do {                                                                       \
        if ((t = value_of(name)) && !(valid) && !bad) bad = name;              \
    } while (0)

static void check_hvd(void)
{
    static const char *const levels[] = {"error", "warning", "info", "debug",
                                         NULL};
    static const char *const binds[] = {"core", "numa", "none", NULL};
    static const char *const intranode[] = {"auto", "shm", "ring", NULL};
    static const char *const bools[] = {"0", "1", NULL};
    hvd__config_t want = {.fusion_threshold = 128 << 20,
                          .cycle_time_s = 1e-3,
                          .stall_check_s = 60,
                          .stall_shutdown_s = 600,
                          .log_level = HVD__LOG_WARNING,
                          .spin_s = 1e-3};
    const char *t, *bad = NULL;
    int i;
    double ms;
    RULE("HVD_FUSION_THRESHOLD", bytes_rule(t, &want.fusion_threshold));
    RULE("HVD_CYCLE_TIME", number_rule(t, 60e3, &ms));
    if (t) want.cycle_time_s = ms * 1e-3;
    RULE("HVD_TIMELINE", strlen(t) < sizeof want.timeline);
    if (t && !bad) strcpy(want.timeline, t);
    RULE("HVD_STALL_CHECK_TIME", number_rule(t, INFINITY, &want.stall_check_s));
    RULE("HVD_STALL_SHUTDOWN_TIME",
         number_rule(t, INFINITY, &want.stall_shutdown_s));
    RULE("HVD_LOG_LEVEL", name_rule(t, levels, 0, &i));
    if (t) want.log_level = (hvd__log_level_t)i;
    RULE("HVD_BIND", name_rule(t, binds, 0, &i));
    if (t) want.bind = (hvd__bind_t)i;
    RULE("HVD_INTRANODE", name_rule(t, intranode, 0, &i));
    if (t) want.intranode = (hvd__intranode_t)i;
    RULE("HVD_HIERARCHICAL_ALLREDUCE",
         name_rule(t, bools, 0, &want.hierarchical));
    RULE("HVD_SPIN_TIME", number_rule(t, 60e3, &ms));
    if (t) want.spin_s = ms * 1e-3;

    hvd__config_t got;
    stderr_begin();
    int status = hvd__config_read(&got);
    if (!judged(status, bad, stderr_end())) return;
    FUZZ_CHECK(got.fusion_threshold == want.fusion_threshold);
    FUZZ_CHECK(got.cycle_time_s == want.cycle_time_s);
    FUZZ_CHECK(strcmp(got.timeline, want.timeline) == 0);
    FUZZ_CHECK(got.stall_check_s == want.stall_check_s);
    FUZZ_CHECK(got.stall_shutdown_s == want.stall_shutdown_s);
    FUZZ_CHECK(got.log_level == want.log_level && got.bind == want.bind);
    FUZZ_CHECK(got.intranode == want.intranode);
    FUZZ_CHECK(got.hierarchical == want.hierarchical);
    FUZZ_CHECK(got.spin_s == want.spin_s);
}

static void check_ring(void)
{
    static const char *const algos[] = {"auto", "ring", "rdb", "rhd", NULL};
    static const char *const bools[] = {"0", "1", NULL};
    /* In RING__STREAM_OFF, RING__STREAM_ON order; then auto. */
    static const char *const streams[] = {"off", "on", "auto", NULL};
    static const char *const waits[] = {"device", "host", NULL};
    ring__tuning_t want = {.algo = RING_ALGO_AUTO,
                           .shm_stream = RING__STREAM_AUTO,
                           .segment_bytes = 256 << 10,
                           .small_bytes = 16 << 10,
                           .shm_segment_bytes = 1 << 20};
    const char *t, *bad = NULL;
    int i;
    RULE("HVD_RING_CHECK", name_rule(t, bools, 1, &want.check));
    RULE("HVD_ALLREDUCE_ALGO", name_rule(t, algos, 1, &i));
    if (t) want.algo = (ring_algo_t)i;
    RULE("HVD_RING_SEGMENT_BYTES", ring_size_rule(t, 64, &want.segment_bytes));
    RULE("HVD_RING_SMALL_BYTES", ring_size_rule(t, 0, &want.small_bytes));
    RULE("HVD_SHM_SEGMENT_BYTES",
         ring_size_rule(t, 64, &want.shm_segment_bytes));
    RULE("HVD_SHM_STREAM", name_rule(t, streams, 1, &i));
    if (t) want.shm_stream = i < 2 ? i : RING__STREAM_AUTO;
    RULE("HVD_RING_IPC_WAIT", name_rule(t, waits, 1, &want.ipc_host_wait));

    ring__tuning_t got;
    stderr_begin();
    int status = ring__tuning_parse(&got);
    if (!judged(status, bad, stderr_end())) return;
    FUZZ_CHECK(got.check == want.check && got.algo == want.algo);
    FUZZ_CHECK(got.segment_bytes == want.segment_bytes);
    FUZZ_CHECK(got.small_bytes == want.small_bytes);
    FUZZ_CHECK(got.shm_segment_bytes == want.shm_segment_bytes);
    FUZZ_CHECK(got.shm_stream == want.shm_stream);
    FUZZ_CHECK(got.ipc_host_wait == want.ipc_host_wait);
}

static void check_models(void)
{
    /* In model__conv_ask_path_t's order, after DEFAULT. */
    static const char *const paths[] = {"cudnn", "im2col", NULL};
    static const char *const bools[] = {"0", "1", NULL};
    model__conv_ask_t want = {MODEL__CONV_ASK_DEFAULT, 0}, got;
    const char *t, *bad = NULL, *why = "";
    int i;
    RULE("HVD_CONV", name_rule(t, paths, 1, &i));
    if (t) want.path = (model__conv_ask_path_t)(1 + i);
    RULE("HVD_CONV_TF32", name_rule(t, bools, 1, &want.tf32));
    int status = model__conv_ask(&got, &why) == 0 ? HVD_OK : HVD_ERR_ARG;
    if (!judged(status, bad, why)) return;
    FUZZ_CHECK(got.path == want.path && got.tf32 == want.tf32);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    set_env(data, size);
    check_hvd();
    check_ring();
    check_models();
    return 0;
}
