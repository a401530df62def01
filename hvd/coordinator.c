/* hvd/coordinator.c: the slow path of negotiation (the plan's container
 * and byte formats are hvd/plan.c's).
 *
 * Each rank sends rank 0 the requests it has not sent before, and whether
 * it has joined. Rank 0 keeps a table, in order of first arrival, of names
 * that some ranks have made: a name is ready once every rank that has not
 * joined has made it. Ready names are checked (kind, count, dtype, op,
 * root and memory kind must agree; a mismatch becomes an error response
 * naming what differed on which ranks), grouped for fusion, and broadcast
 * as the plan every rank runs in the same order. Names that wait longer than
 * HVD_STALL_CHECK_TIME are reported with the ranks that are missing; past
 * HVD_STALL_SHUTDOWN_TIME a stall response stops every rank's engine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/coordinator.h"

/* ---- rank 0's table ---- */

typedef struct {
    hvd__desc_t *descs; /* per rank */
    char *present;      /* per rank */
    double first_s, warned_s;
} hvd__entry_t;

static struct {
    hvd__entry_t *items;
    size_t len, cap;
    char *joined; /* per rank */
} hvd__table;

int hvd__coordinator_waiting(void)
{
    return hvd__table.len > 0;
}

void hvd__coordinator_free(void)
{
    for (size_t i = 0; i < hvd__table.len; i++) {
        free(hvd__table.items[i].descs);
        free(hvd__table.items[i].present);
    }
    free(hvd__table.items);
    free(hvd__table.joined);
    memset(&hvd__table, 0, sizeof hvd__table);
}

static hvd__entry_t *hvd__table_entry(const char *name, double now)
{
    for (size_t i = 0; i < hvd__table.len; i++)
        if (strcmp(hvd__table.items[i].descs[0].name, name) == 0)
            return &hvd__table.items[i];
    if (hvd__table.len == hvd__table.cap) {
        size_t cap = hvd__table.cap ? 2 * hvd__table.cap : 64;
        hvd__entry_t *items = realloc(hvd__table.items, cap * sizeof *items);
        if (!items) return NULL;
        hvd__table.items = items;
        hvd__table.cap = cap;
    }
    int size = hvd__engine.size;
    hvd__entry_t *e = &hvd__table.items[hvd__table.len];
    e->descs = calloc((size_t)size, sizeof *e->descs);
    e->present = calloc((size_t)size, 1);
    if (!e->descs || !e->present) {
        free(e->descs);
        free(e->present);
        return NULL;
    }
    strcpy(e->descs[0].name, name); /* the key, until rank 0's own arrives */
    e->first_s = e->warned_s = now;
    hvd__table.len++;
    return e;
}

static void hvd__table_drop(size_t i)
{
    free(hvd__table.items[i].descs);
    free(hvd__table.items[i].present);
    memmove(&hvd__table.items[i], &hvd__table.items[i + 1],
            (hvd__table.len - i - 1) * sizeof *hvd__table.items);
    hvd__table.len--;
}

/* "ranks 1, 3" of the ranks for which pick() holds, into text. */
static void hvd__rank_list(char *text, size_t len, const hvd__entry_t *e,
                           int want_present)
{
    size_t used = 0;
    text[0] = '\0';
    for (int r = 0; r < hvd__engine.size && used + 16 < len; r++) {
        if ((e->present[r] != 0) != want_present || hvd__table.joined[r])
            continue;
        used += (size_t)snprintf(text + used, len - used, "%s%d",
                                 used ? ", " : "", r);
    }
}

