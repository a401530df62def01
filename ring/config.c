/* ring/config.c: ring's environment variables, one table: each row names a
 * variable, its default, what it expects, where it goes in ring__tuning_t,
 * how it is parsed and whether the ranks must agree on it. Read once per
 * process (a context, or the first collective); a bad value is an error
 * naming the variable, never a silent default. ring/README.md documents
 * each row. */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ring/ring_internal.h"

/* ---- parsers: text -> field; RING_OK or RING_ERR_ARG ---- */

/* One of n words: first + its index into the int at field. */
static int ring__parse_word(const char *text, const char *const *names,
                            int n, int first, void *field)
{
    for (int i = 0; i < n; i++)
        if (strcmp(text, names[i]) == 0) {
            *(int *)field = first + i;
            return RING_OK;
        }
    return RING_ERR_ARG;
}

static int ring__parse_flag(const char *text, void *field)
{
    static const char *const names[] = {"0", "1"};
    return ring__parse_word(text, names, 2, 0, field);
}

static int ring__parse_algo(const char *text, void *field)
{
    return ring_algo_parse(text, field);
}

static int ring__parse_stream(const char *text, void *field)
{
    static const char *const names[] = {"auto", "off", "on"};
    return ring__parse_word(text, names, 3, RING__STREAM_AUTO, field);
}

static int ring__parse_auto_flag(const char *text, void *field)
{
    static const char *const names[] = {"auto", "0", "1"};
    return ring__parse_word(text, names, 3, -1, field);
}

static int ring__parse_ipc(const char *text, void *field)
{
    static const char *const names[] = {"off", "auto"};
    return ring__parse_word(text, names, 2, 0, field);
}

static int ring__parse_ipc_wait(const char *text, void *field)
{
    static const char *const names[] = {"device", "host"};
    return ring__parse_word(text, names, 2, 0, field);
}

/* Sizes: ring_parse_bytes' grammar, at most 1 GiB, at least the row's
 * minimum (a segment of fewer bytes than an element cannot be cut). */
static int ring__parse_size(const char *text, void *field, size_t min)
{
    size_t v;
    if (ring_parse_bytes(text, &v) != RING_OK || v < min || v > (1u << 30))
        return RING_ERR_ARG;
    *(size_t *)field = v;
    return RING_OK;
}

static int ring__parse_size_64(const char *text, void *field)
{
    return ring__parse_size(text, field, 64);
}

static int ring__parse_size_0(const char *text, void *field)
{
    return ring__parse_size(text, field, 0);
}

#define RING__SIZE_EXPECTS(min)                                                \
    "bytes from " #min " to 1G (digits, then K, M or G if any)"

/* ---- the table ---- */

typedef struct {
    const char *name, *fallback, *expects;
    size_t offset;
    int (*parse)(const char *text, void *field);
    /* The ranks must read it alike: it decides how data is cut into
     * messages or which algorithm runs, so ranks that differ pair their
     * messages wrongly and hang or return wrong data. */
    int agree;
} ring__setting_t;

