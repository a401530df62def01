/* hvd/engine.h: the background thread (hvd/engine.c), the only caller of
 * MPI between hvd_init and hvd_shutdown. */
#ifndef HVD_ENGINE_H
#define HVD_ENGINE_H

#include "hvd/hvd.h"

/* Starts the thread on hvd__engine, set up by hvd_init. */
int hvd__engine_start(void);
/* Asks every rank's thread to stop, waits for this one, and frees what
 * the engine's cycle made (collective, as it frees windows). */
int hvd__engine_stop(void);

#endif /* HVD_ENGINE_H */
