/* ring/status.c: status texts, the log, whether MPI may be called, and the
 * one grammar of sizes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
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
 * output from many ranks can still be told apart; written in one call, so
 * that lines of different ranks do not interleave within a line. */
void ring__log(const char *fmt, ...)
{
    int rank = -1;
    char line[2048];
    if (!ring__mpi_down()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hvd[%d]: %s\n", rank, line);
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
