#!/bin/sh
# test/hvd_env_bad.sh: bad values of hvd's variables, one launch each of
# test_hvd_env at 2 ranks through test/mpirun.sh: hvd_init must fail with
# HVD_ERR_ARG (checked by the program) and say on stderr which variable.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup hvd_env
for setting in HVD_FUSION_THRESHOLD=12x HVD_FUSION_THRESHOLD=-1 \
    HVD_FUSION_THRESHOLD=lots HVD_CYCLE_TIME=-1 HVD_CYCLE_TIME=fast \
    HVD_STALL_CHECK_TIME=-5 HVD_STALL_CHECK_TIME=1s \
    HVD_STALL_SHUTDOWN_TIME=never HVD_LOG_LEVEL=loud HVD_BIND=everywhere \
    HVD_INTRANODE=tcp HVD_HIERARCHICAL_ALLREDUCE=yes \
    HVD_RING_SEGMENT_BYTES=12x HVD_SHM_SEGMENT_BYTES=1 \
    HVD_ALLREDUCE_ALGO=fastest; do
    name=${setting%%=*}
    script_launch "$setting" 2 test/test_hvd_env "$setting" bad
    grep -q "$name" "$dir/err" || {
        echo "FAIL: $setting: stderr never names $name" >&2
        rc=1
    }
done
script_finish hvd_env_bad
