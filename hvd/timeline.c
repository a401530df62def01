/* hvd/timeline.c: HVD_TIMELINE, a Chrome-trace JSON file (chrome://tracing,
 * Perfetto) written by rank 0: one row ("process") per tensor name, with
 * its negotiation, its wait in the queue behind earlier responses, copies
 * into and out of the fusion buffer and the ring collective as complete
 * ("X") events. The array is closed at shutdown, so
 * the file parses as JSON; a killed job leaves it unterminated, which both
 * viewers still load. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hvd/timeline.h"

static FILE *hvd__trace;
static double hvd__t0;
static char **hvd__rows; /* tensor names, a row each */
static size_t hvd__nrows;

int hvd__timeline_open(const char *path)
{
    hvd__trace = fopen(path, "w");
    if (!hvd__trace) {
        hvd__log(HVD__LOG_ERROR, "HVD_TIMELINE=%s: cannot write it", path);
        return HVD_ERR_ARG;
    }
    hvd__t0 = hvd__now();
    fputs("[\n", hvd__trace);
    return HVD_OK;
}

/* The name as a JSON string body: quotes, backslashes and control
 * characters escaped. */
static void hvd__json_string(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

/* The row of a tensor; a new one is announced with a metadata event. */
static long hvd__row(const char *tensor)
{
    for (size_t i = 0; i < hvd__nrows; i++)
        if (strcmp(hvd__rows[i], tensor) == 0) return (long)i + 1;
    char **rows = realloc(hvd__rows, (hvd__nrows + 1) * sizeof *rows);
    if (!rows) return 0;
    hvd__rows = rows;
    if (!(hvd__rows[hvd__nrows] = strdup(tensor))) return 0;
    hvd__nrows++;
    fprintf(hvd__trace,
            "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %zu, "
            "\"args\": {\"name\": \"",
            hvd__nrows);
    hvd__json_string(hvd__trace, tensor);
    fputs("\"}},\n", hvd__trace);
    return (long)hvd__nrows;
}

int hvd__timeline_on(void) { return hvd__trace != NULL; }

void hvd__timeline_event(const char *tensor, const char *phase, double start_s,
                         double end_s)
{
    if (!hvd__trace) return;
    long pid = hvd__row(tensor);
    fprintf(hvd__trace,
            "{\"name\": \"%s\", \"ph\": \"X\", \"pid\": %ld, \"tid\": 0, "
            "\"ts\": %.3f, \"dur\": %.3f, \"args\": {\"tensor\": \"",
            phase, pid, (start_s - hvd__t0) * 1e6, (end_s - start_s) * 1e6);
    hvd__json_string(hvd__trace, tensor);
    fputs("\"}},\n", hvd__trace);
}

void hvd__timeline_close(void)
{
    if (!hvd__trace) return;
    /* A last event without a trailing comma closes the array. */
    fputs("{\"name\": \"shutdown\", \"ph\": \"i\", \"pid\": 0, \"ts\": 0}\n]\n",
          hvd__trace);
    fclose(hvd__trace);
    hvd__trace = NULL;
    for (size_t i = 0; i < hvd__nrows; i++) free(hvd__rows[i]);
    free(hvd__rows);
    hvd__rows = NULL;
    hvd__nrows = 0;
}
