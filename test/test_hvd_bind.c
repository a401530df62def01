/* test/test_hvd_bind.c: where hvd_init puts each rank (test/hvd_bind_*.mpi,
 * launched unbound by test/mpirun.sh). argv[1] is the HVD_BIND to set, or
 * "default". Read back with sched_getaffinity after hvd_init:
 *   none     the affinity is what it was before hvd_init;
 *   core     (and the default) every rank has a non-empty set; while the
 *            node has a core per local rank, local ranks' sets are
 *            disjoint and each holds whole cores; with more ranks than
 *            cores each rank has exactly one core's PUs;
 *   numa     each rank's set is its NUMA node's PUs (the whole node on a
 *            single-node machine).
 *   (GPU)    in a CUDA build with a GPU visible, core and numa are within
 *            the PUs nearest the rank's GPU (hwloc's cudart helper): numa
 *            all of them, core whole cores of them, disjoint from the
 *            other local ranks' while they hold a core for each.
 *   launcher the test binds each rank to one PU before hvd_init, as
 *            mpirun --bind-to core would: hvd_init leaves it there.
 * An optional second argument, "nospin", sets HVD_SPIN_TIME=0. With a PU
 * for each of its threads, a rank's quick waits spin rather than sleep,
 * checked where no other program ran meanwhile; with "nospin" they sleep.
 * The core and NUMA counts come from hwloc, the sets from the kernel.
 * Whatever the mode, the engine thread is in SCHED_BATCH (its wake-ups do
 * not preempt training)
 * exactly when the rank ended on one PU that no other local rank runs on,
 * or while the node had one for each local rank (it shares the PU with
 * training, hvd/engine.c); a caller spinning on hvd_poll still sees its
 * allreduce finish, and allreduces beside a thread that keeps the rank's
 * cores busy (another process, say) are not starved.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <hwloc.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>
#include <mpi.h>
#if HVD_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <hwloc/cudart.h>
#endif
#include "hvd/hvd.h"
#include "test/test.h"

/* Threads of this process in the SCHED_BATCH class. */
static int batch_threads(void)
{
    DIR *dir = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; dir && (e = readdir(dir));)
        if (e->d_name[0] != '.' &&
            sched_getscheduler((pid_t)atoi(e->d_name)) == SCHED_BATCH)
            n++;
    if (dir) closedir(dir);
    return n;
}

/* An allreduce waited for by spinning on hvd_poll, as a caller that
 * overlaps its own work would. */
static void spin_on_poll(void)
{
    enum { N = 4096 };
    static float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)(hvd_rank() + i);
    hvd_handle_t h;
    TEST_EQ(hvd_allreduce_async(x, x, N, HVD_FLOAT32, HVD_SUM, "bind.poll",
                                &h), HVD_OK);
    int done;
    long polls = 0;
    double t0 = MPI_Wtime();
    while ((done = hvd_poll(h)) == 0) polls++;
    TEST_EQ(done, 1);
    TEST_EQ(hvd_wait(h), HVD_OK);
    int size = hvd_size();
    for (int i = 0; i < N; i += 511)
        TEST_EQ(x[i], (float)(size * (size - 1) / 2 + size * i));
    if (hvd_rank() == 0)
        printf("hvd_poll: done after %ld polls, %.1f ms\n", polls,
               (MPI_Wtime() - t0) * 1e3);
}

/* Binds this process to one PU of its set, as a launcher would bind each
 * rank before hvd_init: every thread, since a launcher binds before exec
 * and MPI_Init's threads (started here before this) inherit it. The PU is
 * counted from the end of the set, (local rank mod count) back, so that it
 * is not the one hvd's own share of the node would give. */
