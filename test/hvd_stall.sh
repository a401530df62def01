#!/bin/sh
# test/hvd_stall.sh: a collective that rank 1 never makes (test_hvd_stall)
# at 2 and 3 ranks, through test/mpirun.sh. Passes when every rank's checks
# pass and stderr has a line naming "stalled.x" and what is "missing"; and
# one that rank 1 makes 4.5 s late with no shutdown time, which must be
# warned about at least twice.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup hvd_stall
for np in 2 3; do
    script_launch "np=$np" "$np" test/test_hvd_stall
    if ! grep 'stalled\.x' "$dir/err" | grep -qi missing; then
        echo "FAIL: np=$np: no line on stderr names \"stalled.x\" and" \
            "\"missing\"" >&2
        rc=1
    fi
done
# No shutdown time: the request waits (test_hvd_stall checks that it
# neither ends nor fails while rank 1 is missing), warned each second.
script_launch "np=2 forever" 2 test/test_hvd_stall forever
warnings=$(grep -c "stall: 'stalled\.x'.*missing ranks: 1" "$dir/err")
if [ "$warnings" -lt 2 ]; then
    echo "FAIL: forever: $warnings warnings about \"stalled.x\" in 4.5 s," \
        "want one a second" >&2
    rc=1
fi
script_finish hvd_stall
