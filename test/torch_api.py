"""test/torch_api.py: hvd.torch (Horovod's PyTorch API over libhvd.so)
under mpirun at any rank count, on CPU tensors, or with --cuda on the
rank's GPU (scripts/gpu-check).

Checks, each against values computed here: the calls refused before
init; every collective for every dtype and op (int8, int16 and bool
through hvd's dtypes, integer averages and scale factors rounded as
Horovod's); a name past hvd's 199 bytes; ranks whose tensors differ in
layout (channels_last or not); grouped_allreduce's gradient and inputs;
async handles completed out of order and polled; names matched across
ranks that submit in different orders; an empty tensor; on CUDA, a
result synchronized on another stream than the one it was submitted on;
grouped allreduce; allgather with first dimensions that differ;
broadcast_object and allgather_object; mismatches (counts, dtypes,
allgather shapes) raising on every rank, the engine working on after
them; local errors (non-contiguous, unsupported dtype, bad op); the
DistributedOptimizer (SGD with momentum and Adam: N ranks with B/N each
equal one process with B; backward_passes_per_step; fp16 compression;
synchronize + skip_synchronize; a channels_last model, which Horovod
refuses); broadcast_optimizer_state restoring a resumed run bitwise;
SyncBatchNorm against BatchNorm over the whole batch (output, running
statistics, gradients); join with uneven batches; rank 0 shutting down
while the others wait.

Prints "torch_api n=N: ok (K checks)" on rank 0 and exits 0, or prints
each failure ("FAIL: ...") and exits 1 on every rank."""

import math
import os
import pickle
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")
import torch  # noqa: E402  (after the thread count)

import hvd.torch as hvd  # noqa: E402
from torch_checks import (check, expect_raises, finish, run,  # noqa: E402
                          shard)

torch.set_num_threads(1)
DEVICE = torch.device("cpu")


def before_init():
    expect_raises(ValueError, hvd.size, "size() before init",
                  "has not been initialized")
    expect_raises(ValueError, lambda: hvd.allreduce(torch.ones(2)),
                  "allreduce before init", "has not been initialized")
    check(not hvd.is_initialized(), "is_initialized() before init")


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int32, torch.int64, torch.uint8, torch.int8, torch.int16]
OPS = {hvd.Sum: sum, hvd.Min: min, hvd.Max: max, hvd.Product: math.prod}


def values(rank, n, dtype):
    """Small integers, exact in every dtype and under every op at 4
    ranks (products at most 3 ** 4)."""
    return torch.tensor([(rank + i) % 3 + 1 for i in range(n)],
                        dtype=dtype, device=DEVICE)


