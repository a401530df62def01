#!/bin/bash
# bench/results/issue23/gpu_next.sh OUT: what the next GPU lease runs for
# issue 23, from the repository root, in one command (about 10 minutes on
# one H100 with REPS=3; REPS=2 for less):
#
#   1. scripts/gpu-check OUT/gpu-check: the build (cuDNN from CUDA's
#      folder or PyTorch's wheel), every GPU test (test_models_cuda runs
#      cuDNN's and im2col's convolutions against the host; train_gpu.sh
#      the batches copied ahead and the queued loss on the GPU against the
#      CPU), the sanitizers (memcheck over 5 training steps included);
#   2. in the tree it built: compare_torch.sh --device cuda at batch 512,
#      1 rank, ours with cuDNN (the default) and with HVD_CONV=im2col
#      (the reference), against torch: the target is >= 1.0x torch;
#   3. compare_torch.sh --device cuda at batch 64, 1 and 2 ranks sharing
#      the GPU: the target is >= 0.8x torch at 1 rank, and the 2-rank
#      step within 1.2x of twice the 1-rank step, which is 2-rank
#      images/s >= 2 / (2 x 1.2) = 0.83x the 1-rank images/s;
#   4. where a 2-rank cnn step's time goes: HVD_TIMELINE over 300 steps,
#      summed by phase (bench/timeline_phases.py, the first 2 s dropped);
#   5. the 2-rank cnn with HVD_INTRANODE=auto and =shm, alternated, two
#      runs each: a group under 4 KiB (conv1's gradients, 3.3 KB, the
#      last that backward finishes) goes over MPI staged through the host
#      under auto (several waits for the device), through the device
#      slabs under shm (one): whether ring should take the slabs for
#      device calls of every size.
#
# Fashion-MNIST: DATA, else .dev/fmnist when carried, else the programs'
# default folder (train_gpu.sh then trains on noise). Each step's output
# goes to OUT; the figures to read are the tables at the end of
# OUT/ct512_*.txt and OUT/ct64.txt.
set -u
[ $# -eq 1 ] || { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 2; }
out=$(mkdir -p "$1" && cd "$1" && pwd) || exit 2
top=$(pwd)
reps=${REPS:-3}
data=${DATA:-}
[ -z "$data" ] && [ -d "$top/.dev/fmnist" ] && data=$top/.dev/fmnist
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
t0=$SECONDS

TRAIN_DATA=$data T_BENCH=40 scripts/gpu-check "$out/gpu-check" \
    > "$out/gpu-check.txt" 2>&1
echo "gpu-check rc=$? at $((SECONDS - t0))s"
tail -n 25 "$out/gpu-check.txt"
src=$out/gpu-check/src
[ -x "$src/examples/train_fmnist" ] || { echo "no build in $src"; exit 1; }
cd "$src" || exit 1

ct() { # NAME ARGS...: compare_torch.sh on the GPU into OUT/NAME.txt
    local name=$1
    shift
    PYTHON=${PYTHON:-$(command -v python3)} NO_INSTALL=1 \
        bench/compare_torch.sh --device cuda --reps "$reps" \
        ${data:+--data "$data"} --results "$out/$name" "$@" \
        > "$out/$name.txt" 2>&1
    echo "$name rc=$? at $((SECONDS - t0))s"
    tail -n 12 "$out/$name.txt"
}
ct ct512_cudnn --ranks 1 --batch-size 512 --steps-mlp 600 --steps-cnn 200
HVD_CONV=im2col ct ct512_im2col --models cnn --ranks 1 --batch-size 512 \
    --steps-cnn 200
ct ct64 --ranks "1 2" --batch-size 64 --steps-mlp 1000 --steps-cnn 300
HVD_TIMELINE=$out/timeline_cnn_np2.json timeout 90 mpirun \
    --allow-run-as-root --oversubscribe --bind-to none -np 2 \
    examples/train_fmnist ${data:+--data "$data"} --model cnn --device cuda \
    --batch-size 64 --max-steps 300 --epochs 100 --progress lines \
    > "$out/timeline_run.txt" 2>&1
echo "timeline rc=$? at $((SECONDS - t0))s"
python3 bench/timeline_phases.py "$out/timeline_cnn_np2.json" 2 |
    tee "$out/timeline_phases.txt"
for rep in 1 2; do
    for mode in auto shm; do
        printf '%s rep %s: ' "$mode" "$rep"
        HVD_INTRANODE=$mode timeout 60 mpirun --allow-run-as-root \
            --oversubscribe --bind-to none -np 2 examples/train_fmnist \
            ${data:+--data "$data"} --model cnn --device cuda \
            --batch-size 64 --max-steps 300 --epochs 100 --progress lines \
            2>&1 | grep '^done:' || echo "rc=$?"
    done
done | tee "$out/intranode.txt"
echo "end at $((SECONDS - t0))s"
