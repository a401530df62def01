#!/usr/bin/python3
"""examples/torch/train_fmnist.py: examples/train_fmnist (the main job) as a
plain PyTorch script on hvd.torch, written in Horovod's documented style.

An mlp (784-256-128-10) or cnn (two conv5x5 + maxpool, FC 128, FC 10) on
Fashion-MNIST, data-parallel over the ranks of mpirun:

  - hvd.init(); on cuda torch.cuda.set_device(hvd.local_rank() %
    torch.cuda.device_count()), the GPU hvd chose;
  - each rank reads its part of the training set through a
    DistributedSampler(num_replicas=hvd.size(), rank=hvd.rank()),
    reshuffled every epoch (set_epoch) from --seed;
  - SGD, momentum 0.9, lr = --lr x hvd.size() (Horovod's linear scaling);
  - hvd.DistributedOptimizer(optimizer, named_parameters=...,
    compression=hvd.Compression.none or .fp16 with --fp16-allreduce);
  - hvd.broadcast_parameters(model.state_dict(), root_rank=0) and
    hvd.broadcast_optimizer_state(optimizer, root_rank=0) before training;
  - the training loss averaged over ranks with hvd.allreduce, the test set
    split into contiguous parts per rank and its counts summed with
    hvd.allreduce(op=hvd.Sum); rank 0 prints, per epoch,
      epoch 1/2  train_loss 0.5123  test_loss 0.4321  test_acc 0.8456
        (8456/10000)  time 12.3 s  4567 images/s
  - with --checkpoint PATH, rank 0 writes PATH after each epoch (torch.save
    to a temporary file in the same folder, then os.replace: never a
    half-written file). When PATH exists at start, rank 0 loads it and the
    run resumes after its last epoch: broadcast_parameters,
    broadcast_optimizer_state and broadcast_object for the epoch.

Data: the IDX files of examples/train_fmnist (train-images-idx3-ubyte.gz,
train-labels-idx1-ubyte.gz, t10k-*; gzipped or plain) in --data (default
/usr/share/datasets/fashion-mnist, the C program's); pixels byte / 255,
then (x - 0.2860) / 0.3530 with --normalize on (as train_fmnist).

It is a Horovod script: replacing the line `import hvd.torch as hvd` by
`import horovod.torch as hvd` runs it on Horovod, unchanged otherwise.

    HVD_LIBRARY=$PWD/libhvd.so PYTHONPATH=$PWD \\
        mpirun -np 2 /usr/bin/python3 examples/torch/train_fmnist.py \\
        --model cnn --epochs 2 --checkpoint /tmp/fmnist.pt

Threads: one per rank (OMP/OpenBLAS/MKL set before torch is imported), or
TORCH_BENCH_THREADS. Exit status: 0, 1 (data, checkpoint or runtime
error), 2 (bad flags).
"""

import os

# Before torch (and numpy) load their BLAS and OpenMP runtimes.
THREADS = os.environ.get("TORCH_BENCH_THREADS", "1")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = THREADS

import argparse
import gzip
import math
import struct
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data
import torch.utils.data.distributed

import hvd.torch as hvd

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
PROG = "train_fmnist.py"


def fail(msg, code=1):
    print("%s: %s" % (PROG, msg), file=sys.stderr, flush=True)
    sys.exit(code)


def abort(msg):
    """One rank's error while the others train: os._exit skips the
    shutdown at exit, which would wait for them, so that mpirun sees this
    rank end and stops the job."""
    print("%s: %s" % (PROG, msg), file=sys.stderr, flush=True)
    os._exit(1)


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Fashion-MNIST training on hvd.torch (Horovod's API); "
        "launch with mpirun -np N /usr/bin/python3 examples/torch/train_fmnist.py")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp",
                   help="the network (mlp)")
    p.add_argument("--epochs", type=int, default=2, help="epochs (2)")
    p.add_argument("--max-steps", type=int, default=0,
                   help="stop after K steps in total (0: no limit)")
    p.add_argument("--batch-size", type=int, default=64,
                   help="samples per batch per rank (64)")
    p.add_argument("--lr", type=float, default=0.05,
                   help="base learning rate, multiplied by the number of "
                   "ranks (0.05)")
    p.add_argument("--seed", type=int, default=42,
                   help="seed of the weights and the shuffling (42)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where to train (cpu)")
    p.add_argument("--data", default=DEFAULT_DATA,
                   help="folder of the IDX files (%s)" % DEFAULT_DATA)
    p.add_argument("--checkpoint", default=None, metavar="PATH",
                   help="rank 0 writes PATH after each epoch; an existing "
                   "PATH is resumed from")
    p.add_argument("--normalize", choices=("on", "off"), default="off",
                   help="(x - %.4f) / %.4f after /255 (off)" % (MEAN, STD))
    p.add_argument("--fp16-allreduce", action="store_true", default=False,
                   help="gradients travel as float16")
    p.add_argument("--train-limit", type=int, default=0,
                   help="use only the first N training images (0: all)")
    a = p.parse_args(argv)
    if not 1 <= a.epochs <= 100000:
        p.error("--epochs: %d is out of range 1..100000" % a.epochs)
    if not 1 <= a.batch_size <= 65536:
        p.error("--batch-size: %d is out of range 1..65536" % a.batch_size)
    if not (math.isfinite(a.lr) and 0 < a.lr <= 100):
        p.error("--lr: %g is out of range (0, 100]" % a.lr)
    if a.max_steps < 0:
        p.error("--max-steps: must be >= 0")
    if a.train_limit < 0:
        p.error("--train-limit: must be >= 0")
    if not 0 <= a.seed < 2 ** 63:
        p.error("--seed: must be from 0 to 2^63 - 1")
    if a.checkpoint == "":
        p.error("--checkpoint: empty path")
    if a.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch %s sees no GPU" % torch.__version__)
    return a


