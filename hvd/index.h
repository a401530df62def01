/* hvd/index.h: name -> pointer (hvd/index.c), for requests by name. Keys
 * are not copied: they live in what the values point to. */
#ifndef HVD_INDEX_H
#define HVD_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include "hvd/hvd.h"

typedef struct {
    const char **keys;
    void **values;
    uint64_t *hashes; /* each key's hvd__index_hash */
    size_t cap, used;
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
void hvd__index_free(hvd__index_t *ix);

#endif /* HVD_INDEX_H */
