#!/bin/sh
# test/hvd_env_bad.sh: bad values of hvd's variables, one launch each of
# test_hvd_env at 2 ranks through test/mpirun.sh: hvd_init must fail with
# HVD_ERR_ARG (checked by the program) and stderr hold the message of
# test/README.md's bad-input table, naming the variable and its value. An
# HVD_TIMELINE that cannot be written fails rank 0's hvd_init alone (1
# rank here). Every variable set to "" is taken as unset: hvd_init
# succeeds, collectives work, and hvd says nothing.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup hvd_env

# refused NAME=VALUE TAIL [NP]: test_hvd_env NAME=VALUE bad at NP (2)
# ranks passes, and stderr holds NAME="VALUE"TAIL (a fixed string).
refused() {
    name=${1%%=*} value=${1#*=}
    script_launch "$name" "${3:-2}" test/test_hvd_env "$1" bad
    grep -q -F -- "$name=\"$value\"$2" "$dir/err" || {
        echo "FAIL: $name: stderr lacks '$name=\"VALUE\"$2'" >&2
        rc=1
    }
}
hvd=" is not valid: expected"
ring=": expected bytes from"
refused HVD_FUSION_THRESHOLD=12x "$hvd bytes such as 0, 64K or 128M"
refused HVD_FUSION_THRESHOLD=-1 "$hvd bytes such as 0, 64K or 128M"
refused HVD_FUSION_THRESHOLD=lots "$hvd bytes such as 0, 64K or 128M"
refused HVD_CYCLE_TIME=-1 "$hvd milliseconds from 0 to 60000"
refused HVD_CYCLE_TIME=fast "$hvd milliseconds from 0 to 60000"
refused HVD_CYCLE_TIME=60001 "$hvd milliseconds from 0 to 60000"
refused HVD_STALL_CHECK_TIME=-5 "$hvd seconds, 0 or more"
refused HVD_STALL_CHECK_TIME=1s "$hvd seconds, 0 or more"
refused HVD_STALL_SHUTDOWN_TIME=never "$hvd seconds, 0 (off) or more"
refused HVD_LOG_LEVEL=loud "$hvd error, warning, info or debug"
refused HVD_BIND=everywhere "$hvd core, numa or none"
refused HVD_INTRANODE=tcp "$hvd auto, shm or ring"
refused HVD_HIERARCHICAL_ALLREDUCE=yes "$hvd 0 or 1"
refused HVD_SPIN_TIME=-1 "$hvd milliseconds from 0 to 60000"
refused HVD_SPIN_TIME=1ms "$hvd milliseconds from 0 to 60000"
refused HVD_RING_SEGMENT_BYTES=12x "$ring 64 to 1G"
refused HVD_RING_SEGMENT_BYTES=1073741825 "$ring 64 to 1G"
refused HVD_RING_SEGMENT_BYTES=2G "$ring 64 to 1G"
refused HVD_RING_SMALL_BYTES=2147483648 "$ring 0 to 1G"
refused HVD_SHM_SEGMENT_BYTES=1 "$ring 64 to 1G"
refused HVD_RING_STAGING_BYTES=32 "$ring 64 to 1G"
refused HVD_RING_IPC_BYTES=2G "$ring 64 to 1G"
refused HVD_RING_IPC_ONESHOT=1T "$ring 0 to 1G"
refused HVD_RING_IPC=on ": expected auto or off"
refused HVD_SHM_STREAM=yes ": expected auto, on or off"
refused HVD_RING_IPC_WAIT=gpu ": expected device or host"
refused HVD_ALLREDUCE_ALGO=fastest ": expected auto, ring, rdb or rhd"
# A path of 4096 bytes: one more than the setting holds with its NUL.
long=$(head -c 4096 /dev/zero | tr '\0' x)
refused "HVD_TIMELINE=$long" "$hvd a file path"

# A timeline rank 0 cannot write: its hvd_init alone fails.
script_launch "HVD_TIMELINE unwritable" 1 test/test_hvd_env \
    "HVD_TIMELINE=$dir/none/t.json" bad
grep -q -F "hvd[0] error: HVD_TIMELINE=$dir/none/t.json: cannot write it" \
    "$dir/err" || {
    echo "FAIL: HVD_TIMELINE unwritable: no \"cannot write it\"" >&2
    rc=1
}

# Every variable empty: the defaults, and not a word from hvd.
empty=
for name in HVD_FUSION_THRESHOLD HVD_CYCLE_TIME HVD_TIMELINE \
    HVD_STALL_CHECK_TIME HVD_STALL_SHUTDOWN_TIME HVD_LOG_LEVEL HVD_BIND \
    HVD_INTRANODE HVD_HIERARCHICAL_ALLREDUCE HVD_SPIN_TIME HVD_ALLREDUCE_ALGO \
    HVD_RING_SEGMENT_BYTES HVD_RING_SMALL_BYTES HVD_SHM_SEGMENT_BYTES \
    HVD_SHM_STREAM HVD_RING_STAGING_BYTES HVD_RING_IPC_BYTES HVD_RING_IPC \
    HVD_RING_IPC_ONESHOT HVD_RING_IPC_WAIT; do
    empty="$empty $name="
done
# shellcheck disable=SC2086 # one word per setting
script_launch "all empty" 2 test/test_hvd_env $empty good
if grep "hvd" "$dir/err"; then
    echo "FAIL: all empty: hvd said the above" >&2
    rc=1
fi
script_finish hvd_env_bad
