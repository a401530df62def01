/* ring/status.c: status texts, error reports and the argument checks every
 * collective starts with, plus the tuning knobs read from the environment. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "ring/ring_internal.h"

const char *ring_strerror(int status)
{
    switch (status) {
#define RING_STATUS_TEXT(name, value, text)                                    \
    case RING_##name: return text;
        RING_STATUS_MAP(RING_STATUS_TEXT)
#undef RING_STATUS_TEXT
    }
    return "unknown status";
}

/* Why MPI may not be called now, or NULL when it may (both asks may be
 * made at any time). */
static const char *ring__mpi_down(void)
{
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (down) return "finalized";
    return up ? NULL : "not initialized (call MPI_Init first)";
}

/* One line on stderr, prefixed with the world rank so that interleaved
 * output from many ranks can still be told apart. */
void ring__log(const char *fmt, ...)
{
    int rank = -1;
    if (!ring__mpi_down()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hvd[%d]: ", rank);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void ring__log_mpi_error(int rc, const char *call, const char *file, int line)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len] = '\0';
    ring__log("%s:%d: %s failed: %s", file, line, call, text);
}

int ring__check_mpi_up(const char *func)
{
    const char *why = ring__mpi_down();
    if (!why) return RING_OK;
    ring__log("%s: MPI is %s", func, why);
    return RING_ERR_STATE;
}

int ring__check_args(const char *func, const void *sendbuf, const void *recvbuf,
                     size_t count, ring_dtype_t dtype, ring_op_t op,
                     MPI_Comm comm)
{
    const char *why = NULL;
    int status = ring__check_mpi_up(func);
    if (status != RING_OK) return status;
    if (comm == MPI_COMM_NULL)
        why = "comm is MPI_COMM_NULL";
    else if (ring_dtype_size(dtype) == 0)
        why = "unknown dtype";
    else if ((int)op != -1 && ring_op_name(op) == NULL)
        why = "unknown op";
    else if (op == RING_AVERAGE && dtype >= RING_INT32)
        why = "average is for floating dtypes only (use sum)";
    else if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
        why = "NULL buffer with count > 0";
    else if (count > 0 && (ring_is_device_memory(sendbuf) ||
                           ring_is_device_memory(recvbuf)))
        why = "a buffer is CUDA device memory: the collectives take host "
              "memory (device buffers are a later release)";
    if (!why) return RING_OK;
    ring__log("%s: %s (count=%zu dtype=%d op=%d)", func, why, count,
              (int)dtype, (int)op);
    return RING_ERR_ARG;
}

int ring_parse_bytes(const char *text, size_t *nbytes)
{
    /* A digit first: strtoull alone would also take a sign and leading
     * spaces (" 64", "+64", and "-1" as 2^64 - 1). */
    if (!text || text[0] < '0' || text[0] > '9') return RING_ERR_ARG;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    int shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (errno || *end || v > (SIZE_MAX >> shift)) return RING_ERR_ARG;
    *nbytes = (size_t)v << shift;
    return RING_OK;
}

static int ring__env_size(const char *name, size_t fallback, size_t min, size_t *value)
{
    const char *text = getenv(name);
    size_t v;
    *value = fallback;
    if (!text || !*text) return RING_OK;
    if (ring_parse_bytes(text, &v) != RING_OK || v < min || v > (1u << 30)) {
        ring__log("%s=\"%s\": expected bytes from %zu to 1G (digits, then K, "
                  "M or G if any)", name, text, min);
        return RING_ERR_ARG;
    }
    *value = v;
    return RING_OK;
}

int ring__tuning_parse(ring__tuning_t *tuning)
{
    int status = RING_OK;
    /* First, so that the ranks still compare their calls when a later
     * variable is bad. */
    const char *check = getenv("HVD_RING_CHECK");
    tuning->check = 0;
    if (check && *check) {
        if (!strcmp(check, "0") || !strcmp(check, "1")) {
            tuning->check = check[0] == '1';
        } else {
            ring__log("HVD_RING_CHECK=\"%s\": expected 0 or 1", check);
            status = RING_ERR_ARG;
        }
    }
    tuning->algo = RING_ALGO_AUTO;
    const char *algo = getenv("HVD_ALLREDUCE_ALGO");
    if (status == RING_OK && algo && *algo &&
        ring_algo_parse(algo, &tuning->algo) != RING_OK) {
        ring__log("HVD_ALLREDUCE_ALGO=\"%s\": expected auto, ring, rdb or rhd",
                  algo);
        status = RING_ERR_ARG;
    }
    /* 256 KiB segments stay in L2 between their arrival and their
     * reduction; 16 KiB is where the ring starts to beat recursive doubling
     * at 2-4 ranks (bench/README.md). */
    if (status == RING_OK)
        status = ring__env_size("HVD_RING_SEGMENT_BYTES", 256 << 10, 64,
                                &tuning->segment_bytes);
    if (status == RING_OK)
        status = ring__env_size("HVD_RING_SMALL_BYTES", 16 << 10, 0,
                                &tuning->small_bytes);
    /* Shared memory synchronises ranks once per segment: 1 MiB ran 4-16 MiB
     * in place at 14 GB/s, 256 KiB at 9 (bench/README.md). */
    if (status == RING_OK)
        status = ring__env_size("HVD_SHM_SEGMENT_BYTES", 1 << 20, 64,
                                &tuning->shm_segment_bytes);
    tuning->shm_stream = RING__STREAM_AUTO;
    const char *stream = getenv("HVD_SHM_STREAM");
    if (status == RING_OK && stream && *stream) {
        if (!strcmp(stream, "on")) {
            tuning->shm_stream = RING__STREAM_ON;
        } else if (!strcmp(stream, "off")) {
            tuning->shm_stream = RING__STREAM_OFF;
        } else if (strcmp(stream, "auto")) {
            ring__log("HVD_SHM_STREAM=\"%s\": expected auto, on or off",
                      stream);
            status = RING_ERR_ARG;
        }
    }
    return status;
}

static ring__tuning_t ring__tuned;
static int ring__tuned_status;

static void ring__tuning_read(void)
{
    ring__tuned_status = ring__tuning_parse(&ring__tuned);
}

int ring_check_env(void)
{
    const ring__tuning_t *tuning;
    return ring__tuning(&tuning);
}

int ring__tuning(const ring__tuning_t **tuning)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, ring__tuning_read);
    *tuning = &ring__tuned;
    return ring__tuned_status;
}