static const ring__setting_t ring__settings[] = {
    /* First, so that the ranks still compare their calls when a later
     * variable is bad. Ranks that differ would differ in their
     * collectives' messages. */
    {"HVD_RING_CHECK", "0", "0 or 1", offsetof(ring__tuning_t, check),
     ring__parse_flag, 1},
    {"HVD_ALLREDUCE_ALGO", "auto", "auto, ring, rdb or rhd",
     offsetof(ring__tuning_t, algo), ring__parse_algo, 1},
    /* 256 KiB segments stay in L2 between their arrival and their
     * reduction (bench/README.md). */
    {"HVD_RING_SEGMENT_BYTES", "256K", RING__SIZE_EXPECTS(64),
     offsetof(ring__tuning_t, segment_bytes), ring__parse_size_64, 1},
    /* 16 KiB is where the ring starts to beat recursive doubling at 2-4
     * ranks (bench/README.md). */
    {"HVD_RING_SMALL_BYTES", "16K", RING__SIZE_EXPECTS(0),
     offsetof(ring__tuning_t, small_bytes), ring__parse_size_0, 1},
    /* Shared memory synchronises ranks once per segment: 1 MiB ran 4-16
     * MiB in place at 14 GB/s, 256 KiB at 9 (bench/README.md). */
    {"HVD_SHM_SEGMENT_BYTES", "1M", RING__SIZE_EXPECTS(64),
     offsetof(ring__tuning_t, shm_segment_bytes), ring__parse_size_64, 1},
    /* Device buffers go through this much pinned memory, in two halves
     * (ring/staged.c): it sets how calls are cut into chunks. 16 MiB
     * keeps a gradient list of a few MiB in one chunk. */
    {"HVD_RING_STAGING_BYTES", "16M", RING__SIZE_EXPECTS(64),
     offsetof(ring__tuning_t, staging_bytes), ring__parse_size_64, 1},
    /* Each rank's device slab for the IPC path, in two halves: a chunk
     * costs two turns of every rank on the GPU (ipc.c), so big ones. */
    {"HVD_RING_IPC_BYTES", "64M", RING__SIZE_EXPECTS(64),
     offsetof(ring__tuning_t, ipc_bytes), ring__parse_size_64, 1},
    /* A registered call out of place of up to this many bytes (any at 2
     * ranks, 0: none) reduces in one step, each rank the whole from every
     * rank's buffer: one wait for the others instead of three, for N
     * times the reads (ipc.c). Ranks that differ wait for different
     * counts. */
    {"HVD_RING_IPC_ONESHOT", "256K", RING__SIZE_EXPECTS(0),
     offsetof(ring__tuning_t, ipc_oneshot_bytes), ring__parse_size_0, 1},
    /* Within a node, device allreduces read each other's memory (ipc.c)
     * or stage; the two send different messages. */
    {"HVD_RING_IPC", "auto", "auto or off", offsetof(ring__tuning_t, ipc),
     ring__parse_ipc, 1},
    /* Device buffers to MPI, or staged: different messages. */
    {"HVD_CUDA_AWARE", "auto", "auto, 0 or 1",
     offsetof(ring__tuning_t, cuda_aware), ring__parse_auto_flag, 1},
    /* How a rank writes, not what: ranks may differ. */
    {"HVD_SHM_STREAM", "auto", "auto, on or off",
     offsetof(ring__tuning_t, shm_stream), ring__parse_stream, 0},
    /* How a rank waits, not for what: ranks may differ. */
    {"HVD_RING_IPC_WAIT", "device", "device or host",
     offsetof(ring__tuning_t, ipc_host_wait), ring__parse_ipc_wait, 0},
};
enum { RING__NSETTINGS = sizeof ring__settings / sizeof ring__settings[0] };

int ring__tuning_parse(ring__tuning_t *tuning)
{
    for (int i = 0; i < RING__NSETTINGS; i++) {
        const ring__setting_t *s = &ring__settings[i];
        const char *text = getenv(s->name);
        int from_env = text && *text;
        void *field = (char *)tuning + s->offset;
        if (s->parse(from_env ? text : s->fallback, field) != RING_OK) {
            ring__log("%s=\"%s\": expected %s", s->name, text, s->expects);
            return RING_ERR_ARG;
        }
    }
    return RING_OK;
}

static ring__tuning_t ring__tuned;
static int ring__tuned_status;

static void ring__tuning_read(void)
{
    ring__tuned_status = ring__tuning_parse(&ring__tuned);
}

int ring__tuning(const ring__tuning_t **tuning)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, ring__tuning_read);
    *tuning = &ring__tuned;
    return ring__tuned_status;
}

int ring_check_env(void)
{
    const ring__tuning_t *tuning;
    return ring__tuning(&tuning);
}

/* A setting's value as text, one spelling per value: what ranks compare. */
static void ring__setting_text(const ring__setting_t *s,
                               const ring__tuning_t *tuning, char *text,
                               size_t nbytes)
{
    const void *field = (const char *)tuning + s->offset;
    if (s->parse == ring__parse_size_64 || s->parse == ring__parse_size_0)
        snprintf(text, nbytes, "%zu", *(const size_t *)field);
    else if (s->parse == ring__parse_algo)
        snprintf(text, nbytes, "%s",
                 ring_algo_name(*(const ring_algo_t *)field));
    else
        snprintf(text, nbytes, "%d", *(const int *)field);
}

int ring__tuning_agree(MPI_Comm comm)
{
    const ring__tuning_t *tuning;
    int status = ring__tuning(&tuning), worst;
    /* A rank whose variables are bad has said which; the others must not
     * go on without it. */
    RING_CHECK_MPI(MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MIN, comm));
    if (worst != RING_OK) {
        if (status == RING_OK)
            ring__log("ring_ctx_create: another rank's ring variables are "
                      "bad (its message says which)");
        status = worst;
        goto out;
    }
    const char *names[RING__NSETTINGS], *values[RING__NSETTINGS];
    char texts[RING__NSETTINGS][32];
    int n = 0;
    for (int i = 0; i < RING__NSETTINGS; i++) {
        if (!ring__settings[i].agree) continue;
        ring__setting_text(&ring__settings[i], tuning, texts[n],
                           sizeof texts[n]);
        names[n] = ring__settings[i].name;
        values[n] = texts[n];
        n++;
    }
    status = ring_settings_agree(comm, n, names, values);
out:
    return status;
}
