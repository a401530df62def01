/* hvd/fusion.c: which allreduces run together. The plan's groups
 * (hvd__plan_group) and the hint a rank attaches to a request to say that
 * it continues, in memory, the allreduce it submitted just before
 * (hvd__chain_link).
 *
 * Fusing small tensors saves a collective each; fusing a large one only
 * costs its two copies through the fusion buffer, so large tensors run
 * alone. Unless every rank says the large one follows the group's last
 * member in memory: a model's gradients, laid out in the order backward
 * finishes them, are then one range, reduced where it lies (execute.c's
 * hvd__tiled) in one collective instead of two. The hint never decides
 * correctness: a rank whose tensors do not tile after all packs them, as
 * for any group. */
#include <stddef.h>
#include <string.h>
#include "hvd/hvd_internal.h"

/* Tensors this large gain nothing from fusion but its two copies. */
static const size_t hvd__direct_bytes = 256 << 10;

uint64_t hvd__name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *name; name++) h = (h ^ (unsigned char)*name) * 0x100000001b3ull;
    return h ? h : 1; /* 0 means "follows nothing" */
}

size_t hvd__desc_bytes(const hvd__desc_t *d)
{
    return (size_t)d->count * ring_dtype_size((ring_dtype_t)d->dtype);
}

void hvd__chain_link(hvd__chain_t *chain, hvd__desc_t *desc,
                     const void *sendbuf, const void *recvbuf)
{
    int in_place = desc->kind == HVD__ALLREDUCE && sendbuf == recvbuf &&
                   desc->count > 0;
    desc->follows = in_place && chain->end && chain->end == recvbuf &&
                            chain->dtype == desc->dtype &&
                            chain->op == desc->op
                        ? chain->hash
                        : 0;
    chain->end = in_place ? (const char *)recvbuf + hvd__desc_bytes(desc)
                          : NULL;
    chain->dtype = desc->dtype;
    chain->op = desc->op;
    chain->hash = hvd__name_hash(desc->name);
}

int hvd__desc_same(const hvd__desc_t *a, const hvd__desc_t *b)
{
    return memcmp(a, b, offsetof(hvd__desc_t, follows)) == 0;
}

/* Whether d may join a group whose last member is prev. */
static int hvd__joins(const hvd__desc_t *prev, const hvd__desc_t *d)
{
    if (d->kind != HVD__ALLREDUCE || prev->kind != HVD__ALLREDUCE ||
        d->dtype != prev->dtype || d->op != prev->op)
        return 0;
    if (hvd__desc_bytes(prev) < hvd__direct_bytes &&
        hvd__desc_bytes(d) < hvd__direct_bytes)
        return 1;
    return d->follows != 0 && d->follows == hvd__name_hash(prev->name);
}

int hvd__plan_group(const hvd__desc_t *descs, size_t n, hvd__plan_t *plan)
{
    size_t threshold = hvd__engine.config.fusion_threshold;
    for (size_t i = 0; i < n;) {
        size_t end = i + 1, total = hvd__desc_bytes(&descs[i]);
        while (end < n && hvd__joins(&descs[end - 1], &descs[end]) &&
               total + hvd__desc_bytes(&descs[end]) <= threshold)
            total += hvd__desc_bytes(&descs[end++]);
        hvd__response_t *r = hvd__plan_add(plan, HVD_OK, (int)(end - i));
        if (!r) return HVD_ERR_NOMEM;
        memcpy(r->descs, &descs[i], (end - i) * sizeof *descs);
        i = end;
    }
    return HVD_OK;
}
