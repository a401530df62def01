#!/bin/sh
# test/check_layers.sh: dependencies point one way (shared/DESIGN.md):
# nothing under ring/ includes hvd/, nothing under models/ includes mpi.h.
cd "${srcdir:-.}" || exit 99
rc=0
for f in $(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]hvd/' \
               ring 2>/dev/null); do
    echo "FAIL: $f includes hvd/: ring/ must not depend on hvd/"
    rc=1
done
for f in $(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]mpi\.h' \
               models 2>/dev/null); do
    echo "FAIL: $f includes mpi.h: models/ must not depend on MPI"
    rc=1
done
test $rc -eq 0 && echo "layers ok"
exit $rc
