/* models/conv_dnnl.c: the CPU table's convolutions through oneDNN
 * (models/conv_dnnl.h), in a build configured with it.
 *
 * Why: OpenBLAS's GEMM behind im2col is held to the kernels of an older
 * core where OPENBLAS_CORETYPE says so (this project's build machines set
 * it, since old OpenBLAS builds fail on their newer cores), while oneDNN,
 * PyTorch's CPU library, picks its own kernels: on a 2-core AVX-512
 * machine it ran conv2 of the cnn (32 -> 64 channels, 5x5, batch 64)
 * forward and backward in 16 ms where im2col took 38.
 *
 * A plan per (shape, batch) holds the three primitives (forward with the
 * bias, backward data, backward weights with the bias's gradient), made
 * with oneDNN choosing its layouts ("any"), and a port per argument: the
 * model's NCHW memory, the layout the primitive chose, and a reorder
 * between them when they differ. Plans are made on first use, in a small
 * table replaced round-robin when full; a model needs a few (its conv
 * layers times its batch sizes). One engine and stream per process, one
 * thread (model_setup_cpu's, as OpenBLAS's).
 *
 * The results differ from im2col's by float rounding (another order of
 * the sums); each call is deterministic, so a run and its resume, and
 * every rank, agree bit for bit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <oneapi/dnnl/dnnl.h>
#include "models/conv_dnnl.h"
#include "models/model.h"

#define PLAN_SLOTS 16

/* One argument of a primitive: the model's memory (user, its handle set
 * per call), the primitive's (inner: user itself when the layouts agree),
 * and the reorder between them (NULL when they agree). */
typedef struct {
    dnnl_memory_t user, inner;
    dnnl_primitive_t reorder;
} port_t;

enum { FWD_X, FWD_W, FWD_B, FWD_Y, BD_DY, BD_W, BD_DX, BW_X, BW_DY, BW_DW,
       BW_DB, NPORTS };

typedef struct {
    model__conv_shape_t s; /* the key, with batch; batch 0: empty */
    int batch;
    dnnl_primitive_t fwd, bwd_data, bwd_weights;
    port_t port[NPORTS];
} plan_t;

static struct {
    int tried, ok;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    plan_t plans[PLAN_SLOTS];
    int next; /* the slot replaced next when all are taken */
    int said; /* a failure was written to stderr */
} dn;

static int fail(const char *what, dnnl_status_t rc)
{
    if (!dn.said)
        fprintf(stderr,
                "models: oneDNN: %s failed (status %d): convolutions run "
                "through im2col\n",
                what, (int)rc);
    dn.said = 1;
    return MODEL_ERR_STATE;
}

