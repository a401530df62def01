#!/usr/bin/python3
"""bench/torch_fmnist.py: the PyTorch peer of examples/train_fmnist.

PyTorch 1.13 DistributedDataParallel (gloo; the CPU, or a GPU with
--device cuda) training of the same
networks as models/model.c, on the same Fashion-MNIST data, with the same
optimiser and schedule, printing progress in train_fmnist's format so that
one parser reads both (bench/compare_torch.sh, bench/plot_training.sh):

  mlp: 784-256-128-10 with ReLU (235,146 parameters)
  cnn: conv5x5 32 pad 2 + ReLU + maxpool2, conv5x5 64 pad 2 + ReLU +
       maxpool2, FC 3136->128 + ReLU, FC 128->10 (454,922 parameters)

What is the same as train_fmnist (by construction, not by chance):
  - the initial weights: He uniform U(-b, b), b = sqrt(6 / fan_in), drawn
    in parameter order from splitmix64 seeded with --seed, biases 0
    (models/model.c's init_weights, reproduced with numpy; --init torch
    gives PyTorch's default initialisation instead);
  - the data order: every rank shuffles all indices with examples/shard.c's
    Fisher-Yates over splitmix64 from (seed, epoch), pads to a multiple of
    the rank count by wrapping around, and takes every size-th index from
    its rank (PyTorch's DistributedSampler layout); batches of --batch-size
    per rank, the last one short;
  - SGD with momentum 0.9 (PyTorch's formula, which models/sgd.c copies),
    lr warmed up linearly from LR to LR x ranks over the first epoch, per
    step (model_lr_warmup), then a cosine decay to 0 at the last epoch
    (model_lr_cosine);
  - pixels byte / 255, then (x - 0.2860) / 0.3530 with --normalize on;
  - softmax cross-entropy, mean over the batch; DDP averages gradients;
  - the test set split into contiguous parts per rank, results summed;
  - timing: rank 0's clock around the training steps of each epoch (the
    shuffle before and the evaluation after are outside), progress every
    tenth of an epoch with the images/s of that window, and at the end
      done: S steps, I images in T s of training: X images/s (Y per rank),
      test_acc A

Threads: one per rank. OMP/OpenBLAS/MKL thread counts are set in the
environment before torch is imported (torch.set_num_threads alone does
not limit OpenBLAS), then torch.set_num_threads(1).

Launch with mpirun (torchrun on torch 1.13 with Python 3.11 is awkward;
see ../shared/BENCHMARKING.md); ranks come from OMPI_COMM_WORLD_RANK/SIZE:

  mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \\
      /usr/bin/python3 bench/torch_fmnist.py --model cnn --max-steps 200

Rendezvous: MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default: from
Open MPI's job id, so that back-to-back launches do not collide).
GLOO_SOCKET_IFNAME defaults to lo (all ranks on this machine).

Needs Debian's python3-torch (1.13) and python3-numpy; use /usr/bin/python3.
Exit status: 0, 1 (data or runtime error), 2 (bad flags).
"""

import os

# Before torch (and numpy) load their BLAS and OpenMP runtimes.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = os.environ.get("TORCH_FMNIST_THREADS", "1")

import argparse
import gzip
import math
import struct
import sys
import time

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
MEAN, STD = 0.2860, 0.3530
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
WARMUP_EPOCHS = 1.0
MOMENTUM = 0.9


