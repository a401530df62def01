#!/bin/sh
# test/torch_api_gpu.sh: test/torch_api.sh on CUDA tensors, each rank on
# its GPU (ranks share it when there is one): run by scripts/gpu-check;
# skips (77) where PyTorch sees no GPU.
TORCH_API_ARGS=--cuda
export TORCH_API_ARGS
exec sh "${srcdir:-.}/test/torch_api.sh"