#define DNNL(call, ...)                                                        \
    do {                                                                       \
        dnnl_status_t rc_ = call(__VA_ARGS__);                                 \
        if (rc_ != dnnl_success) return fail(#call, rc_);                      \
    } while (0)

static int open_once(void)
{
    if (dn.tried) return dn.ok ? MODEL_OK : MODEL_ERR_STATE;
    dn.tried = 1;
    DNNL(dnnl_engine_create, &dn.engine, dnnl_cpu, 0);
    DNNL(dnnl_stream_create, &dn.stream, dn.engine, dnnl_stream_default_flags);
    dn.ok = 1;
    return MODEL_OK;
}

int model__dnnl_takes(const model__conv_shape_t *s)
{
    const char *v = getenv("HVD_CONV");
    return s->in_c >= 16 && !(v && strcmp(v, "im2col") == 0);
}

size_t model__dnnl_scratch_count(const model__conv_shape_t *s)
{
    return (size_t)s->out_c * s->in_c * s->k * s->k + (size_t)s->out_c;
}

static void port_free(port_t *p)
{
    if (p->reorder) dnnl_primitive_destroy(p->reorder);
    if (p->inner && p->inner != p->user) dnnl_memory_destroy(p->inner);
    if (p->user) dnnl_memory_destroy(p->user);
    *p = (port_t){0};
}

static void plan_free(plan_t *p)
{
    for (int i = 0; i < NPORTS; i++) port_free(&p->port[i]);
    if (p->fwd) dnnl_primitive_destroy(p->fwd);
    if (p->bwd_data) dnnl_primitive_destroy(p->bwd_data);
    if (p->bwd_weights) dnnl_primitive_destroy(p->bwd_weights);
    *p = (plan_t){0};
}

/* port p between the model's layout (user) and pd's argument `what`;
 * into: whether data goes from the model's memory into the primitive's. */
static int port_init(port_t *p, const dnnl_memory_desc_t *user,
                     const_dnnl_primitive_desc_t pd, dnnl_query_t what,
                     int into)
{
    const dnnl_memory_desc_t *inner = dnnl_primitive_desc_query_md(pd, what, 0);
    if (!inner) return fail("dnnl_primitive_desc_query_md", dnnl_not_required);
    DNNL(dnnl_memory_create, &p->user, user, dn.engine, DNNL_MEMORY_NONE);
    if (dnnl_memory_desc_equal(user, inner)) {
        p->inner = p->user;
        return MODEL_OK;
    }
    DNNL(dnnl_memory_create, &p->inner, inner, dn.engine,
         DNNL_MEMORY_ALLOCATE);
    dnnl_primitive_desc_t rpd;
    DNNL(dnnl_reorder_primitive_desc_create, &rpd, into ? user : inner,
         dn.engine, into ? inner : user, dn.engine, NULL);
    dnnl_status_t rc = dnnl_primitive_create(&p->reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    return rc == dnnl_success ? MODEL_OK : fail("dnnl_primitive_create", rc);
}

/* The plan's primitives for s at batch; on failure p is left empty. */
static int plan_init(plan_t *p, const model__conv_shape_t *s, int batch)
{
    dnnl_memory_desc_t x, w, b, y, xa, wa, ya;
    dnnl_dims_t dx = {batch, s->in_c, s->in_h, s->in_w};
    dnnl_dims_t dw = {s->out_c, s->in_c, s->k, s->k};
    dnnl_dims_t db = {s->out_c};
    dnnl_dims_t dy = {batch, s->out_c, s->out_h, s->out_w};
    dnnl_dims_t stride = {s->stride, s->stride}, pad = {s->pad, s->pad};
    dnnl_convolution_desc_t fd, bdd, bwd;
    dnnl_primitive_desc_t fpd = NULL, bdpd = NULL, bwpd = NULL;
    int rc = MODEL_ERR_STATE;
    *p = (plan_t){.s = *s};
#define TRY(call, ...)                                                         \
    do {                                                                       \
        dnnl_status_t st_ = call(__VA_ARGS__);                                 \
        if (st_ != dnnl_success) {                                             \
            rc = fail(#call, st_);                                             \
            goto out;                                                          \
        }                                                                      \
    } while (0)
    TRY(dnnl_memory_desc_init_by_tag, &x, 4, dx, dnnl_f32, dnnl_nchw);
    TRY(dnnl_memory_desc_init_by_tag, &w, 4, dw, dnnl_f32, dnnl_oihw);
    TRY(dnnl_memory_desc_init_by_tag, &b, 1, db, dnnl_f32, dnnl_x);
    TRY(dnnl_memory_desc_init_by_tag, &y, 4, dy, dnnl_f32, dnnl_nchw);
    TRY(dnnl_memory_desc_init_by_tag, &xa, 4, dx, dnnl_f32,
        dnnl_format_tag_any);
    TRY(dnnl_memory_desc_init_by_tag, &wa, 4, dw, dnnl_f32,
        dnnl_format_tag_any);
    TRY(dnnl_memory_desc_init_by_tag, &ya, 4, dy, dnnl_f32,
        dnnl_format_tag_any);
    TRY(dnnl_convolution_forward_desc_init, &fd, dnnl_forward_training,
        dnnl_convolution_direct, &xa, &wa, &b, &ya, stride, pad, pad);
    TRY(dnnl_primitive_desc_create, &fpd, &fd, NULL, dn.engine, NULL);
    TRY(dnnl_convolution_backward_data_desc_init, &bdd,
        dnnl_convolution_direct, &xa, &wa, &ya, stride, pad, pad);
    TRY(dnnl_primitive_desc_create, &bdpd, &bdd, NULL, dn.engine, fpd);
    TRY(dnnl_convolution_backward_weights_desc_init, &bwd,
        dnnl_convolution_direct, &xa, &wa, &b, &ya, stride, pad, pad);
    TRY(dnnl_primitive_desc_create, &bwpd, &bwd, NULL, dn.engine, fpd);
#undef TRY
    struct {
        int port;
        const dnnl_memory_desc_t *user;
        const_dnnl_primitive_desc_t pd;
        dnnl_query_t what;
        int into;
    } const ports[NPORTS] = {
        {FWD_X, &x, fpd, dnnl_query_src_md, 1},
        {FWD_W, &w, fpd, dnnl_query_weights_md, 1},
        {FWD_B, &b, fpd, dnnl_query_weights_md, 1},
        {FWD_Y, &y, fpd, dnnl_query_dst_md, 0},
        {BD_DY, &y, bdpd, dnnl_query_diff_dst_md, 1},
        {BD_W, &w, bdpd, dnnl_query_weights_md, 1},
        {BD_DX, &x, bdpd, dnnl_query_diff_src_md, 0},
        {BW_X, &x, bwpd, dnnl_query_src_md, 1},
        {BW_DY, &y, bwpd, dnnl_query_diff_dst_md, 1},
        {BW_DW, &w, bwpd, dnnl_query_diff_weights_md, 0},
        {BW_DB, &b, bwpd, dnnl_query_diff_weights_md, 0}};
    for (int i = 0; i < NPORTS; i++) {
        /* The bias's md is index 1 of the weights' query. */
        if (i == FWD_B || i == BW_DB) {
            const dnnl_memory_desc_t *inner =
                dnnl_primitive_desc_query_md(ports[i].pd, ports[i].what, 1);
            if (!inner || !dnnl_memory_desc_equal(inner, &b)) {
                rc = fail("the bias's layout", dnnl_unimplemented);
                goto out;
            }
            if (dnnl_memory_create(&p->port[i].user, &b, dn.engine,
                                   DNNL_MEMORY_NONE) != dnnl_success) {
                rc = fail("dnnl_memory_create", dnnl_out_of_memory);
                goto out;
            }
            p->port[i].inner = p->port[i].user;
            continue;
        }
        rc = port_init(&p->port[i], ports[i].user, ports[i].pd,
                       ports[i].what, ports[i].into);
        if (rc != MODEL_OK) goto out;
    }
    rc = MODEL_ERR_STATE;
    if (dnnl_primitive_create(&p->fwd, fpd) != dnnl_success ||
        dnnl_primitive_create(&p->bwd_data, bdpd) != dnnl_success ||
        dnnl_primitive_create(&p->bwd_weights, bwpd) != dnnl_success) {
        rc = fail("dnnl_primitive_create", dnnl_runtime_error);
        goto out;
    }
    p->batch = batch;
    rc = MODEL_OK;
out:
    if (fpd) dnnl_primitive_desc_destroy(fpd);
    if (bdpd) dnnl_primitive_desc_destroy(bdpd);
    if (bwpd) dnnl_primitive_desc_destroy(bwpd);
    if (rc != MODEL_OK) plan_free(p);
    return rc;
}

static plan_t *plan_get(const model__conv_shape_t *s, int batch)
{
    if (open_once() != MODEL_OK) return NULL;
    for (int i = 0; i < PLAN_SLOTS; i++)
        if (dn.plans[i].batch == batch &&
            memcmp(&dn.plans[i].s, s, sizeof *s) == 0)
            return &dn.plans[i];
    plan_t *p = &dn.plans[dn.next];
    dn.next = (dn.next + 1) % PLAN_SLOTS;
    plan_free(p);
    return plan_init(p, s, batch) == MODEL_OK ? p : NULL;
}

/* Points port's model side at data and, going in, reorders it across. */
static int port_in(port_t *p, const void *data)
{
    DNNL(dnnl_memory_set_data_handle, p->user, (void *)data);
    if (!p->reorder) return MODEL_OK;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, p->user},
                              {DNNL_ARG_TO, p->inner}};
    DNNL(dnnl_primitive_execute, p->reorder, dn.stream, 2, args);
    return MODEL_OK;
}

/* After the primitive: the result across to the model's data. */
static int port_out(port_t *p, void *data)
{
    DNNL(dnnl_memory_set_data_handle, p->user, data);
    if (!p->reorder) return MODEL_OK;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, p->inner},
                              {DNNL_ARG_TO, p->user}};
    DNNL(dnnl_primitive_execute, p->reorder, dn.stream, 2, args);
    return MODEL_OK;
}

