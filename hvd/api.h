/* hvd/api.h: what hvd/api.c offers the rest of hvd/ beyond hvd/hvd.h. */
#ifndef HVD_API_H
#define HVD_API_H

#include "hvd/hvd.h"
#include "ring/ring.h"

/* An allreduce of float32 whose reduced result passes through apply
 * before every rank receives it in recvbuf (ring_apply_t: on one node each
 * element is applied once, by its owner; otherwise on every rank). apply
 * never sees recvbuf itself, so it may read recvbuf's old values. */
int hvd__allreduce_apply_async(const float *sendbuf, float *recvbuf,
                               size_t count, hvd_op_t op, const char *name,
                               const ring_apply_t *apply,
                               hvd_handle_t *handle);

#endif /* HVD_API_H */
