#!/bin/sh
# test/hvd_env_bad.sh: bad values of hvd's variables, one launch each of
# test_hvd_env at 2 ranks through test/mpirun.sh: hvd_init must fail with
# HVD_ERR_ARG (checked by the program) and say on stderr which variable.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
dir=$(mktemp -d "${TMPDIR:-/tmp}/hvd_env.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
rc=0
for setting in HVD_FUSION_THRESHOLD=12x HVD_FUSION_THRESHOLD=-1 \
    HVD_FUSION_THRESHOLD=lots HVD_CYCLE_TIME=-1 HVD_CYCLE_TIME=fast \
    HVD_STALL_CHECK_TIME=-5 HVD_STALL_CHECK_TIME=1s \
    HVD_STALL_SHUTDOWN_TIME=never HVD_LOG_LEVEL=loud; do
    name=${setting%%=*}
    echo "2 test/test_hvd_env $setting bad" > "$dir/spec"
    sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" 2> "$dir/err"
    status=$?
    cat "$dir/err" >&2
    case $status in
    0) ;;
    77 | 99) exit $status ;;
    *) echo "FAIL: $setting: test_hvd_env exited $status" >&2; rc=1 ;;
    esac
    grep -q "$name" "$dir/err" || {
        echo "FAIL: $setting: stderr never names $name" >&2
        rc=1
    }
done
test $rc -eq 0 && echo "hvd_env_bad ok"
exit $rc
