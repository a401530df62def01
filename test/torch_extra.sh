#!/bin/sh
# test/torch_extra.sh: hvd.torch where it does what Horovod does beyond
# test/torch_api.sh (test/torch_extra.py says what it checks), at 1, 2
# and 3 ranks on CPU tensors. Runs the Python that has PyTorch
# (script_torch_python); skips (77) when none has it.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir,
# PYTHON.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup torch_extra
script_torch_python || { echo "SKIP: hvd.torch needs it"; exit 77; }
for np in 1 2 3; do
    script_launch "torch_extra.py np=$np" $np "$python" \
        "$src/test/torch_extra.py"
done
script_finish torch_extra