static int bind_like_launcher(cpu_set_t *set)
{
    MPI_Comm node;
    int local, have = 0, at = 0, ok = 1;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                        MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    int pick = CPU_COUNT(set) - 1 - local % CPU_COUNT(set);
    for (int cpu = 0; cpu < CPU_SETSIZE && !have; cpu++)
        if (CPU_ISSET(cpu, set) && at++ == pick) {
            CPU_ZERO(set);
            CPU_SET(cpu, set);
            have = 1;
        }
    DIR *dir = opendir("/proc/self/task");
    if (!have || !dir) return 0;
    for (struct dirent *e; (e = readdir(dir)) != NULL;)
        if (e->d_name[0] != '.')
            ok &= sched_setaffinity(atoi(e->d_name), sizeof *set, set) == 0;
    closedir(dir);
    return ok;
}

/* In a CUDA build with a GPU visible, the PUs nearest this local rank's
 * GPU (local rank mod the GPUs) into near: 1. Else 0: no GPU here. */
static int near_gpu(hwloc_topology_t topo, int local, hwloc_bitmap_t near)
{
#if HVD_HAVE_CUDA
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count <= 0) {
        (void)cudaGetLastError();
        return 0;
    }
    return hwloc_cudart_get_device_cpuset(topo, local % count, near) == 0;
#else
    (void)topo;
    (void)local;
    (void)near;
    return 0;
#endif
}

/* Whether every PU of set is in outer. */
static int within(const cpu_set_t *set, hwloc_const_bitmap_t outer)
{
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, set) && !hwloc_bitmap_isset(outer, (unsigned)cpu))
            return 0;
    return 1;
}

static _Atomic int spin_stop; /* atomic: read by the busy thread */

static void *spin(void *arg)
{
    (void)arg;
    while (!spin_stop) {
    }
    return NULL;
}

/* CPU seconds the machine has run on all its PUs (/proc/stat; 0 where it
 * does not say), and this process. */
static double machine_cpu_s(void)
{
    unsigned long long user, nice, sys, idle, iowait, irq, softirq;
    FILE *f = fopen("/proc/stat", "r");
    int got = f ? fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &user,
                         &nice, &sys, &idle, &iowait, &irq, &softirq)
                : 0;
    if (f) fclose(f);
    return got == 7 ? (double)(user + nice + sys + irq + softirq) /
                          (double)sysconf(_SC_CLK_TCK)
                    : 0;
}

static double own_cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

/* Whether other programs ran on the machine since the *_s readings (taken
 * by every local rank): more CPU time than this job's local ranks used,
 * beyond a tenth of a PU and the kernel's 10 ms ticks. Then hvd may
 * rightly have stopped spinning (hvd/contention.c, whose back-off lasts
 * 0.5 to 16 s), as under a parallel make check. (A moment of the test's
 * own thread busy alone, measured first, missed that: the load comes and
 * goes.) */
static int others_ran(MPI_Comm node, double wall_s, double machine_s,
                      double own_s)
{
    double job = own_cpu_s() - own_s;
    MPI_Allreduce(MPI_IN_PLACE, &job, 1, MPI_DOUBLE, MPI_SUM, node);
    double others = machine_cpu_s() - machine_s - job;
    return others > 0.1 * (MPI_Wtime() - wall_s) + 0.03;
}

/* Blocking allreduces, *calls of them. *fast: how many were answered
 * within half the spin window (0.5 ms), so that their wait had no reason
 * to sleep; returns how many of those slept all the same (a voluntary
 * context switch of this thread during the call). Slower answers, as
 * under a sanitizer or a loaded machine, are left out. */
