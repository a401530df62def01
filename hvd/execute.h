/* hvd/execute.h: running one response of the plan on this rank
 * (hvd/execute.c), and the buffers and windows that takes. */
#ifndef HVD_EXECUTE_H
#define HVD_EXECUTE_H

#include "hvd/plan.h"

/* Runs one response: gathers this rank's requests for its names from
 * pending (a joined rank has none and contributes zeros), reduces, copies
 * out and completes them. ready_s: when the ranks agreed it was ready (the
 * timeline's end of negotiation and start of queueing). */
int hvd__execute(const hvd__response_t *response, hvd__list_t *pending,
                 int joined, double ready_s);
/* Collective, before the engine starts: the shared window for allreduces
 * when every rank is on one node (nnodes == 1) and HVD_INTRANODE allows it.
 * HVD_ERR_ARG when HVD_INTRANODE=shm cannot hold. */
int hvd__execute_init(int nnodes);
/* Collective (the shared window), after the engine has stopped. */
void hvd__execute_free(void);

#endif /* HVD_EXECUTE_H */
