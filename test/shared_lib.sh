#!/bin/sh
# test/shared_lib.sh: libhvd.so (issue 24's first step). It exports hvd's
# public API and nothing else (hvd/libhvd.map), and links with nothing
# left undefined (-Wl,--no-undefined);
# test/shared_lib.py loads it with Python's ctypes, as hvd.torch will, and
# runs collectives through it at 1, 2 and 3 ranks. Skips (77) without a
# python3 that has ctypes.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup shared_lib
lib=${abs_top_builddir:-.}/libhvd.so
if ! python3 -c 'import ctypes' > /dev/null 2>&1; then
    echo "SKIP: no python3 with ctypes"
    exit 77
fi
test -r "$lib" || { echo "FAIL: $lib not built" >&2; exit 1; }
for sym in hvd_init hvd_shutdown hvd_rank hvd_size hvd_allreduce_async \
    hvd_wait hvd_broadcast hvd_allgather hvd_dist_opt_create \
    ring_ctx_create ring_ctx_allreduce; do
    nm -D --defined-only "$lib" | grep -q " T $sym\$" ||
        { echo "FAIL: libhvd.so does not export $sym" >&2; rc=1; }
done
# The layers' own names (two underscores) stay inside (hvd/libhvd.map).
inside=$(nm -D --defined-only "$lib" | grep -E ' [A-Z] (hvd|ring|model)__')
test -z "$inside" ||
    { echo "FAIL: libhvd.so exports internal names: $inside" >&2; rc=1; }
for np in 1 2 3; do
    script_launch "shared_lib.py np=$np" $np test/shared_lib.py "$lib"
done
script_finish shared_lib
