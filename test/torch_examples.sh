#!/bin/sh
# test/torch_examples.sh: the PyTorch examples on hvd.torch, as a user
# runs them with mpirun (test/slurm.sh runs them under srun):
#   - examples/torch/train_fmnist.py at 2 ranks on 640 training images:
#     2 epochs straight, and 1 epoch + a resume from rank 0's checkpoint
#     + 1 epoch, must end with equal model and optimizer state (bitwise),
#     and the epoch-1 checkpoint must differ from them;
#   - at 3 ranks, the cnn for a few steps with fp16 gradients;
#   - examples/torch/synthetic_benchmark.py at 3 ranks (images/s over 3
#     CPUs) and its small-tensor timing at 2;
#   - a bad flag: exit 2 naming it.
# Fashion-MNIST from TRAIN_DATA (Debian's by default); a tiny set in its
# format when missing. Skips (77) without a Python that has torch.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir,
# PYTHON, TRAIN_DATA.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup torch_examples
script_torch_python || { echo "SKIP: hvd.torch needs it"; exit 77; }
if script_have_fmnist; then
    limit=640
else
    script_tiny_fmnist "$dir/data" 64 28 /dev/urandom
    data=$dir/data limit=64
fi
train="$src/examples/torch/train_fmnist.py --data $data --train-limit $limit \
--seed 3 --batch-size 32"
bench=$src/examples/torch/synthetic_benchmark.py

# out_has WHAT PATTERN: $dir/out (the last launch's stdout) matches.
out_has() {
    grep -q -e "$2" "$dir/out" ||
        { echo "FAIL: $1: no line matches \"$2\"" >&2; rc=1; }
}

# run WHAT NP ARGS...: script_launch with the stdout kept in $dir/out.
run() {
    what=$1 np=$2
    shift 2
    script_launch "$what" "$np" "$python" "$@" > "$dir/out"
    cat "$dir/out"
}

run "2 epochs" 2 $train --epochs 2 --checkpoint "$dir/a.pt"
out_has "2 epochs" "^epoch 2/2 "
run "1 epoch" 2 $train --epochs 1 --checkpoint "$dir/b.pt"
cp "$dir/b.pt" "$dir/b1.pt"
run "resume" 2 $train --epochs 2 --checkpoint "$dir/b.pt"
out_has "resume" "resumed from .* after epoch 1"
"$python" - "$dir/a.pt" "$dir/b.pt" "$dir/b1.pt" <<'PY' || rc=1
import sys, torch
def flat(path):
    state = torch.load(path)
    tensors = []
    def walk(x):
        if torch.is_tensor(x):
            tensors.append(x.flatten().double())
        elif isinstance(x, dict):
            for k in sorted(x, key=str):
                walk(x[k])
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
    walk({k: v for k, v in state.items() if k in ("model", "optimizer")})
    return torch.cat(tensors)
a, b, b1 = map(flat, sys.argv[1:])
if not torch.equal(a, b):
    sys.exit("FAIL: 2 epochs and 1 + resume + 1 differ by %g"
             % (a - b).abs().max())
if torch.equal(a, b1):
    sys.exit("FAIL: the epoch-1 checkpoint equals the epoch-2 one")
print("resume: bitwise equal to the uninterrupted run")
PY
run "cnn fp16 at 3" 3 $train --model cnn --max-steps 4 --fp16-allreduce
out_has "cnn fp16 at 3" "3 ranks"
run "synthetic at 3" 3 "$bench" --model cnn --num-warmup-batches 1 \
    --num-batches-per-iter 2 --num-iters 2 --batch-size 16
out_has "synthetic at 3" "^Total img/sec on 3 CPU"
run "small tensors at 2" 2 "$bench" --small-tensors 100 --num-iters 2 \
    --num-warmup-batches 1
out_has "small tensors at 2" "^small tensors: 100 x 4 KiB: "
script_expect "a bad model" 2 "nonsuch" 1 "$python" "$bench" --model nonsuch
script_finish torch_examples
