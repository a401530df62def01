#!/bin/sh
# test/mpirun.sh SPEC: run one multi-rank test for automake's harness.
# SPEC is a one-line file "NP PROGRAM [ARGS...]", PROGRAM relative to the
# build directory, or absolute. Exit codes: the program's own, 77 (skip)
# without mpirun, 99 (hard error) when mpirun cannot start even one rank
# or PROGRAM is missing.
# Environment: MPIRUN (from configure), HVD_TEST_TIMEOUT (seconds, 600).

spec=$1
read -r np prog args < "$spec"
test -n "$prog" || { echo "$spec: want 'NP PROGRAM [ARGS...]'" >&2; exit 99; }
case $prog in
/*) ;;  # an interpreter, e.g. test/torch_api.sh's python
*) prog=${abs_top_builddir:-.}/$prog ;;
esac
timeout=${HVD_TEST_TIMEOUT:-600}

if test -z "$MPIRUN" || ! command -v "$MPIRUN" > /dev/null 2>&1; then
    echo "SKIP: no mpirun (install openmpi-bin and re-run configure)"
    exit 77
fi
test -x "$prog" || { echo "$prog: not built" >&2; exit 99; }

# Open MPI refuses root and more ranks than cores unless told; the others
# (MPICH's hydra) take neither flag.
if "$MPIRUN" --version 2>&1 | grep -q "Open MPI"; then
    set -- --allow-run-as-root --oversubscribe --bind-to none \
        --mca mpi_yield_when_idle 1
else
    set --
fi

if ! timeout 60 "$MPIRUN" "$@" -np 1 true > /dev/null 2>&1; then
    echo "ERROR: '$MPIRUN $* -np 1 true' fails: MPI cannot start" >&2
    timeout 60 "$MPIRUN" "$@" -np 1 true
    exit 99
fi

echo "$MPIRUN $* -np $np $prog $args"
# $args is split into words on purpose: the spec holds no quoting.
# shellcheck disable=SC2086
timeout "$timeout" "$MPIRUN" "$@" -np "$np" "$prog" $args
rc=$?
test $rc -eq 124 && echo "FAIL: timed out after $timeout s" >&2
exit $rc
