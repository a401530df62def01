#!/usr/bin/env python3
"""test/shared_lib.py LIBHVD: libhvd.so loaded at run time, as hvd.torch
will load it (ctypes, no compiled extension), under mpirun: hvd_init with
no arguments, the ranks' numbers, allreduces of float32 (sum, average),
int32 (min, max) and float64 (product), an async one waited for, a
broadcast, an error status for a bad call (not a crash) and its message
from hvd_last_error, hvd_shutdown.
Prints "shared_lib n=N: ok" on rank 0; exits 1 on the first wrong value."""
import ctypes
import sys

FLOAT32, FLOAT64, INT32 = 0, 1, 4       # hvd_dtype_t
SUM, AVERAGE, MIN, MAX, PRODUCT = range(5)  # hvd_op_t


def main():
    # RTLD_GLOBAL: Open MPI loads its plugins with dlopen, and they look
    # for libmpi's symbols in the global scope.
    lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
    lib.hvd_strerror.restype = ctypes.c_char_p
    lib.hvd_last_error.restype = ctypes.c_char_p
    size_t = ctypes.c_size_t

    def check(status, what):
        if status != 0:
            sys.exit("shared_lib: %s: %s" % (what, lib.hvd_strerror(status).decode()))

    check(lib.hvd_init(None, None), "hvd_init")
    rank, size = lib.hvd_rank(), lib.hvd_size()
    if not 0 <= rank < size or lib.hvd_local_size() < 1:
        sys.exit("shared_lib: rank %d of %d" % (rank, size))
    n = 1000
    failed = []

    def expect(what, got, want):
        if list(got) != list(want):
            failed.append("%s: rank %d got %s..., want %s..." %
                          (what, rank, list(got)[:3], list(want)[:3]))

    def allreduce(ctype, dtype, op, values, name):
        buf = (ctype * n)(*values)
        check(lib.hvd_allreduce(buf, buf, size_t(n), dtype, op, name.encode()),
              name)
        return buf

    ranks = range(size)
    f = allreduce(ctypes.c_float, FLOAT32, SUM, [rank + i for i in range(n)], "f32.sum")
    expect("f32 sum", f, [sum(r + i for r in ranks) for i in range(n)])
    f = allreduce(ctypes.c_float, FLOAT32, AVERAGE, [2.0 * rank] * n, "f32.avg")
    expect("f32 average", f, [float(size - 1)] * n)
    i32 = allreduce(ctypes.c_int32, INT32, MIN, [rank - i for i in range(n)], "i32.min")
    expect("i32 min", i32, [-i for i in range(n)])
    i32 = allreduce(ctypes.c_int32, INT32, MAX, [rank * i for i in range(n)], "i32.max")
    expect("i32 max", i32, [(size - 1) * i for i in range(n)])
    d = allreduce(ctypes.c_double, FLOAT64, PRODUCT, [2.0] * n, "f64.prod")
    expect("f64 product", d, [2.0 ** size] * n)

    a = (ctypes.c_float * n)(*([1.0] * n))
    handle = ctypes.c_void_p()
    check(lib.hvd_allreduce_async(a, a, size_t(n), FLOAT32, SUM, b"async",
                                  ctypes.byref(handle)), "hvd_allreduce_async")
    check(lib.hvd_wait(handle), "hvd_wait")
    expect("async sum", a, [float(size)] * n)

    b = (ctypes.c_int32 * n)(*([rank * 10 + 7] * n))
    check(lib.hvd_broadcast(b, size_t(n), INT32, size - 1, b"bcast"), "hvd_broadcast")
    expect("broadcast", b, [(size - 1) * 10 + 7] * n)

    # A bad call returns an error status (HVD_ERR_ARG), it does not abort,
    # and its message is there to raise (hvd_last_error).
    if lib.hvd_allreduce(a, a, size_t(n), 99, SUM, b"bad.dtype") == 0:
        failed.append("a bad dtype was taken")
    message = lib.hvd_last_error().decode()
    if message != "hvd_allreduce: unknown dtype":
        failed.append("hvd_last_error after a bad dtype: %r" % message)

    for line in failed:
        print("FAIL:", line, file=sys.stderr)
    check(lib.hvd_barrier(), "hvd_barrier")
    check(lib.hvd_shutdown(), "hvd_shutdown")
    if failed:
        sys.exit(1)
    if rank == 0:
        print("shared_lib n=%d: ok" % size)


main()
