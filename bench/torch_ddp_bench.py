#!/usr/bin/python3
"""bench/torch_ddp_bench.py: examples/torch/synthetic_benchmark.py on
PyTorch DistributedDataParallel over gloo, the third peer of
bench/compare_horovod.sh (hvd.torch, Horovod, DDP).

The same models, random batch, optimiser (SGD, lr 0.01 x ranks, momentum
0.9), warm-up, timing and output lines ("Iter #i: X img/sec per CPU",
"Img/sec per CPU: M +-C", "Total img/sec on N CPU(s): T +-C"): those are
imported from examples/torch/synthetic_benchmark.py, not copied. DDP
broadcasts rank 0's parameters when it wraps the model and averages the
gradients in its buckets during backward; --fp16-allreduce registers
DDP's fp16_compress_hook.

--small-tensors N times N x 4 KiB float32 tensors per iteration reduced by
torch.distributed.all_reduce(async_op=True) each, then wait() on every
work handle; the output line is the same as synthetic_benchmark.py's:

    small tensors: 1000 x 4 KiB: 3.21 ms per iteration (median of 100)

Launch with mpirun; ranks come from OMPI_COMM_WORLD_RANK/SIZE (or
RANK/WORLD_SIZE), rendezvous as bench/torch_fmnist.py: MASTER_ADDR (default
127.0.0.1), MASTER_PORT (default: from Open MPI's job id, so that
back-to-back launches do not collide), GLOO_SOCKET_IFNAME (default lo):

    mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \\
        /usr/bin/python3 bench/torch_ddp_bench.py --model cnn --num-iters 5

Threads: as synthetic_benchmark.py (1 per rank, or TORCH_BENCH_THREADS).
Needs Debian's python3-torch (1.13); use /usr/bin/python3.
Exit status: 0, 1 (runtime error), 2 (bad flags).
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(_HERE, "..", "examples", "torch"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

# Sets the thread variables before it imports torch.
import synthetic_benchmark as sb  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch.optim as optim  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def rendezvous():
    """(rank, size) from mpirun's environment; MASTER_* defaults."""
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE",
                              os.environ.get("WORLD_SIZE", "1")))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        # Same on every rank of one mpirun, different between launches.
        jobid = os.environ.get("OMPI_MCA_ess_base_jobid", "0")
        try:
            j = int(jobid)
        except ValueError:
            j = sum(map(ord, jobid))
        os.environ["MASTER_PORT"] = str(29500 + (j * 7919) % 20000)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return rank, size


def main(argv=None):
    parser = sb.build_parser(
        "torch_ddp_bench.py",
        "examples/torch/synthetic_benchmark.py on PyTorch DDP (gloo); launch "
        "with mpirun -np N /usr/bin/python3 bench/torch_ddp_bench.py")
    args = sb.parse_args(parser, argv)
    rank, size = rendezvous()
    sb.set_threads()
    if args.cuda:
        local = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK",
                                   os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(local % torch.cuda.device_count())
        torch.backends.cudnn.benchmark = True
    device = torch.device("cuda" if args.cuda else "cpu")
    dist.init_process_group("gloo", rank=rank, world_size=size)

    def log(s):
        if rank == 0:
            print(s, flush=True)

    log("Framework: torch.distributed DDP gloo (torch %s, %d thread%s per rank)"
        % (torch.__version__, torch.get_num_threads(),
           "" if torch.get_num_threads() == 1 else "s"))

    if args.small_tensors:
        tensors = sb.small_tensors(args, device)

        def reduce_all():
            works = [dist.all_reduce(t, async_op=True) for t in tensors]
            for w in works:
                w.wait()

        log("Number of %ss: %d" % ("GPU" if args.cuda else "CPU", size))
        sb.time_small_tensors(args, reduce_all, log)
    else:
        torch.manual_seed(args.seed)
        model = DDP(sb.build_model(args.model).to(device))
        if args.fp16_allreduce:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
        optimizer = optim.SGD(model.parameters(), lr=0.01 * size, momentum=0.9)
        data, target = sb.synthetic_batch(args, device)

        def benchmark_step():
            optimizer.zero_grad()
            output = model(data)
            loss = F.cross_entropy(output, target)
            loss.backward()
            optimizer.step()

        sb.time_model(args, benchmark_step, size, log)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
