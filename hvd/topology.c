/* hvd/topology.c: which node each rank runs on, the order of the ring
 * that hvd's allreduces and broadcasts run around, and rank 0's log of
 * where every rank runs.
 *
 * A node is what MPI calls one (MPI_COMM_TYPE_SHARED: the ranks that can
 * share memory). Nodes are numbered by their lowest rank, so node 0 holds
 * rank 0; that index is hvd_cross_rank() and their number
 * hvd_cross_size(), the same on every rank even when nodes hold different
 * numbers of ranks.
 *
 * The ring: a launcher that deals ranks out round-robin (mpirun --map-by
 * node) puts neighbours on different nodes, and a ring in rank order then
 * crosses the network at every hop. The collectives therefore run on
 * hvd__ring_comm, the same ranks ordered node by node (by node index, then
 * by rank within the node), which crosses each node boundary once:
 *
 *   mpirun --map-by node -H a:2,b:2 -np 4   ranks 0 2 on a, 1 3 on b
 *   rank order  0 -> 1 -> 2 -> 3 -> 0        a b a b a: 4 network hops
 *   ring order  0 -> 2 -> 1 -> 3 -> 0        a a b b a: 2, one per boundary
 *
 * Where ranks were placed node by node already (mpirun's default, srun's
 * block distribution) the ring order is the rank order. hvd_rank() stays
 * the rank in MPI_COMM_WORLD either way: broadcast roots are translated
 * (hvd__topo.ring_rank), and allgather, whose result is laid out by rank,
 * stays on hvd__engine.comm.
 *
 * Left out: any ordering of nodes by network distance (switches, racks);
 * nodes keep the order of their lowest ranks.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/topology.h"
#include "hvd/bind.h"

hvd__topo_t hvd__topo;
MPI_Comm hvd__ring_comm = MPI_COMM_NULL;

int hvd__topo_build(hvd__topo_t *topo, const int *first, int size)
{
    memset(topo, 0, sizeof *topo);
    if (!first || size < 1) return HVD_ERR_ARG;
    for (int r = 0; r < size; r++)
        if (first[r] < 0 || first[r] > r || first[first[r]] != first[r])
            return HVD_ERR_ARG;
    int *slab = calloc((size_t)size * 5, sizeof *slab);
    if (!slab) return HVD_ERR_NOMEM;
    topo->size = size;
    topo->node_idx = slab;
    topo->local_rank = slab + size;
    topo->ring_rank = slab + 2 * (size_t)size;
    topo->node_size = slab + 3 * (size_t)size;
    topo->node_start = slab + 4 * (size_t)size;
    /* first[r] <= r: a node's index is known before its other ranks. */
    for (int r = 0; r < size; r++) {
        int node = first[r] == r ? topo->nnodes++ : topo->node_idx[first[r]];
        topo->node_idx[r] = node;
        topo->local_rank[r] = topo->node_size[node]++;
    }
    for (int n = 1; n < topo->nnodes; n++)
        topo->node_start[n] = topo->node_start[n - 1] + topo->node_size[n - 1];
    for (int r = 0; r < size; r++)
        topo->ring_rank[r] =
            topo->node_start[topo->node_idx[r]] + topo->local_rank[r];
    return HVD_OK;
}

void hvd__topo_free(hvd__topo_t *topo)
{
    free(topo->node_idx); /* the slab */
    memset(topo, 0, sizeof *topo);
}

int hvd__topology_init(MPI_Comm comm)
{
    int rank, size, first, status = HVD_OK;
    MPI_Comm local = MPI_COMM_NULL;
    int *firsts = NULL;
    HVD_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    HVD_CHECK_MPI(MPI_Comm_size(comm, &size));
    first = rank;
    firsts = malloc((size_t)size * sizeof *firsts);
    if (!firsts) {
        status = HVD_ERR_NOMEM;
        goto out;
    }
    /* Each rank learns the lowest rank on its node, then everyone's. */
    HVD_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank,
                                      MPI_INFO_NULL, &local));
    HVD_CHECK_MPI(MPI_Allreduce(&rank, &first, 1, MPI_INT, MPI_MIN, local));
    HVD_CHECK_MPI(MPI_Allgather(&first, 1, MPI_INT, firsts, 1, MPI_INT,
                                comm));
    status = hvd__topo_build(&hvd__topo, firsts, size);
    if (status != HVD_OK) goto out;
    HVD_CHECK_MPI(MPI_Comm_split(comm, 0, hvd__topo.ring_rank[rank],
                                 &hvd__ring_comm));
