/* ring/dev.c: which device this process uses (ring_dev, ring/ring.h),
 * chosen once from HVD_DEVICE_EMULATE and, in a CUDA build, whether a GPU
 * is visible. The choice is cached: the variable is read once, and a CUDA
 * build without a GPU makes no CUDA call after the first look.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if HVD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#include "ring/dev.h"
#include "ring/ring_internal.h"

static pthread_once_t ring__dev_once = PTHREAD_ONCE_INIT;
static const ring_dev_t *ring__dev_chosen;

/* The CUDA table when a GPU is visible, else NULL. */
static const ring_dev_t *ring__dev_real(void)
{
#if HVD_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return &ring__dev_cuda;
    (void)cudaGetLastError(); /* no driver or no GPU: not sticky */
#endif
    return NULL;
}

/* HVD_DEVICE_EMULATE's value as a mode (dev.h lists them): 0, or -1 when
 * it is not one. */
static int ring__dev_parse(const char *text, ring__emu_mode_t *mode,
                           unsigned long *seed)
{
    char *end;
    *seed = 1;
    if (strcmp(text, "1") == 0) {
        *mode = RING__EMU_PLAIN;
    } else if (strcmp(text, "guard") == 0) {
        *mode = RING__EMU_GUARD;
    } else if (strcmp(text, "delay") == 0) {
        *mode = RING__EMU_DELAY;
    } else if (strncmp(text, "delay:", 6) == 0 && text[6] >= '0' &&
               text[6] <= '9') {
        *mode = RING__EMU_DELAY;
        *seed = strtoul(text + 6, &end, 10);
        if (*end != '\0') return -1;
    } else {
        return -1;
    }
    return 0;
}

static void ring__dev_choose(void)
{
    const char *text = getenv("HVD_DEVICE_EMULATE");
    ring__emu_mode_t mode;
    unsigned long seed;
    if (!text || !*text || strcmp(text, "0") == 0) { /* empty: unset */
        ring__dev_chosen = ring__dev_real();
    } else if (ring__dev_parse(text, &mode, &seed) == 0) {
        ring__dev_emu_configure(mode, seed);
        ring__dev_chosen = &ring__dev_emulated;
    } else {
        ring__log("HVD_DEVICE_EMULATE=\"%s\" is not one of 0, 1, delay, "
                  "delay:SEED (SEED a decimal number) or guard: no device "
                  "is used",
                  text);
    }
}

const ring_dev_t *ring_dev(void)
{
    pthread_once(&ring__dev_once, ring__dev_choose);
    return ring__dev_chosen;
}
