/* hvd/api.c: the public API of hvd/hvd.h. Init and shutdown, topology, and
 * the collectives, which only check their arguments, describe the request
 * and queue it for the engine thread (hvd/engine.c). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/api.h"
#include "hvd/bind.h"
#include "hvd/engine.h"
#include "hvd/execute.h"
#include "hvd/requests.h"
#include "hvd/timeline.h"
#include "hvd/topology.h"

/* hvd's statuses are ring's, so ring's pass through unchanged; and its
 * dtypes and ops are ring's, so a request's pass to ring by value. */
#define HVD__SAME_STATUS(name, value, text)                                    \
    _Static_assert((int)HVD_##name == (int)RING_##name, "status " #name);
RING_STATUS_MAP(HVD__SAME_STATUS)
#undef HVD__SAME_STATUS
#define HVD__SAME(name)                                                        \
    _Static_assert((int)HVD_##name == (int)RING_##name, #name);
HVD__SAME(FLOAT32) HVD__SAME(FLOAT64) HVD__SAME(FLOAT16) HVD__SAME(BFLOAT16)
HVD__SAME(INT32) HVD__SAME(INT64) HVD__SAME(UINT8)
HVD__SAME(SUM) HVD__SAME(AVERAGE) HVD__SAME(MIN) HVD__SAME(MAX)
HVD__SAME(PRODUCT)
#undef HVD__SAME

static enum { HVD__NEW, HVD__UP, HVD__DOWN } hvd__state = HVD__NEW;
static int hvd__started_mpi; /* we called MPI_Init_thread: we finalise */

const char *hvd_strerror(int status)
{
    switch (status) {
#define HVD_STATUS_TEXT(name, value, text)                                     \
    case HVD_##name: return text;
        HVD_STATUS_MAP(HVD_STATUS_TEXT)
#undef HVD_STATUS_TEXT
    }
    return "unknown status";
}

static int hvd__check_up(const char *func)
{
    if (hvd__state == HVD__UP) return HVD_OK;
    hvd__log(HVD__LOG_ERROR, "%s: %s", func,
             hvd__state == HVD__NEW ? "call hvd_init() first"
                                    : "hvd_shutdown() was called");
    return HVD_ERR_STATE;
}

/* Every rank's hvd_init fails when one rank's does (rank 0 alone opens the
 * timeline, say): the others would otherwise wait in their first
 * collective for a rank that is not coming. The worst status wins. */
static int hvd__agree(int local)
{
    int worst = local, status = HVD_OK;
    HVD_CHECK_MPI(MPI_Allreduce(&local, &worst, 1, MPI_INT, MPI_MIN,
                                hvd__engine.comm));
    if (local == HVD_OK && worst != HVD_OK)
        hvd__log(HVD__LOG_ERROR, "hvd_init failed on another rank (%s); "
                 "see its message", hvd_strerror(worst));
    status = worst;
out:
    return status;
}

/* MPI up at a thread level the engine can use, and this process's rank,
 * size and communicator (hvd__engine.comm, which the caller frees). */
static int hvd__start_mpi(int *argc, char ***argv)
{
    int status = HVD_OK, up = 0, finalized = 0;
    int provided = MPI_THREAD_SINGLE;
    HVD_CHECK_MPI(MPI_Initialized(&up));
    if (!up) {
        /* Open MPI spins in blocking waits unless told to yield; the
         * engine's collectives then take the core of another rank's
         * training thread (cnn at 2 ranks on 2 cores: 15% slower). A
         * setting from the user or mpirun's --mca wins. */
        setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
        /* MULTIPLE, so the program may use MPI beside the engine thread. */
        HVD_CHECK_MPI(
            MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
        hvd__started_mpi = 1;
    } else {
        HVD_CHECK_MPI(MPI_Finalized(&finalized));
        if (finalized) {
            hvd__log(HVD__LOG_ERROR, "hvd_init: MPI is already finalised");
            status = HVD_ERR_STATE;
            goto out;
        }
        HVD_CHECK_MPI(MPI_Query_thread(&provided));
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        hvd__log(HVD__LOG_ERROR, "hvd_init: MPI gives thread level %d; the "
                 "engine thread needs MPI_THREAD_SERIALIZED or more (start "
                 "MPI with MPI_Init_thread, or let hvd_init start it)",
                 provided);
        status = HVD_ERR_MPI;
        goto out;
    }
    HVD_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &hvd__engine.rank));
    HVD_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &hvd__engine.size));
    hvd__log_rank = hvd__engine.rank;
    HVD_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &hvd__engine.comm));
