#!/usr/bin/python3
"""examples/torch/synthetic_benchmark.py: Horovod's PyTorch synthetic
benchmark (examples/pytorch/pytorch_synthetic_benchmark.py) on hvd.torch.

Every rank trains its replica on one random batch, generated once: forward,
cross-entropy, backward (whose hooks start each gradient's allreduce) and
the DistributedOptimizer's step (SGD, lr 0.01 x ranks, momentum 0.9). After
--num-warmup-batches batches, rank 0 times --num-iters iterations of
--num-batches-per-iter batches and prints, as Horovod's does:

    Iter #0: 1234.5 img/sec per CPU
    ...
    Img/sec per CPU: 1230.1 +-12.3
    Total img/sec on 2 CPU(s): 2460.2 +-24.6

(mean +- 1.96 x std over the iterations; GPU instead of CPU on cuda).

It is a Horovod script: replacing the one line `import hvd.torch as hvd`
(in main) by `import horovod.torch as hvd` runs it on Horovod, unchanged
otherwise (bench/compare_horovod.sh does exactly that).

Models (--model):
  mlp  784-256-128-10 with ReLU, on 1x28x28 inputs, 10 classes
  cnn  conv5x5 32 pad 2 + ReLU + maxpool2, conv5x5 64 pad 2 + ReLU +
       maxpool2, FC 3136->128 + ReLU, FC 128->10 (1x28x28, 10 classes)
  any torchvision.models name (resnet50, ...) on 3x224x224, 1000 classes,
       when torchvision is installed (Debian's python3-torch has none: such
       a name then exits 2 saying so).
The mlp and cnn are bench/torch_fmnist.py's and models/model.c's networks.

--small-tensors N times, instead of a model, N float32 tensors of 4 KiB
(1024 elements) reduced through the API per iteration: allreduce_async_
on each (op Sum, on zeros, so values stay finite), then synchronize on
every handle. After --num-warmup-batches iterations, rank 0 times
--num-iters x --num-batches-per-iter iterations and prints

    small tensors: 1000 x 4 KiB: 3.21 ms per iteration (median of 100)

This measures the per-tensor cost of the framework (negotiation, fusion,
Python overhead) rather than bandwidth.

Threads: OMP/OpenBLAS/MKL thread counts are set in the environment before
torch is imported (torch.set_num_threads alone does not limit OpenBLAS),
then torch.set_num_threads: 1 per rank, or TORCH_BENCH_THREADS.

Launch (as root add --allow-run-as-root; with more ranks than cores
--oversubscribe --bind-to none):

    HVD_LIBRARY=$PWD/libhvd.so PYTHONPATH=$PWD \\
        mpirun -np 2 /usr/bin/python3 examples/torch/synthetic_benchmark.py \\
        --model cnn --num-iters 5

Exit status: 0, 1 (runtime error), 2 (bad flags).
"""

import os

# Before torch (and numpy) load their BLAS and OpenMP runtimes.
THREADS = os.environ.get("TORCH_BENCH_THREADS", "1")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = THREADS

import argparse
import statistics
import sys
import timeit

import torch
import torch.nn.functional as F
import torch.optim as optim

SMALL_TENSOR_ELEMS = 1024  # 4 KiB of float32
LOCAL_MODELS = ("mlp", "cnn")


def build_parser(prog, description):
    """The flags, shared with bench/torch_ddp_bench.py."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--model", default="mlp",
                   help="mlp, cnn, or a torchvision.models name when "
                   "torchvision is installed (mlp)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="input batch size per rank (64)")
    p.add_argument("--num-warmup-batches", type=int, default=10,
                   help="batches (or small-tensor iterations) before timing (10)")
    p.add_argument("--num-batches-per-iter", type=int, default=10,
                   help="batches per benchmark iteration (10)")
    p.add_argument("--num-iters", type=int, default=10,
                   help="benchmark iterations (10)")
    p.add_argument("--fp16-allreduce", action="store_true", default=False,
                   help="gradients travel as float16")
    p.add_argument("--no-cuda", action="store_true", default=False,
                   help="run on the CPU even when a GPU is visible")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="cpu, cuda, or auto: cuda when torch sees a GPU and "
                   "--no-cuda is not given (auto)")
    p.add_argument("--seed", type=int, default=42,
                   help="seed of the weights and the random batch (42)")
    p.add_argument("--small-tensors", type=int, default=0, metavar="N",
                   help="time N x 4 KiB float32 allreduces per iteration "
                   "instead of a model (0: off)")
    return p


def parse_args(parser, argv):
    a = parser.parse_args(argv)
    if not 1 <= a.batch_size <= 65536:
        parser.error("--batch-size: %d is out of range 1..65536" % a.batch_size)
    if not 0 <= a.num_warmup_batches <= 1000000:
        parser.error("--num-warmup-batches: %d is out of range 0..1000000"
                     % a.num_warmup_batches)
    for name in ("num_batches_per_iter", "num_iters"):
        v = getattr(a, name)
        if not 1 <= v <= 1000000:
            parser.error("--%s: %d is out of range 1..1000000"
                         % (name.replace("_", "-"), v))
    if not 0 <= a.small_tensors <= 1000000:
        parser.error("--small-tensors: %d is out of range 0..1000000"
                     % a.small_tensors)
    if a.seed < 0:
        parser.error("--seed: must be >= 0")
    if a.device == "cuda" and a.no_cuda:
        parser.error("--device cuda contradicts --no-cuda")
    if a.device == "auto":
        a.device = "cuda" if (torch.cuda.is_available() and not a.no_cuda) else "cpu"
    elif a.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch %s sees no GPU" % torch.__version__)
    a.cuda = a.device == "cuda"
    if a.small_tensors == 0:
        check_model_name(parser, a.model)
    return a


# ---- models ----

def build_model(kind):
    """The networks of models/model.c (and bench/torch_fmnist.py)."""
    nn = torch.nn
    if kind == "mlp":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 256), nn.ReLU(),
            nn.Linear(256, 128), nn.ReLU(),
            nn.Linear(128, 10))
    if kind == "cnn":
        return nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(3136, 128), nn.ReLU(),
            nn.Linear(128, 10))
    from torchvision import models  # checked by check_model_name
    return getattr(models, kind)()


def check_model_name(parser, kind):
    """Exit 2 (parser.error) unless build_model can build kind."""
    if kind in LOCAL_MODELS:
        return
    try:
        from torchvision import models
    except ImportError:
        parser.error("--model %s: torchvision is not installed, so only %s "
                     "are available" % (kind, " and ".join(LOCAL_MODELS)))
    if not callable(getattr(models, kind, None)) or kind.startswith("_"):
        parser.error("--model %s: neither %s nor a torchvision.models name"
                     % (kind, " nor ".join(LOCAL_MODELS)))


def model_input(kind):
    """(channels, height, width, classes) of kind's inputs and outputs."""
    if kind in LOCAL_MODELS:
        return 1, 28, 28, 10
    return 3, 224, 224, 1000


