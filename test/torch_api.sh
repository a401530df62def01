#!/bin/sh
# test/torch_api.sh: hvd.torch, Horovod's PyTorch API over libhvd.so
# (test/torch_api.py says what it checks), at 1, 2, 3 and 4 ranks on CPU
# tensors; with TORCH_API_ARGS=--cuda, on the GPU (scripts/gpu-check).
# Runs the Python that has PyTorch: $PYTHON, else Debian's /usr/bin/python3
# (python3-torch), else python3 on PATH; skips (77) when none has it.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir,
# PYTHON, TORCH_API_ARGS.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup torch_api
python=
for candidate in ${PYTHON:-} /usr/bin/python3 python3; do
    if "$candidate" -c 'import torch' > /dev/null 2>&1; then
        python=$(command -v "$candidate")
        break
    fi
done
if test -z "$python"; then
    echo "SKIP: no python3 with torch (scripts/install-deps installs python3-torch)"
    exit 77
fi
src=$(cd "${srcdir:-.}" && pwd)
HVD_LIBRARY=$(cd "${abs_top_builddir:-.}" && pwd)/libhvd.so
PYTHONPATH=$src${PYTHONPATH:+:$PYTHONPATH}
export HVD_LIBRARY PYTHONPATH
for np in 1 2 3 4; do
    script_launch "torch_api.py np=$np" $np "$python" "$src/test/torch_api.py" \
        ${TORCH_API_ARGS:-}
done
script_finish torch_api