def collectives():
    rank, size, n = hvd.rank(), hvd.size(), 37
    for dtype in DTYPES:
        mine = values(rank, n, dtype)
        columns = [[(r + i) % 3 + 1 for r in range(size)] for i in range(n)]
        for op, fold in OPS.items():
            want = torch.tensor([fold(c) for c in columns], dtype=dtype)
            got = hvd.allreduce(mine, op=op, name="op.%s.%d" % (dtype, op))
            check(torch.equal(got.cpu(), want) and torch.equal(
                mine, values(rank, n, dtype)),
                "allreduce %s op %d: %s, want %s" % (dtype, op,
                                                     got[:4].tolist(),
                                                     want[:4].tolist()))
            inplace = mine.clone()
            hvd.allreduce_(inplace, op=op)
            check(torch.equal(inplace.cpu(), want),
                  "allreduce_ %s op %d" % (dtype, op))
        if dtype.is_floating_point:
            avg = torch.tensor([sum(c) / size for c in columns],
                               dtype=torch.float64)
            got = hvd.allreduce(mine, op=hvd.Average).double().cpu()
            check(torch.allclose(got, avg, rtol=1e-2),
                  "allreduce %s Average: %s, want %s" %
                  (dtype, got[:4].tolist(), avg[:4].tolist()))
            scaled = hvd.allreduce(mine, op=hvd.Sum, prescale_factor=0.5,
                                   postscale_factor=4.0).double().cpu()
            check(torch.allclose(scaled, 2.0 * avg * size, rtol=1e-2),
                  "allreduce %s pre/postscale" % dtype)
        else:
            # Horovod's: the sum scaled, rounded toward zero.
            avg = torch.tensor([int(sum(c) / size) for c in columns],
                               dtype=dtype)
            got = hvd.allreduce(mine, op=hvd.Average).cpu()
            check(torch.equal(got, avg), "allreduce %s Average: %s, want "
                  "%s" % (dtype, got[:4].tolist(), avg[:4].tolist()))
            scaled = hvd.allreduce(mine, op=hvd.Sum, prescale_factor=1.5,
                                   postscale_factor=0.5).cpu()
            want = torch.tensor([int(sum(int(1.5 * x) for x in c) * 0.5)
                                 for c in columns], dtype=dtype)
            check(torch.equal(scaled, want), "allreduce %s pre/postscale: "
                  "%s, want %s" % (dtype, scaled[:4].tolist(),
                                   want[:4].tolist()))
        root = size - 1
        b = values(rank, n, dtype) + rank
        want = values(root, n, dtype) + root
        got = hvd.broadcast(b, root, name="bcast.%s" % dtype)
        check(torch.equal(got, want) and
              torch.equal(b, values(rank, n, dtype) + rank),
              "broadcast %s" % dtype)
        hvd.broadcast_(b, root)
        check(torch.equal(b, want), "broadcast_ %s" % dtype)
        g = torch.full((rank + 1, 3), rank, dtype=dtype, device=DEVICE)
        got = hvd.allgather(g, name="gather.%s" % dtype)
        want = torch.cat([torch.full((r + 1, 3), r, dtype=dtype)
                          for r in range(size)])
        check(torch.equal(got.cpu(), want), "allgather %s: %s" %
              (dtype, got.tolist()))
    # Bools: reduced as ints, or and and; moved as bytes.
    bits = torch.tensor([(rank + i) % 2 == 0 for i in range(n)],
                        device=DEVICE)
    columns = [[(r + i) % 2 == 0 for r in range(size)] for i in range(n)]
    for op, fold in ((hvd.Sum, any), (hvd.Max, any), (hvd.Min, all),
                     (hvd.Product, all)):
        got = hvd.allreduce(bits, op=op, name="bool.%d" % op)
        check(got.dtype == torch.bool and got.tolist() ==
              [fold(c) for c in columns], "allreduce bool op %d" % op)
    got = hvd.broadcast(bits, size - 1, name="bcast.bool")
    check(got.tolist() == [(size - 1 + i) % 2 == 0 for i in range(n)],
          "broadcast bool")
    got = hvd.allgather(bits[:rank + 1], name="gather.bool")
    check(got.tolist() == [(r + i) % 2 == 0 for r in range(size)
                           for i in range(r + 1)], "allgather bool")
    # Integer averages whose sums pass the dtype (summed wider), and one
    # past float64's 53 bits (divided exactly).
    for dtype, v in ((torch.uint8, 200), (torch.int32, 2 ** 30 + 1),
                     (torch.int64, 2 ** 60 + 1)):
        got = hvd.allreduce(torch.full((3,), v, dtype=dtype, device=DEVICE),
                            op=hvd.Average, name="avg.big.%s" % dtype)
        check(got.dtype == dtype and got.tolist() == [v] * 3,
              "Average of %s %d on every rank: %s" % (dtype, v, got.tolist()))
    # A name past hvd's 199 bytes, cut alike on every rank.
    got = hvd.allreduce(torch.ones(2, device=DEVICE), op=hvd.Sum,
                        name="layer." * 40 + "weight")
    check(got.tolist() == [size, size], "a name of 246 bytes")
    # Averages of floats, and a multi-dimensional tensor's shape kept.
    x = torch.arange(12, dtype=torch.float32, device=DEVICE).view(3, 4)
    got = hvd.allreduce(x * (rank + 1))
    check(got.shape == (3, 4) and torch.allclose(
        got, x * (size + 1) / 2), "allreduce Average 3x4")


