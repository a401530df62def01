#!/bin/sh
# test/shm_room.sh: a node whose shared memory has too little room for
# hvd's window (a container's /dev/shm: Docker's is 64 MB), which Open
# MPI, asked for the window, failed on one rank and left the others
# waiting (or aborted the job). Through test/mpirun.sh, test_hvd_env's
# sums at 2 and 3 ranks, with Open MPI's osc_sm_backing_directory (where
# ring/shm_room.c looks too):
#   /proc (no free bytes): the allreduces go over MPI, sums right, and
#     rank 0 says so; with HVD_INTRANODE=shm hvd_init fails with
#     HVD_ERR_NOMEM on every rank, saying why;
#   a tmpfs of 24 MiB, where this machine lets root mount one: the
#     window's slabs shrink from HVD_FUSION_THRESHOLD's to what fits, and
#     rank 0 says to what.
# And a backing directory named that does not exist: no room, said, the
# allreduces over MPI (everywhere). The /proc and tmpfs cases run where
# their premise holds (/proc reports no free bytes; the mount).
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup shm_room
trap 'umount "$dir/shm" 2> /dev/null || umount -l "$dir/shm" 2> /dev/null
    rm -rf "$dir"' EXIT
trap 'exit 1' INT TERM HUP
# hvd's settings as the cases assume them, whatever the caller's
good="HVD_INTRANODE=auto HVD_FUSION_THRESHOLD=128M HVD_LOG_LEVEL=warning good"

# says WHAT TEXT: stderr of the last launch holds TEXT (a fixed string).
says() {
    grep -q -F -- "$2" "$dir/err" || {
        echo "FAIL: $1: stderr lacks '$2'" >&2
        rc=1
    }
}

if [ "$(stat -f -c %a /proc 2> /dev/null)" = 0 ]; then
    OMPI_MCA_osc_sm_backing_directory=/proc
    export OMPI_MCA_osc_sm_backing_directory
    for np in 2 3; do
        # shellcheck disable=SC2086
        script_launch "np=$np, no room" $np test/test_hvd_env $good
        says "np=$np, no room" "/proc has too little room for the shared"
        says "np=$np, no room" "allreduces within the node go over MPI"
    done
    script_launch "HVD_INTRANODE=shm, no room" 2 test/test_hvd_env \
        HVD_INTRANODE=shm nomem
    says "HVD_INTRANODE=shm, no room" "HVD_INTRANODE=shm: a node's /proc"
else
    echo "note: /proc reports free bytes here; its cases did not run"
fi
# A backing directory named that cannot be measured (Open MPI could not
# make the window there either): no room, said, and over MPI.
OMPI_MCA_osc_sm_backing_directory=$dir/missing
export OMPI_MCA_osc_sm_backing_directory
# shellcheck disable=SC2086
script_launch "a missing directory" 2 test/test_hvd_env $good
says "a missing directory" "$dir/missing (osc_sm_backing_directory): No such"
says "a missing directory" "allreduces within the node go over MPI"

mkdir "$dir/shm" || exit 99
if mount -t tmpfs -o size=24m tmpfs "$dir/shm" 2> /dev/null; then
    OMPI_MCA_osc_sm_backing_directory=$dir/shm
    export OMPI_MCA_osc_sm_backing_directory
    # 2 x 128 MiB do not fit; 2 x 8 MiB do
    # shellcheck disable=SC2086
    script_launch "24 MiB" 2 test/test_hvd_env $good
    says "24 MiB" "they are 8388608 bytes"
else
    echo "note: no tmpfs could be mounted here; the shrinking case did" \
        "not run"
fi
script_finish shm_room
