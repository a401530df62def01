/* test/fuzz/fuzz_negotiation.c: the messages ranks exchange while they
 * negotiate (hvd/plan.c): each rank's requests to rank 0
 * (hvd__decode_requests) and rank 0's plan back (hvd__decode_plan). They
 * come from other processes, so decoding must refuse what is corrupt
 * rather than crash on it or hand it on.
 *
 * Input: a byte choosing the decoder (bit 0: plan), then the message. A
 * failure must be HVD_ERR_ARG (or HVD_ERR_NOMEM) with nothing left
 * allocated. A success must hold only valid descriptions: a NUL within the
 * name, a known kind, dtype and op, a count whose bytes fit a size_t, and a
 * root that is a rank of the world (size 4 here); and the encoder must
 * give the message back byte for byte (the requests' joined flag read as 0
 * or 1).
 */
#include <stdlib.h>
#include <string.h>
#include "hvd/plan.h"
#include "test/fuzz/fuzz.h"

enum { WORLD_SIZE = 4 };

static int valid(const hvd__desc_t *d)
{
    return memchr(d->name, 0, sizeof d->name) && d->kind >= 0 &&
           d->kind < HVD__KIND_COUNT && d->dtype >= 0 &&
           d->dtype < RING_DTYPE_COUNT &&
           d->count <= SIZE_MAX / ring_dtype_size((ring_dtype_t)d->dtype) &&
           d->op >= 0 && d->op < RING_OP_COUNT &&
           d->root >= 0 && d->root < WORLD_SIZE && d->mem >= 0 &&
           d->mem < HVD__MEM_COUNT;
}

static void check_requests(const uint8_t *msg, size_t n)
{
    int joined = -1;
    hvd__desc_t *descs = NULL;
    size_t count = 0;
    int status =
        hvd__decode_requests((const char *)msg, n, &joined, &descs, &count);
    if (status != HVD_OK) {
        FUZZ_CHECK(status == HVD_ERR_ARG || status == HVD_ERR_NOMEM);
        FUZZ_CHECK(descs == NULL);
        return;
    }
    FUZZ_CHECK(joined == 0 || joined == 1);
    for (size_t i = 0; i < count; i++)
        FUZZ_CHECK(valid(&descs[i]));

    struct hvd_handle *handles = calloc(count + 1, sizeof *handles);
    hvd_handle_t *reqs = calloc(count + 1, sizeof *reqs);
    FUZZ_CHECK(handles && reqs);
    for (size_t i = 0; i < count; i++) {
        handles[i].desc = descs[i];
        reqs[i] = &handles[i];
    }
    char *again;
    size_t again_nbytes;
    FUZZ_CHECK(hvd__encode_requests(reqs, count, joined, &again,
                                    &again_nbytes) == HVD_OK);
    /* The joined flag is the first int32; any non-zero reads as 1. */
    int32_t flag = joined;
    FUZZ_CHECK(
        again_nbytes == n && memcmp(again, &flag, sizeof flag) == 0 &&
        memcmp(again + sizeof flag, msg + sizeof flag, n - sizeof flag) == 0);
    free(again);
    free(reqs);
    free(handles);
    free(descs);
}

static void check_plan(const uint8_t *msg, size_t n)
{
    hvd__plan_t plan;
    int status = hvd__decode_plan((const char *)msg, n, &plan);
    if (status != HVD_OK) {
        FUZZ_CHECK(status == HVD_ERR_ARG || status == HVD_ERR_NOMEM);
        FUZZ_CHECK(plan.items == NULL && plan.len == 0 && plan.cap == 0);
        return;
    }
    for (size_t i = 0; i < plan.len; i++) {
        const hvd__response_t *r = &plan.items[i];
        FUZZ_CHECK(r->head.ndescs >= 0);
        FUZZ_CHECK(memchr(r->head.message, 0, sizeof r->head.message));
        for (int32_t d = 0; d < r->head.ndescs; d++)
            FUZZ_CHECK(valid(&r->descs[d]));
    }
    char *again;
    size_t again_nbytes;
    FUZZ_CHECK(hvd__encode_plan(&plan, &again, &again_nbytes) == HVD_OK);
    FUZZ_CHECK(again_nbytes == n && memcmp(again, msg, n) == 0);
    free(again);
    hvd__plan_free(&plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    /* Decoding checks roots against the world's size, which hvd_init sets
     * in a real run. */
    hvd__engine.size = WORLD_SIZE;
    if (data[0] & 1)
        check_plan(data + 1, size - 1);
    else
        check_requests(data + 1, size - 1);
    return 0;
}