def fail(msg, code=1):
    print("torch_fmnist: %s" % msg, file=sys.stderr, flush=True)
    sys.exit(code)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="torch_fmnist.py",
        description="PyTorch DDP (gloo) peer of examples/train_fmnist; "
        "launch with mpirun -np N /usr/bin/python3 bench/torch_fmnist.py")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    p.add_argument("--epochs", type=int, default=None,
                   help="epochs (2; with --max-steps alone, as many as its "
                   "steps take)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="samples per batch per rank (64)")
    p.add_argument("--lr", type=float, default=0.05,
                   help="base learning rate, warmed up to LR x ranks over the "
                   "first epoch (0.05)")
    p.add_argument("--seed", type=int, default=42,
                   help="seed of the weights and the shuffling (42)")
    p.add_argument("--data", default=DEFAULT_DATA,
                   help="Fashion-MNIST IDX files (%s)" % DEFAULT_DATA)
    p.add_argument("--max-steps", type=int, default=0,
                   help="stop after K steps in total (0: no limit)")
    p.add_argument("--train-limit", type=int, default=0,
                   help="use only the first N training images (0: all)")
    p.add_argument("--normalize", choices=("on", "off"), default="off",
                   help="(x - %.4f) / %.4f after /255 (off)" % (MEAN, STD))
    p.add_argument("--init", choices=("ours", "torch"), default="ours",
                   help="initial weights: models/model.c's (ours) or "
                   "PyTorch's defaults (torch)")
    p.add_argument("--progress", choices=("lines",), default="lines",
                   help="a line every tenth of an epoch (the only mode)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where to train: the CPU, or the GPU (every rank on "
                   "cuda:0, as train_fmnist's ranks sharing one GPU; gloo "
                   "reduces CUDA tensors where NCCL refuses ranks that share "
                   "a GPU)")
    p.add_argument("--cudnn", choices=("fast", "exact"), default="fast",
                   help="cuDNN's convolutions on cuda: PyTorch's defaults, "
                   "TF32 allowed and any algorithm (fast), or float FMAs "
                   "and deterministic algorithms, as train_fmnist's by "
                   "default (exact: cudnn.allow_tf32 off, "
                   "cudnn.deterministic on)")
    a = p.parse_args(argv)
    if a.epochs is not None and not 1 <= a.epochs <= 100000:
        p.error("--epochs: %d is out of range 1..100000" % a.epochs)
    if not 1 <= a.batch_size <= 65536:
        p.error("--batch-size: %d is out of range 1..65536" % a.batch_size)
    if not (a.lr > 0 and a.lr <= 100 and math.isfinite(a.lr)):
        p.error("--lr: %g is out of range (0, 100]" % a.lr)
    if a.max_steps < 0 or a.train_limit < 0:
        p.error("--max-steps and --train-limit must be >= 0")
    if not 0 <= a.seed <= MASK64:
        p.error("--seed: not an unsigned 64-bit integer")
    return a


# ---- splitmix64, as examples/shard.c and models/layers.c use it ----

def splitmix64(state):
    """(new state, output) from state, all Python ints below 2^64."""
    state = (state + GOLDEN) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def splitmix64_block(np, state, n):
    """(new state, n outputs as numpy uint64) from state, vectorised."""
    with np.errstate(over="ignore"):
        k = np.arange(1, n + 1, dtype=np.uint64)
        s = np.uint64(state) + k * np.uint64(GOLDEN)  # wraps mod 2^64
        z = s
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (state + n * GOLDEN) & MASK64, z


def shuffle_order(count, seed, epoch):
    """examples/shard.c's data_shuffle: Fisher-Yates driven by splitmix64,
    rejection sampling without modulo bias, one stream per (seed, epoch)."""
    _, a = splitmix64(seed)
    _, b = splitmix64(epoch)
    state = a ^ b
    order = list(range(count))
    for i in range(count, 1, -1):
        threshold = ((1 << 64) - i) % i  # (0 - bound) % bound in uint64
        while True:
            state, r = splitmix64(state)
            if r >= threshold:
                break
        j = r % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def shard_indices(order, rank, size):
    """data_shard_set_epoch: pad by wrapping, every size-th from rank."""
    n = len(order)
    shard_count = n // size + (n % size != 0)
    return [order[(j * size + rank) % n] for j in range(shard_count)]


# ---- data ----

def load_idx(np, data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    out = []
    for kind, magic in (("images-idx3-ubyte", 0x803), ("labels-idx1-ubyte", 0x801)):
        path = os.path.join(data_dir, "%s-%s.gz" % (prefix, kind))
        opener = gzip.open
        if not os.path.exists(path) and os.path.exists(path[:-3]):
            path, opener = path[:-3], open
        try:
            with opener(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            fail("%s: cannot read: %s" % (path, e))
        ndim = magic & 0xFF
        if len(raw) < 4 + 4 * ndim:
            fail("%s: short header" % path)
        got_magic = struct.unpack(">I", raw[:4])[0]
        if got_magic != magic:
            fail("%s: magic 0x%x, expected 0x%x" % (path, got_magic, magic))
        dims = struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim])
        body = raw[4 + 4 * ndim:]
        if len(body) != math.prod(dims):
            fail("%s: %d data bytes, expected %d" % (path, len(body), math.prod(dims)))
        out.append(np.frombuffer(body, dtype=np.uint8).reshape(dims))
    images, labels = out
    if images.shape[0] != labels.shape[0] or images.shape[1:] != (28, 28):
        fail("%s: %s images of %s, %d labels" % (data_dir, images.shape[0],
                                                  images.shape[1:], labels.shape[0]))
    if labels.max() >= 10:
        fail("%s: label %d out of range" % (data_dir, labels.max()))
    return images, labels


# ---- models ----

def build_model(torch, kind):
    nn = torch.nn
    if kind == "mlp":
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 256), nn.ReLU(),
            nn.Linear(256, 128), nn.ReLU(),
            nn.Linear(128, 10))
    return nn.Sequential(
        nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(3136, 128), nn.ReLU(),
        nn.Linear(128, 10))


