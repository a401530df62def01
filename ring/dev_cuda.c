/* ring/dev_cuda.c: placeholder, replaced by the CUDA implementation of
 * ring/dev.h (written on another branch); it only lets ring/dev.c link in
 * a CUDA build meanwhile. ring__dev() hands it out on a GPU node, where
 * until then only ring_is_device_memory asks, and that calls no function
 * of this table. */
#include "ring/dev.h"

const ring__dev_t ring__dev_cuda = {.name = "cuda"};
