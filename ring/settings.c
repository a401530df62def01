/* ring/settings.c: ring_settings_agree, whether every rank of a
 * communicator was given the same settings.
 *
 * Some settings decide how the ranks' messages pair up (how tensors are
 * grouped, which path an allreduce takes); a rank given another value than
 * its peers sends what they do not expect, and the job hangs, often with
 * no message. Checking once at start, in one small reduction, turns that
 * into an error on every rank that names the setting and who has what.
 *
 * The values are texts, compared byte for byte: callers normalise them
 * first (hvd prints each parsed value canonically, so "128M" and
 * "134217728" are the same). Each rank reduces a 64-bit hash of each text
 * and of its complement with MPI_MAX, which gives the largest and smallest
 * hash of every setting in one call; they are equal exactly when all
 * ranks agree (but for a hash collision, about 2^-64 a pair). Only when
 * some setting differs are the texts gathered, to say who has what.
 *
 * Left out: which settings must agree (the caller's table says) and
 * reading them (the caller's parser).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ring/ring_internal.h"

/* Bytes of a value that a mismatch message shows; longer ones end in
 * "...". */
enum { RING__VALUE_SHOWN = 56 };

/* What a rank tells the others about one setting that differs. */
typedef struct {
    uint64_t hash;
    char text[RING__VALUE_SHOWN + 4];
} ring__value_t;

/* Values in one message before the rest are counted, not listed, so
 * that a job of many ranks still logs one short line. */
enum { RING__GROUPS_SHOWN = 4, RING__RANGES_SHOWN = 6 };

static uint64_t ring__text_hash(const char *text)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *text; text++) h = (h ^ (unsigned char)*text) * 0x100000001b3ull;
    return h;
}

/* Appends printf-style text at *used, never past nbytes. */
static void ring__append(char *line, size_t nbytes, size_t *used,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void ring__append(char *line, size_t nbytes, size_t *used,
                         const char *fmt, ...)
{
    if (*used + 1 >= nbytes) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + *used, nbytes - *used, fmt, ap);
    va_end(ap);
    if (n > 0) *used += (size_t)n < nbytes - *used ? (size_t)n
                                                   : nbytes - *used - 1;
}

/* "rank 2" or "ranks 0-1, 3": the ranks whose value is all[first]'s, as
 * ranges; done[r] is set for each. */
static void ring__group_ranks(const ring__value_t *all, int size, int first,
                              char *done, char *line, size_t nbytes,
                              size_t *used)
{
    int count = 0, ranges = 0;
    for (int r = first; r < size; r++)
        count += all[r].hash == all[first].hash;
    ring__append(line, nbytes, used, "rank%s ", count > 1 ? "s" : "");
    for (int r = first; r < size; r++) {
        if (all[r].hash != all[first].hash) continue;
        int end = r;
        while (end + 1 < size && all[end + 1].hash == all[first].hash) end++;
        for (int k = r; k <= end; k++) done[k] = 1;
        if (ranges < RING__RANGES_SHOWN)
            ring__append(line, nbytes, used, ranges ? ", %d" : "%d", r);
        if (ranges < RING__RANGES_SHOWN && end > r)
            ring__append(line, nbytes, used, "-%d", end);
        if (ranges == RING__RANGES_SHOWN)
            ring__append(line, nbytes, used, ", ...");
        ranges++;
        r = end;
    }
    ring__append(line, nbytes, used, " %s \"%s\"", count > 1 ? "have" : "has",
                 all[first].text);
}

/* One line naming the setting and, value by value, the ranks that have
 * it, in order of each value's lowest rank. */
static void ring__report(const char *name, const ring__value_t *all, int size,
                         char *done)
{
    char line[1024];
    size_t used = 0;
    int groups = 0;
    for (int r = 0; r < size; r++) done[r] = 0;
    ring__append(line, sizeof line, &used, "%s differs across ranks: ", name);
    for (int r = 0; r < size; r++) {
        if (done[r]) continue;
        if (groups < RING__GROUPS_SHOWN) {
            if (groups) ring__append(line, sizeof line, &used, "; ");
            ring__group_ranks(all, size, r, done, line, sizeof line, &used);
        } else {
            for (int k = r; k < size; k++)
                done[k] |= all[k].hash == all[r].hash;
        }
        groups++;
    }
    if (groups > RING__GROUPS_SHOWN)
        ring__append(line, sizeof line, &used, "; and %d more values",
                     groups - RING__GROUPS_SHOWN);
    ring__log("%s (give every rank the same value)", line);
}

int ring_settings_agree(MPI_Comm comm, int n, const char *const names[],
                        const char *const values[])
{
    int status = ring__check_mpi_up("ring_settings_agree"), size = 0;
    /* range[i]: the largest hash of setting i; range[n + i] the largest
     * complement, so ~range[n + i] is the smallest hash; range[2n]: 1 when
     * some rank could not allocate what the report needs, so that all
     * leave together instead of some waiting in the gather. */
    uint64_t range[2 * RING_SETTINGS_MAX + 1];
    ring__value_t *mine = NULL, *all = NULL, *column = NULL;
    char *done = NULL;
    if (status != RING_OK) return status;
    if (comm == MPI_COMM_NULL || n < 0 || n > RING_SETTINGS_MAX ||
        (n > 0 && (!names || !values))) {
        ring__log("ring_settings_agree: %s",
                  comm == MPI_COMM_NULL ? "comm is MPI_COMM_NULL"
                                        : "bad n, names or values");
        return RING_ERR_ARG;
    }
    if (n == 0) return RING_OK;
    RING_CHECK_MPI(MPI_Comm_size(comm, &size));
    mine = calloc((size_t)n, sizeof *mine);
    all = calloc((size_t)n * (size_t)size, sizeof *all);
    column = malloc((size_t)size * sizeof *column);
    done = malloc((size_t)size);
    for (int i = 0; i < n; i++) {
        range[i] = ring__text_hash(values[i]);
        range[n + i] = ~range[i];
    }
    range[2 * n] = !mine || !all || !column || !done;
    RING_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, range, 2 * n + 1,
                                 MPI_UINT64_T, MPI_MAX, comm));
    if (range[2 * n]) {
        status = RING_ERR_NOMEM;
        goto out;
    }
    /* Every rank saw the same ranges: all gather, or none. */
    int ndiff = 0;
    for (int i = 0; i < n; i++) {
        if (range[i] == ~range[n + i]) continue;
        mine[ndiff].hash = ring__text_hash(values[i]);
        snprintf(mine[ndiff].text, sizeof mine[ndiff].text, "%.*s%s",
                 RING__VALUE_SHOWN, values[i],
                 strlen(values[i]) > RING__VALUE_SHOWN ? "..." : "");
        ndiff++;
    }
    if (ndiff == 0) goto out;
    RING_CHECK_MPI(MPI_Allgather(mine, (int)(ndiff * sizeof *mine), MPI_BYTE,
                                 all, (int)(ndiff * sizeof *mine), MPI_BYTE,
                                 comm));
    /* all holds rank r's differing values at [r * ndiff, ...): one
     * setting's column at a time. */
    for (int i = 0, d = 0; i < n; i++) {
        if (range[i] == ~range[n + i]) continue;
        for (int r = 0; r < size; r++) column[r] = all[(size_t)r * ndiff + d];
        ring__report(names[i], column, size, done);
        d++;
    }
    status = RING_ERR_MISMATCH;
out:
    free(done);
    free(column);
    free(all);
    free(mine);
    return status;
}
