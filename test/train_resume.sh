#!/bin/sh
# test/train_resume.sh: examples/train_fmnist on the first 2000 training
# images at 2 ranks: 2 epochs straight and 1 epoch + --resume + 1 epoch
# end with bitwise equal checkpoints (parameters, momentum, epoch, RNG);
# a truncated or corrupted checkpoint is refused on --resume (exit 1, a
# message naming the file); bad flags exit 2 naming the flag; at 3 ranks
# --shard-optimizer on resumes bitwise and ends bitwise where off does.
# Skips (77) without the Fashion-MNIST files (TRAIN_DATA, default
# /usr/share/datasets/fashion-mnist).
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup train_resume
if ! script_have_fmnist; then
    echo "SKIP: no Fashion-MNIST in $data"
    exit 77
fi
prog=examples/train_fmnist
common="--model mlp --train-limit 2000 --batch-size 32 --seed 7 --data $data"

script_resume_equal 2 $prog $common

# Corrupt checkpoints: refused, never half-loaded.
size=$(wc -c < "$dir/b1.ckpt")
head -c $((size - 100)) "$dir/b1.ckpt" > "$dir/trunc.ckpt"
script_expect "truncated" 1 "trunc.ckpt.*truncated" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/trunc.ckpt" --resume
cp "$dir/b1.ckpt" "$dir/flip.ckpt"
printf 'X' | dd of="$dir/flip.ckpt" bs=1 seek=1000 conv=notrunc 2> /dev/null
script_expect "corrupt" 1 "flip.ckpt.*CRC" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/flip.ckpt" --resume
script_expect "missing" 1 "none.ckpt" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/none.ckpt" --resume
script_expect "model mismatch" 1 "expected \"cnn\"" 1 $prog $common \
    --model cnn --epochs 2 --checkpoint "$dir/b1.ckpt" --resume
script_expect "missing data" 1 "$dir/nodata" 2 $prog --data "$dir/nodata"

# Bad flags: exit 2 naming the flag.
script_expect "unknown flag" 2 "--bogus" 2 $prog --bogus
script_expect "missing value" 2 "missing value for '--epochs'" 2 $prog \
    --epochs
script_expect "non-numeric" 2 "'x' for --batch-size: expected an integer" 2 \
    $prog --batch-size x
script_expect "out of range" 2 "'0' for --epochs: expected an integer from \
1 to 100000" 2 $prog --epochs 0
script_expect "bad lr" 2 "--lr" 2 $prog --lr -1
script_expect "unknown model" 2 "resnet.*--model" 2 $prog --model resnet
script_expect "resume alone" 2 "--resume needs --checkpoint" 2 $prog --resume
script_expect "fp16 with a value" 2 "'--fp16-allreduce' takes no value" 2 \
    $prog --fp16-allreduce=1

script_expect "bad shard value" 2 "--shard-optimizer.*on or off" 2 $prog \
    --shard-optimizer maybe
script_expect "shard with fp16" 2 "--shard-optimizer on.*--fp16-allreduce" 2 \
    $prog --shard-optimizer on --fp16-allreduce

# The sharded step at 3 ranks: bitwise the unsharded run's checkpoint, and
# its own resume is bitwise too (the momentum is gathered before saving).
script_resume_equal 3 $prog $common --shard-optimizer on
cp "$dir/a.ckpt" "$dir/shard.ckpt"
script_launch "unsharded" 3 $prog $common --shard-optimizer off --epochs 2 \
    --checkpoint "$dir/a.ckpt"
if ! cmp "$dir/a.ckpt" "$dir/shard.ckpt"; then
    echo "FAIL: the sharded and unsharded checkpoints differ" >&2
    rc=1
fi

# Gradients as float16 on the wire still train: the run ends and reports.
script_launch "fp16 allreduce" 2 $prog $common --epochs 1 --fp16-allreduce \
    > "$dir/fp16.out"
grep -q "^done: " "$dir/fp16.out" || {
    echo "FAIL: fp16 allreduce: no final line" >&2
    rc=1
}
script_finish train_resume