def asynchronous():
    rank, size = hvd.rank(), hvd.size()
    tensors = [torch.full((100 + k,), float(rank + k), device=DEVICE)
               for k in range(6)]
    handles = [hvd.allreduce_async_(t, op=hvd.Sum, name="async.%d" % k)
               for k, t in enumerate(tensors)]
    for k in reversed(range(6)):  # completed out of order
        out = hvd.synchronize(handles[k])
        want = float(sum(r + k for r in range(size)))
        check(out is tensors[k] and bool((out == want).all()),
              "async %d out of order" % k)
    expect_raises(ValueError, lambda: hvd.synchronize(handles[0]),
                  "synchronize twice", "unknown handle")
    t = torch.ones(10, device=DEVICE)
    h = hvd.allreduce_async(t, op=hvd.Sum)
    while not hvd.poll(h):
        pass
    check(bool((hvd.synchronize(h) == size).all()) and
          bool((t == 1).all()), "poll, then the out-of-place result")
    # Names matched whatever order each rank submits them in.
    names = ["order.a", "order.b", "order.c", "order.d"]
    mine = names if rank % 2 == 0 else list(reversed(names))
    bufs = {nm: torch.full((50,), float(names.index(nm) + rank),
                           device=DEVICE) for nm in mine}
    hs = {nm: hvd.allreduce_async_(bufs[nm], name=nm, op=hvd.Sum)
          for nm in mine}
    for nm in mine:
        want = float(sum(names.index(nm) + r for r in range(size)))
        check(bool((hvd.synchronize(hs[nm]) == want).all()),
              "name %s submitted in rank order %s" % (nm, mine))
    group = [torch.full((k + 1,), float(rank), device=DEVICE)
             for k in range(5)]
    out = hvd.grouped_allreduce(group, op=hvd.Max, name="grouped")
    check(len(out) == 5 and all(bool((o == size - 1).all()) for o in out),
          "grouped_allreduce")
    kept = [g.clone() for g in group]
    out = hvd.grouped_allreduce(group, op=hvd.Sum, name="grouped.none",
                                compression=hvd.Compression.none)
    check(all(torch.equal(g, k) for g, k in zip(group, kept)) and
          all(bool((o == sum(range(size))).all()) for o in out),
          "grouped_allreduce through Compression.none: inputs kept")
    # Gradients: reduced as the values were (Horovod's grouped function),
    # and none on the asynchronous forms' results.
    x = torch.ones(2, device=DEVICE, requires_grad=True)
    hvd.grouped_allreduce([x], op=hvd.Sum, name="grouped.grad")[0] \
        .sum().backward()
    check(x.grad is not None and x.grad.tolist() == [size, size],
          "grouped_allreduce's gradient: %s" % (x.grad,))
    results = [hvd.synchronize(hvd.allreduce_async(x, name="async.grad")),
               hvd.synchronize(hvd.broadcast_async(x, 0, name="bcast.grad"))]
    check(not any(r.requires_grad for r in results),
          "the asynchronous forms' results have no gradient")
    h = hvd.grouped_allreduce_async_(group, op=hvd.Min)
    check(hvd.synchronize(h)[0] is group[0] and all(
        bool((g == 0).all()) for g in group), "grouped_allreduce_async_")
    h = hvd.allgather_async(torch.full((rank + 1,), rank, device=DEVICE))
    check(hvd.poll(h) and hvd.synchronize(h).tolist() ==
          [r for r in range(size) for _ in range(r + 1)], "allgather_async")
    state = {"rank": rank, "list": list(range(rank + 1))}
    got = hvd.broadcast_object(state, root_rank=size - 1, name="obj")
    check(got == {"rank": size - 1, "list": list(range(size))},
          "broadcast_object: %r" % (got,))
    everyone = hvd.allgather_object(("r", rank, "x" * rank))
    check(everyone == [("r", r, "x" * r) for r in range(size)],
          "allgather_object: %r" % (everyone,))


