/* test/test_hvd_timeline.c: HVD_TIMELINE (run by test/hvd_timeline.sh,
 * which parses the file as JSON afterwards).
 *
 *   test_hvd_timeline PATH [PHASE]
 *       sets HVD_TIMELINE=PATH, makes the collectives named in `names`
 *       below, shuts down, and then rank 0 checks that PATH holds one JSON
 *       array ("[" ... "]") mentioning every name, and an event named PHASE
 *       when given (SHM_ALLREDUCE or RING_ALLREDUCE: the path the
 *       allreduces took); and an allreduce named `odd`, whose quotes,
 *       backslash and tab the file escapes.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <ctype.h>
#include <string.h>
#include "hvd/hvd.h"
#include "test/test.h"

/* Keep in step with test/hvd_timeline.sh. */
static const char *const names[] = {"tl.blocking", "tl.async.0",
                                    "tl.async.1", "tl.async.2", "tl.bcast",
                                    "tl.gather"};
static const char odd[] = "tl.odd \"q\" \\ \t",
                  odd_escaped[] = "tl.odd \\\"q\\\" \\\\ \\u0009";

/* The whole file, NUL-terminated; NULL if it cannot be read. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t len = 0, cap = 1 << 16, got;
    char *text = malloc(cap);
    while (text && (got = fread(text + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) text = realloc(text, cap *= 2);
    }
    fclose(f);
    if (text) text[len] = '\0';
    return text;
}

int main(int argc, char **argv)
{
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: test_hvd_timeline PATH [PHASE]\n");
        return TEST_HARD_ERROR;
    }
    const char *path = argv[1], *phase = argc == 3 ? argv[2] : NULL;
    setenv("HVD_TIMELINE", path, 1);
    if (hvd_init(&argc, &argv) != HVD_OK) return TEST_HARD_ERROR;
    int rank = test_rank = hvd_rank(), size = hvd_size();

    /* 8 KiB: large enough for HVD_INTRANODE=auto to take shared memory. */
    enum { N = 2048 };
    float x[N], *y = malloc(N * sizeof *y * (size_t)size);
    for (int i = 0; i < N; i++) x[i] = (float)(rank + i);
    TEST_EQ(hvd_allreduce(x, y, N, HVD_FLOAT32, HVD_SUM, names[0]), HVD_OK);
    float a[3][16];
    hvd_handle_t h[3] = {NULL, NULL, NULL};
    for (int k = 0; k < 3; k++)
        TEST_EQ(hvd_allreduce_async(x, a[k], 16, HVD_FLOAT32, HVD_SUM,
                                    names[1 + k], &h[k]), HVD_OK);
    for (int k = 0; k < 3; k++) TEST_EQ(h[k] ? hvd_wait(h[k]) : -1, HVD_OK);
    TEST_EQ(hvd_broadcast(x, 64, HVD_FLOAT32, 0, names[4]), HVD_OK);
    TEST_EQ(hvd_allgather(x, 64, y, HVD_FLOAT32, names[5]), HVD_OK);
    TEST_EQ(hvd_allreduce(x, y, 16, HVD_FLOAT32, HVD_SUM, odd), HVD_OK);
    TEST_EQ(hvd_shutdown(), HVD_OK);
    free(y);

    if (rank == 0) {
        char *text = slurp(path);
        if (!text) {
            TEST_FAIL("timeline n=%d: cannot read %s", size, path);
        } else {
            const char *p = text, *end = text + strlen(text);
            while (isspace((unsigned char)*p)) p++;
            while (end > p && isspace((unsigned char)end[-1])) end--;
            if (*p != '[' || end == p || end[-1] != ']')
                TEST_FAIL("timeline n=%d: %s is not one complete JSON array "
                          "(starts '%c', ends '%c')", size, path, *p,
                          end > p ? end[-1] : ' ');
            for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
                if (!strstr(text, names[k]))
                    TEST_FAIL("timeline n=%d: %s never mentions \"%s\"", size,
                              path, names[k]);
            if (!strstr(text, odd_escaped))
                TEST_FAIL("timeline n=%d: %s never mentions %s", size, path,
                          odd_escaped);
            char event[64];
            snprintf(event, sizeof event, "\"name\": \"%s\"",
                     phase ? phase : "");
            if (phase && !strstr(text, event))
                TEST_FAIL("timeline n=%d: %s has no %s event", size, path,
                          phase);
        }
        free(text);
        printf("test_hvd_timeline n=%d: %s\n", size,
               test_failures ? "FAIL" : "ok");
    }
    return test_exit_code();
}