out:
    if (local != MPI_COMM_NULL) MPI_Comm_free(&local);
    free(firsts);
    return status;
}

void hvd__topology_free(void)
{
    if (hvd__ring_comm != MPI_COMM_NULL) MPI_Comm_free(&hvd__ring_comm);
    hvd__topo_free(&hvd__topo);
}

/* ---- rank 0's log ---- */

/* What each rank sends rank 0: its host and hvd__bind's description. */
typedef struct {
    char host[128];
    char place[HVD__PLACE_MAX];
} hvd__where_t;

/* Appends printf-style text to line (nbytes) at *used, always leaving
 * room for " ...", which ends a line that fills up. */
static void hvd__append(char *line, size_t nbytes, size_t *used,
                        const char *fmt, ...)
{
    if (*used >= nbytes) return; /* full */
    size_t room = nbytes - *used;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line + *used, room, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n + 5 <= room) {
        *used += (size_t)n;
        return;
    }
    snprintf(line + *used, room, " ...");
    *used = nbytes;
}

/* With more than one node: how many, their sizes, and the order in which
 * the ring visits the ranks, read back from hvd__ring_comm itself, with a
 * bar wherever it crosses to another node. */
static int hvd__log_nodes(MPI_Comm comm)
{
    const hvd__topo_t *t = &hvd__topo;
    char sizes[1024] = "", order[1024] = "";
    size_t nsizes = 0, norder = 0;
    int status = HVD_OK,
        *ring_ranks = malloc(2 * (size_t)t->size * sizeof(int));
    MPI_Group ring = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    if (!ring_ranks) return HVD_ERR_NOMEM;
    int *who = ring_ranks + t->size; /* the rank at each place of the ring */
    for (int i = 0; i < t->size; i++)
        ring_ranks[i] = i;
    HVD_CHECK_MPI(MPI_Comm_group(hvd__ring_comm, &ring));
    HVD_CHECK_MPI(MPI_Comm_group(comm, &world));
    HVD_CHECK_MPI(
        MPI_Group_translate_ranks(ring, t->size, ring_ranks, world, who));
    for (int n = 0; n < t->nnodes; n++)
        hvd__append(sizes, sizeof sizes, &nsizes, " %d", t->node_size[n]);
    for (int i = 0; i < t->size; i++) {
        if (i > 0 && t->node_idx[who[i]] != t->node_idx[who[i - 1]])
            hvd__append(order, sizeof order, &norder, " |");
        hvd__append(order, sizeof order, &norder, " %d", who[i]);
    }
    hvd__log(HVD__LOG_INFO, "topology: %d nodes, ranks per node%s", t->nnodes,
             sizes);
    hvd__log(HVD__LOG_INFO, "topology: ring order%s (| between nodes)", order);
out:
    if (ring != MPI_GROUP_NULL) MPI_Group_free(&ring);
    if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
    free(ring_ranks);
    return status;
}

int hvd__topology_log(MPI_Comm comm, const char *place)
{
    int rank, size, len = 0, status = HVD_OK;
    char host[MPI_MAX_PROCESSOR_NAME] = "?";
    hvd__where_t mine, *all = NULL;
    HVD_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    HVD_CHECK_MPI(MPI_Comm_size(comm, &size));
    HVD_CHECK_MPI(MPI_Get_processor_name(host, &len));
    snprintf(mine.host, sizeof mine.host, "%s", host);
    snprintf(mine.place, sizeof mine.place, "%s", place);
    if (rank == 0 && !(all = malloc((size_t)size * sizeof *all))) {
        status = HVD_ERR_NOMEM;
        goto out;
    }
    HVD_CHECK_MPI(MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all,
                             (int)sizeof mine, MPI_BYTE, 0, comm));
    if (rank == 0 && hvd__topo.nnodes > 1) status = hvd__log_nodes(comm);
    for (int r = 0; rank == 0 && r < size; r++) {
        int node = hvd__topo.node_idx[r];
        hvd__log(HVD__LOG_INFO,
                 "placement: rank %d on %s (node %d), local rank %d of %d: %s",
                 r, all[r].host, node, hvd__topo.local_rank[r],
                 hvd__topo.node_size[node], all[r].place);
    }
out:
    free(all);
    return status;
}