def streams():
    """An empty tensor (data_ptr() 0) on the device in use. On CUDA: an
    allreduce submitted on a side stream whose work is still queued (a
    sleep kernel) and synchronized on another stream: what that stream
    does next sees the result (torch's streams do not wait for each
    other: synchronize orders the current one after the result)."""
    size = hvd.size()
    empty = hvd.allreduce(torch.empty(0, device=DEVICE), op=hvd.Sum,
                          name="empty")
    check(empty.numel() == 0 and empty.device.type == DEVICE.type,
          "allreduce of an empty tensor")
    if DEVICE.type != "cuda":
        return
    n = 1 << 20
    t = torch.ones(n, device=DEVICE)
    side, other = torch.cuda.Stream(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200 * 1000 * 1000)  # about 0.1 s of the GPU
        h = hvd.allreduce_async_(t, op=hvd.Sum, name="side.stream")
    with torch.cuda.stream(other):
        total = hvd.synchronize(h).sum()
    other.synchronize()
    check(float(total) == float(size * n),
          "synchronized on another stream than submitted: sum %g, want %g"
          % (float(total), float(size * n)))


def mismatches():
    rank, size = hvd.rank(), hvd.size()
    if size > 1:
        count = 5 if rank == 0 else 6
        expect_raises(hvd.HorovodInternalError,
                      lambda: hvd.allreduce(torch.ones(count, device=DEVICE),
                                            name="bad.count"),
                      "counts that differ", "ranks disagree")
        dtype = torch.float32 if rank == 0 else torch.float64
        expect_raises(hvd.HorovodInternalError,
                      lambda: hvd.allreduce(torch.ones(4, dtype=dtype,
                                                       device=DEVICE),
                                            name="bad.dtype"),
                      "dtypes that differ", "ranks disagree")
        shape = (2, 3) if rank == 0 else (2, 4)
        expect_raises(hvd.HorovodInternalError,
                      lambda: hvd.allgather(torch.ones(shape, device=DEVICE),
                                            name="bad.gather"),
                      "allgather shapes that differ", "ranks disagree")
        # One rank's tensor refused before the shape exchange: the others
        # raise too, where they waited in it.
        odd = torch.ones(2, 3, dtype=torch.complex64 if rank == 0
                         else torch.float32, device=DEVICE)
        expect_raises((TypeError, hvd.HorovodInternalError),
                      lambda: hvd.allgather(odd, name="bad.gather.dtype"),
                      "allgather refused on rank 0",
                      "unsupported dtype" if rank == 0
                      else "rank 0 could not take its tensor")
        # The engine goes on.
        check(bool((hvd.allreduce(torch.ones(3, device=DEVICE), op=hvd.Sum)
                    == size).all()), "an allreduce after the mismatches")
    expect_raises(ValueError,
                  lambda: hvd.allreduce(torch.ones(4, 4, device=DEVICE).t()),
                  "non-contiguous", "not contiguous")
    expect_raises(TypeError,
                  lambda: hvd.allreduce(torch.ones(4, dtype=torch.complex64)),
                  "complex64", "unsupported dtype torch.complex64")
    expect_raises(ValueError, lambda: hvd.allreduce(torch.ones(4),
                                                    op=hvd.Adasum),
                  "Adasum", "Adasum")
    expect_raises(ValueError,
                  lambda: hvd.allreduce(torch.ones(4, dtype=torch.bool)),
                  "Average of bools", "Average of a bool tensor")


def model(seed, dtype=torch.float64):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 4)).to(dtype).to(DEVICE)


