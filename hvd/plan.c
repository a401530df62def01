/* hvd/plan.c: the plan every rank runs: the container, the grouping of
 * requests into responses, and the byte formats of what ranks exchange.
 *
 * Grouping: fusing small tensors saves a collective each; fusing a large
 * one only costs its two copies through the fusion buffer, so large
 * tensors run alone. Unless every rank says the large one follows the
 * group's last member in memory (hvd__chain_link's hint): a model's
 * gradients, laid out in the order backward finishes them, are then one
 * range, reduced where it lies (execute.c's hvd__tiled) in one collective
 * instead of two. The hint never decides correctness: a rank whose
 * tensors do not tile after all packs them, as for any group.
 *
 * Left out: the fusion buffer, which lives with the code that packs it
 * (hvd/execute.c), and who decides the plan (hvd/coordinator.c, and the
 * engine's cache for names seen before).
 */
#include <stdlib.h>
#include <string.h>
#include "hvd/plan.h"

/* ---- plans ---- */

void hvd__plan_free(hvd__plan_t *plan)
{
    for (size_t i = 0; i < plan->len; i++) free(plan->items[i].descs);
    free(plan->items);
    *plan = (hvd__plan_t){0};
}

hvd__response_t *hvd__plan_add(hvd__plan_t *plan, int status, int ndescs)
{
    if (plan->len == plan->cap) {
        size_t cap = plan->cap ? 2 * plan->cap : 16;
        hvd__response_t *items = realloc(plan->items, cap * sizeof *items);
        if (!items) return NULL;
        plan->items = items;
        plan->cap = cap;
    }
    hvd__response_t *r = &plan->items[plan->len];
    memset(r, 0, sizeof *r);
    r->descs = calloc((size_t)ndescs + 1, sizeof *r->descs);
    if (!r->descs) return NULL;
    r->head.status = status;
    r->head.ndescs = ndescs;
    plan->len++;
    return r;
}

/* ---- byte formats ---- */

/* A desc from another rank is checked before use: a NUL-terminated name,
 * known kind, dtype and op, a count whose bytes fit a size_t (fusion adds
 * them up), and a root that is a rank (rank 0 indexes its per-rank tables
 * with it, and every rank its ring order). */
static int hvd__desc_valid(const hvd__desc_t *d)
{
    size_t esize = ring_dtype_size((ring_dtype_t)d->dtype);
    return memchr(d->name, '\0', sizeof d->name) != NULL && d->kind >= 0 &&
           d->kind < HVD__KIND_COUNT && esize != 0 &&
           d->count <= SIZE_MAX / esize &&
           ring_op_name((ring_op_t)d->op) != NULL && d->root >= 0 &&
           d->mem >= 0 && d->mem < HVD__MEM_COUNT &&
           d->root < hvd__engine.size;
}

typedef struct {
    int32_t joined, n;
} hvd__requests_head_t;

int hvd__encode_requests(hvd_handle_t *reqs, size_t n, int joined,
                         char **bytes, size_t *nbytes)
{
    hvd__requests_head_t head = {joined, (int32_t)n};
    *nbytes = sizeof head + n * sizeof(hvd__desc_t);
    *bytes = malloc(*nbytes);
    if (!*bytes) return HVD_ERR_NOMEM;
    memcpy(*bytes, &head, sizeof head);
    for (size_t i = 0; i < n; i++)
        memcpy(*bytes + sizeof head + i * sizeof(hvd__desc_t), &reqs[i]->desc,
               sizeof(hvd__desc_t));
    return HVD_OK;
}

int hvd__decode_requests(const char *bytes, size_t nbytes, int *joined,
                         hvd__desc_t **descs, size_t *n)
{
    hvd__requests_head_t head;
    if (nbytes < sizeof head) return HVD_ERR_ARG;
    memcpy(&head, bytes, sizeof head);
    if (head.n < 0 ||
        nbytes != sizeof head + (size_t)head.n * sizeof(hvd__desc_t))
        return HVD_ERR_ARG;
    *descs = malloc((size_t)head.n * sizeof **descs + 1);
    if (!*descs) return HVD_ERR_NOMEM;
    memcpy(*descs, bytes + sizeof head, (size_t)head.n * sizeof **descs);
    for (int32_t i = 0; i < head.n; i++) {
        if (!hvd__desc_valid(&(*descs)[i])) {
            free(*descs);
            *descs = NULL;
            return HVD_ERR_ARG;
        }
    }
    *joined = head.joined != 0;
    *n = (size_t)head.n;
    return HVD_OK;
}