out:
    return status;
}

/* Everything the engine needs before it starts, each step collective
 * over hvd__engine.comm and taken only while the last succeeded (so the
 * ranks still take the same steps). What it made is freed by hvd_init's
 * failure path, or at shutdown. */
static int hvd__setup(void)
{
    const hvd__topo_t *t = &hvd__topo;
    int rank = hvd__engine.rank, single;
    char place[HVD__PLACE_MAX];
    /* First: ranks that disagree on these would hang in the first
     * collective whose messages they pair differently (the shared window
     * one rank makes and the other does not). */
    int status = hvd__config_agree(hvd__engine.comm, &hvd__engine.config);
    if (status == HVD_OK) status = hvd__topology_init(hvd__engine.comm);
    if (status != HVD_OK) return status;
    if (rank == 0) hvd__config_print(&hvd__engine.config);
    int local_size = t->node_size[t->node_idx[rank]];
    /* Before the engine thread starts, which then inherits it. */
    hvd__bind(hvd__engine.config.bind, t->local_rank[rank], local_size, place,
              sizeof place);
    status = hvd__own_pus(hvd__engine.comm, t->node_idx, local_size,
                          &hvd__engine.own_cores, &single,
                          &hvd__engine.spare_pus);
    hvd__engine.shares_core = hvd__engine.own_cores && single;
    if (hvd__engine.shares_core) {
        size_t used = strlen(place);
        snprintf(place + used, sizeof place - used, "; engine in SCHED_BATCH");
    }
    if (status == HVD_OK) status = hvd__topology_log(hvd__engine.comm, place);
    if (status == HVD_OK) status = hvd__execute_init();
    if (status == HVD_OK && rank == 0 && hvd__engine.config.timeline[0])
        status = hvd__timeline_open(hvd__engine.config.timeline);
    return status;
}

/* The device this thread uses (hvd__setup's binding chose it), which the
 * engine thread selects too; -1 without a device. */
static int hvd__current_device(void)
{
    const ring_dev_t *dev = ring_dev();
    int device = -1;
    if (dev && dev->device(&device) != RING_OK) device = -1;
    return device;
}

int hvd_init(int *argc, char ***argv)
{
    int status;
    if (hvd__state == HVD__UP) {
        hvd__log(HVD__LOG_ERROR, "hvd_init: already initialised");
        return HVD_ERR_STATE;
    }
    /* The variables are read before MPI starts, ring's own too (which
     * would otherwise fail the first collective and, with it, the
     * engine), and their verdict agreed once it is up: a rank that
     * returned alone, before MPI_Init, left the others waiting in it
     * (srun does not end a step when one task exits). */
    int vars = hvd__config_read(&hvd__engine.config);
    if (vars == HVD_OK && ring_check_env() != RING_OK) vars = HVD_ERR_ARG;
    status = hvd__start_mpi(argc, argv);
    if (status != HVD_OK) return status;
    status = hvd__agree(vars);
    if (status == HVD_OK) status = hvd__agree(hvd__setup());
    if (status == HVD_OK) hvd__engine.device = hvd__current_device();
    if (status == HVD_OK) status = hvd__engine_start();
    if (status != HVD_OK) goto err_free_setup;
    hvd__state = HVD__UP;
    return HVD_OK;
err_free_setup:
    hvd__timeline_close();
    hvd__execute_free();
    hvd__topology_free();
    MPI_Comm_free(&hvd__engine.comm);
    return status;
}

