#!/bin/sh
# test/checkpoint_full.sh: a checkpoint that cannot be written (a full disk,
# a folder that does not exist) is a clear error on every rank, and the
# checkpoint written before it stays whole: train_fmnist at 2 ranks resumes
# from a checkpoint on a small tmpfs, trains an epoch, and must fail to
# write the next one for want of space, leaving the old file byte for byte
# and no temporary file; the old one then still resumes. Skips (77) where
# this machine cannot mount a tmpfs (not root, or a container without it).
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup checkpoint_full
if ! script_have_fmnist; then
    echo "SKIP: no Fashion-MNIST in $data"
    exit 77
fi
prog=examples/train_fmnist
common="--model mlp --train-limit 2000 --batch-size 32 --seed 7 --data $data"

script_launch "first epoch" 2 $prog $common --epochs 1 \
    --checkpoint "$dir/good.ckpt" > /dev/null
size=$(wc -c < "$dir/good.ckpt")

# Room for the old checkpoint and half of a new one.
mkdir "$dir/small"
if ! mount -t tmpfs -o size=$((size * 3 / 2)) hvd-test "$dir/small" \
    2> "$dir/mount.err"; then
    echo "SKIP: cannot mount a tmpfs: $(cat "$dir/mount.err")"
    exit 77
fi
trap 'umount "$dir/small" 2> /dev/null; rm -rf "$dir"' EXIT
cp "$dir/good.ckpt" "$dir/small/c.ckpt"
script_expect "disk full" 1 "c.ckpt.tmp failed: No space left on device" 2 \
    $prog $common --epochs 2 --checkpoint "$dir/small/c.ckpt" --resume
if ! cmp "$dir/good.ckpt" "$dir/small/c.ckpt"; then
    echo "FAIL: disk full: the old checkpoint changed" >&2
    rc=1
fi
if test -e "$dir/small/c.ckpt.tmp"; then
    echo "FAIL: disk full: the temporary file was left behind" >&2
    rc=1
fi
cp "$dir/small/c.ckpt" "$dir/again.ckpt"
script_launch "resume after the failure" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/again.ckpt" --resume > /dev/null

script_expect "missing folder" 1 "cannot write in its folder .*/nowhere:" 2 $prog \
    $common --epochs 1 --checkpoint "$dir/nowhere/c.ckpt"
script_finish checkpoint_full
