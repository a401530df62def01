/* models/conv_dnnl.c: the CPU table's convolutions through oneDNN
 * (models/conv_dnnl.h), in a build configured with it; without it (and in
 * scripts/fuzz's build, which compiles every source), stubs that take no
 * layer.
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
 * layers times its batch sizes). One engine and stream per process, and
 * models of several threads take turns at them (a lock): the plans and
 * their ports' data handles are the process's, and two models trained
 * at once in two threads ran on each other's data.
 *
 * The results differ from im2col's by float rounding (another order of
 * the sums); each call is deterministic, so a run and its resume, and
 * every rank, agree bit for bit.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "models/backend.h"
#include "models/conv_dnnl.h"
#include "models/model.h"

#if HVD_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>

#define PLAN_SLOTS 16

/* One argument of a primitive: the model's memory (user, its handle set
 * per call), the primitive's (inner: user itself when the layouts agree),
 * the reorder between them (NULL when they agree), and which way the data
 * goes (into the primitive, or out of it). */
typedef struct {
    dnnl_memory_t user, inner;
    dnnl_primitive_t reorder;
    int into;
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
    model__conv_ask_t ask;
    return s->in_c >= 16 && model__conv_ask(&ask, NULL) == 0 &&
           ask.path != MODEL__CONV_ASK_IM2COL;
}

/* dw's floats. */
static size_t weights_count(const model__conv_shape_t *s)
{
    return (size_t)s->out_c * s->in_c * s->k * s->k;
}