/* Empty when all present ranks agree; else what differs, on which ranks. */
static void hvd__check_agreement(const hvd__entry_t *e, char *message,
                                 size_t len)
{
    const hvd__desc_t *ref = NULL;
    int ref_rank = -1;
    message[0] = '\0';
    for (int r = 0; r < hvd__engine.size; r++) {
        if (!e->present[r]) continue;
        const hvd__desc_t *d = &e->descs[r];
        if (!ref) {
            ref = d;
            ref_rank = r;
            continue;
        }
        const char *field = d->kind != ref->kind     ? "kind"
                             : d->count != ref->count ? "count"
                             : d->dtype != ref->dtype ? "dtype"
                             : d->op != ref->op       ? "op"
                             : d->root != ref->root   ? "root"
                             : d->mem != ref->mem     ? "memory"
                                                      : NULL;
        if (!field) continue;
        snprintf(message, len,
                 "'%s': ranks disagree on %s: rank %d has %s count=%llu "
                 "dtype=%s op=%s root=%d in %s memory, rank %d has %s "
                 "count=%llu dtype=%s op=%s root=%d in %s memory",
                 ref->name, field, ref_rank, hvd__kind_name(ref->kind),
                 (unsigned long long)ref->count,
                 ring_dtype_name((ring_dtype_t)ref->dtype),
                 ring_op_name((ring_op_t)ref->op), ref->root,
                 hvd__mem_name(ref->mem), r, hvd__kind_name(d->kind),
                 (unsigned long long)d->count,
                 ring_dtype_name((ring_dtype_t)d->dtype),
                 ring_op_name((ring_op_t)d->op), d->root,
                 hvd__mem_name(d->mem));
        return;
    }
    if (ref && ref->kind == HVD__BROADCAST && hvd__table.joined[ref->root])
        snprintf(message, len, "'%s': broadcast root %d has joined",
                 ref->name, ref->root);
    for (int r = 0; ref && ref->kind == HVD__ALLREDUCE_APPLY &&
                    r < hvd__engine.size; r++)
        if (hvd__table.joined[r]) {
            snprintf(message, len, "'%s': a sharded optimizer step needs "
                     "every rank, and rank %d has joined", ref->name, r);
            break;
        }
}

static int hvd__entry_ready(const hvd__entry_t *e)
{
    int any = 0;
    for (int r = 0; r < hvd__engine.size; r++) {
        if (!e->present[r] && !hvd__table.joined[r]) return 0;
        any |= e->present[r];
    }
    return any;
}

/* Moves ready entries into the plan; reports and ends stalls. */
static int hvd__decide(hvd__plan_t *plan, double now)
{
    const hvd__config_t *cfg = &hvd__engine.config;
    hvd__desc_t *ready = malloc((hvd__table.len + 1) * sizeof *ready);
    size_t nready = 0;
    int status = ready ? HVD_OK : HVD_ERR_NOMEM;
    char message[sizeof ((hvd__response_head_t *)0)->message];
    char ranks[256];
    for (size_t i = 0; status == HVD_OK && i < hvd__table.len;) {
        hvd__entry_t *e = &hvd__table.items[i];
        if (!hvd__entry_ready(e)) {
            double age = now - e->first_s;
            hvd__rank_list(ranks, sizeof ranks, e, 0);
            if (cfg->stall_shutdown_s > 0 && age > cfg->stall_shutdown_s) {
                hvd__response_t *r = hvd__plan_add(plan, HVD_ERR_STALL, 0);
                if (!r) return HVD_ERR_NOMEM;
                snprintf(r->head.message, sizeof r->head.message,
                         "'%s' stalled for %.1f s (HVD_STALL_SHUTDOWN_TIME): "
                         "missing ranks %s; stopping",
                         e->descs[0].name, age, ranks);
                break;
            }
            if (age > cfg->stall_check_s &&
                now - e->warned_s > cfg->stall_check_s) {
                hvd__log(HVD__LOG_WARNING,
                         "stall: '%s' was made %.1f s ago by some ranks; "
                         "missing ranks: %s",
                         e->descs[0].name, age, ranks);
                e->warned_s = now;
            }
            i++;
            continue;
        }
        hvd__check_agreement(e, message, sizeof message);
        if (message[0]) {
            hvd__response_t *r = hvd__plan_add(plan, HVD_ERR_MISMATCH, 1);
            if (!r) return HVD_ERR_NOMEM;
            memcpy(r->head.message, message, sizeof message);
            strcpy(r->descs[0].name, e->descs[0].name);
        } else {
            /* The fusion hint holds only where every rank gave it. */
            hvd__desc_t *d = NULL;
            for (int k = 0; k < hvd__engine.size; k++) {
                if (!e->present[k]) continue;
                if (!d) {
                    d = &ready[nready++];
                    *d = e->descs[k];
                } else if (d->follows != e->descs[k].follows) {
                    d->follows = 0;
                }
            }
        }
        hvd__table_drop(i);
    }
    if (status == HVD_OK) status = hvd__plan_group(ready, nready, plan);
    free(ready);
    return status;
}

