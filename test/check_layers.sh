#!/bin/sh
# test/check_layers.sh: dependencies point one way (shared/DESIGN.md):
# nothing under ring/ includes hvd/, nothing under models/ includes mpi.h,
# nothing under hvd/ includes models/ (hvd wraps an optimizer through its
# own interface), nothing under bench/ includes examples/; prog/, what the
# programs of examples/, bench/ and test/ share, includes none of the
# layers above ring/.
cd "${srcdir:-.}" || exit 99
rc=0
# forbid FOLDER INCLUDED WHY: "FAIL: FILE:LINE: the #include: WHY" for
# each #include under FOLDER of INCLUDED (an extended regex: a path's
# start or a header's name).
forbid() {
    found=$(grep -rnE --include='*.[ch]' --include='*.cu' \
        "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]$2" "$1" \
        2>/dev/null) || return 0
    echo "$found" | sed "s|\$|: $3|; s|^|FAIL: |"
    rc=1
}
forbid ring 'hvd/' "ring/ must not depend on hvd/"
forbid models 'mpi\.h' "models/ must not depend on MPI"
forbid hvd 'models/' "hvd/ must not depend on models/"
forbid bench 'examples/' "bench/ must not depend on examples/"
forbid prog '(hvd|models|examples|bench|test)/' \
    "prog/ depends on libc and ring/ only"
test $rc -eq 0 && echo "layers ok"
exit $rc