size_t model__dnnl_scratch_count(const model__conv_shape_t *s)
{
    return weights_count(s) + (size_t)s->out_c;
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

/* One port: the model's layout user, and pd's argument `what` (the
 * index-th of that query: the bias is the weights' second). */
typedef struct {
    const dnnl_memory_desc_t *user;
    const_dnnl_primitive_desc_t pd;
    dnnl_query_t what;
    int index, into;
} port_spec_t;

static int port_init(port_t *p, const port_spec_t *spec)
{
    const dnnl_memory_desc_t *user = spec->user;
    const dnnl_memory_desc_t *inner =
        dnnl_primitive_desc_query_md(spec->pd, spec->what, spec->index);
    if (!inner) return fail("dnnl_primitive_desc_query_md", dnnl_not_required);
    p->into = spec->into;
    DNNL(dnnl_memory_create, &p->user, user, dn.engine, DNNL_MEMORY_NONE);
    if (dnnl_memory_desc_equal(user, inner)) {
        p->inner = p->user;
        return MODEL_OK;
    }
    DNNL(dnnl_memory_create, &p->inner, inner, dn.engine, DNNL_MEMORY_ALLOCATE);
    dnnl_primitive_desc_t rpd;
    DNNL(dnnl_reorder_primitive_desc_create, &rpd, p->into ? user : inner,
         dn.engine, p->into ? inner : user, dn.engine, NULL);
    dnnl_status_t rc = dnnl_primitive_create(&p->reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    return rc == dnnl_success ? MODEL_OK : fail("dnnl_primitive_create", rc);
}

/* The plan's primitives and ports for s at batch, their primitive
 * descriptors left in pd (forward, backward data, backward weights) for
 * the caller to destroy. */
static int plan_build(plan_t *p, const model__conv_shape_t *s, int batch,
                      dnnl_primitive_desc_t pd[3])
{
    dnnl_memory_desc_t x, w, b, y, xa, wa, ya;
    dnnl_dims_t dx = {batch, s->in_c, s->in_h, s->in_w};
    dnnl_dims_t dw = {s->out_c, s->in_c, s->k, s->k};
    dnnl_dims_t db = {s->out_c};
    dnnl_dims_t dy = {batch, s->out_c, s->out_h, s->out_w};
    dnnl_dims_t stride = {s->stride, s->stride}, pad = {s->pad, s->pad};
    dnnl_convolution_desc_t fd, bdd, bwd;
    DNNL(dnnl_memory_desc_init_by_tag, &x, 4, dx, dnnl_f32, dnnl_nchw);
    DNNL(dnnl_memory_desc_init_by_tag, &w, 4, dw, dnnl_f32, dnnl_oihw);
    DNNL(dnnl_memory_desc_init_by_tag, &b, 1, db, dnnl_f32, dnnl_x);
    DNNL(dnnl_memory_desc_init_by_tag, &y, 4, dy, dnnl_f32, dnnl_nchw);
    DNNL(dnnl_memory_desc_init_by_tag, &xa, 4, dx, dnnl_f32,
         dnnl_format_tag_any);
    DNNL(dnnl_memory_desc_init_by_tag, &wa, 4, dw, dnnl_f32,
         dnnl_format_tag_any);
    DNNL(dnnl_memory_desc_init_by_tag, &ya, 4, dy, dnnl_f32,
         dnnl_format_tag_any);
    DNNL(dnnl_convolution_forward_desc_init, &fd, dnnl_forward_training,
         dnnl_convolution_direct, &xa, &wa, &b, &ya, stride, pad, pad);
    DNNL(dnnl_primitive_desc_create, &pd[0], &fd, NULL, dn.engine, NULL);
    DNNL(dnnl_convolution_backward_data_desc_init, &bdd,
         dnnl_convolution_direct, &xa, &wa, &ya, stride, pad, pad);
    DNNL(dnnl_primitive_desc_create, &pd[1], &bdd, NULL, dn.engine, pd[0]);
    DNNL(dnnl_convolution_backward_weights_desc_init, &bwd,
         dnnl_convolution_direct, &xa, &wa, &b, &ya, stride, pad, pad);
    DNNL(dnnl_primitive_desc_create, &pd[2], &bwd, NULL, dn.engine, pd[0]);
    const port_spec_t specs[NPORTS] = {
        [FWD_X] = {&x, pd[0], dnnl_query_src_md, 0, 1},
        [FWD_W] = {&w, pd[0], dnnl_query_weights_md, 0, 1},
        [FWD_B] = {&b, pd[0], dnnl_query_weights_md, 1, 1},
        [FWD_Y] = {&y, pd[0], dnnl_query_dst_md, 0, 0},
        [BD_DY] = {&y, pd[1], dnnl_query_diff_dst_md, 0, 1},
        [BD_W] = {&w, pd[1], dnnl_query_weights_md, 0, 1},
        [BD_DX] = {&x, pd[1], dnnl_query_diff_src_md, 0, 0},
        [BW_X] = {&x, pd[2], dnnl_query_src_md, 0, 1},
        [BW_DY] = {&y, pd[2], dnnl_query_diff_dst_md, 0, 1},
        [BW_DW] = {&w, pd[2], dnnl_query_diff_weights_md, 0, 0},
        [BW_DB] = {&b, pd[2], dnnl_query_diff_weights_md, 1, 0}};
    for (int i = 0; i < NPORTS; i++) {
        int rc = port_init(&p->port[i], &specs[i]);
        if (rc != MODEL_OK) return rc;
    }
    DNNL(dnnl_primitive_create, &p->fwd, pd[0]);
    DNNL(dnnl_primitive_create, &p->bwd_data, pd[1]);
    DNNL(dnnl_primitive_create, &p->bwd_weights, pd[2]);
    return MODEL_OK;
}

/* The plan of s at batch; on failure p is left empty. */
static int plan_init(plan_t *p, const model__conv_shape_t *s, int batch)
{
    dnnl_primitive_desc_t pd[3] = {NULL, NULL, NULL};
    *p = (plan_t){.s = *s};
    int rc = plan_build(p, s, batch, pd);
    for (int i = 0; i < 3; i++)
        if (pd[i]) dnnl_primitive_desc_destroy(pd[i]);
    if (rc == MODEL_OK)
        p->batch = batch;
    else
        plan_free(p);
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

/* A reorder of port p, in the direction its data goes. */
static int port_reorder(const port_t *p)
{
    if (!p->reorder) return MODEL_OK;
    dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, p->into ? p->user : p->inner},
                              {DNNL_ARG_TO, p->into ? p->inner : p->user}};
    DNNL(dnnl_primitive_execute, p->reorder, dn.stream, 2, args);
    return MODEL_OK;
}

/* An argument of a primitive: its oneDNN name, the plan's port, the
 * model's data (written through when the port goes out). */
typedef struct {
    int arg, port;
    const void *data;
} use_t;

/* The reorders of the uses' ports that go `into` the primitive (1) or
 * out of it (0). */
static int reorder_uses(plan_t *p, const use_t *uses, int n, int into)
{
    for (int i = 0; i < n; i++) {
        const port_t *q = &p->port[uses[i].port];
        int rc = q->into == into ? port_reorder(q) : MODEL_OK;
        if (rc != MODEL_OK) return rc;
    }
    return MODEL_OK;
}

/* prim on the n uses: each port pointed at its data, inputs reordered
 * in, the primitive, outputs reordered out; then waited for. */
static int run(plan_t *p, dnnl_primitive_t prim, const use_t *uses, int n)
{
    dnnl_exec_arg_t args[NPORTS];
    for (int i = 0; i < n; i++) {
        port_t *q = &p->port[uses[i].port];
        DNNL(dnnl_memory_set_data_handle, q->user, (void *)uses[i].data);
        args[i] = (dnnl_exec_arg_t){uses[i].arg, q->inner};
    }
    int rc = reorder_uses(p, uses, n, 1);
    if (rc != MODEL_OK) return rc;
    DNNL(dnnl_primitive_execute, prim, dn.stream, n, args);
    if ((rc = reorder_uses(p, uses, n, 0)) != MODEL_OK) return rc;
    DNNL(dnnl_stream_wait, dn.stream);
    return MODEL_OK;
}

static pthread_mutex_t dn_turn = PTHREAD_MUTEX_INITIALIZER;

static int conv_forward(const model__conv_shape_t *s, const float *x,
                        const float *w, const float *b, float *y, int batch)
{
    plan_t *p = plan_get(s, batch);
    if (!p) return MODEL_ERR_STATE;
    const use_t uses[] = {{DNNL_ARG_SRC, FWD_X, x},
                          {DNNL_ARG_WEIGHTS, FWD_W, w},
                          {DNNL_ARG_BIAS, FWD_B, b},
                          {DNNL_ARG_DST, FWD_Y, y}};
    return run(p, p->fwd, uses, 4);
}

int model__dnnl_conv2d_forward(const model__conv_shape_t *s, const float *x,
                               const float *w, const float *b, float *y,
                               int batch)
{
    pthread_mutex_lock(&dn_turn);
    int rc = conv_forward(s, x, w, b, y, batch);
    pthread_mutex_unlock(&dn_turn);
    return rc;
}

static int conv_backward(const model__conv_shape_t *s, const float *x,
                         const float *w, const float *dy, float *dx,
                         float *dw, float *db, int batch, float *scratch,
                         int accumulate)
{
    plan_t *p = plan_get(s, batch);
    if (!p) return MODEL_ERR_STATE;
    if (dx) {
        const use_t uses[] = {{DNNL_ARG_DIFF_DST, BD_DY, dy},
                              {DNNL_ARG_WEIGHTS, BD_W, w},
                              {DNNL_ARG_DIFF_SRC, BD_DX, dx}};
        int rc = run(p, p->bwd_data, uses, 3);
        if (rc != MODEL_OK) return rc;
    }
    if (!dw) return MODEL_OK;
    size_t nw = weights_count(s);
    float *to_w = accumulate ? scratch : dw;
    float *to_b = accumulate ? scratch + nw : db;
    const use_t uses[] = {{DNNL_ARG_SRC, BW_X, x},
                          {DNNL_ARG_DIFF_DST, BW_DY, dy},
                          {DNNL_ARG_DIFF_WEIGHTS, BW_DW, to_w},
                          {DNNL_ARG_DIFF_BIAS, BW_DB, to_b}};
    int rc = run(p, p->bwd_weights, uses, 4);
    if (rc != MODEL_OK || !accumulate) return rc;
    for (size_t i = 0; i < nw; i++) dw[i] += to_w[i];
    for (int i = 0; i < s->out_c; i++) db[i] += to_b[i];
    return MODEL_OK;
}

int model__dnnl_conv2d_backward(const model__conv_shape_t *s, const float *x,
                                const float *w, const float *dy, float *dx,
                                float *dw, float *db, int batch, float *scratch,
                                int accumulate)
{
    pthread_mutex_lock(&dn_turn);
    int rc = conv_backward(s, x, w, dy, dx, dw, db, batch, scratch,
                           accumulate);
    pthread_mutex_unlock(&dn_turn);
    return rc;
}
#else
/* A build without oneDNN: no layer is taken, so nothing else is called. */
int model__dnnl_takes(const model__conv_shape_t *s)
{
    (void)s;
    return 0;
}

size_t model__dnnl_scratch_count(const model__conv_shape_t *s)
{
    (void)s;
    return 0;
}

int model__dnnl_conv2d_forward(const model__conv_shape_t *s, const float *x,
                               const float *w, const float *b, float *y,
                               int batch)
{
    (void)s, (void)x, (void)w, (void)b, (void)y, (void)batch;
    return MODEL_ERR_STATE;
}

int model__dnnl_conv2d_backward(const model__conv_shape_t *s, const float *x,
                                const float *w, const float *dy, float *dx,
                                float *dw, float *db, int batch,
                                float *scratch, int accumulate)
{
    (void)s, (void)x, (void)w, (void)dy, (void)dx, (void)dw, (void)db;
    (void)batch, (void)scratch, (void)accumulate;
    return MODEL_ERR_STATE;
}
#endif
