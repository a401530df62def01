/* hvd/index.c: a hash map from names to pointers, so that finding a request
 * by name costs the same with 10 or 10,000 in flight. Open addressing with
 * linear probing; keys are not copied (they live in the requests or cache
 * entries the values belong to). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/index.h"

static const char hvd__deleted[] = "";

static size_t hvd__hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

/* The slot holding name, or the empty one where it would go. */
static size_t hvd__probe(const hvd__index_t *ix, const char *name, int *found)
{
    size_t mask = ix->cap - 1, i = hvd__hash(name) & mask, free_at = ix->cap;
    for (;; i = (i + 1) & mask) {
        const char *key = ix->keys[i];
        if (!key) break;
        if (key == hvd__deleted) {
            if (free_at == ix->cap) free_at = i;
        } else if (strcmp(key, name) == 0) {
            *found = 1;
            return i;
        }
    }
    *found = 0;
    return free_at < ix->cap ? free_at : i;
}

/* Rebuilds the table without its tombstones, at a size the live entries
 * fill to at most a quarter. Sizing it from used (tombstones included)
 * doubled it whenever tombstones piled up: with a new name every call
 * (bench/soak) it grew for ever, 30 -> 55 MiB over a million calls. */
static int hvd__index_grow(hvd__index_t *ix)
{
    size_t live = 0, cap = 64;
    for (size_t i = 0; i < ix->cap; i++)
        live += ix->keys[i] && ix->keys[i] != hvd__deleted;
    while (cap < 4 * (live + 1)) cap *= 2;
    hvd__index_t bigger = {.cap = cap};
    bigger.keys = calloc(bigger.cap, sizeof *bigger.keys);
    bigger.values = calloc(bigger.cap, sizeof *bigger.values);
    if (!bigger.keys || !bigger.values) {
        free(bigger.keys);
        free(bigger.values);
        return HVD_ERR_NOMEM;
    }
    for (size_t i = 0; i < ix->cap; i++)
        if (ix->keys[i] && ix->keys[i] != hvd__deleted)
            hvd__index_put(&bigger, ix->keys[i], ix->values[i]);
    hvd__index_free(ix);
    *ix = bigger;
    return HVD_OK;
}

int hvd__index_put(hvd__index_t *ix, const char *name, void *value)
{
    /* Tombstones count as used, so probes always reach an empty slot. */
    if (2 * (ix->used + 1) > ix->cap && hvd__index_grow(ix) != HVD_OK)
        return HVD_ERR_NOMEM;
    int found;
    size_t i = hvd__probe(ix, name, &found);
    if (found) return HVD_ERR_STATE;
    if (!ix->keys[i]) ix->used++;
    ix->keys[i] = name;
    ix->values[i] = value;
    return HVD_OK;
}

void *hvd__index_get(const hvd__index_t *ix, const char *name)
{
    int found = 0;
    if (ix->cap == 0) return NULL;
    size_t i = hvd__probe(ix, name, &found);
    return found ? ix->values[i] : NULL;
}

void *hvd__index_take(hvd__index_t *ix, const char *name)
{
    int found = 0;
    if (ix->cap == 0) return NULL;
    size_t i = hvd__probe(ix, name, &found);
    if (!found) return NULL;
    void *value = ix->values[i];
    ix->keys[i] = hvd__deleted;
    ix->values[i] = NULL;
    return value;
}

void hvd__index_del(hvd__index_t *ix, const char *name)
{
    hvd__index_take(ix, name);
}

void hvd__index_free(hvd__index_t *ix)
{
    free(ix->keys);
    free(ix->values);
    *ix = (hvd__index_t){0};
}
