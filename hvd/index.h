/* hvd/index.h: name -> pointer (hvd/index.c), for requests by name. Keys
 * are not copied: they live in what the values point to. */
#ifndef HVD_INDEX_H
#define HVD_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include "hvd/hvd.h"

typedef struct {
    uint64_t hash;   /* the key's hvd__index_hash */
    const char *key; /* NULL: empty */
    void *value;
} hvd__index_slot_t;

typedef struct {
    hvd__index_slot_t *slots;
    size_t cap, used; /* cap: 0 or a power of two; used: entries */
} hvd__index_t;

/* FNV-1a of a name: the index's hash, and the fusion hint's. */
uint64_t hvd__index_hash(const char *name);

/* Adds name -> value: HVD_OK, HVD_ERR_STATE when name is there already
 * (the table is unchanged), HVD_ERR_NOMEM. */
int hvd__index_put(hvd__index_t *ix, const char *name, void *value);
void *hvd__index_get(const hvd__index_t *ix, const char *name);
void hvd__index_del(hvd__index_t *ix, const char *name);
/* get, then del, in one probe: the value, or NULL when absent. */
void *hvd__index_take(hvd__index_t *ix, const char *name);
/* Removes the entries whose value drop() lets go (it returns nonzero, and
 * has freed what it had to), then grows the table until the rest fill at
 * most a quarter of it, so that a sweep that frees little is not followed
 * by another at the next put: HVD_OK, or HVD_ERR_NOMEM (the entries are
 * all still valid). */
int hvd__index_sweep(hvd__index_t *ix, int (*drop)(void *value));
void hvd__index_free(hvd__index_t *ix);

#endif /* HVD_INDEX_H */
