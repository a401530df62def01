/* hvd/index.c: a hash map from names to pointers, so that finding a request
 * by name costs the same with 10 or 10,000 in flight. Open addressing with
 * linear probing over one array of {hash, key, value} slots, so that a
 * probe reads one cache line, not one in each of three arrays. Keys are
 * not copied (they live in the requests or cache entries the values belong
 * to); a probe compares a key only where the hash matches, and a key that
 * is the very pointer asked for without reading it.
 *
 * Deletion moves the entries after the hole back into it (Knuth's
 * Algorithm R) instead of leaving a tombstone: an index whose names are
 * put and deleted once a step (the pending requests', and then hvd's
 * index of requests in flight) filled with tombstones and was rebuilt
 * about once a step, and a sweep (hvd__index_sweep) can remove entries
 * while it walks the table. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/index.h"

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
    size_t mask = ix->cap - 1, i = (size_t)hash & mask;
    for (;; i = (i + 1) & mask) {
        const hvd__index_slot_t *s = &ix->slots[i];
        if (!s->key) break;
        if (s->hash == hash && (s->key == name || strcmp(s->key, name) == 0)) {
            *found = 1;
            return i;
        }
    }
    *found = 0;
    return i;
}

/* Doubles the table; the keys are distinct and their hashes kept, so each
 * goes to the first empty slot of its probe with no comparison. */
static int hvd__index_grow(hvd__index_t *ix)
{
    size_t cap = ix->cap ? 2 * ix->cap : 64;
    hvd__index_slot_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return HVD_ERR_NOMEM;
    for (size_t i = 0; i < ix->cap; i++) {
        if (!ix->slots[i].key) continue;
        size_t j = (size_t)ix->slots[i].hash & (cap - 1);
        while (slots[j].key) j = (j + 1) & (cap - 1);
        slots[j] = ix->slots[i];
    }
    free(ix->slots);
    ix->slots = slots;
    ix->cap = cap;
    return HVD_OK;
}

int hvd__index_put(hvd__index_t *ix, const char *name, void *value)
{
    if (2 * (ix->used + 1) > ix->cap && hvd__index_grow(ix) != HVD_OK)
        return HVD_ERR_NOMEM;
    int found;
    uint64_t hash = hvd__index_hash(name);
    size_t i = hvd__probe(ix, name, hash, &found);
    if (found) return HVD_ERR_STATE;
    ix->slots[i] = (hvd__index_slot_t){hash, name, value};
    ix->used++;
    return HVD_OK;
}

void *hvd__index_get(const hvd__index_t *ix, const char *name)
{
    int found = 0;
    if (ix->cap == 0) return NULL;
    size_t i = hvd__probe(ix, name, hvd__index_hash(name), &found);
    return found ? ix->slots[i].value : NULL;
}

/* Empties slot i, moving back each later entry of the run whose probe
 * starts at or before the hole, so that every probe still reaches its
 * entry before an empty slot. */
static void hvd__index_remove(hvd__index_t *ix, size_t i)
{
    size_t mask = ix->cap - 1;
    for (size_t j = (i + 1) & mask; ix->slots[j].key; j = (j + 1) & mask) {
        size_t home = (size_t)ix->slots[j].hash & mask;
        /* Stays where it is when its home lies cyclically in (i, j]. */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
            continue;
        ix->slots[i] = ix->slots[j];
        i = j;
    }
    ix->slots[i] = (hvd__index_slot_t){0};
    ix->used--;
}

void *hvd__index_take(hvd__index_t *ix, const char *name)
{
    int found = 0;
    if (ix->cap == 0) return NULL;
    size_t i = hvd__probe(ix, name, hvd__index_hash(name), &found);
    if (!found) return NULL;
    void *value = ix->slots[i].value;
    hvd__index_remove(ix, i);
    return value;
}

void hvd__index_del(hvd__index_t *ix, const char *name)
{
    hvd__index_take(ix, name);
}

int hvd__index_sweep(hvd__index_t *ix, int (*drop)(void *value))
{
    if (ix->used == 0) return HVD_OK;
    /* From an empty slot round the table: a removal moves only entries
     * of the run after the hole, none yet visited, and none past an
     * empty slot, so each entry is seen once. */
    size_t mask = ix->cap - 1, start = 0;
    while (ix->slots[start].key) start++;
    for (size_t n = 1; n < ix->cap;) {
        size_t i = (start + n) & mask;
        if (ix->slots[i].key && drop(ix->slots[i].value))
            hvd__index_remove(ix, i); /* i now holds the next entry */
        else
            n++;
    }
    while (4 * (ix->used + 1) > ix->cap)
        if (hvd__index_grow(ix) != HVD_OK) return HVD_ERR_NOMEM;
    return HVD_OK;
}

void hvd__index_free(hvd__index_t *ix)
{
    free(ix->slots);
    *ix = (hvd__index_t){0};
}