#define CHECK(call)                                                            \
    do {                                                                       \
        int st_ = (call);                                                      \
        if (st_ != MODEL_OK) return st_;                                       \
    } while (0)

int model__dnnl_conv2d_forward(const model__conv_shape_t *s, const float *x,
                               const float *w, const float *b, float *y,
                               int batch)
{
    plan_t *p = plan_get(s, batch);
    if (!p) return MODEL_ERR_STATE;
    port_t *q = p->port;
    CHECK(port_in(&q[FWD_X], x));
    CHECK(port_in(&q[FWD_W], w));
    CHECK(port_in(&q[FWD_B], b));
    /* y's handle first: with no reorder the primitive writes it. */
    DNNL(dnnl_memory_set_data_handle, q[FWD_Y].user, y);
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, q[FWD_X].inner},
                              {DNNL_ARG_WEIGHTS, q[FWD_W].inner},
                              {DNNL_ARG_BIAS, q[FWD_B].inner},
                              {DNNL_ARG_DST, q[FWD_Y].inner}};
    DNNL(dnnl_primitive_execute, p->fwd, dn.stream, 4, args);
    CHECK(port_out(&q[FWD_Y], y));
    DNNL(dnnl_stream_wait, dn.stream);
    return MODEL_OK;
}

int model__dnnl_conv2d_backward(const model__conv_shape_t *s, const float *x,
                                const float *w, const float *dy, float *dx,
                                float *dw, float *db, int batch,
                                float *scratch, int accumulate)
{
    plan_t *p = plan_get(s, batch);
    if (!p) return MODEL_ERR_STATE;
    port_t *q = p->port;
    if (dx) {
        CHECK(port_in(&q[BD_DY], dy));
        CHECK(port_in(&q[BD_W], w));
        DNNL(dnnl_memory_set_data_handle, q[BD_DX].user, dx);
        dnnl_exec_arg_t args[] = {{DNNL_ARG_DIFF_DST, q[BD_DY].inner},
                                  {DNNL_ARG_WEIGHTS, q[BD_W].inner},
                                  {DNNL_ARG_DIFF_SRC, q[BD_DX].inner}};
        DNNL(dnnl_primitive_execute, p->bwd_data, dn.stream, 3, args);
        CHECK(port_out(&q[BD_DX], dx));
    }
    if (dw) {
        size_t nw = model__dnnl_scratch_count(s) - (size_t)s->out_c;
        float *to_w = accumulate ? scratch : dw;
        float *to_b = accumulate ? scratch + nw : db;
        CHECK(port_in(&q[BW_X], x));
        CHECK(port_in(&q[BW_DY], dy));
        DNNL(dnnl_memory_set_data_handle, q[BW_DW].user, to_w);
        DNNL(dnnl_memory_set_data_handle, q[BW_DB].user, to_b);
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, q[BW_X].inner},
                                  {DNNL_ARG_DIFF_DST, q[BW_DY].inner},
                                  {DNNL_ARG_DIFF_WEIGHTS, q[BW_DW].inner},
                                  {DNNL_ARG_DIFF_BIAS, q[BW_DB].inner}};
        DNNL(dnnl_primitive_execute, p->bwd_weights, dn.stream, 4, args);
        CHECK(port_out(&q[BW_DW], to_w));
        DNNL(dnnl_stream_wait, dn.stream);
        if (accumulate) {
            for (size_t i = 0; i < nw; i++) dw[i] += to_w[i];
            for (int i = 0; i < s->out_c; i++) db[i] += to_b[i];
        }
    }
    DNNL(dnnl_stream_wait, dn.stream);
    return MODEL_OK;
}