static int fast_waits_that_slept(int *calls, int *fast)
{
    enum { N = 1024 };
    static float x[N];
    int slept = 0, more = 1;
    *fast = *calls = 0;
    /* At least 200 calls and 0.25 s, long enough for others_ran's 10 ms
     * ticks: x[1] says whether a rank wants more, and the sum tells all. */
    for (double start = MPI_Wtime(); more; ++*calls) {
        struct rusage before, after;
        x[0] = (float)hvd_rank();
        x[1] = *calls < 200 || MPI_Wtime() - start < 0.25;
        getrusage(RUSAGE_THREAD, &before);
        double t0 = MPI_Wtime();
        TEST_EQ(hvd_allreduce(x, x, N, HVD_FLOAT32, HVD_SUM, "bind.spin"),
                HVD_OK);
        double t = MPI_Wtime() - t0;
        getrusage(RUSAGE_THREAD, &after);
        TEST_EQ(x[0], hvd_size() * (hvd_size() - 1) / 2);
        more = x[1] > 0;
        if (t < 0.5e-3) {
            ++*fast;
            slept += after.ru_nvcsw != before.ru_nvcsw;
        }
    }
    return slept;
}

/* Blocking allreduces, then hvd_shutdown, beside a thread that keeps this
 * rank's cores busy, as another process there would: the engine must
 * still get its turn. An engine in SCHED_IDLE (tried) took 19 s for the
 * allreduces here; in SCHED_BATCH, 0.2-0.3 s. */
