#!/bin/sh
# test/dev_emu.sh: test/test_dev in each mode of HVD_DEVICE_EMULATE (the
# program sets the variable from its argument): plain, delay, guard, and
# a bad value. Fails when any run fails; 99 when test_dev is not built.
# Environment: abs_top_builddir (as test/mpirun.sh).
prog=${abs_top_builddir:-.}/test/test_dev
test -x "$prog" || { echo "$prog: not built" >&2; exit 99; }
rc=0
for mode in plain delay guard bad; do
    echo "test_dev $mode"
    "$prog" $mode || { echo "FAIL: test_dev $mode" >&2; rc=1; }
done
exit $rc
