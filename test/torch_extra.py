"""test/torch_extra.py: what hvd.torch does as Horovod does beyond
test/torch_api.py, under mpirun at any rank count on CPU tensors.

Checks: broadcast_object and allgather_object of what only cloudpickle
pickles (a lambda, a local class: carried when cloudpickle is there,
else refused on every rank), and of what nothing pickles (a lock):
every rank raises, naming the rank, instead of the others waiting
forever, and the next call works; the DistributedOptimizer on a model
with a sparse gradient (nn.Embedding(sparse=True)), with and without
sparse_as_dense: N ranks with B/N each equal one process with B, and the
gradient stays sparse; cuda_built() answers whether libhvd.so was built
with CUDA (--cuda-built 0|1, the build's HVD_HAVE_CUDA), whatever device
the process sees.

Prints "torch_extra n=N: ok (K checks)" on rank 0 and exits 0, or prints
each failure ("FAIL: ...") and exits 1 on every rank."""

import importlib.util
import os
import pickle
import sys
import threading

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402  (after the thread count)

import hvd.torch as hvd  # noqa: E402
from torch_checks import (check, expect_raises, finish, run,  # noqa: E402
                          shard)

HAVE_CLOUDPICKLE = importlib.util.find_spec("cloudpickle") is not None
torch.set_num_threads(1)


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


def embedding_model(seed):
    torch.manual_seed(seed)
    return torch.nn.ModuleDict({
        "emb": torch.nn.Embedding(20, 4, sparse=True),
        "out": torch.nn.Linear(4, 2)}).double()


def forward(net, x):
    return net["out"](net["emb"](x).mean(1))


def embedding_batch(step):
    """The global batch of a step: 12 rows of 3 indices (some repeated
    within and across ranks), the same on every rank."""
    g = torch.Generator().manual_seed(2000 + step)
    x = torch.randint(0, 20, (12, 3), generator=g)
    y = torch.randn(12, 2, generator=g, dtype=torch.float64)
    return x, y


def sparse():
    makers = {
        "SGD": lambda p: torch.optim.SGD(p, lr=0.5),
        "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
    }
    for what, make in makers.items():
        for as_dense in (False, True):
            for passes in (1, 2):
                case = "%s sparse_as_dense=%s passes=%d" % (what, as_dense,
                                                            passes)
                ref = embedding_model(1)
                ref_opt = make(ref.parameters())
                net = embedding_model(1)
                opt = hvd.DistributedOptimizer(
                    make(net.parameters()),
                    named_parameters=net.named_parameters(),
                    backward_passes_per_step=passes,
                    sparse_as_dense=as_dense)
                for step in range(3):
                    x, y = embedding_batch(step)
                    for m, o, xs, ys in ((ref, ref_opt, x, y),
                                         (net, opt, shard(x), shard(y))):
                        o.zero_grad()
                        for xp, yp in zip(xs.chunk(passes),
                                          ys.chunk(passes)):
                            torch.nn.functional.mse_loss(
                                forward(m, xp), yp).backward()
                        o.step()
                worst = max(float((p - q).abs().max()) for p, q in
                            zip(net.parameters(), ref.parameters()))
                check(worst <= 1e-10, "%s: N ranks with B/N vs one with B: "
                      "parameters differ by %g" % (case, worst))
                check(net["emb"].weight.grad.is_sparse,
                      "%s: the embedding's gradient is no longer sparse"
                      % case)


def sparse_unused():
    """A step whose backward on the last rank does not reach the embedding
    (its gradient None after zero_grad(set_to_none=True)): that rank
    gathers an empty gradient as the others gather theirs (it reduced a
    dense zero one, and every rank waited), and the ranks' weights stay
    equal."""
    net = embedding_model(1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.5),
                                   named_parameters=net.named_parameters())
    for step in range(2):
        x, y = embedding_batch(step)
        opt.zero_grad(set_to_none=True)
        if step == 1 and hvd.rank() == hvd.size() - 1:
            loss = net["out"](torch.zeros(4, 4, dtype=torch.float64)).sum()
        else:
            loss = torch.nn.functional.mse_loss(forward(net, shard(x)),
                                                shard(y))
        loss.backward()
        opt.step()
    weights = hvd.allgather(net["emb"].weight.detach().unsqueeze(0),
                            name="sparse_unused.weights")
    check(all(torch.equal(weights[0], w) for w in weights),
          "sparse_unused: the ranks' embeddings differ")
    grad = net["emb"].weight.grad  # at one rank, nothing to gather
    check(hvd.size() == 1 or (grad is not None and grad.is_sparse),
          "sparse_unused: the embedding's gradient is not sparse")


def cuda_built():
    want = sys.argv[sys.argv.index("--cuda-built") + 1] == "1"
    check(hvd.cuda_built() is want,
          "cuda_built() is %r, the build's HVD_HAVE_CUDA says %r (device "
          "emulated: %s)" % (hvd.cuda_built(), want,
                             os.environ.get("HVD_DEVICE_EMULATE", "no")))


def main():
    hvd.init()
    finish("torch_extra", *run((cuda_built, sparse, sparse_unused, objects)),
           note="" if HAVE_CLOUDPICKLE else "; without cloudpickle")


if __name__ == "__main__":
    main()
