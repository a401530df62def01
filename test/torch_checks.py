"""test/torch_checks.py: what test/torch_api.py and test/torch_extra.py
share: checks counted and failures kept on each rank, a shard of the
global batch, and the run of a script's tests, which every rank ends
alike (one allreduce of the failures' count).

Imported after the script has set OMP_NUM_THREADS (it imports torch)."""

import sys
import traceback

import torch

import hvd.torch as hvd

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


def shard(t):
    """This rank's rows of a global batch of t.shape[0] (a multiple of
    the ranks)."""
    per = t.shape[0] // hvd.size()
    return t[hvd.rank() * per:(hvd.rank() + 1) * per]


def run(tests):
    """Each test in turn, one that raises counted as a failure; returns
    (the failures over all ranks, rank, size), read while hvd is up."""
    for test in tests:
        try:
            test()
        except Exception:  # pylint: disable=broad-except
            FAILURES.append("%s raised:\n%s" % (test.__name__,
                                                traceback.format_exc()))
    failed = int(hvd.allreduce(torch.tensor([len(FAILURES)]), op=hvd.Sum,
                               name="failures"))
    return failed, hvd.rank(), hvd.size()


def finish(script, failed, rank, size, note=""):
    """Prints this rank's failures, or rank 0 "SCRIPT n=N: ok (K
    checks...)" when no rank has any, and exits 1 or 0 alike on every
    rank."""
    for line in FAILURES:
        print("FAIL: rank %d: %s" % (rank, line), file=sys.stderr)
    if rank == 0 and not failed and not FAILURES:
        print("%s n=%d: ok (%d checks%s)" % (script, size, CHECKS[0], note))
    sys.exit(1 if failed or FAILURES else 0)
