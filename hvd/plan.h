/* hvd/plan.h: the plan every rank runs (hvd/plan.c): the container, which
 * requests run together (grouping for fusion), and the byte formats of
 * what the ranks exchange to agree on it. */
#ifndef HVD_PLAN_H
#define HVD_PLAN_H

#include "hvd/requests.h"

/* One decision every rank executes in the same order: a group of requests
 * (one, or several fused allreduces of one dtype and op), or an error for
 * one name. */
typedef struct {
    int32_t status;            /* HVD_OK, or the error every rank returns */
    int32_t ndescs;
    char message[512];         /* what differed, on which ranks */
} hvd__response_head_t;

typedef struct {
    hvd__response_head_t head;
    hvd__desc_t *descs;
} hvd__response_t;

typedef struct {
    hvd__response_t *items;
    size_t len, cap;
} hvd__plan_t;

void hvd__plan_free(hvd__plan_t *plan);
/* A response for ndescs names (left zero) at the end of plan; NULL when
 * out of memory. */
hvd__response_t *hvd__plan_add(hvd__plan_t *plan, int status, int ndescs);

/* Appends descs to plan as responses: consecutive allreduces of one dtype,
 * op and memory kind are fused up to HVD_FUSION_THRESHOLD when both are
 * small or the second follows the first (hvd__chain_link); everything
 * else alone. */
int hvd__plan_group(const hvd__desc_t *descs, size_t n, hvd__plan_t *plan);
/* The end of the group that starts at descs[i] (of n), as plan_group
 * would make it: for a caller that runs groups where the descs lie. */
size_t hvd__group_end(const hvd__desc_t *descs, size_t i, size_t n);

/* Byte encodings of what ranks exchange; decode checks every length and
 * field, so a corrupt message is an error, not a crash. */
int hvd__encode_requests(hvd_handle_t *reqs, size_t n, int joined,
                         char **bytes, size_t *nbytes);
int hvd__decode_requests(const char *bytes, size_t nbytes, int *joined,
                         hvd__desc_t **descs, size_t *n);
int hvd__encode_plan(const hvd__plan_t *plan, char **bytes, size_t *nbytes);
int hvd__decode_plan(const char *bytes, size_t nbytes, hvd__plan_t *plan);

#endif /* HVD_PLAN_H */