def init_like_ours(np, torch, model, seed):
    """models/model.c's init_weights: weights of each layer in order from
    one splitmix64 stream, (2 u - 1) * sqrtf(6 / fan_in) in float32 with
    u = (r >> 40) / 2^24; biases zero. Layouts (out, in[, kh, kw]) are the
    same in PyTorch."""
    state = seed & MASK64
    with torch.no_grad():
        for mod in model:
            if not isinstance(mod, (torch.nn.Linear, torch.nn.Conv2d)):
                continue
            w = mod.weight
            count = w.numel()
            fan_in = count // w.shape[0]
            bound = np.sqrt(np.float32(6.0) / np.float32(fan_in), dtype=np.float32)
            state, r = splitmix64_block(np, state, count)
            u = (r >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
            vals = (np.float32(2.0) * u - np.float32(1.0)) * bound
            w.copy_(torch.from_numpy(vals.astype(np.float32)).view_as(w))
            mod.bias.zero_()


def lr_warmup(base_lr, ranks, warmup_epochs, epoch):
    """model_lr_warmup."""
    target = base_lr * max(ranks, 1)
    if warmup_epochs <= 0 or epoch >= warmup_epochs:
        return target
    epoch = max(epoch, 0.0)
    return base_lr + (target - base_lr) * (epoch / warmup_epochs)


def lr_cosine(lr, from_epoch, to_epoch, epoch):
    """model_lr_cosine: ours decays to 0 after the warm-up."""
    if to_epoch <= from_epoch or epoch <= from_epoch:
        return lr
    if epoch >= to_epoch:
        return 0.0
    t = (epoch - from_epoch) / (to_epoch - from_epoch)
    return lr * 0.5 * (1.0 + math.cos(math.pi * t))


def fmt_duration(s):
    if not (s >= 0) or s > 1e7:
        s = 0
    t = int(s + 0.5)
    if t >= 3600:
        return "%d:%02d:%02d" % (t // 3600, t // 60 % 60, t % 60)
    return "%d:%02d" % (t // 60, t % 60)


def main(argv):
    opt = parse_args(argv)
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
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

    try:
        import numpy as np
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
    except ImportError as e:
        fail("%s (install Debian's python3-torch and run /usr/bin/python3)" % e)
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass

    if opt.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: torch sees no GPU (torch %s)" % torch.__version__,
             2)
    dev = torch.device(opt.device)
    if opt.cudnn == "exact":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
    dist.init_process_group("gloo", rank=rank, world_size=size)

    # ---- data: every rank reads both splits ----
    tr_x, tr_y = load_idx(np, opt.data, "train")
    te_x, te_y = load_idx(np, opt.data, "test")
    if 0 < opt.train_limit < tr_x.shape[0]:
        tr_x, tr_y = tr_x[:opt.train_limit], tr_y[:opt.train_limit]

    def to_tensor(x):
        t = torch.from_numpy(x.astype(np.float32) / np.float32(255.0))
        if opt.normalize == "on":
            t = (t - MEAN) / STD
        return t.view(-1, 1, 28, 28).contiguous()

    # On the GPU the whole data set lives there (188 MB for the training
    # images): each batch is an index_select on the device.
    train_x, test_x = to_tensor(tr_x).to(dev), to_tensor(te_x).to(dev)
    train_y = torch.from_numpy(tr_y.astype(np.int64)).to(dev)
    test_y = torch.from_numpy(te_y.astype(np.int64)).to(dev)
    n_train = train_x.shape[0]

    # ---- model, optimizer, DDP ----
    torch.manual_seed(opt.seed)
    model = build_model(torch, opt.model)
    if opt.init == "ours":
        init_like_ours(np, torch, model, opt.seed)
    model = model.to(dev)
    nparams = sum(p.numel() for p in model.parameters())
    ddp = DDP(model)  # broadcasts rank 0's parameters
    sgd = torch.optim.SGD(ddp.parameters(), lr=opt.lr, momentum=MOMENTUM)
    loss_fn = torch.nn.CrossEntropyLoss()

    shard_count = n_train // size + (n_train % size != 0)
    spe = shard_count // opt.batch_size + (shard_count % opt.batch_size != 0)
    # As train_fmnist: --max-steps K alone trains K steps, in as many
    # epochs as they take, the cosine ending with the K-th.
    lr_epochs = opt.epochs
    if opt.epochs is None:
        opt.epochs = -(-opt.max_steps // spe) if opt.max_steps > 0 else 2
        lr_epochs = opt.max_steps / spe if opt.max_steps > 0 else 2
    end_step = opt.epochs * spe
    if 0 < opt.max_steps < end_step:
        end_step = opt.max_steps
    log_every = max(spe // 10, 1)
    if rank == 0:
        print("torch_fmnist: %s, %d parameters, %d rank%s, batch %d per rank, "
              "%d training images (%d steps per epoch), %d test images, "
              "lr %g x %d after %g warm-up epoch (torch %s, gloo, %d thread%s "
              "per rank, normalize %s, init %s, on %s%s)"
              % (opt.model, nparams, size, "" if size == 1 else "s",
                 opt.batch_size, n_train, spe, test_x.shape[0], opt.lr, size,
                 WARMUP_EPOCHS, torch.__version__, torch.get_num_threads(),
                 "" if torch.get_num_threads() == 1 else "s", opt.normalize,
                 opt.init, opt.device,
                 ", cuDNN " + opt.cudnn if opt.device == "cuda" else ""),
              flush=True)

    gstep = done_steps = 0
    train_time = total_images = 0.0
    last_acc = -1.0
    for epoch in range(opt.epochs):
        if gstep >= end_step:
            break
        idx_all = torch.tensor(shard_indices(shuffle_order(n_train, opt.seed, epoch),
                                             rank, size), dtype=torch.int64,
                               device=dev)
        ddp.train()
        t_epoch = t_win = time.perf_counter()
        loss_win = loss_epoch = images_win = images_epoch = 0.0
        steps_win = steps_epoch = 0
        stopped = False
        for b in range(spe):
            if gstep >= end_step:
                stopped = True
                break
            idx = idx_all[b * opt.batch_size:(b + 1) * opt.batch_size]
            n = idx.shape[0]
            x = train_x.index_select(0, idx)
            y = train_y.index_select(0, idx)
            lr = lr_cosine(lr_warmup(opt.lr, size, WARMUP_EPOCHS, epoch + b / spe),
                           WARMUP_EPOCHS, lr_epochs, epoch + b / spe)
            for g in sgd.param_groups:
                g["lr"] = lr
            sgd.zero_grad(set_to_none=False)
            loss = loss_fn(ddp(x), y)
            loss.backward()
            sgd.step()
            lv = loss.item()
            gstep += 1
            done_steps += 1
            steps_win += 1
            steps_epoch += 1
            loss_win += lv
            loss_epoch += lv
            images_win += n * size
            images_epoch += n * size
            if rank != 0:
                continue
            last = b + 1 == spe or gstep == end_step
            if not (gstep % log_every == 0 or last):
                continue
            t = time.perf_counter()
            elapsed = train_time + (t - t_epoch)
            left = elapsed / done_steps * (end_step - done_steps)
            print("step %d/%d  epoch %d  loss %.4f  %.0f images/s  lr %.4g  left %s"
                  % (gstep, end_step, epoch + 1, loss_win / steps_win,
                     images_win / max(t - t_win, 1e-9), lr, fmt_duration(left)),
                  flush=True)
            t_win = t
            loss_win = images_win = 0.0
            steps_win = 0
        epoch_time = time.perf_counter() - t_epoch
        train_time += epoch_time
        total_images += images_epoch

        # ---- test accuracy: each rank a contiguous part, summed ----
        ddp.eval()
        lo = test_x.shape[0] * rank // size
        hi = test_x.shape[0] * (rank + 1) // size
        correct = count = loss_sum = 0.0
        with torch.no_grad():
            for i in range(lo, hi, opt.batch_size):
                j = min(i + opt.batch_size, hi)
                logits = model(test_x[i:j])  # the module, not DDP: no sync
                correct += (logits.argmax(1) == test_y[i:j]).sum().item()
                count += j - i
                loss_sum += loss_fn(logits, test_y[i:j]).item() * (j - i)
        sums = torch.tensor([correct, count, loss_sum,
                             loss_epoch / steps_epoch if steps_epoch else 0.0],
                            dtype=torch.float64)  # on the host: gloo sums it
        dist.all_reduce(sums)
        tot = sums.tolist()
        last_acc = tot[0] / tot[1] if tot[1] > 0 else 0.0
        if rank == 0:
            print("epoch %d/%d  train_loss %.4f  test_loss %.4f  test_acc %.4f  "
                  "(%.0f/%.0f)  time %.1f s  %.0f images/s%s"
                  % (epoch + 1, opt.epochs, tot[3] / size,
                     tot[2] / tot[1] if tot[1] > 0 else 0.0, last_acc, tot[0],
                     tot[1], epoch_time, images_epoch / max(epoch_time, 1e-9),
                     "  (stopped by --max-steps)" if stopped else ""), flush=True)

    if rank == 0 and done_steps > 0:
        rate = total_images / max(train_time, 1e-9)
        print("done: %d steps, %.0f images in %.1f s of training: %.0f images/s "
              "(%.0f per rank), test_acc %.4f"
              % (done_steps, total_images, train_time, rate, rate / size,
                 last_acc), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
