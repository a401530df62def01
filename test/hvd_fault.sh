#!/bin/sh
# test/hvd_fault.sh: a rank that exits in the middle of training ends the
# job with an error on the others, within a bounded time: test_hvd_fault at
# 2 and 3 ranks, with allreduces through shared memory and around the ring.
# Passes when every launch fails (not 0, not a timeout) in under 60 s and
# the dying rank said it was going.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup hvd_fault
limit=60
for run in 2:shm 3:shm 2:ring 3:ring; do
    np=${run%%:*} path=${run#*:}
    echo "$np test/test_hvd_fault" > "$dir/spec"
    start=$(date +%s)
    HVD_INTRANODE=$path HVD_TEST_TIMEOUT=$((limit * 2)) \
        sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > "$dir/out" 2> "$dir/err"
    status=$?
    took=$(($(date +%s) - start))
    case $status in 77 | 99) cat "$dir/err" >&2; exit $status ;; esac
    echo "np=$np HVD_INTRANODE=$path: exit $status after $took s"
    if test "$status" -eq 0 || test "$status" -eq 124 ||
        test "$took" -ge "$limit"; then
        echo "FAIL: np=$np $path: the job did not end with an error within" \
            "$limit s (exit $status, $took s)" >&2
        cat "$dir/err" >&2
        rc=1
    elif ! grep -q "rank $((np - 1)) exits now" "$dir/err"; then
        echo "FAIL: np=$np $path: the dying rank never said so" >&2
        rc=1
    fi
done
script_finish hvd_fault
