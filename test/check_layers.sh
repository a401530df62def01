#!/bin/sh
# test/check_layers.sh: dependencies point one way (shared/DESIGN.md):
# nothing under ring/ includes hvd/, nothing under models/ includes mpi.h,
# nothing under hvd/ includes models/ (hvd wraps an optimizer through its
# own interface), nothing under bench/ includes examples/; prog/, what the
# programs of examples/, bench/ and test/ share, includes none of the
# layers above ring/. And within hvd/, the files form a line (hvd/config.h
# draws it): each hvd/NAME.c or NAME.h includes only hvd/hvd.h and the
# internal headers of names at or below its own in $hvd_order, so no two
# files call each other round a circle.
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

# Bottom first; a new file of hvd/ takes its place here.
hvd_order="config events index timeline contention bind topology requests plan
coordinator execute engine api optimizer"

# level NAME: NAME's place in $hvd_order (1 is the bottom); empty if none.
level() {
    i=0
    for n in $hvd_order; do
        i=$((i + 1))
        test "$n" = "$1" && { echo $i; return; }
    done
}

# The NAME of each line #include "hvd/NAME.h".
include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*"hvd/\([a-z_]*\)\.h".*'
for f in hvd/*.c hvd/*.h; do
    name=${f#hvd/}
    name=${name%.*}
    test "$name" = hvd && continue # the public header
    own=$(level "$name")
    if test -z "$own"; then
        echo "FAIL: $f: $name is not in test/check_layers.sh's hvd_order"
        rc=1
        continue
    fi
    for inc in $(sed -n "s|$include_re|\\1|p" "$f"); do
        test "$inc" = hvd && continue
        lv=$(level "$inc")
        if test -z "$lv"; then
            echo "FAIL: $f includes hvd/$inc.h, which is not in" \
                "test/check_layers.sh's hvd_order"
            rc=1
        elif test "$lv" -gt "$own"; then
            echo "FAIL: $f includes hvd/$inc.h, which is above $name" \
                "in hvd's line (test/check_layers.sh's hvd_order)"
            rc=1
        fi
    done
done
test $rc -eq 0 && echo "layers ok"
exit $rc
