#!/bin/sh
# test/hvd_mismatch.sh: ranks launched with different values of a setting
# that must agree (hvd/config.c's table) fail hvd_init on every rank with
# HVD_ERR_MISMATCH, quickly, each saying which setting differs and who has
# what; values that differ only in how they are written, and settings
# that may differ, start as usual. Each case is one MPMD launch
# ("NP PROGRAM ARGS : -np NP PROGRAM ARGS") of test_hvd_env through
# test/mpirun.sh, whose timeout (30 s here) turns a hang into a failure.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup hvd_mismatch
HVD_TEST_TIMEOUT=30
export HVD_TEST_TIMEOUT
prog=test/test_hvd_env
other="${abs_top_builddir:-.}/$prog"

# differ WHAT NP1 NAME=VALUE1 NP2 NAME=VALUE2 MESSAGE: NP1 ranks with the
# first value, NP2 with the second; each of the NP1 + NP2 ranks must log
# MESSAGE (a fixed string) and see HVD_ERR_MISMATCH.
differ() {
    script_expect "$1" 0 "differs across ranks" \
        "$2" $prog "$3" mismatch : -np "$4" "$other" "$5" mismatch
    # Counted, not matched per rank: ring's log writes its "hvd[R]: "
    # prefix apart from the line, so two ranks' lines may interleave.
    said=$(grep -o -F "$6" "$dir/err" | wc -l)
    if test "$said" -ne $(($2 + $4)); then
        echo "FAIL: $1: $said of the $(($2 + $4)) ranks said '$6'" >&2
        rc=1
    fi
}

# agree WHAT NP1 ARGS1 NP2 ARGS2: both halves start and compute.
agree() {
    script_launch "$1" "$2" $prog $3 good : -np "$4" "$other" $5 good
}

# The intra-node path: one rank on shared memory, the other on the ring
# (before this check: no message, a hang).
differ intranode 1 HVD_INTRANODE=shm 1 HVD_INTRANODE=ring \
    'HVD_INTRANODE differs across ranks: rank 0 has "shm"; rank 1 has "ring"'
hier='HVD_HIERARCHICAL_ALLREDUCE differs across ranks:'
differ hierarchical 2 HVD_HIERARCHICAL_ALLREDUCE=0 \
    1 HVD_HIERARCHICAL_ALLREDUCE=1 "$hier"' ranks 0-1 have "0"; rank 2 has "1"'
# Fusion groups the same requests differently, so the ranks' reductions
# differ in size. Values are compared as parsed bytes.
fusion='HVD_FUSION_THRESHOLD differs across ranks: rank 0 has "65536";'
differ fusion 1 HVD_FUSION_THRESHOLD=64K 2 HVD_FUSION_THRESHOLD=128M \
    "$fusion"' ranks 1-2 have "134217728"'

# The same values written differently, or left to the default, agree.
agree "128M = 134217728" 1 HVD_FUSION_THRESHOLD=128M \
    1 HVD_FUSION_THRESHOLD=134217728
agree "default = 128M" 1 HVD_LOG_LEVEL=warning 1 HVD_FUSION_THRESHOLD=128M
agree "SHM = shm" 1 HVD_INTRANODE=SHM 1 HVD_INTRANODE=shm
# Settings that only tune one rank may differ.
agree "log, cycle, spin, bind" 1 "HVD_LOG_LEVEL=error HVD_CYCLE_TIME=5" \
    1 "HVD_SPIN_TIME=0 HVD_BIND=none HVD_STALL_CHECK_TIME=30"
script_finish hvd_mismatch