static void beside_a_busy_thread(void)
{
    enum { N = 4096 };
    static float x[N];
    pthread_t busy;
    spin_stop = 0;
    if (pthread_create(&busy, NULL, spin, NULL) != 0) {
        TEST_FAIL("pthread_create");
        return;
    }
    double t0 = MPI_Wtime();
    for (int k = 0; k < 20; k++) {
        x[0] = (float)hvd_rank();
        TEST_EQ(hvd_allreduce(x, x, N, HVD_FLOAT32, HVD_SUM, "bind.busy"),
                HVD_OK);
        TEST_EQ(x[0], hvd_size() * (hvd_size() - 1) / 2);
    }
    double t1 = MPI_Wtime();
    TEST_EQ(hvd_shutdown(), HVD_OK);
    double t2 = MPI_Wtime();
    spin_stop = 1;
    pthread_join(busy, NULL);
    if (t1 - t0 > 5)
        TEST_FAIL("beside a busy thread, 20 allreduces took %.1f s", t1 - t0);
    if (t2 - t1 > 5)
        TEST_FAIL("beside a busy thread, hvd_shutdown took %.1f s", t2 - t1);
    printf("rank %d beside a busy thread: 20 allreduces in %.1f ms, "
           "hvd_shutdown in %.1f ms\n", test_rank, (t1 - t0) * 1e3,
           (t2 - t1) * 1e3);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "default";
    int launcher = !strcmp(mode, "launcher"), provided;
    int spin = !(argc > 2 && !strcmp(argv[2], "nospin"));
    if (!spin) setenv("HVD_SPIN_TIME", "0", 1);
    if (strcmp(mode, "default") != 0 && !launcher)
        setenv("HVD_BIND", mode, 1);
    cpu_set_t before, after;
    CPU_ZERO(&before);
    CPU_ZERO(&after);
    if (sched_getaffinity(0, sizeof before, &before) != 0)
        return TEST_HARD_ERROR;
    if (launcher &&
        (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) !=
             MPI_SUCCESS ||
         !bind_like_launcher(&before)))
        return TEST_HARD_ERROR;
    if (hvd_init(&argc, &argv) != HVD_OK) return TEST_HARD_ERROR;
    test_rank = hvd_rank();
    double wall_s = MPI_Wtime(), machine_s = machine_cpu_s(),
           own_s = own_cpu_s();
    if (sched_getaffinity(0, sizeof after, &after) != 0)
        return TEST_HARD_ERROR;

    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0)
        return TEST_HARD_ERROR;
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    int pus_per_core =
        hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU) / (cores ? cores : 1);
    int local = hvd_local_rank(), local_size = hvd_local_size();
    int n = CPU_COUNT(&after);
    TEST_TRUE(n > 0);

    /* Whether no other local rank may run where this one may. */
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                        MPI_INFO_NULL, &node);
    cpu_set_t *sets = malloc((size_t)local_size * sizeof *sets);
    if (!sets) return TEST_HARD_ERROR;
    MPI_Allgather(&after, (int)sizeof after, MPI_BYTE, sets,
                  (int)sizeof after, MPI_BYTE, node);
    int alone = 1;
    for (int r = 0; r < local_size; r++) {
        cpu_set_t both;
        CPU_AND(&both, &after, &sets[r]);
        if (r != local && CPU_COUNT(&both) > 0) alone = 0;
    }
    free(sets);

    hwloc_bitmap_t gpu_pus = hwloc_bitmap_alloc();
    if (!gpu_pus) return TEST_HARD_ERROR;
    if (!strcmp(mode, "none") || launcher) {
        TEST_TRUE(CPU_EQUAL(&before, &after));
    } else if (near_gpu(topo, local, gpu_pus)) {
        /* numa: the PUs nearest its GPU; core: whole cores of those,
         * disjoint from every other local rank's while those hold a core
         * for each local rank (ranks near other GPUs then have theirs). */
        TEST_TRUE(within(&after, gpu_pus));
        if (!strcmp(mode, "numa")) {
            TEST_EQ(n, hwloc_bitmap_weight(gpu_pus));
        } else {
            TEST_EQ(n % pus_per_core, 0);
            if (hwloc_get_nbobjs_inside_cpuset_by_type(
                    topo, gpu_pus, HWLOC_OBJ_CORE) >= local_size)
                TEST_TRUE(alone);
        }
    } else if (!strcmp(mode, "numa")) {
        /* The rank's NUMA node holds its set exactly. */
        int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
        int node = local_size <= numa ? local * numa / local_size
                                      : local % numa;
        hwloc_obj_t obj = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE,
                                                node);
        TEST_TRUE(obj != NULL);
        TEST_EQ(n, obj ? hwloc_bitmap_weight(obj->cpuset) : -1);
        TEST_TRUE(obj && within(&after, obj->cpuset));
    } else {
        /* Whole cores: this rank's share, or one core when they run out;
         * disjoint from every other local rank's while cores suffice. */
        int share = local_size <= cores ? (local + 1) * cores / local_size -
                                              local * cores / local_size
                                        : 1;
        TEST_EQ(n, share * pus_per_core);
        if (local_size <= cores) TEST_TRUE(alone);
    }
    hwloc_bitmap_free(gpu_pus);
    hwloc_topology_destroy(topo);
    TEST_EQ(batch_threads(),
            n == 1 && (alone || CPU_COUNT(&before) >= local_size));
    spin_on_poll();
    /* With a PU for each of its threads, the caller and the engine spin
     * a while before they sleep: most of these waits never sleep, unless
     * other programs ran meanwhile. With HVD_SPIN_TIME=0 they all do. */
    int spare = n >= (alone ? 2 : 2 * local_size), fast, calls;
    int slept = fast_waits_that_slept(&calls, &fast);
    int busy = others_ran(node, wall_s, machine_s, own_s);
    MPI_Comm_free(&node);
    printf("rank %d (%s PUs, %s): %d of %d answered within 0.5 ms, %d of "
           "those slept%s\n", test_rank, spare ? "spare" : "no spare",
           spin ? "spinning" : "HVD_SPIN_TIME=0", fast, calls, slept,
           busy ? "; other programs ran meanwhile: not checked" : "");
    if (spare && spin && !busy && fast >= 20 && slept >= fast / 2)
        TEST_FAIL("with spare PUs, %d of %d waits answered within 0.5 ms "
                  "slept", slept, fast);
    if (spare && !spin && slept < fast / 2)
        TEST_FAIL("with HVD_SPIN_TIME=0, only %d of %d waits answered "
                  "within 0.5 ms slept", slept, fast);
    beside_a_busy_thread(); /* and shuts down */
    if (launcher) MPI_Finalize(); /* ours: hvd_init found MPI up */
    return test_exit_code();
}
