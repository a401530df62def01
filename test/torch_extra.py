"""test/torch_extra.py: what hvd.torch does as Horovod does beyond
test/torch_api.py, under mpirun at any rank count on CPU tensors.

Checks: broadcast_object and allgather_object of what only cloudpickle
pickles (a lambda, a local class: carried when cloudpickle is there,
else refused on every rank), and of what nothing pickles (a lock):
every rank raises, naming the rank, instead of the others waiting
forever, and the next call works.

Prints "torch_extra n=N: ok (K checks)" on rank 0 and exits 0, or prints
each failure ("FAIL: ...") and exits 1 on every rank."""

import importlib.util
import os
import pickle
import sys
import threading
import traceback

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402  (after the thread count)

import hvd.torch as hvd  # noqa: E402

HAVE_CLOUDPICKLE = importlib.util.find_spec("cloudpickle") is not None
torch.set_num_threads(1)
FAILURES = []
CHECKS = [0]


def check(condition, what):
    CHECKS[0] += 1
    if not condition:
        FAILURES.append(what)


def expect_raises(errors, call, what, contains=None):
    """call() must raise one of errors (with contains in its text)."""
    try:
        call()
    except errors as e:
        check(contains is None or contains in str(e),
              "%s: message %r lacks %r" % (what, str(e), contains))
        return
    except Exception as e:  # pylint: disable=broad-except
        check(False, "%s: raised %s: %s" % (what, type(e).__name__, e))
        return
    check(False, "%s: did not raise" % what)


def objects():
    rank, size = hvd.rank(), hvd.size()
    root = size - 1

    class Local:
        def __init__(self, value):
            self.value = value

    offset = rank * 10
    shared = (lambda x: x + offset, Local(rank))
    if HAVE_CLOUDPICKLE:
        add, local = hvd.broadcast_object(shared, root_rank=root)
        check(add(1) == 1 + root * 10 and local.value == root,
              "broadcast_object of a lambda and a local class")
        everyone = hvd.allgather_object(shared)
        check([f(1) for f, _ in everyone] == [1 + r * 10 for r in
                                              range(size)] and
              [o.value for _, o in everyone] == list(range(size)),
              "allgather_object of lambdas and local classes")
    else:
        expect_raises(pickle.PicklingError,
                      lambda: hvd.broadcast_object(shared, root_rank=root),
                      "broadcast_object of a lambda without cloudpickle",
                      "rank %d" % root)
    # A lock pickles with neither: every rank raises, none waits.
    expect_raises(pickle.PicklingError,
                  lambda: hvd.broadcast_object(threading.Lock(), root),
                  "broadcast_object of a lock",
                  "rank %d cannot pickle" % root)
    check(hvd.broadcast_object(["after", rank], root) == ["after", root],
          "broadcast_object after one that failed")
    mine = threading.Lock() if rank == root else rank
    expect_raises(pickle.PicklingError, lambda: hvd.allgather_object(mine),
                  "allgather_object with a lock on rank %d" % root,
                  "rank %d cannot pickle" % root)
    expect_raises(pickle.PicklingError,
                  lambda: hvd.allgather_object(threading.Lock()),
                  "allgather_object with a lock on every rank",
                  "ranks %s" % ", ".join(str(r) for r in range(size))
                  if size > 1 else "rank 0")
    check(hvd.allgather_object(rank) == list(range(size)),
          "allgather_object after ones that failed")


def main():
    hvd.init()
    for test in (objects,):
        try:
            test()
        except Exception:  # pylint: disable=broad-except
            FAILURES.append("%s raised:\n%s" % (test.__name__,
                                                traceback.format_exc()))
    failed = int(hvd.allreduce(torch.tensor([len(FAILURES)]), op=hvd.Sum,
                               name="failures"))
    rank, size = hvd.rank(), hvd.size()
    for line in FAILURES:
        print("FAIL: rank %d: %s" % (rank, line), file=sys.stderr)
    if rank == 0 and not failed and not FAILURES:
        print("torch_extra n=%d: ok (%d checks%s)" % (
            size, CHECKS[0], "" if HAVE_CLOUDPICKLE else
            "; without cloudpickle"))
    sys.exit(1 if failed or FAILURES else 0)


if __name__ == "__main__":
    main()
