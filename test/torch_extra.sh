#!/bin/sh
# test/torch_extra.sh: hvd.torch where it does what Horovod does beyond
# test/torch_api.sh (test/torch_extra.py says what it checks), at 1, 2
# and 3 ranks on CPU tensors, and at 1 rank with the emulated device
# (HVD_DEVICE_EMULATE), which cuda_built() must not take for a CUDA
# build. Runs the Python that has PyTorch (script_torch_python); skips
# (77) when none has it.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir,
# PYTHON.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup torch_extra
script_torch_python || { echo "SKIP: hvd.torch needs it"; exit 77; }
# Whether this build has CUDA, as configure decided it.
built=$(sed -n 's/^DEFS = .*-DHVD_HAVE_CUDA=\([01]\).*/\1/p' \
    "${abs_top_builddir:-.}/Makefile")
test -n "$built" || { echo "no HVD_HAVE_CUDA in the Makefile's DEFS" >&2
    exit 99; }
for np in 1 2 3; do
    script_launch "torch_extra.py np=$np" $np "$python" \
        "$src/test/torch_extra.py" --cuda-built "$built"
done
HVD_DEVICE_EMULATE=1
export HVD_DEVICE_EMULATE
script_launch "torch_extra.py np=1 emulated" 1 "$python" \
    "$src/test/torch_extra.py" --cuda-built "$built"
script_finish torch_extra
