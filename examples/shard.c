/* examples/shard.c: each rank's share of the training set, reshuffled every
 * epoch from a seed that all ranks share (see data_shard_t in data.h for the
 * layout and a worked example). Pure arithmetic, no MPI: every rank computes
 * the same global order by itself, so no communication is needed.
 */
#include <stdlib.h>
#include <string.h>
#include "examples/data.h"

uint64_t data_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* Uniform in [0, bound), bound > 0, without modulo bias: draws below
 * 2^64 mod bound are rejected, leaving a multiple of bound outcomes. */
static uint64_t rng_below(uint64_t *state, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound;
    for (;;) {
        uint64_t r = data_splitmix64(state);
        if (r >= threshold) return r % bound;
    }
}

void data_shuffle(size_t *order_idx, size_t count, uint64_t seed,
                  uint64_t epoch)
{
    /* One stream per (seed, epoch): both pass through the mixer, so nearby
     * seeds or epochs give unrelated orders. */
    uint64_t s = seed, e = epoch;
    uint64_t state = data_splitmix64(&s) ^ data_splitmix64(&e);
    for (size_t i = 0; i < count; i++)
        order_idx[i] = i;
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)rng_below(&state, i); /* 0..i-1 */
        size_t t = order_idx[i - 1];
        order_idx[i - 1] = order_idx[j];
        order_idx[j] = t;
    }
}

int data_shard_init(data_shard_t *sh, size_t sample_count, size_t rank_idx,
                    size_t rank_count, size_t batch_size, uint64_t seed)
{
    if (!sh) return DATA_ERR_ARG;
    memset(sh, 0, sizeof(*sh));
    if (sample_count == 0 || rank_count == 0 || rank_idx >= rank_count ||
        batch_size == 0)
        return DATA_ERR_ARG;
    sh->sample_count = sample_count;
    sh->shard_count =
        sample_count / rank_count + (sample_count % rank_count != 0);
    sh->batch_size = batch_size;
    sh->rank_idx = rank_idx;
    sh->rank_count = rank_count;
    sh->seed = seed;
    sh->shard_idx = malloc(sh->shard_count * sizeof(size_t));
    sh->order_idx = malloc(sample_count * sizeof(size_t));
    if (!sh->shard_idx || !sh->order_idx) {
        data_shard_free(sh);
        return DATA_ERR_NOMEM;
    }
    data_shard_set_epoch(sh, 0);
    return DATA_OK;
}

void data_shard_set_epoch(data_shard_t *sh, uint64_t epoch)
{
    sh->epoch = epoch;
    data_shuffle(sh->order_idx, sh->sample_count, sh->seed, epoch);
    /* Padded position k holds order[k mod sample_count]: the wrap-around
     * (repeated when there are more ranks than samples). */
    for (size_t j = 0; j < sh->shard_count; j++)
        sh->shard_idx[j] = sh->order_idx[(j * sh->rank_count + sh->rank_idx) %
                                         sh->sample_count];
}

size_t data_shard_batch_count(const data_shard_t *sh)
{
    return sh->shard_count / sh->batch_size +
           (sh->shard_count % sh->batch_size != 0);
}

size_t data_shard_batch(const data_shard_t *sh, size_t batch_idx,
                        const size_t **sample_idx)
{
    *sample_idx = NULL;
    if (batch_idx >= data_shard_batch_count(sh)) return 0;
    size_t first = batch_idx * sh->batch_size;
    size_t n = sh->shard_count - first;
    *sample_idx = sh->shard_idx + first;
    return n < sh->batch_size ? n : sh->batch_size;
}

void data_shard_free(data_shard_t *sh)
{
    if (!sh) return;
    free(sh->shard_idx);
    free(sh->order_idx);
    memset(sh, 0, sizeof(*sh));
}