def batch(step, dtype=torch.float64):
    """The global batch of a step: 24 samples, the same on every rank."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(24, 8, generator=g, dtype=dtype)
    y = torch.randn(24, 4, generator=g, dtype=dtype)
    return x.to(DEVICE), y.to(DEVICE)


def train(net, opt, steps, passes=1, full=False, first=0):
    """steps steps of passes backward passes each on micro-batches of
    this rank's shard (the whole batch with full), MSE loss."""
    for step in range(first, first + steps):
        x, y = batch(step)
        if not full:
            x, y = shard(x), shard(y)
        opt.zero_grad()
        for xs, ys in zip(x.chunk(passes), y.chunk(passes)):
            torch.nn.functional.mse_loss(net(xs), ys).backward()
        opt.step()


def same_params(a, b, what, tol=1e-10):
    worst = max(float((p - q).abs().max()) for p, q in
                zip(a.parameters(), b.parameters()))
    check(worst <= tol, "%s: parameters differ by %g" % (what, worst))


def optimizers():
    makers = {
        "SGD momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
        "Adam": lambda p: torch.optim.Adam(p, lr=0.01),
    }
    for what, make in makers.items():
        ref = model(1)
        ref_opt = make(ref.parameters())
        train(ref, ref_opt, 4, full=True)
        net = model(1 + hvd.rank())  # differs until broadcast
        opt = hvd.DistributedOptimizer(make(net.parameters()),
                                       named_parameters=net.named_parameters())
        check(isinstance(opt, type(ref_opt)), "%s: class kept" % what)
        hvd.broadcast_parameters(net.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
        train(net, opt, 4)
        same_params(net, ref, "%s: N ranks with B/N vs one with B" % what)
    # backward_passes_per_step: 2 micro-batches per step, reduced once.
    ref = model(2)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    train(ref, ref_opt, 3, passes=2, full=True)
    net = model(2)
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9),
        named_parameters=net.named_parameters(), backward_passes_per_step=2)
    train(net, opt, 3, passes=2)
    same_params(net, ref, "backward_passes_per_step=2")
    # fp16 compression: float32 gradients travel as float16.
    ref = model(3, torch.float32)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    net = model(3, torch.float32)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.05),
                                   named_parameters=net.named_parameters(),
                                   compression=hvd.Compression.fp16)
    for step in range(3):
        x, y = batch(step, torch.float32)
        for m, o, xs, ys in ((ref, ref_opt, x, y),
                             (net, opt, shard(x), shard(y))):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(xs), ys).backward()
            o.step()
    same_params(net, ref, "fp16 compression", tol=2e-3)
    # synchronize, then a step that does not reduce again.
    net = model(4)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                   named_parameters=net.named_parameters())
    x, y = batch(0)
    torch.nn.functional.mse_loss(net(shard(x)), shard(y)).backward()
    opt.synchronize()
    grads = [p.grad.clone() for p in net.parameters()]
    with opt.skip_synchronize():
        opt.step()
    ref = model(4)
    torch.nn.functional.mse_loss(ref(x), y).backward()
    worst = max(float((g - p.grad).abs().max())
                for g, p in zip(grads, ref.parameters()))
    check(worst < 1e-10, "synchronize(): averaged gradients off by %g" % worst)
    expect_raises(ValueError, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD(net.parameters(), lr=0.1),
        named_parameters=[("a", p) for p in net.parameters()]),
        "repeated names", "unique")


