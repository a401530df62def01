/* test/fuzz/replay.c: main() for a fuzz target outside libFuzzer. Runs
 * LLVMFuzzerTestOneInput once on each file named, or on each file of each
 * folder named (in name order, dot files skipped), and prints how many.
 *
 * With no arguments it replays the target's committed inputs,
 * $srcdir/test/fuzz/corpus/NAME (seeds; must exist) and
 * $srcdir/test/fuzz/regress/NAME (crashes once found, now fixed; may be
 * absent), NAME being the program's name without its "fuzz_" prefix: so
 * each target is a plain `make check` test that needs no clang. A broken
 * check aborts (FUZZ_CHECK), which fails the test; exit 99 when an input
 * cannot be read.
 */
#define _DEFAULT_SOURCE /* scandir, alphasort */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "test/fuzz/fuzz.h"

enum { HARD_ERROR = 99 };

static void replay_file(const char *path)
{
    /* Named first, so that a failed check's message follows its input. */
    fprintf(stderr, "replay: %s\n", path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        exit(HARD_ERROR);
    }
    size_t cap = 1 << 12, size = 0;
    uint8_t *data = malloc(cap);
    size_t got;
    while (data && (got = fread(data + size, 1, cap - size, f)) > 0) {
        size += got;
        if (size == cap) data = realloc(data, cap *= 2);
    }
    if (!data || ferror(f)) {
        fprintf(stderr, "replay: %s: cannot read it\n", path);
        exit(HARD_ERROR);
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
}

/* Replays path, a file or a folder of files; returns the inputs run. */
static size_t replay(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        exit(HARD_ERROR);
    }
    if (!S_ISDIR(st.st_mode)) {
        replay_file(path);
        return 1;
    }
    struct dirent **entries;
    int n = scandir(path, &entries, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        exit(HARD_ERROR);
    }
    size_t count = 0;
    for (int i = 0; i < n; i++) {
        if (entries[i]->d_name[0] != '.') {
            char file[4096];
            snprintf(file, sizeof file, "%s/%s", path, entries[i]->d_name);
            replay_file(file);
            count++;
        }
        free(entries[i]);
    }
    free(entries);
    return count;
}

int main(int argc, char **argv)
{
    const char *prog = strrchr(argv[0], '/');
    prog = prog ? prog + 1 : argv[0];
    size_t count = 0;
    for (int i = 1; i < argc; i++)
        count += replay(argv[i]);
    if (argc == 1) {
        const char *srcdir = getenv("srcdir");
        const char *name = strncmp(prog, "fuzz_", 5) == 0 ? prog + 5 : prog;
        char dir[4096];
        struct stat st;
        snprintf(dir, sizeof dir, "%s/test/fuzz/corpus/%s",
                 srcdir ? srcdir : ".", name);
        count += replay(dir);
        snprintf(dir, sizeof dir, "%s/test/fuzz/regress/%s",
                 srcdir ? srcdir : ".", name);
        if (stat(dir, &st) == 0) count += replay(dir);
    }
    printf("%s: %zu inputs replayed, all passed\n", prog, count);
    return 0;
}
