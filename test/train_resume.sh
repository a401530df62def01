#!/bin/sh
# test/train_resume.sh: examples/train_fmnist on the first 2000 training
# images at 2 ranks: 2 epochs straight and 1 epoch + --resume + 1 epoch
# end with bitwise equal checkpoints (parameters, momentum, epoch, RNG);
# a truncated or corrupted checkpoint is refused on --resume (exit 1, a
# message naming the file); bad flags exit 2 naming the flag.
# Skips (77) without the Fashion-MNIST files (TRAIN_DATA, default
# /usr/share/datasets/fashion-mnist).
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup train_resume
data=${TRAIN_DATA:-/usr/share/datasets/fashion-mnist}
if ! test -r "$data/train-images-idx3-ubyte.gz" &&
    ! test -r "$data/train-images-idx3-ubyte"; then
    echo "SKIP: no Fashion-MNIST in $data"
    exit 77
fi
prog=examples/train_fmnist
common="--model mlp --train-limit 2000 --batch-size 32 --seed 7 --data $data"

# expect WHAT STATUS PATTERN NP ARGS...: the run exits STATUS and its
# stderr matches the grep pattern PATTERN.
expect() {
    what=$1 want=$2 pattern=$3
    shift 3
    echo "$*" > "$dir/spec"
    sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > "$dir/out" 2> "$dir/err"
    status=$?
    case $status in 77 | 99) cat "$dir/err" >&2; exit $status ;; esac
    if test "$status" -ne "$want"; then
        echo "FAIL: $what: exited $status, expected $want" >&2
        cat "$dir/err" >&2
        rc=1
    elif ! grep -q -e "$pattern" "$dir/err"; then
        echo "FAIL: $what: stderr does not match \"$pattern\":" >&2
        cat "$dir/err" >&2
        rc=1
    fi
}

script_launch "2 epochs" 2 $prog $common --epochs 2 --checkpoint "$dir/a.ckpt"
script_launch "1 epoch" 2 $prog $common --epochs 1 --checkpoint "$dir/b.ckpt"
cp "$dir/b.ckpt" "$dir/b1.ckpt"
script_launch "resume" 2 $prog $common --epochs 2 --checkpoint "$dir/b.ckpt" \
    --resume
if ! cmp "$dir/a.ckpt" "$dir/b.ckpt"; then
    echo "FAIL: 2 epochs and 1 + resume + 1 differ" >&2
    rc=1
fi
if cmp -s "$dir/a.ckpt" "$dir/b1.ckpt"; then
    echo "FAIL: the epoch-1 checkpoint equals the epoch-2 one" >&2
    rc=1
fi

# Corrupt checkpoints: refused, never half-loaded.
size=$(wc -c < "$dir/b1.ckpt")
head -c $((size - 100)) "$dir/b1.ckpt" > "$dir/trunc.ckpt"
expect "truncated" 1 "trunc.ckpt.*truncated" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/trunc.ckpt" --resume
cp "$dir/b1.ckpt" "$dir/flip.ckpt"
printf 'X' | dd of="$dir/flip.ckpt" bs=1 seek=1000 conv=notrunc 2> /dev/null
expect "corrupt" 1 "flip.ckpt.*CRC" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/flip.ckpt" --resume
expect "missing" 1 "none.ckpt" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/none.ckpt" --resume
expect "model mismatch" 1 "expected \"cnn\"" 1 $prog $common --model cnn \
    --epochs 2 --checkpoint "$dir/b1.ckpt" --resume
expect "missing data" 1 "$dir/nodata" 2 $prog --data "$dir/nodata"

# Bad flags: exit 2 naming the flag.
expect "unknown flag" 2 "--bogus" 2 $prog --bogus
expect "missing value" 2 "--epochs: missing value" 2 $prog --epochs
expect "non-numeric" 2 "--batch-size.*not an integer" 2 $prog --batch-size x
expect "out of range" 2 "--epochs.*out of range" 2 $prog --epochs 0
expect "bad lr" 2 "--lr" 2 $prog --lr -1
expect "unknown model" 2 "--model.*resnet" 2 $prog --model resnet
expect "cuda" 2 "--device cuda" 2 $prog --device cuda
expect "resume alone" 2 "--resume needs --checkpoint" 2 $prog --resume
script_finish train_resume
