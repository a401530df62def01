/* test/capture.h: what a call writes to stderr, for tests that check the
 * message of an error as well as its status.
 *
 *   TEST_SAYS(call, status, text): runs call with stderr sent to a
 *   temporary file; the call must return status, and what it wrote must
 *   hold text (a fixed string), or, when text is NULL, be empty. What was
 *   written is then copied to the real stderr, so the log still shows it.
 *
 * The includer defines _POSIX_C_SOURCE (dup, dup2, fileno) before its
 * first include. The capture is of the process's file descriptor 2: what
 * other threads (hvd's engine) write meanwhile lands in it too.
 * Left out: stdout; messages longer than 4 KiB (cut).
 */
#ifndef HVD_TEST_CAPTURE_H
#define HVD_TEST_CAPTURE_H

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200112L
#error "test/capture.h needs _POSIX_C_SOURCE 200112L or later"
#endif

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "test/test.h"

static FILE *test_capture_file;
static int test_capture_saved_fd = -1;

static inline void test_capture_begin(void)
{
    fflush(stderr);
    test_capture_file = tmpfile();
    test_capture_saved_fd = dup(STDERR_FILENO);
    if (!test_capture_file || test_capture_saved_fd < 0 ||
        dup2(fileno(test_capture_file), STDERR_FILENO) < 0) {
        perror("test/capture.h: cannot capture stderr");
        exit(TEST_HARD_ERROR);
    }
}

/* Ends the capture; what was written, NUL-terminated (static storage). */
static inline const char *test_capture_end(void)
{
    static char text[4096];
    fflush(stderr);
    dup2(test_capture_saved_fd, STDERR_FILENO);
    close(test_capture_saved_fd);
    test_capture_saved_fd = -1;
    rewind(test_capture_file);
    size_t n = fread(text, 1, sizeof text - 1, test_capture_file);
    text[n] = '\0';
    fclose(test_capture_file);
    test_capture_file = NULL;
    fputs(text, stderr);
    return text;
}

#define TEST_SAYS(call, status, text)                                          \
    do {                                                                       \
        test_capture_begin();                                                  \
        long long test_says_got_ = (long long)(call);                          \
        const char *test_says_ = test_capture_end();                           \
        const char *test_says_want_ = (text);                                  \
        TEST_EQ(test_says_got_, status);                                       \
        if (!test_says_want_ && test_says_[0] != '\0')                         \
            TEST_FAIL("%s wrote \"%s\", want nothing", #call, test_says_);     \
        if (test_says_want_ && !strstr(test_says_, test_says_want_))           \
            TEST_FAIL("%s wrote \"%s\", want \"%s\"", #call, test_says_,       \
                      test_says_want_);                                        \
    } while (0)

#endif /* HVD_TEST_CAPTURE_H */
