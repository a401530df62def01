/* models/backend_emu.c: the emulated device (models/backend.h): the
 * host's kernels, on memory that is the device's own. Its allocations are
 * remembered, and upload and download check both sides: a program that
 * hands the model host memory where device memory belongs, or the other
 * way round, fails here as it would on a GPU, instead of working by
 * accident because both are host memory. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "models/backend.h"
#include "models/model.h"

/* The live allocations, [base, base + bytes) each. A model holds about
 * ten. */
static struct {
    pthread_mutex_t mu;
    struct {
        char *base;
        size_t bytes;
    } *items;
    size_t len, cap;
    int failed; /* a check failed since the last finish */
} emu = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int emu_alloc(size_t bytes, void **p)
{
    char *base = calloc(bytes ? bytes : 1, 1);
    int status = base ? MODEL_OK : MODEL_ERR_NOMEM;
    pthread_mutex_lock(&emu.mu);
    if (base && emu.len == emu.cap) {
        size_t cap = emu.cap ? 2 * emu.cap : 16;
        void *items = realloc(emu.items, cap * sizeof *emu.items);
        if (items) {
            emu.items = items;
            emu.cap = cap;
        }
    }
    if (base && emu.len < emu.cap) {
        emu.items[emu.len].base = base;
        emu.items[emu.len++].bytes = bytes ? bytes : 1;
        *p = base;
    } else if (base) {
        free(base);
        status = MODEL_ERR_NOMEM;
    }
    pthread_mutex_unlock(&emu.mu);
    return status;
}

static void emu_release(void *p)
{
    if (!p) return;
    pthread_mutex_lock(&emu.mu);
    for (size_t i = 0; i < emu.len; i++)
        if (emu.items[i].base == p) {
            emu.items[i] = emu.items[--emu.len];
            break;
        }
    pthread_mutex_unlock(&emu.mu);
    free(p);
}

/* Whether [p, p + bytes) lies within one emulated allocation. */
static int emu_holds(const void *p, size_t bytes)
{
    const char *c = p;
    int held = 0;
    pthread_mutex_lock(&emu.mu);
    for (size_t i = 0; i < emu.len && !held; i++)
        held = c >= emu.items[i].base &&
               bytes <= emu.items[i].bytes &&
               (size_t)(c - emu.items[i].base) <= emu.items[i].bytes - bytes;
    pthread_mutex_unlock(&emu.mu);
    return held;
}

/* A copy from src to dst, device_dst saying which side is the device's. */
static int emu_copy(void *dst, const void *src, size_t bytes, int device_dst)
{
    if (!bytes) return MODEL_OK;
    const void *dev = device_dst ? dst : src, *host = device_dst ? src : dst;
    if (!emu_holds(dev, bytes) || emu_holds(host, 1)) {
        pthread_mutex_lock(&emu.mu);
        emu.failed = 1;
        pthread_mutex_unlock(&emu.mu);
        return MODEL_ERR_CUDA;
    }
    memcpy(dst, src, bytes);
    return MODEL_OK;
}

static int emu_upload(void *dst, const void *host_src, size_t bytes)
{
    return emu_copy(dst, host_src, bytes, 1);
}

static int emu_download(void *host_dst, const void *src, size_t bytes)
{
    return emu_copy(host_dst, src, bytes, 0);
}

static int emu_finish(void)
{
    pthread_mutex_lock(&emu.mu);
    int failed = emu.failed;
    emu.failed = 0;
    pthread_mutex_unlock(&emu.mu);
    return failed ? MODEL_ERR_CUDA : MODEL_OK;
}

static pthread_once_t emu_once = PTHREAD_ONCE_INIT;
static model__backend_t emu_table;

static void emu_make(void)
{
    emu_table = *model__backend_cpu();
    emu_table.name = "cuda (emulated)";
    emu_table.alloc = emu_alloc;
    emu_table.release = emu_release;
    emu_table.upload = emu_upload;
    emu_table.download = emu_download;
    emu_table.finish = emu_finish;
}

const model__backend_t *model__backend_emu(void)
{
    pthread_once(&emu_once, emu_make);
    return &emu_table;
}