int hvd_shutdown(void)
{
    int status = hvd__check_up("hvd_shutdown");
    if (status != HVD_OK) return status;
    status = hvd__engine_stop();
    hvd__state = HVD__DOWN;
    hvd__topology_free();
    HVD_CHECK_MPI(MPI_Comm_free(&hvd__engine.comm));
    if (hvd__started_mpi) HVD_CHECK_MPI(MPI_Finalize());
out:
    hvd__started_mpi = 0;
    return status;
}

int hvd_is_initialized(void) { return hvd__state == HVD__UP; }

#define HVD__TOPOLOGY(fn, value)                                               \
    int fn(void)                                                               \
    {                                                                          \
        int status = hvd__check_up(#fn);                                       \
        return status == HVD_OK ? (value) : status;                            \
    }
HVD__TOPOLOGY(hvd_rank, hvd__engine.rank)
HVD__TOPOLOGY(hvd_size, hvd__engine.size)
HVD__TOPOLOGY(hvd_local_rank, hvd__topo.local_rank[hvd__engine.rank])
HVD__TOPOLOGY(hvd_local_size,
              hvd__topo.node_size[hvd__topo.node_idx[hvd__engine.rank]])
HVD__TOPOLOGY(hvd_cross_rank, hvd__topo.node_idx[hvd__engine.rank])
HVD__TOPOLOGY(hvd_cross_size, hvd__topo.nnodes)
#undef HVD__TOPOLOGY

/* ---- submitting ---- */

static int hvd__bad(const char *func, const char *why)
{
    hvd__log(HVD__LOG_ERROR, "%s: %s", func, why);
    return HVD_ERR_ARG;
}

/* A buffer's memory kind; HVD_ERR_ARG when it is device memory of
 * another device than the rank's (ring's opening would refuse it too,
 * but later, on the engine's thread); HVD_ERR_CUDA when it is of no kind
 * that can be told (ring_is_device_memory). */
static int hvd__buffer_mem(const char *func, const void *p, int *mem)
{
    int device = -1, kind = p ? ring_is_device_memory(p) : 0;
    if (kind > 0 && ring_dev()->owns(p, &device) < 0) kind = HVD_ERR_CUDA;
    *mem = HVD__MEM_HOST;
    if (kind < 0)
        hvd__log(HVD__LOG_ERROR, "%s: a buffer's memory kind cannot be "
                 "told (CUDA's error above)", func);
    if (kind <= 0) return kind;
    *mem = HVD__MEM_DEVICE;
    if (device != hvd__engine.device) {
        hvd__log(HVD__LOG_ERROR, "%s: a buffer is memory of device %d; this "
                 "rank uses device %d (hvd_init chose it): give buffers of "
                 "the rank's own device", func, device, hvd__engine.device);
        return HVD_ERR_ARG;
    }
    return HVD_OK;
}

/* The request's memory kind into r->mem: both buffers of one kind (a NULL
 * one, of an empty request, takes the other's; with both NULL, a stream
 * says device, as for an empty CUDA tensor, whose data_ptr() is 0); a
 * stream only with device memory; no device memory for a sharded step
 * (its apply runs on the host, on the reduced data). */
static int hvd__request_mem(const char *func, hvd__request_t *r,
                            ring_stream_t *stream)
{
    int send_mem, recv_mem;
    const void *sendbuf = r->sendbuf, *recvbuf = r->recvbuf;
    int status = hvd__buffer_mem(func, sendbuf, &send_mem);
    if (status == HVD_OK) status = hvd__buffer_mem(func, recvbuf, &recv_mem);
    if (status != HVD_OK) return status;
    if (sendbuf && recvbuf && send_mem != recv_mem) {
        hvd__log(HVD__LOG_ERROR, "%s: sendbuf is %s memory and recvbuf is %s "
                 "memory: give both on the device or both on the host",
                 func, hvd__mem_name(send_mem), hvd__mem_name(recv_mem));
        return HVD_ERR_ARG;
    }
    r->mem = sendbuf   ? send_mem
             : recvbuf ? recv_mem
             : stream  ? HVD__MEM_DEVICE
                       : HVD__MEM_HOST;
    if (r->mem == HVD__MEM_DEVICE && r->kind == HVD__ALLREDUCE_APPLY)
        return hvd__bad(func, "a sharded step takes host memory, not device "
                              "memory");
    if (stream && r->mem != HVD__MEM_DEVICE)
        return hvd__bad(func, "a stream is for device tensors; these are "
                              "host memory (use the variant without one)");
    return HVD_OK;
}

/* The stream variants' events: ready_ev marks the caller's work on stream
 * so far (the engine waits for it before reading the tensor), done_ev is
 * for the engine to record the result (hvd_wait_stream). */
static int hvd__request_events(hvd__request_t *r, ring_stream_t *stream)
{
    const ring_dev_t *dev = ring_dev();
    int status = HVD_OK;
    HVD_CHECK_DEV(hvd__event_take(&r->ready_ev));
    HVD_CHECK_DEV(hvd__event_take(&r->done_ev));
    HVD_CHECK_DEV(dev->event_record(r->ready_ev, stream));
out:
    return status;
}

/* Checks what every collective shares and queues the request. */
static int hvd__submit(const char *func, hvd__kind_t kind, const void *sendbuf,
                       void *recvbuf, size_t count, int dtype, int op,
                       int root, const char *name, const ring_apply_t *apply,
                       ring_stream_t *stream, hvd_handle_t *handle)
{
    int reduces = kind == HVD__ALLREDUCE || kind == HVD__ALLREDUCE_APPLY;
    int status = hvd__check_up(func);
    if (status != HVD_OK) return status;
    if (!handle) return hvd__bad(func, "handle is NULL");
    *handle = NULL;
    if (ring_dtype_size((ring_dtype_t)dtype) == 0)
        return hvd__bad(func, "unknown dtype");
    if (kind == HVD__ALLREDUCE_APPLY && (!apply || !apply->fn))
        return hvd__bad(func, "apply or apply->fn is NULL");
    if (reduces && ring_op_name((ring_op_t)op) == NULL)
        return hvd__bad(func, "unknown op");
    if (reduces && op == HVD_AVERAGE && dtype >= HVD_INT32)
        return hvd__bad(func, "average is for floating dtypes (use sum)");
    if (count > 0 && (!sendbuf || !recvbuf))
        return hvd__bad(func, "NULL buffer with count > 0");
    if (kind == HVD__BROADCAST && (root < 0 || root >= hvd__engine.size))
        return hvd__bad(func, "root is not a rank");
    if (name && strlen(name) >= HVD__NAME_MAX)
        return hvd__bad(func, "name longer than 199 bytes");
    if (name && strncmp(name, "__", 2) == 0)
        return hvd__bad(func, "names starting with \"__\" are hvd's own");

    hvd__request_t req = {.kind = kind, .dtype = dtype,
                          .op = reduces ? op : 0,
                          .root = kind == HVD__BROADCAST ? root : 0,
                          .count = count, .sendbuf = sendbuf,
                          .recvbuf = recvbuf, .name = name};
    status = hvd__request_mem(func, &req, stream);
    if (status == HVD_OK && stream) status = hvd__request_events(&req, stream);
    if (status != HVD_OK) goto out;
    if (apply) req.apply = *apply;
    status = hvd__request_queue(&req, handle);
out:
    /* Not kept: an event of another device (a thread whose current
     * device is not the rank's) fails its record, and would fail the
     * next request that took it. */
    if (status != HVD_OK) {
        if (req.ready_ev) ring_dev()->event_destroy(req.ready_ev);
        if (req.done_ev) ring_dev()->event_destroy(req.done_ev);
    }
    return status;
}

/* While waits may spin: whether other threads want this PU (mu held). */
static void hvd__watch_contention(void)
{
    if (hvd__engine.spare_pus && hvd__engine.config.spin_s > 0)
        hvd__contention_check(&hvd__engine.contention);
}

/* Blocks until handle is done; its status. */
static int hvd__wait_done(hvd_handle_t handle)
{
    /* Done already, as the rest of a fused group is once its first has
     * been waited for: no lock (hvd__complete_many sets status before
     * done). */
    if (atomic_load_explicit(&handle->done, memory_order_acquire))
        return handle->status;
    pthread_mutex_lock(&hvd__engine.mu);
    hvd__watch_contention();
    if (!handle->done) {
        hvd__engine.waiters++; /* ends the engine's wait for more requests */
        pthread_cond_signal(&hvd__engine.wake_cv);
        double spin = hvd__spin_time();
        if (spin > 0) {
            /* The engine runs beside us, and usually answers sooner than
             * this thread, asleep, could be woken (spare_pus). */
            pthread_mutex_unlock(&hvd__engine.mu);
            double until = hvd__now() + spin;
            while (!handle->done && hvd__now() < until) hvd__cpu_relax();
            pthread_mutex_lock(&hvd__engine.mu);
        }
        handle->waited = 1;
        while (!handle->done)
            pthread_cond_wait(&hvd__engine.done_cv, &hvd__engine.mu);
        hvd__engine.waiters--;
    }
    pthread_mutex_unlock(&hvd__engine.mu);
    return handle->status;
}

const char *hvd_last_error(void) { return hvd__thread_error(); }

/* A failed request's message, as the caller's last error. */
static void hvd__take_error(hvd_handle_t handle, int status)
{
    if (status != HVD_OK)
        hvd__set_thread_error(handle->error ? handle->error
                                            : hvd_strerror(status));
}

int hvd_wait(hvd_handle_t handle)
{
    if (!handle) return hvd__bad("hvd_wait", "handle is NULL");
    int status = hvd__wait_done(handle);
    /* A stream variant's result may still be on its way (the engine
     * records done_ev after queueing it, and goes on). */
    if (status == HVD_OK && handle->done_ev)
        status = ring_dev()->event_sync(handle->done_ev);
    hvd__take_error(handle, status);
    hvd__handle_release(handle);
    return status;
}

int hvd_wait_stream(hvd_handle_t handle, struct ring_stream *stream)
{
    if (!handle) return hvd__bad("hvd_wait_stream", "handle is NULL");
    if (!stream || !handle->done_ev)
        return hvd__bad("hvd_wait_stream", !stream
                            ? "stream is NULL (hvd_wait waits without one)"
                            : "the handle is not from a stream variant "
                              "(use hvd_wait)");
    int status = hvd__wait_done(handle);
    hvd__take_error(handle, status);
    /* The engine queues the result and goes on (hvd/execute.c): stream
     * runs after it, and the host waits for nothing. */
    if (status == HVD_OK)
        status = ring_dev()->stream_wait(stream, handle->done_ev);
    hvd__handle_release(handle);
    return status;
}

int hvd_poll(hvd_handle_t handle)
{
    if (!handle) return hvd__bad("hvd_poll", "handle is NULL");
    pthread_mutex_lock(&hvd__engine.mu);
    hvd__watch_contention(); /* a caller may poll instead of waiting */
    int done = handle->done;
    pthread_mutex_unlock(&hvd__engine.mu);
    if (!done) {
        /* A caller polling in a loop must leave the engine its core. */
        if (hvd__engine.shares_core) sched_yield();
        return 0;
    }
    return handle->status == HVD_OK ? 1 : handle->status;
}

/* Submit, then wait: the blocking calls. The handle is read only after
 * the submitting call (an argument to this one) has set it. */
static int hvd__run(int status, hvd_handle_t *handle)
{
    return status == HVD_OK ? hvd_wait(*handle) : status;
}

int hvd_allreduce_async(const void *sendbuf, void *recvbuf, size_t count,
                        hvd_dtype_t dtype, hvd_op_t op, const char *name,
                        hvd_handle_t *handle)
{
    return hvd__submit("hvd_allreduce", HVD__ALLREDUCE, sendbuf, recvbuf,
                       count, dtype, op, 0, name, NULL, NULL, handle);
}

int hvd_allreduce_async_stream(const void *sendbuf, void *recvbuf,
                               size_t count, hvd_dtype_t dtype, hvd_op_t op,
                               const char *name, struct ring_stream *stream,
                               hvd_handle_t *handle)
{
    if (!stream) return hvd__bad("hvd_allreduce_async_stream", "stream is "
                                 "NULL (use hvd_allreduce_async)");
    return hvd__submit("hvd_allreduce_async_stream", HVD__ALLREDUCE, sendbuf,
                       recvbuf, count, dtype, op, 0, name, NULL, stream,
                       handle);
}

int hvd_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                  hvd_dtype_t dtype, hvd_op_t op, const char *name)
{
    hvd_handle_t h;
    return hvd__run(hvd_allreduce_async(sendbuf, recvbuf, count, dtype, op,
                                        name, &h), &h);
}

