#!/bin/sh
# test/cuda_no_gpu.sh: a CUDA build where no GPU is visible runs the host
# path normally. CUDA_VISIBLE_DEVICES is emptied, which hides any GPU, so
# this holds on GPU nodes too: test_hvd's collectives pass at 2 ranks, and
# the placement rank 0 logs for each rank is a share of the cores, with
# no GPU. Skips (77) in a build without CUDA (no test/test_reduce_cuda).
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup cuda_no_gpu
if ! test -x test/test_reduce_cuda; then
    echo "SKIP: not a CUDA build"
    exit 77
fi
CUDA_VISIBLE_DEVICES=
HVD_LOG_LEVEL=info
export CUDA_VISIBLE_DEVICES HVD_LOG_LEVEL
script_launch "test_hvd with no GPU visible" 2 test/test_hvd
grep "placement: rank" "$dir/err" > "$dir/places"
if test "$(wc -l < "$dir/places")" -ne 2; then
    echo "FAIL: expected a placement line per rank from rank 0" >&2
    rc=1
elif grep -q "GPU" "$dir/places" || ! grep -q "core" "$dir/places"; then
    echo "FAIL: placement with no GPU visible should be cores only:" >&2
    cat "$dir/places" >&2
    rc=1
fi
script_finish cuda_no_gpu
