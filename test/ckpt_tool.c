/* test/ckpt_tool.c: examples/checkpoint.c driven from the shell, for the
 * checkpoint tests (test/checkpoint_kill.sh, test/checkpoint_bad.sh). No
 * MPI, one thread: a test can stop it at any system call with strace.
 *
 *   ckpt_tool write PATH SEED [KIND COUNT]
 *       ckpt_write of a state that SEED decides in every value: COUNT
 *       parameters (100000) and as many momentum values, epoch SEED, an
 *       RNG state from SEED, model kind KIND ("test").
 *   ckpt_tool check PATH
 *       ckpt_read of a checkpoint that `write PATH SEED` made (kind "test",
 *       100000 values); prints "seed S" when every value is the one seed S
 *       writes. Exit 1 on anything else: ckpt_read's message, or the first
 *       value that belongs to another seed (a mix of two writes).
 *   ckpt_tool recrc PATH
 *       stores the CRC32 of PATH's bytes but the last 4 in those 4, so that
 *       a test can change a header field (version, epoch) and still get
 *       past the CRC check to the check of that field.
 *
 * Exit status: 0, 1 (the fault on stderr), 2 (usage).
 * Left out: any knowledge of the layout beyond checkpoint.h's comment.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "examples/checkpoint.h"

enum { DEFAULT_COUNT = 100000 };

/* Element i of seed s's parameters (momentum: the negation): integers
 * below 2^16, exact in float; two seeds under 65521 apart differ at every
 * i (65521 is prime). */
static float value(uint64_t seed, size_t i)
{
    return (float)((seed * 7919u + (uint64_t)i * 31u) % 65521u);
}

static uint64_t rng_of(uint64_t seed)
{
    return seed * 0x9e3779b97f4a7c15ull + 1;
}

static int usage(void)
{
    fprintf(stderr, "usage: ckpt_tool write PATH SEED [KIND COUNT] | "
                    "check PATH | recrc PATH\n");
    return 2;
}

/* A state of count values (params and velocity in one allocation of
 * 2 * count floats); NULL when out of memory. */
static float *alloc_state(ckpt_state_t *st, const char *kind, size_t count)
{
    float *slab = malloc(2 * count * sizeof *slab);
    *st = (ckpt_state_t){.kind = kind, .param_count = count, .params = slab,
                         .velocity_count = count,
                         .velocity = slab ? slab + count : NULL};
    if (!slab) fprintf(stderr, "ckpt_tool: out of memory\n");
    return slab;
}

static int do_write(const char *path, uint64_t seed, const char *kind,
                    size_t count)
{
    ckpt_state_t st;
    float *slab = alloc_state(&st, kind, count);
    if (!slab) return 1;
    for (size_t i = 0; i < count; i++) {
        st.params[i] = value(seed, i);
        st.velocity[i] = -value(seed, i);
    }
    st.epoch = (int64_t)seed;
    st.rng_state = rng_of(seed);
    int status = ckpt_write(path, &st, NULL, 0); /* message to stderr */
    free(slab);
    return status == CKPT_OK ? 0 : 1;
}

static int do_check(const char *path)
{
    ckpt_state_t st;
    float *slab = alloc_state(&st, "test", DEFAULT_COUNT);
    if (!slab) return 1;
    int rc = 1;
    if (ckpt_read(path, &st, NULL, 0) != CKPT_OK) goto out;
    uint64_t seed = (uint64_t)st.epoch;
    if (st.rng_state != rng_of(seed)) {
        fprintf(stderr, "ckpt_tool: %s: epoch %llu, but the RNG state of "
                "another seed\n", path, (unsigned long long)seed);
        goto out;
    }
    for (size_t i = 0; i < st.param_count; i++)
        if (st.params[i] != value(seed, i) ||
            st.velocity[i] != -value(seed, i)) {
            fprintf(stderr, "ckpt_tool: %s: seed %llu, but value %zu is "
                    "another seed's (%g, %g)\n", path,
                    (unsigned long long)seed, i, (double)st.params[i],
                    (double)st.velocity[i]);
            goto out;
        }
    printf("seed %llu\n", (unsigned long long)seed);
    rc = 0;
out:
    free(slab);
    return rc;
}

static int do_recrc(const char *path)
{
    FILE *f = fopen(path, "r+b");
    if (!f) {
        perror(path);
        return 1;
    }
    unsigned char buf[1 << 16];
    uLong crc = crc32(0L, Z_NULL, 0);
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    int ok = size >= 4 && fseek(f, 0, SEEK_SET) == 0;
    for (long left = size - 4; ok && left > 0;) {
        size_t n = left < (long)sizeof buf ? (size_t)left : sizeof buf;
        ok = fread(buf, 1, n, f) == n;
        crc = crc32(crc, buf, (uInt)n);
        left -= (long)n;
    }
    for (int i = 0; i < 4; i++) buf[i] = (unsigned char)(crc >> (8 * i));
    ok = ok && fseek(f, size - 4, SEEK_SET) == 0 && fwrite(buf, 1, 4, f) == 4;
    ok = fclose(f) == 0 && ok;
    if (!ok) fprintf(stderr, "ckpt_tool: recrc %s failed\n", path);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "check")) return do_check(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "recrc")) return do_recrc(argv[2]);
    if ((argc == 4 || argc == 6) && !strcmp(argv[1], "write")) {
        char *end;
        uint64_t seed = strtoull(argv[3], &end, 10);
        if (*end || end == argv[3]) return usage();
        size_t count = DEFAULT_COUNT;
        if (argc == 6) {
            count = strtoull(argv[5], &end, 10);
            if (*end || end == argv[5] || count == 0) return usage();
        }
        return do_write(argv[2], seed, argc == 6 ? argv[4] : "test", count);
    }
    return usage();
}