/* Rank 0: the requests of every rank into the table. */
static int hvd__gathered(const char *bytes, const int *sizes, double now)
{
    size_t at = 0;
    if (!hvd__table.joined) {
        hvd__table.joined = calloc((size_t)hvd__engine.size, 1);
        if (!hvd__table.joined) return HVD_ERR_NOMEM;
    }
    for (int r = 0; r < hvd__engine.size; r++) {
        hvd__desc_t *descs;
        size_t n;
        int joined;
        int status = hvd__decode_requests(bytes + at, (size_t)sizes[r],
                                          &joined, &descs, &n);
        if (status != HVD_OK) {
            hvd__log(HVD__LOG_ERROR, "corrupt request message from rank %d",
                     r);
            return status;
        }
        at += (size_t)sizes[r];
        hvd__table.joined[r] = (char)joined;
        for (size_t i = 0; i < n; i++) {
            hvd__entry_t *e = hvd__table_entry(descs[i].name, now);
            if (!e) {
                free(descs);
                return HVD_ERR_NOMEM;
            }
            e->descs[r] = descs[i];
            e->present[r] = 1;
        }
        free(descs);
    }
    return HVD_OK;
}

int hvd__coordinate(hvd__list_t *pending, int joined, hvd__plan_t *plan)
{
    int status, nbytes_int, size = hvd__engine.size, root = 0;
    int is_root = hvd__engine.rank == root;
    char *mine = NULL, *all = NULL, *planned = NULL;
    int *sizes = NULL, *displs = NULL;
    size_t nbytes, nplanned = 0, nnew = 0;
    MPI_Request req;
    hvd_handle_t *fresh = malloc((pending->len + 1) * sizeof *fresh);
    if (!fresh) return HVD_ERR_NOMEM;
    for (size_t i = 0; i < pending->len; i++) {
        hvd_handle_t h = pending->items[i];
        if (!h || h->coordinated) continue;
        h->coordinated = 1;
        fresh[nnew++] = h;
    }
    status = hvd__encode_requests(fresh, nnew, joined, &mine, &nbytes);
    free(fresh);
    if (status != HVD_OK) return status;
    nbytes_int = (int)nbytes;
    if (is_root) {
        sizes = malloc((size_t)size * sizeof *sizes);
        displs = malloc((size_t)size * sizeof *displs);
        if (!sizes || !displs) {
            status = HVD_ERR_NOMEM;
            goto out;
        }
    }
    /* Each step posts a non-blocking call and waits for it in
     * hvd__mpi_wait, which naps instead of taking a core. */
#define HVD__POST_WAIT(call)                                                \
    do {                                                                       \
        HVD_CHECK_MPI(call);                                                   \
        if ((status = hvd__mpi_wait(&req)) != HVD_OK) goto out;                \
    } while (0)
    HVD__POST_WAIT(MPI_Igather(&nbytes_int, 1, MPI_INT, sizes, 1, MPI_INT,
                               root, hvd__engine.comm, &req));
    if (is_root) {
        size_t total = 0;
        for (int r = 0; r < size; r++) {
            displs[r] = (int)total;
            total += (size_t)sizes[r];
        }
        all = malloc(total + 1);
        if (!all) {
            status = HVD_ERR_NOMEM;
            goto out;
        }
    }
    HVD__POST_WAIT(MPI_Igatherv(mine, nbytes_int, MPI_BYTE, all, sizes,
                                displs, MPI_BYTE, root, hvd__engine.comm,
                                &req));
    if (is_root) {
        hvd__plan_t decided = {0};
        double now = hvd__now();
        status = hvd__gathered(all, sizes, now);
        if (status == HVD_OK) status = hvd__decide(&decided, now);
        if (status == HVD_OK)
            status = hvd__encode_plan(&decided, &planned, &nplanned);
        hvd__plan_free(&decided);
    }
    /* A plan size of -1 tells the others that rank 0 failed, so that no
     * rank waits for a plan that will not come. */
    int nplanned_int = status == HVD_OK ? (int)nplanned : -1;
    HVD__POST_WAIT(MPI_Ibcast(&nplanned_int, 1, MPI_INT, root,
                              hvd__engine.comm, &req));
    if (nplanned_int < 0) {
        if (status == HVD_OK) status = HVD_ERR_MPI;
        goto out;
    }
    if (!is_root) planned = malloc((size_t)nplanned_int + 1);
    if (!planned) {
        status = HVD_ERR_NOMEM;
        goto out;
    }
    HVD__POST_WAIT(MPI_Ibcast(planned, nplanned_int, MPI_BYTE, root,
                              hvd__engine.comm, &req));
#undef HVD__POST_WAIT
    status = hvd__decode_plan(planned, (size_t)nplanned_int, plan);
out:
    free(mine);
    free(all);
    free(sizes);
    free(displs);
    free(planned);
    return status;
}
