/* hvd/index.c: a hash map from names to pointers, so that finding a request
 * by name costs the same with 10 or 10,000 in flight. Open addressing with
 * linear probing; keys are not copied (they live in the requests or cache
 * entries the values belong to). Each slot keeps its key's hash, so that
 * a probe reads the key itself, which lies in some request the cache may
 * have lost, only where the hash matches: a probe of a table of a step's
 * names passes many others, and tombstones, before its own. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/index.h"

static const char hvd__deleted[] = "";

uint64_t hvd__index_hash(const char *name)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

/* The slot holding name (of that hash), or the empty one where it would
 * go. */
static size_t hvd__probe(const hvd__index_t *ix, const char *name,
                         uint64_t hash, int *found)
{
    size_t mask = ix->cap - 1, i = (size_t)hash & mask, free_at = ix->cap;
    for (;; i = (i + 1) & mask) {
        const char *key = ix->keys[i];
        if (!key) break;
        if (key == hvd__deleted) {
            if (free_at == ix->cap) free_at = i;
        } else if (ix->hashes[i] == hash && strcmp(key, name) == 0) {
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
    bigger.hashes = calloc(bigger.cap, sizeof *bigger.hashes);
    if (!bigger.keys || !bigger.values || !bigger.hashes) {
        hvd__index_free(&bigger);
        return HVD_ERR_NOMEM;
    }
    /* The keys are distinct and their hashes kept: each goes to the first
     * empty slot of its probe, with no hash or comparison made again. */
    for (size_t i = 0; i < ix->cap; i++) {
        if (!ix->keys[i] || ix->keys[i] == hvd__deleted) continue;
        size_t j = (size_t)ix->hashes[i] & (cap - 1);
        while (bigger.keys[j]) j = (j + 1) & (cap - 1);
        bigger.keys[j] = ix->keys[i];
        bigger.values[j] = ix->values[i];
        bigger.hashes[j] = ix->hashes[i];
        bigger.used++;
    }
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
    uint64_t hash = hvd__index_hash(name);
    size_t i = hvd__probe(ix, name, hash, &found);
    if (found) return HVD_ERR_STATE;
    if (!ix->keys[i]) ix->used++;
    ix->keys[i] = name;
    ix->values[i] = value;
    ix->hashes[i] = hash;
    return HVD_OK;
}

void *hvd__index_get(const hvd__index_t *ix, const char *name)
{
    int found = 0;
    if (ix->cap == 0) return NULL;
    size_t i = hvd__probe(ix, name, hvd__index_hash(name), &found);
    return found ? ix->values[i] : NULL;
}

void *hvd__index_take(hvd__index_t *ix, const char *name)
{
    int found = 0;
    if (ix->cap == 0) return NULL;
    size_t i = hvd__probe(ix, name, hvd__index_hash(name), &found);
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
    free(ix->hashes);
    *ix = (hvd__index_t){0};
}