def load_idx(data_dir, split):
    """(images uint8 N x 28 x 28, labels int64 N) of one split."""
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
        except (OSError, EOFError) as e:
            fail("%s: cannot read: %s" % (path, e))
        ndim = magic & 0xFF
        if len(raw) < 4 + 4 * ndim:
            fail("%s: short header" % path)
        got = struct.unpack(">I", raw[:4])[0]
        if got != magic:
            fail("%s: magic 0x%x, expected 0x%x" % (path, got, magic))
        dims = struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim])
        body = raw[4 + 4 * ndim:]
        if len(body) != math.prod(dims):
            fail("%s: %d data bytes, expected %d" % (path, len(body), math.prod(dims)))
        out.append(torch.frombuffer(bytearray(body), dtype=torch.uint8).view(*dims))
    images, labels = out
    if images.shape[0] != labels.shape[0] or tuple(images.shape[1:]) != (28, 28):
        fail("%s: %d images of %s, %d labels" % (data_dir, images.shape[0],
                                                  tuple(images.shape[1:]),
                                                  labels.shape[0]))
    if labels.numel() and int(labels.max()) >= 10:
        fail("%s: label %d out of range" % (data_dir, int(labels.max())))
    return images, labels.long()


def to_dataset(images, labels, normalize):
    x = images.float().div_(255.0).unsqueeze(1)  # N x 1 x 28 x 28
    if normalize:
        x = (x - MEAN) / STD
    return torch.utils.data.TensorDataset(x, labels)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(3136, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc2(F.relu(self.fc1(x)))


def metric_average(val, name):
    """Horovod's examples' metric_average: the mean over the ranks."""
    return hvd.allreduce(torch.tensor(float(val)), name=name).item()


def save_checkpoint(path, state):
    """torch.save to a temporary file beside path, then os.replace."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path),
                               suffix=".tmp", dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 otherwise
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def main(argv=None):
    args = parse_args(argv)

    torch.set_num_threads(int(THREADS))
    hvd.init()
    torch.manual_seed(args.seed)
    if args.device == "cuda":
        # hvd's GPU: local rank modulo those visible (one, under srun's
        # --gpus-per-task, where local_rank() alone was no device).
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        torch.cuda.manual_seed(args.seed)
    device = torch.device(args.device)

    # ---- data ----
    tr_x, tr_y = load_idx(args.data, "train")
    te_x, te_y = load_idx(args.data, "test")
    if 0 < args.train_limit < tr_x.shape[0]:
        tr_x, tr_y = tr_x[:args.train_limit], tr_y[:args.train_limit]
    train_dataset = to_dataset(tr_x, tr_y, args.normalize == "on")
    test_dataset = to_dataset(te_x, te_y, args.normalize == "on")
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_dataset, num_replicas=hvd.size(), rank=hvd.rank(), shuffle=True,
        seed=args.seed)
    train_loader = torch.utils.data.DataLoader(
        train_dataset, batch_size=args.batch_size, sampler=train_sampler)
    # The test set: a contiguous part per rank, counts summed (exact).
    n_test = len(test_dataset)
    lo, hi = n_test * hvd.rank() // hvd.size(), n_test * (hvd.rank() + 1) // hvd.size()
    test_loader = torch.utils.data.DataLoader(
        torch.utils.data.Subset(test_dataset, range(lo, hi)),
        batch_size=max(args.batch_size, 256))

    # ---- model, optimizer ----
    model = (MLP() if args.model == "mlp" else CNN()).to(device)
    lr_scaler = hvd.size()
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler,
                          momentum=0.9)
    compression = (hvd.Compression.fp16 if args.fp16_allreduce
                   else hvd.Compression.none)
    optimizer = hvd.DistributedOptimizer(
        optimizer, named_parameters=model.named_parameters(),
        compression=compression, op=hvd.Average)

    # ---- resume: rank 0 reads the checkpoint, the others get it ----
    start_epoch, gstep, error = 0, 0, None
    if args.checkpoint and hvd.rank() == 0:
        folder = os.path.dirname(os.path.abspath(args.checkpoint))
        if not (os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK)):
            error = "%s: cannot write there (no folder %s, or not writable)" % (
                args.checkpoint, folder)
        elif os.path.exists(args.checkpoint):
            try:
                ckpt = torch.load(args.checkpoint, map_location="cpu")
                if ckpt.get("model_name") != args.model:
                    raise ValueError("holds a %s, not a %s"
                                     % (ckpt.get("model_name"), args.model))
                model.load_state_dict(ckpt["model"])
                optimizer.load_state_dict(ckpt["optimizer"])
                start_epoch, gstep = int(ckpt["epoch"]), int(ckpt["step"])
            except Exception as e:  # noqa: BLE001 - any unreadable checkpoint
                error = "%s: cannot resume: %s" % (args.checkpoint, e)
        if error:
            print("%s: %s" % (PROG, error), file=sys.stderr, flush=True)
    start_epoch, gstep, error = hvd.broadcast_object((start_epoch, gstep, error),
                                                     root_rank=0)
    if error:
        sys.exit(1)  # every rank together: rank 0 said why
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    nparams = sum(p.numel() for p in model.parameters())
    steps_per_epoch = len(train_loader)
    end_step = args.epochs * steps_per_epoch
    if 0 < args.max_steps < end_step:
        end_step = args.max_steps
    if hvd.rank() == 0:
        print("%s: %s, %d parameters, %d rank%s, batch %d per rank, %d training "
              "images (%d steps per epoch), %d test images, lr %g x %d (%s, "
              "torch %s, on %s)%s"
              % (PROG, args.model, nparams, hvd.size(),
                 "" if hvd.size() == 1 else "s", args.batch_size,
                 len(train_dataset), steps_per_epoch, n_test, args.lr,
                 lr_scaler, hvd.__name__, torch.__version__, args.device,
                 "; resumed from %s after epoch %d" % (args.checkpoint, start_epoch)
                 if start_epoch > 0 else ""), flush=True)

    for epoch in range(start_epoch, args.epochs):
        if gstep >= end_step:
            break
        # ---- train ----
        model.train()
        train_sampler.set_epoch(epoch)
        t0 = time.perf_counter()
        loss_sum, steps, images = 0.0, 0, 0
        stopped = False
        for data, target in train_loader:
            if gstep >= end_step:
                stopped = True
                break
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item()
            steps += 1
            gstep += 1
            images += data.shape[0]
        elapsed = time.perf_counter() - t0
        if gstep >= end_step and steps < steps_per_epoch:
            stopped = True

        # ---- test ----
        model.eval()
        correct = test_loss = 0.0
        with torch.no_grad():
            for data, target in test_loader:
                data, target = data.to(device), target.to(device)
                output = model(data)
                test_loss += F.cross_entropy(output, target, reduction="sum").item()
                correct += (output.argmax(1) == target).sum().item()
        sums = hvd.allreduce(torch.tensor([correct, float(hi - lo), test_loss],
                                          dtype=torch.float64),
                             name="test_sums", op=hvd.Sum)
        correct, count, test_loss = sums.tolist()
        train_loss = metric_average(loss_sum / max(steps, 1), "train_loss")
        total_images = metric_average(images, "images") * hvd.size()
        if hvd.rank() == 0:
            print("epoch %d/%d  train_loss %.4f  test_loss %.4f  test_acc %.4f  "
                  "(%.0f/%.0f)  time %.1f s  %.0f images/s%s"
                  % (epoch + 1, args.epochs, train_loss, test_loss / max(count, 1),
                     correct / max(count, 1), correct, count, elapsed,
                     total_images / max(elapsed, 1e-9),
                     "  (stopped by --max-steps)" if stopped else ""), flush=True)

        # ---- checkpoint: whole epochs only ----
        if args.checkpoint and hvd.rank() == 0 and not stopped:
            try:
                save_checkpoint(args.checkpoint, {
                    "model_name": args.model, "epoch": epoch + 1, "step": gstep,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict()})
            except OSError as e:
                abort("%s: cannot write the checkpoint: %s" % (args.checkpoint, e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
