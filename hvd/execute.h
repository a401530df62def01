/* hvd/execute.h: running one response of the plan on this rank
 * (hvd/execute.c), through ring's context. */
#ifndef HVD_EXECUTE_H
#define HVD_EXECUTE_H

#include "hvd/plan.h"

/* Runs one response with this rank's requests for its names, hs[i] for
 * response->descs[i] (NULL where this rank has none, having joined: it
 * contributes zeros), and completes them. ready_s: when the ranks agreed
 * it was ready (the timeline's end of negotiation and start of
 * queueing). response->head.status when every rank ran it alike (its
 * requests may still have failed, on every rank: the device fusion
 * buffer that one rank could not make), else this rank's own failure,
 * after which the ranks are out of step. */
int hvd__execute(const hvd__response_t *response, hvd_handle_t *hs,
                 double ready_s);
/* Collective, before the engine starts: ring's context over
 * hvd__ring_comm, with the shared window and the hierarchical
 * communicators that HVD_INTRANODE and HVD_HIERARCHICAL_ALLREDUCE ask for.
 * HVD_ERR_ARG when HVD_INTRANODE=shm cannot hold, HVD_ERR_MISMATCH when
 * the ranks read ring's variables differently. */
int hvd__execute_init(void);
/* On the engine thread as it ends: releases the device fusion buffer, the
 * device zeros and the engine's stream (made on that thread). */
void hvd__execute_thread_end(void);
/* Collective (the context), after the engine has stopped. */
void hvd__execute_free(void);

#endif /* HVD_EXECUTE_H */
