#!/bin/sh
# test/train_cifar10.sh: examples/train_cifar10 on small files in CIFAR-10's
# binary format that this script writes (5 x 40 training records, 30 test
# records, a pattern that tells the class): 2 epochs train to a test
# accuracy of at least 0.8 at 2 ranks (mlp) and 3 ranks (cnn); 2 epochs
# straight and 1 epoch + --resume + 1 epoch end with bitwise equal
# checkpoints; a truncated file, a label of 10 and a missing file exit 1
# naming the file; train_fmnist and train_cifar10 refuse each other's
# checkpoints by model name; bad flags exit 2 naming the flag.
# Needs no data set installed.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup train_cifar10
prog=examples/train_cifar10

# cifar_write FILE FIRST COUNT: COUNT records numbered from FIRST, record n
# of label n * 7 % 10, its image bright (+150) in channel label % 3 and
# rows 8 (label / 3) .. 8 (label / 3) + 7, over a fixed noise of 0..60.
cifar_write() {
    LC_ALL=C awk -v first="$2" -v count="$3" 'BEGIN {
        for (n = first; n < first + count; n++) {
            label = n * 7 % 10
            printf "%c", label
            for (k = 0; k < 3072; k++) {
                v = (n * 31 + k * 17) % 61
                if (int(k / 1024) == label % 3 &&
                    int(k % 1024 / 256) == int(label / 3))
                    v += 150
                printf "%c", v
            }
        }
    }' > "$1"
    if test "$(wc -c < "$1")" -ne $(($3 * 3073)); then
        echo "ERROR: awk wrote $1 with $(wc -c < "$1") bytes" >&2
        exit 99
    fi
}

data=$dir/c10
mkdir "$data" || exit 99
for f in 1 2 3 4 5; do
    cifar_write "$data/data_batch_$f.bin" $((f * 40)) 40
done
cifar_write "$data/test_batch.bin" 1000 30

# The lr is low enough for these inputs not to diverge.
common="--data $data --batch-size 8 --lr 0.003 --seed 5 --progress lines"

# train NAME NP ARGS...: 2 epochs; the last epoch line's test_acc >= 0.8.
train() {
    what=$1 np=$2
    shift 2
    script_launch "$what" "$np" $prog $common --epochs 2 "$@" > "$dir/out"
    cat "$dir/out"
    acc=$(sed -n 's|^epoch 2/2 .* test_acc \([0-9.]*\) .*|\1|p' "$dir/out")
    if ! grep -q "^done: .* images/s" "$dir/out" || test -z "$acc"; then
        echo "FAIL: $what: no \"epoch 2/2 ... test_acc\" or \"done:\" line" >&2
        rc=1
    elif ! awk -v a="$acc" 'BEGIN { exit !(a >= 0.8) }'; then
        echo "FAIL: $what: test_acc $acc after 2 epochs, expected >= 0.8" >&2
        rc=1
    fi
}
train "mlp at 2 ranks" 2 --model mlp
train "cnn at 3 ranks" 3 --model cnn
train "mlp at 2 ranks, normalized inputs" 2 --model mlp --normalize on

# Resume: bitwise the same as the straight run.
script_resume_equal 2 $prog $common

# Another program's checkpoint: refused by its model name. A tiny
# Fashion-MNIST set (IDX, 4 blank images) gives train_fmnist its own.
idx=$dir/idx
script_tiny_fmnist "$idx"
script_expect "fmnist resumes cifar" 1 "model \"mlp.c10\", expected \"mlp\"" \
    2 examples/train_fmnist --data "$idx" --checkpoint "$dir/b1.ckpt" --resume
script_launch "fmnist checkpoint" 2 examples/train_fmnist --data "$idx" \
    --batch-size 2 --epochs 1 --checkpoint "$dir/f.ckpt" > /dev/null
script_expect "cifar resumes fmnist" 1 "model \"mlp\", expected \"mlp.c10\"" \
    2 $prog $common --checkpoint "$dir/f.ckpt" --resume

# Bad data: exit 1 naming the file.
bad=$dir/bad
mkdir "$bad" || exit 99
cp "$data"/*.bin "$bad/"
head -c 100000 "$data/data_batch_3.bin" > "$bad/data_batch_3.bin"
script_expect "truncated" 1 "data_batch_3.bin.*truncated" 2 $prog $common \
    --data "$bad"
cp "$data/data_batch_3.bin" "$bad/"
printf '\012' | dd of="$bad/data_batch_4.bin" bs=1 seek=$((3 * 3073)) \
    conv=notrunc 2> /dev/null
script_expect "label 10" 1 "data_batch_4.bin: record 3 has label 10" 2 \
    $prog $common --data "$bad"
cp "$data/data_batch_4.bin" "$bad/"
rm "$bad/test_batch.bin"
script_expect "missing file" 1 "test_batch.bin: cannot open" 2 $prog $common \
    --data "$bad"
script_expect "missing directory" 1 "$dir/none/data_batch_1.bin" 2 $prog \
    --data "$dir/none"

# Bad flags: exit 2 naming the flag.
script_expect "normalize" 2 "'maybe' for --normalize: expected on or off" 2 \
    $prog --normalize maybe
script_expect "unknown model" 2 "resnet.*--model" 2 $prog --model resnet
script_expect "resume alone" 2 "--resume needs --checkpoint" 2 $prog --resume
script_finish train_cifar10