def channels_last():
    """A channels_last model (Horovod refuses one; DDP takes it): its
    parameters broadcast and its gradients reduced as they lie, N ranks
    with B/N each equal to one process with B; allreduce and broadcast of
    a channels_last tensor keep its layout; allgather, which concatenates
    rows, still wants a contiguous one."""
    cl, rank, size = torch.channels_last, hvd.rank(), hvd.size()

    def conv(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
            torch.nn.Linear(4 * 4 * 4, 2)).to(torch.float64).to(
                DEVICE).to(memory_format=cl)

    g = torch.Generator().manual_seed(7)
    data = [(torch.randn(24, 3, 6, 6, generator=g, dtype=torch.float64)
             .to(DEVICE).to(memory_format=cl),
             torch.randn(24, 2, generator=g, dtype=torch.float64)
             .to(DEVICE)) for _ in range(3)]
    ref = conv(5)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    net = conv(5 + rank)  # differs until broadcast
    opt = hvd.DistributedOptimizer(
        torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9),
        named_parameters=net.named_parameters())
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    for m, o, part in ((ref, ref_opt, lambda t: t), (net, opt, shard)):
        for x, y in data:
            o.zero_grad()
            torch.nn.functional.mse_loss(m(part(x)), part(y)).backward()
            o.step()
    weight = net[0].weight
    check(weight.is_contiguous(memory_format=cl) and
          not weight.is_contiguous() and
          weight.grad.is_contiguous(memory_format=cl),
          "channels_last: the conv's weight and gradient kept the layout")
    same_params(net, ref, "channels_last: N ranks with B/N vs one with B")
    base = torch.arange(120, dtype=torch.float64).reshape(2, 3, 4, 5)
    t = (base + rank).to(DEVICE).to(memory_format=cl)
    out = hvd.allreduce(t, op=hvd.Sum, name="cl.allreduce")
    want = (base * size + sum(range(size))).to(DEVICE)
    check(torch.equal(out, want) and out.stride() == t.stride(),
          "channels_last allreduce: values or strides %s" % (out.stride(),))
    hvd.broadcast_(t, root_rank=size - 1, name="cl.broadcast")
    check(torch.equal(t, (base + size - 1).to(DEVICE)),
          "channels_last broadcast_")
    expect_raises(ValueError, lambda: hvd.allgather(t, name="cl.gather"),
                  "allgather of a channels_last tensor", "not contiguous")
    # Ranks whose layouts differ: the elements still meet in one order.
    mixed = (base + rank).to(DEVICE)
    if rank % 2:
        mixed = mixed.to(memory_format=cl)
    out = hvd.allreduce(mixed, op=hvd.Sum, name="cl.mixed")
    check(torch.equal(out, want), "allreduce of layouts that differ")
    hvd.broadcast_(mixed, root_rank=size - 1, name="cl.mixed.bcast")
    check(torch.equal(mixed, (base + size - 1).to(DEVICE)),
          "broadcast_ of layouts that differ")
    # Moved as a dtype of their size, through the contiguous copy too (a
    # channels_last model's bool and int buffers).
    for dtype in (torch.bool, torch.int8, torch.int16):
        mine = ((base + rank) % 3).to(dtype).to(DEVICE)
        if rank % 2:
            mine = mine.to(memory_format=cl)
        hvd.broadcast_(mine, root_rank=size - 1, name="cl.bcast.%s" % dtype)
        check(torch.equal(mine, ((base + size - 1) % 3).to(dtype)
                          .to(DEVICE)), "broadcast_ of %s, layouts that "
              "differ" % dtype)


def resume():
    """k steps, a rank-0 checkpoint, fresh ranks resumed from it by the
    broadcasts, m more steps: bitwise the uninterrupted k + m."""
    def fresh(seed):
        net = model(seed)
        opt = hvd.DistributedOptimizer(
            torch.optim.Adam(net.parameters(), lr=0.01),
            named_parameters=net.named_parameters())
        return net, opt

    straight, opt = fresh(5)
    train(straight, opt, 5)
    net, opt = fresh(5)
    train(net, opt, 3)
    saved = pickle.dumps((net.state_dict(), opt.state_dict()))
    net, opt = fresh(6 + hvd.rank())  # other weights, no optimizer state
    if hvd.rank() == 0:
        model_state, opt_state = pickle.loads(saved)
        net.load_state_dict(model_state)
        opt.load_state_dict(opt_state)
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    train(net, opt, 2, first=3)
    same_params(net, straight, "resumed from rank 0's checkpoint", tol=0.0)
    # A fresh start (no state on the root) only shares hyperparameters.
    net, opt = fresh(7)
    for group in opt.param_groups:
        group["lr"] = 0.01 * (hvd.rank() + 1)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    check(not opt.state and opt.param_groups[0]["lr"] == 0.01,
          "broadcast_optimizer_state with no state on the root")


