#!/bin/sh
# test/hvd_fault.sh: a rank that exits or is killed in the middle of
# training ends the job with an error on the others, within a bounded time:
# test_hvd_fault at 2 and 3 ranks, with allreduces through shared memory
# and around the ring, the last rank exiting or killed by SIGKILL; then
# examples/train_fmnist at 2 ranks with one rank killed (kill -9 from here)
# once training is under way. Passes when every launch fails (not 0, not a
# timeout) in under 60 s and the dying rank said it was going (for the
# program) or was found and killed (for the training).
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup hvd_fault
limit=60

# fault_launch WHAT NP PROGRAM [ARGS...] in the background; fault_end waits
# for it and checks how it ended.
fault_launch() {
    what=$1
    shift
    echo "$*" > "$dir/spec"
    start=$(date +%s)
    HVD_TEST_TIMEOUT=$((limit * 2)) \
        sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > "$dir/out" 2> "$dir/err" &
    job=$!
}

fault_end() {
    wait "$job"
    status=$?
    took=$(($(date +%s) - start))
    case $status in 77 | 99) cat "$dir/err" >&2; exit $status ;; esac
    echo "$what: exit $status after $took s"
    if test "$status" -eq 0 || test "$status" -eq 124 ||
        test "$took" -ge "$limit"; then
        echo "FAIL: $what: the job did not end with an error within" \
            "$limit s (exit $status, $took s)" >&2
        cat "$dir/err" >&2
        rc=1
    fi
}

for run in 2:shm:exit 3:shm:exit 2:ring:exit 3:ring:exit 2:shm:kill \
    3:ring:kill; do
    np=${run%%:*} how=${run##*:} path=${run#*:} path=${path%:*}
    HVD_INTRANODE=$path fault_launch "np=$np HVD_INTRANODE=$path $how" \
        "$np" test/test_hvd_fault "$how"
    fault_end
    said="exits"
    test "$how" = kill && said="is killed"
    if ! grep -q "rank $((np - 1)) $said now" "$dir/err"; then
        echo "FAIL: $what: the dying rank never said so" >&2
        rc=1
    fi
done

# The training program, one rank killed from outside after its first
# progress line: the ranks are the processes running its binary (mpirun's
# own command line names it too, so the binary is what tells them apart;
# /proc, not pgrep, which a minimal system may lack) with this launch's
# tag in their environment (another test's training may run beside this
# one under make -j: before, this could kill a rank of that one).
if script_have_fmnist; then
    prog=${abs_top_builddir:-.}/examples/train_fmnist
    HVD_FAULT_TAG=hvd_fault.$$
    export HVD_FAULT_TAG
    fault_launch "train_fmnist np=2, a rank killed" 2 examples/train_fmnist \
        --data "$data" --epochs 5 --progress lines
    victim=
    for _ in $(seq 1 300); do
        if grep -q "^step" "$dir/out" 2> /dev/null; then
            target=$(readlink -f "$prog")
            for exe in /proc/[0-9]*/exe; do
                pid=${exe%/exe}
                test "$(readlink "$exe" 2> /dev/null)" = "$target" &&
                    tr '\0' '\n' < "$pid/environ" 2> /dev/null |
                    grep -qx "HVD_FAULT_TAG=$HVD_FAULT_TAG" &&
                    victim=${pid#/proc/}
            done
            break
        fi
        kill -0 "$job" 2> /dev/null || break
        sleep 0.1
    done
    if test -n "$victim"; then
        kill -9 "$victim"
        echo "killed rank process $victim"
        fault_end
    else
        echo "FAIL: $what: no progress line or no rank process found" >&2
        cat "$dir/out" "$dir/err" >&2
        kill "$job" 2> /dev/null
        wait "$job"
        rc=1
    fi
else
    echo "note: no Fashion-MNIST data, the training case is left out"
fi
script_finish hvd_fault
