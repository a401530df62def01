#!/bin/sh
# test/train_gpu.sh: the main job on a real GPU (scripts/gpu-check; exits
# 77 where --device cuda cannot run). On Fashion-MNIST when installed,
# else on noise images this script writes:
#   - 300 steps at 2 ranks sharing the GPU: the loss of each progress line and the
#     final test accuracy against the same run on the CPU, within TOL_LOSS
#     relative and TOL_ACC absolute (cuBLAS and OpenBLAS add in other
#     orders, nvcc fuses multiply-adds: a difference of 1e-6 a step that
#     training carries on, not a wrong kernel, which shows at once). On
#     noise images only the first NOISE_STEPS steps: raw noise trains
#     chaotically, and on an H100 the two runs, equal to 4 decimals for 10
#     steps, were 5% apart by step 53 and apart for good after;
#   - resume on the GPU: 2 epochs straight equal, bitwise, to 1 epoch, a
#     checkpoint and --resume (the GPU's kernels and hvd's device path add
#     in a fixed order), for the mlp and the cnn.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup train_gpu
TOL_LOSS=0.05 TOL_ACC=0.02 NOISE_STEPS=10
unset HVD_DEVICE_EMULATE
tf=examples/train_fmnist
if script_have_fmnist; then
    data_flags="--data $data --train-limit 6400"
    steps=300 check_acc=1
else
    script_tiny_fmnist "$dir/idx" 200 28 /dev/urandom
    data_flags="--data $dir/idx"
    steps=$NOISE_STEPS check_acc=0
fi
echo 1 $tf $data_flags --device cuda --max-steps 1 > "$dir/spec"
if ! sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > /dev/null 2>&1; then
    echo "SKIP: train_fmnist --device cuda cannot run here"
    exit 77
fi

# losses FILE: "step loss" per progress line, then "acc A".
losses() {
    sed -n 's/^step \([0-9]*\)\/.* loss \([0-9.]*\) .*/\1 \2/p' "$1"
    sed -n 's/^done: .* test_acc \([0-9.]*\)$/acc \1/p' "$1"
}
for model in mlp cnn; do
    run="$data_flags --model $model --batch-size 32 --progress lines"
    script_launch "cpu $model" 2 $tf $run --max-steps $steps --device cpu \
        --shard-optimizer off > "$dir/cpu.out"
    script_launch "gpu $model" 2 $tf $run --max-steps $steps --device cuda \
        > "$dir/gpu.out"
    losses "$dir/cpu.out" > "$dir/cpu"
    losses "$dir/gpu.out" > "$dir/gpu"
    paste "$dir/cpu" "$dir/gpu" | awk -v tl=$TOL_LOSS -v ta=$TOL_ACC \
        -v what="$model" -v acc=$check_acc '
        $1 != $3 { print "FAIL: " what ": line " NR ": " $0; bad = 1; next }
        $1 == "acc" { n_acc++; if (!acc) next
                      d = $2 - $4; if (d < 0) d = -d
                      if (d > ta) { print "FAIL: " what ": test_acc " \
                          $2 " on the CPU, " $4 " on the GPU"; bad = 1 }
                      next }
        { d = $2 - $4; if (d < 0) d = -d
          if (d > tl * (1 + $2)) { print "FAIL: " what ": step " $1 \
              ": loss " $2 " on the CPU, " $4 " on the GPU"; bad = 1 } }
        END { if (NR - n_acc < 10 || n_acc != 1) {
                  print "FAIL: " what ": " NR - n_acc " losses and " \
                      n_acc " accuracies (10 and 1 at least)"; bad = 1 }
              exit bad }' >&2 || rc=1
    script_resume_equal 2 $tf $data_flags --model $model --batch-size 32 \
        --progress lines --device cuda
done
script_finish train_gpu
