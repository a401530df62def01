/* test/fuzz/fuzz.h: what the fuzz targets (test/fuzz/fuzz_*.c) share.
 *
 * Each target defines LLVMFuzzerTestOneInput and is linked either with
 * libFuzzer (scripts/fuzz, clang) or with test/fuzz/replay.c (make check,
 * any compiler), which runs it on the committed inputs. A target returns 0
 * for every input, valid or not; a broken promise of the parser is
 * FUZZ_CHECK's abort(), which libFuzzer reports as a crash and saves the
 * input, and which fails the replay.
 */
#ifndef HVD_TEST_FUZZ_H
#define HVD_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts, naming the expression and file:line, when cond is false. */
#define FUZZ_CHECK(cond)                                                       \
    do {                                                                       \
        if (!(cond)) fuzz_fail(#cond, __FILE__, __LINE__);                     \
    } while (0)
_Noreturn void fuzz_fail(const char *what, const char *file, int line);

/* The path of an in-memory file (memfd) holding nbytes of bytes, through
 * /proc/self/fd, so that readers that take paths can be fed the input.
 * slot (0..FUZZ_FILE_SLOTS-1) picks one of a few such files, reused by
 * later calls: a path is good until the next call with its slot. */
enum { FUZZ_FILE_SLOTS = 4 };
const char *fuzz_file(int slot, const void *bytes, size_t nbytes);

/* Cuts a piece off the front of the input: a 4-byte little-endian length,
 * then that many bytes (fewer when the input ends first). Returns the
 * piece's length and points *piece at it; *data and *size move past it. */
size_t fuzz_take(const uint8_t **data, size_t *size, const uint8_t **piece);

/* The gzip file (as gzip(1) writes it, without a name or time) of n
 * bytes, malloc'ed, *gz_nbytes long; NULL when out of memory. */
uint8_t *fuzz_gzip(const uint8_t *bytes, size_t n, size_t *gz_nbytes);

#endif /* HVD_TEST_FUZZ_H */
