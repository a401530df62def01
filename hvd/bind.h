/* hvd/bind.h: where this rank runs (hvd/bind.c): its binding to its share
 * of the node, and whether its PUs are its own. */
#ifndef HVD_BIND_H
#define HVD_BIND_H

#include <pthread.h>
#include "hvd/config.h"

enum { HVD__PLACE_MAX = 384 }; /* bytes of one rank's place, NUL included */
/* Collective over comm, after hvd__bind; node_idx[r] is rank r's node.
 * own: no other rank of this node may run where this one may, or
 * (launched unbound) they share at least a PU each, so that this rank's
 * engine can poll without taking a core another rank computes on.
 * single: this rank may run on one PU only. spare: there is a PU for each
 * of this rank's two threads (training and engine) beside the other
 * ranks' (two of its own, or twice the node's ranks in a shared pool). */
int hvd__own_pus(MPI_Comm comm, const int *node_idx, int local_size,
                 int *own, int *single, int *spare);
/* Puts thread in Linux's SCHED_BATCH class: its ordinary share of the
 * core, but its wake-ups never preempt another thread. 0 where that
 * cannot be done. */
int hvd__sched_batch(pthread_t thread);
/* Binds this process to its local rank's share of the node (HVD_BIND),
 * first making its GPU current in a CUDA build, and describes the result
 * in place (nbytes): "device cpu, core 1 of 2 (PUs 1)". A failed binding
 * is only a warning. */
void hvd__bind(hvd__bind_t mode, int local_rank, int local_size, char *place,
               size_t nbytes);

#endif /* HVD_BIND_H */
