#!/bin/sh
# test/torch_api.sh: hvd.torch, Horovod's PyTorch API over libhvd.so
# (test/torch_api.py says what it checks), at 1, 2, 3 and 4 ranks on CPU
# tensors; with TORCH_API_ARGS=--cuda, on the GPU (scripts/gpu-check).
# Runs the Python that has PyTorch (script_torch_python); skips (77) when
# none has it.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir,
# PYTHON, TORCH_API_ARGS.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup torch_api
script_torch_python || { echo "SKIP: hvd.torch needs it"; exit 77; }
for np in 1 2 3 4; do
    script_launch "torch_api.py np=$np" $np "$python" "$src/test/torch_api.py" \
        ${TORCH_API_ARGS:-}
done
script_finish torch_api
