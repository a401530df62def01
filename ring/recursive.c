/* ring/recursive.c: the allreduce algorithms built on pairwise exchanges
 * between ranks r and r ^ mask, for small and medium messages.
 *
 *   rdb  recursive doubling: log2(N) exchanges of the whole message, each
 *        rank reducing everything. Fewest steps: for latency.
 *   rhd  recursive halving then doubling (Rabenseifner): a reduce-scatter
 *        in which each exchange halves the region a rank is responsible
 *        for, then an allgather retracing the steps. The ring's
 *        2(N-1)/N bytes per rank in 2 log2(N) steps instead of 2(N-1):
 *        fewer hand-offs, which matters when ranks share cores.
 *
 * Both work on 2^k "virtual" ranks. With N = 2^k + rem, the first 2*rem
 * ranks fold pairwise first: even ranks hand their data to the odd rank
 * above (which plays virtual rank r/2) and get the result back at the end.
 *
 * Bitwise agreement: in rdb both partners compute (lower rank's data) op
 * (higher rank's data), the same expression; in rhd each element is reduced
 * by one rank only and then copied.
 */
#include <stdlib.h>
#include "ring/ring_internal.h"

enum { RING_RECURSIVE_TAG = 0x7264 };

/* The exchange part of an algorithm, on the virtual ranks: this rank's
 * (folded) data is src, the result goes to buf, tmp has room for the whole
 * message. src is read before buf is first written, so it may be buf; when
 * it is not, no copy of the input is ever made. */
typedef int ring__pow2_fn(const ring__coll_t *c, const char *src, char *buf,
                          char *tmp, int divisor, int vrank, int p2, int rem);

/* Rank of the process that plays virtual rank v after the fold. */
static int ring__real_rank(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}

/* dst = (lower rank's data) op (higher rank's), mine being this rank's and
 * tmp the peer's; dst may be mine. */
static void ring__reduce_ordered(const ring__coll_t *c, char *dst,
                                 const char *mine, const char *tmp,
                                 size_t count, int divisor, int peer_is_lower)
{
    if (peer_is_lower)
        c->mem->reduce(dst, tmp, mine, count, c->dtype, c->op, divisor);
    else
        c->mem->reduce(dst, mine, tmp, count, c->dtype, c->op, divisor);
}

static int ring__sendrecv(const char *sendbuf, size_t send_nbytes, char *recvbuf,
                          size_t recv_nbytes, int peer, MPI_Comm comm)
{
    int status = RING_OK;
    RING_CHECK_MPI(MPI_Sendrecv(sendbuf, (int)send_nbytes, MPI_BYTE, peer,
                                RING_RECURSIVE_TAG, recvbuf, (int)recv_nbytes,
                                MPI_BYTE, peer, RING_RECURSIVE_TAG, comm,
                                MPI_STATUS_IGNORE));
out:
    return status;
}

static int ring__rdb(const ring__coll_t *c, const char *src, char *buf,
                     char *tmp, int divisor, int vrank, int p2, int rem)
{
    int status = RING_OK;
    size_t nbytes = c->count * c->esize;
    for (int mask = 1; mask < p2; mask <<= 1, src = buf) {
        int vpeer = vrank ^ mask;
        RING_CHECK(ring__sendrecv(src, nbytes, tmp, nbytes,
                                  ring__real_rank(vpeer, rem), c->comm));
        ring__reduce_ordered(c, buf, src, tmp, c->count,
                             mask * 2 == p2 ? divisor : 1, vpeer < vrank);
    }
out:
    return status;
}

/* Rabenseifner. Four ranks, message ABCD:
 *   halving, mask 2: 0<->2 and 1<->3; ranks 0,1 keep AB, ranks 2,3 keep CD
 *   halving, mask 1: 0<->1: 0 keeps A, 1 keeps B; 2<->3: 2 keeps C, 3 D
 *   doubling, mask 1: 0<->1 swap A and B; 2<->3 swap C and D
 *   doubling, mask 2: 0<->2 swap AB and CD; 1<->3 likewise. */