def sync_batch_norm():
    torch.manual_seed(11)
    x = torch.randn(8 * hvd.size(), 3, 5, 5, dtype=torch.float64,
                    device=DEVICE)
    g = torch.randn_like(x)
    full = torch.nn.BatchNorm2d(3, momentum=0.3).double().to(DEVICE)
    with torch.no_grad():
        full.weight.copy_(torch.linspace(0.5, 1.5, 3))
        full.bias.copy_(torch.linspace(-1, 1, 3))
    sync = hvd.SyncBatchNorm(3, momentum=0.3).double().to(DEVICE)
    sync.load_state_dict(full.state_dict())
    xf, xs = x.clone().requires_grad_(), shard(x).clone().requires_grad_()
    yf = full(xf)
    ys = sync(xs)
    (yf * g).sum().backward()
    (ys * shard(g)).sum().backward()
    check(torch.allclose(ys, shard(yf), atol=1e-10), "SyncBatchNorm output")
    check(torch.allclose(sync.running_mean, full.running_mean, atol=1e-12)
          and torch.allclose(sync.running_var, full.running_var,
                             atol=1e-12), "SyncBatchNorm running statistics")
    check(torch.allclose(xs.grad, shard(xf.grad), atol=1e-10),
          "SyncBatchNorm input gradient")
    wsum = hvd.allreduce(sync.weight.grad, op=hvd.Sum)
    check(torch.allclose(wsum, full.weight.grad, atol=1e-10),
          "SyncBatchNorm weight gradient summed over ranks")
    sync.eval()
    full.eval()
    check(torch.allclose(sync(shard(x)), full(shard(x)), atol=1e-12),
          "SyncBatchNorm in evaluation")


def join():
    """Rank r has r + 1 batches; a joined rank gives zeros, averages
    still divide by size()."""
    rank, size = hvd.rank(), hvd.size()
    for step in range(rank + 1):
        t = torch.full((10,), float(rank + 1), device=DEVICE)
        got = hvd.allreduce(t, op=hvd.Average, name="uneven")
        want = sum(r + 1 for r in range(step, size)) / size
        check(bool((got == want).all()), "join: step %d got %s, want %s" %
              (step, got[0].item(), want))
    last = hvd.join()
    check(last == size - 1, "join returned %r, want %d (the rank with the "
          "most batches)" % (last, size - 1))
    check(bool((hvd.allreduce(torch.ones(2, device=DEVICE), op=hvd.Sum)
                == size).all()), "an allreduce after join")


def shutdown_by_peer():
    """Rank 0 shuts down while the others wait in a collective: theirs
    fail, naming the reason, and so do their later calls (Horovod's
    behaviour; no hang)."""
    rank = hvd.rank()
    if rank > 0:
        expect_raises(hvd.HorovodInternalError,
                      lambda: hvd.allreduce(torch.ones(3, device=DEVICE),
                                            name="never"),
                      "a wait when rank 0 shuts down",
                      "another rank called hvd_shutdown")
        expect_raises(hvd.HorovodInternalError,
                      lambda: hvd.allreduce(torch.ones(3, device=DEVICE)),
                      "a call after rank 0 shut down", "shut hvd down")
    hvd.shutdown()
    check(not hvd.is_initialized(), "is_initialized() after shutdown")


def main():
    global DEVICE
    before_init()
    hvd.init()
    check(hvd.is_initialized() and 0 <= hvd.rank() < hvd.size() and
          0 <= hvd.local_rank() < hvd.local_size() and hvd.cross_size() >= 1,
          "topology")
    if "--cuda" in sys.argv:
        if not torch.cuda.is_available():
            print("SKIP: --cuda without a GPU visible to PyTorch")
            sys.exit(77)
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        DEVICE = torch.device("cuda")
    outcome = run((collectives, asynchronous, streams, mismatches,
                   optimizers, channels_last, resume, sync_batch_norm, join))
    shutdown_by_peer()  # last: hvd is down on every rank after it
    finish("torch_api", *outcome)


if __name__ == "__main__":
    main()