def synthetic_batch(args, device):
    """One random batch, like Horovod's (seeded here: every run alike)."""
    c, h, w, classes = model_input(args.model)
    g = torch.Generator().manual_seed(args.seed + 1)
    data = torch.randn(args.batch_size, c, h, w, generator=g)
    target = torch.randint(0, classes, (args.batch_size,), generator=g)
    return data.to(device), target.to(device)


# ---- timing and output, shared with bench/torch_ddp_bench.py ----

def set_threads():
    torch.set_num_threads(int(THREADS))
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass


def time_model(args, step, size, log):
    """Horovod's warm-up, timed iterations and summary lines."""
    device = "GPU" if args.cuda else "CPU"
    log("Model: %s" % args.model)
    log("Batch size: %d" % args.batch_size)
    log("Number of %ss: %d" % (device, size))
    log("Running warmup...")
    timeit.timeit(step, number=args.num_warmup_batches)
    log("Running benchmark...")
    img_secs = []
    for x in range(args.num_iters):
        t = timeit.timeit(step, number=args.num_batches_per_iter)
        img_sec = args.batch_size * args.num_batches_per_iter / t
        log("Iter #%d: %.1f img/sec per %s" % (x, img_sec, device))
        img_secs.append(img_sec)
    mean = statistics.fmean(img_secs)
    conf = 1.96 * statistics.pstdev(img_secs)
    log("Img/sec per %s: %.1f +-%.1f" % (device, mean, conf))
    log("Total img/sec on %d %s(s): %.1f +-%.1f"
        % (size, device, size * mean, size * conf))


def time_small_tensors(args, reduce_all, log):
    """reduce_all(): one iteration over the small tensors; prints the
    median over --num-iters x --num-batches-per-iter timed iterations."""
    n = args.small_tensors
    for _ in range(args.num_warmup_batches):
        reduce_all()
    times = []
    for _ in range(args.num_iters * args.num_batches_per_iter):
        t0 = timeit.default_timer()
        reduce_all()
        times.append(timeit.default_timer() - t0)
    log("small tensors: %d x %d KiB: %.3f ms per iteration (median of %d)"
        % (n, SMALL_TENSOR_ELEMS * 4 // 1024, 1e3 * statistics.median(times),
           len(times)))


def small_tensors(args, device):
    return [torch.zeros(SMALL_TENSOR_ELEMS, dtype=torch.float32, device=device)
            for _ in range(args.small_tensors)]


# ---- the benchmark ----

def main(argv=None):
    parser = build_parser(
        "synthetic_benchmark.py",
        "PyTorch synthetic benchmark (Horovod's), on hvd.torch; launch with "
        "mpirun -np N /usr/bin/python3 examples/torch/synthetic_benchmark.py")
    args = parse_args(parser, argv)

    import hvd.torch as hvd

    set_threads()
    hvd.init()
    if args.cuda:
        # hvd's GPU (train_fmnist.py says why the modulo)
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        torch.backends.cudnn.benchmark = True
    device = torch.device("cuda" if args.cuda else "cpu")

    def log(s):
        if hvd.rank() == 0:
            print(s, flush=True)

    log("Framework: %s (torch %s, %d thread%s per rank)"
        % (hvd.__name__, torch.__version__, torch.get_num_threads(),
           "" if torch.get_num_threads() == 1 else "s"))

    if args.small_tensors:
        tensors = small_tensors(args, device)
        names = ["small.%d" % i for i in range(len(tensors))]

        def reduce_all():
            handles = [hvd.allreduce_async_(t, name=nm, op=hvd.Sum)
                       for t, nm in zip(tensors, names)]
            for h in handles:
                hvd.synchronize(h)

        log("Number of %ss: %d" % ("GPU" if args.cuda else "CPU", hvd.size()))
        time_small_tensors(args, reduce_all, log)
        return 0

    torch.manual_seed(args.seed)
    model = build_model(args.model).to(device)
    optimizer = optim.SGD(model.parameters(), lr=0.01 * hvd.size(),
                          momentum=0.9)
    compression = (hvd.Compression.fp16 if args.fp16_allreduce
                   else hvd.Compression.none)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=compression, op=hvd.Average)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    data, target = synthetic_batch(args, device)

    def benchmark_step():
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()

    time_model(args, benchmark_step, hvd.size(), log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
