#!/bin/sh
# test/hvd_stall.sh: a collective that rank 1 never makes (test_hvd_stall)
# at 2 and 3 ranks, through test/mpirun.sh. Passes when every rank's checks
# pass and stderr has a line naming "stalled.x" and what is "missing".
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
dir=$(mktemp -d "${TMPDIR:-/tmp}/hvd_stall.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT
rc=0
for np in 2 3; do
    echo "$np test/test_hvd_stall" > "$dir/spec"
    sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" 2> "$dir/err"
    status=$?
    cat "$dir/err" >&2
    case $status in
    0) ;;
    77 | 99) exit $status ;;
    *) echo "FAIL: np=$np: test_hvd_stall exited $status" >&2; rc=1 ;;
    esac
    if ! grep 'stalled\.x' "$dir/err" | grep -qi missing; then
        echo "FAIL: np=$np: no line on stderr names \"stalled.x\" and" \
            "\"missing\"" >&2
        rc=1
    fi
done
test $rc -eq 0 && echo "hvd_stall ok"
exit $rc
