/* hvd/topology.h: which node each rank is on, and the ring order
 * (hvd/topology.c). */
#ifndef HVD_TOPOLOGY_H
#define HVD_TOPOLOGY_H

#include "hvd/config.h"

/* Which node each rank is on and where it sits in the ring. Nodes are
 * numbered by their lowest rank; the ring takes node 0's ranks in rank
 * order, then node 1's, and so on. Arrays indexed by rank have size
 * entries, those by node nnodes; all live in one allocation. */
typedef struct {
    int size, nnodes;
    int *node_idx;   /* (size) the rank's node */
    int *local_rank; /* (size) its index among its node's ranks */
    int *ring_rank;  /* (size) its rank in the ring order */
    int *node_size;  /* (nnodes) ranks on the node */
    int *node_start; /* (nnodes) the ring rank of the node's lowest rank */
} hvd__topo_t;

/* Fills topo from first[r], the lowest rank on rank r's node (size
 * entries). HVD_ERR_ARG when first is not such a map (first[r] > r, or
 * first[first[r]] != first[r]), HVD_ERR_NOMEM. Pure: no MPI. */
int hvd__topo_build(hvd__topo_t *topo, const int *first, int size);
void hvd__topo_free(hvd__topo_t *topo);

/* This process's topology over comm (hvd__engine.comm), and comm's ranks
 * in ring order: what allreduce and broadcast run on
 * (hvd__topo.ring_rank[root] is a broadcast root there). Set by
 * hvd__topology_init, collective over comm (HVD_ERR_MPI, HVD_ERR_NOMEM);
 * freed by hvd__topology_free. */
extern hvd__topo_t hvd__topo;
extern MPI_Comm hvd__ring_comm;
int hvd__topology_init(MPI_Comm comm);
void hvd__topology_free(void);
/* Gathers every rank's place (from hvd__bind) and host to rank 0 of comm,
 * which logs them at info level, after the nodes and the ring order when
 * there is more than one node. Collective; HVD_ERR_MPI, HVD_ERR_NOMEM. */
int hvd__topology_log(MPI_Comm comm, const char *place);

#endif /* HVD_TOPOLOGY_H */