static int ring__rhd(const ring__coll_t *c, const char *src, char *buf,
                     char *tmp, int divisor, int vrank, int p2, int rem)
{
    int status = RING_OK, nsteps = 0;
    size_t esize = c->esize, lo = 0, hi = c->count;
    size_t parent_lo[32], parent_hi[32]; /* the region before each halving */
    for (int mask = p2 / 2; mask > 0; mask >>= 1, nsteps++, src = buf) {
        int vpeer = vrank ^ mask, keep_low = vrank < vpeer;
        size_t mid = lo + (hi - lo) / 2;
        size_t keep = keep_low ? lo : mid, keep_end = keep_low ? mid : hi;
        size_t give = keep_low ? mid : lo, give_end = keep_low ? hi : mid;
        RING_CHECK(ring__sendrecv(src + give * esize, (give_end - give) * esize,
                                  tmp, (keep_end - keep) * esize,
                                  ring__real_rank(vpeer, rem), c->comm));
        ring__reduce_ordered(c, buf + keep * esize, src + keep * esize, tmp,
                             keep_end - keep, mask == 1 ? divisor : 1,
                             vpeer < vrank);
        parent_lo[nsteps] = lo;
        parent_hi[nsteps] = hi;
        lo = keep;
        hi = keep_end;
    }
    for (int step = nsteps - 1, mask = 1; step >= 0; step--, mask <<= 1) {
        /* The partner owns the rest of the parent region. */
        size_t plo = parent_lo[step], phi = parent_hi[step];
        size_t other = lo == plo ? hi : plo, other_end = lo == plo ? phi : lo;
        RING_CHECK(ring__sendrecv(buf + lo * esize, (hi - lo) * esize,
                                  buf + other * esize,
                                  (other_end - other) * esize,
                                  ring__real_rank(vrank ^ mask, rem),
                                  c->comm));
        lo = plo;
        hi = phi;
    }
out:
    return status;
}

/* Folds the ranks beyond the largest power of two, runs `core` on the
 * virtual ranks, and unfolds. */
static int ring__allreduce_folded(ring__pow2_fn *core, const ring__coll_t *c,
                                  const void *sendbuf, void *recvbuf)
{
    int status = RING_OK, rank = c->rank, size = c->size;
    size_t nbytes = c->count * c->esize;
    char stack[8192]; /* small messages: no allocation on the latency path */
    int on_stack = nbytes <= sizeof stack && c->mem == &ring__mem_host;
    char *tmp = on_stack ? stack : c->mem->alloc(nbytes);
    const char *src = sendbuf;
    char *buf = recvbuf;
    int divisor = c->op == RING_AVERAGE ? size : 1, p2 = 1;
    while (p2 * 2 <= size) p2 *= 2;
    int rem = size - p2, folded = rank < 2 * rem;
    if (!tmp) return RING_ERR_NOMEM;

    if (folded && rank % 2 == 0) {
        /* Hand the data to rank + 1; the result comes back at the end. */
        RING_CHECK_MPI(MPI_Send(src, (int)nbytes, MPI_BYTE, rank + 1,
                                RING_RECURSIVE_TAG, c->comm));
        RING_CHECK_MPI(MPI_Recv(buf, (int)nbytes, MPI_BYTE, rank + 1,
                                RING_RECURSIVE_TAG, c->comm,
                                MPI_STATUS_IGNORE));
        goto out;
    }
    if (folded) {
        RING_CHECK_MPI(MPI_Recv(tmp, (int)nbytes, MPI_BYTE, rank - 1,
                                RING_RECURSIVE_TAG, c->comm,
                                MPI_STATUS_IGNORE));
        c->mem->reduce(buf, tmp, src, c->count, c->dtype, c->op, 1);
        src = buf;
    }
    RING_CHECK(core(c, src, buf, tmp, divisor,
                    folded ? rank / 2 : rank - rem, p2, rem));
    if (folded)
        RING_CHECK_MPI(MPI_Send(buf, (int)nbytes, MPI_BYTE, rank - 1,
                                RING_RECURSIVE_TAG, c->comm));
out:
    if (!on_stack) c->mem->release(tmp);
    return status;
}

int ring__allreduce_rdb(const ring__coll_t *c, const void *sendbuf,
                        void *recvbuf)
{
    return ring__allreduce_folded(ring__rdb, c, sendbuf, recvbuf);
}

int ring__allreduce_rhd(const ring__coll_t *c, const void *sendbuf,
                        void *recvbuf)
{
    return ring__allreduce_folded(ring__rhd, c, sendbuf, recvbuf);
}
