/* hvd/coordinator.h: the slow path of negotiation (hvd/coordinator.c):
 * rank 0 learns every rank's new requests and sends back the plan. */
#ifndef HVD_COORDINATOR_H
#define HVD_COORDINATOR_H

#include "hvd/plan.h"

/* Runs one exchange with rank 0: sends this rank's requests that it has not
 * sent before (and whether it has joined), and receives the plan. Collective
 * over the engine's communicator. */
int hvd__coordinate(hvd__list_t *pending, int joined, hvd__plan_t *plan);
/* On rank 0: names that some ranks made and others not yet, so the slow
 * path must run again (to finish them, or to report them stalled). */
int hvd__coordinator_waiting(void);
void hvd__coordinator_free(void);

#endif /* HVD_COORDINATOR_H */