int hvd__encode_plan(const hvd__plan_t *plan, char **bytes, size_t *nbytes)
{
    int32_t n = (int32_t)plan->len;
    size_t total = sizeof n;
    for (size_t i = 0; i < plan->len; i++)
        total += sizeof(hvd__response_head_t) +
                 (size_t)plan->items[i].head.ndescs * sizeof(hvd__desc_t);
    char *p = *bytes = malloc(total);
    if (!p) return HVD_ERR_NOMEM;
    memcpy(p, &n, sizeof n);
    p += sizeof n;
    for (size_t i = 0; i < plan->len; i++) {
        const hvd__response_t *r = &plan->items[i];
        memcpy(p, &r->head, sizeof r->head);
        p += sizeof r->head;
        memcpy(p, r->descs, (size_t)r->head.ndescs * sizeof(hvd__desc_t));
        p += (size_t)r->head.ndescs * sizeof(hvd__desc_t);
    }
    *nbytes = total;
    return HVD_OK;
}

int hvd__decode_plan(const char *bytes, size_t nbytes, hvd__plan_t *plan)
{
    int32_t n;
    size_t at = sizeof n;
    *plan = (hvd__plan_t){0};
    if (nbytes < sizeof n) return HVD_ERR_ARG;
    memcpy(&n, bytes, sizeof n);
    for (int32_t i = 0; n >= 0 && i < n; i++) {
        hvd__response_head_t head;
        if (nbytes - at < sizeof head) goto bad;
        memcpy(&head, bytes + at, sizeof head);
        at += sizeof head;
        if (head.ndescs < 0 ||
            (size_t)head.ndescs > (nbytes - at) / sizeof(hvd__desc_t) ||
            !memchr(head.message, '\0', sizeof head.message))
            goto bad;
        hvd__response_t *r = hvd__plan_add(plan, head.status, head.ndescs);
        if (!r) {
            hvd__plan_free(plan);
            return HVD_ERR_NOMEM;
        }
        r->head = head;
        memcpy(r->descs, bytes + at, (size_t)head.ndescs * sizeof *r->descs);
        at += (size_t)head.ndescs * sizeof *r->descs;
        for (int32_t d = 0; d < head.ndescs; d++)
            if (!hvd__desc_valid(&r->descs[d])) goto bad;
    }
    if (n < 0 || at != nbytes) goto bad;
    return HVD_OK;
bad:
    hvd__plan_free(plan);
    return HVD_ERR_ARG;
}

/* ---- grouping ---- */

/* Tensors this large gain nothing from fusion but its two copies. */
static const size_t hvd__direct_bytes = 256 << 10;

/* Whether d may join a group whose last member is prev: host and device
 * tensors never fuse (each kind has its own fusion buffer). */
static int hvd__joins(const hvd__desc_t *prev, const hvd__desc_t *d)
{
    if (d->kind != HVD__ALLREDUCE || prev->kind != HVD__ALLREDUCE ||
        d->dtype != prev->dtype || d->op != prev->op || d->mem != prev->mem)
        return 0;
    if (hvd__desc_bytes(prev) < hvd__direct_bytes &&
        hvd__desc_bytes(d) < hvd__direct_bytes)
        return 1;
    return d->follows != 0 && d->follows == hvd__name_hash(prev->name);
}

size_t hvd__group_end(const hvd__desc_t *descs, size_t i, size_t n)
{
    size_t threshold = hvd__engine.config.fusion_threshold;
    size_t end = i + 1, total = hvd__desc_bytes(&descs[i]);
    while (end < n && hvd__joins(&descs[end - 1], &descs[end]) &&
           total + hvd__desc_bytes(&descs[end]) <= threshold)
        total += hvd__desc_bytes(&descs[end++]);
    return end;
}

int hvd__plan_group(const hvd__desc_t *descs, size_t n, hvd__plan_t *plan)
{
    for (size_t i = 0; i < n;) {
        size_t end = hvd__group_end(descs, i, n);
        hvd__response_t *r = hvd__plan_add(plan, HVD_OK, (int)(end - i));
        if (!r) return HVD_ERR_NOMEM;
        memcpy(r->descs, &descs[i], (end - i) * sizeof *descs);
        i = end;
    }
    return HVD_OK;
}