int hvd__allreduce_apply_async(const float *sendbuf, float *recvbuf,
                               size_t count, hvd_op_t op, const char *name,
                               const ring_apply_t *apply, hvd_handle_t *handle)
{
    return hvd__submit("hvd__allreduce_apply_async", HVD__ALLREDUCE_APPLY,
                       sendbuf, recvbuf, count, HVD_FLOAT32, op, 0, name,
                       apply, NULL, handle);
}

int hvd_broadcast_async(void *buf, size_t count, hvd_dtype_t dtype, int root,
                        const char *name, hvd_handle_t *handle)
{
    return hvd__submit("hvd_broadcast", HVD__BROADCAST, buf, buf, count,
                       dtype, 0, root, name, NULL, NULL, handle);
}

int hvd_broadcast_async_stream(void *buf, size_t count, hvd_dtype_t dtype,
                               int root, const char *name,
                               struct ring_stream *stream,
                               hvd_handle_t *handle)
{
    if (!stream) return hvd__bad("hvd_broadcast_async_stream", "stream is "
                                 "NULL (use hvd_broadcast_async)");
    return hvd__submit("hvd_broadcast_async_stream", HVD__BROADCAST, buf, buf,
                       count, dtype, 0, root, name, NULL, stream, handle);
}

int hvd_broadcast(void *buf, size_t count, hvd_dtype_t dtype, int root,
                  const char *name)
{
    hvd_handle_t h;
    return hvd__run(hvd_broadcast_async(buf, count, dtype, root, name, &h), &h);
}

int hvd_allgather(const void *sendbuf, size_t count, void *recvbuf,
                  hvd_dtype_t dtype, const char *name)
{
    hvd_handle_t h;
    return hvd__run(hvd__submit("hvd_allgather", HVD__ALLGATHER, sendbuf,
                                recvbuf, count, dtype, 0, 0, name, NULL, NULL,
                                &h),
                    &h);
}

int hvd_barrier(void)
{
    hvd_handle_t h;
    return hvd__run(hvd__submit("hvd_barrier", HVD__BARRIER, NULL, NULL, 0,
                                HVD_UINT8, 0, 0, NULL, NULL, NULL, &h),
                    &h);
}

int hvd_join(void)
{
    hvd_handle_t h;
    return hvd__run(hvd__submit("hvd_join", HVD__JOIN, NULL, NULL, 0,
                                HVD_UINT8, 0, 0, NULL, NULL, NULL, &h),
                    &h);
}

int hvd_last_joined(void)
{
    int status = hvd__check_up("hvd_last_joined");
    if (status != HVD_OK) return status;
    pthread_mutex_lock(&hvd__engine.mu);
    int last = hvd__engine.last_joined;
    pthread_mutex_unlock(&hvd__engine.mu);
    return last;
}
