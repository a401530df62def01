#!/bin/sh
# test/train_bad_input.sh: train_fmnist at 2 ranks on a tiny data set that
# this script writes (no data set installed), given bad checkpoints to
# --resume and bad files (test/README.md's bad-input table, sections 3 and
# 4): each exits 1 with rank 0's message naming the file and the fault. A
# folder, a file under a header, one longer than its header says, a bad
# magic, format version 1, other sizes, a negative epoch (valid CRCs where
# the check comes after the CRC's, by test/ckpt_tool recrc), a checkpoint
# folder that does not exist, a folder where the checkpoint would be
# written, a flag given as its path, images of another shape. Also what is not
# an error: a checkpoint whose epoch is already --epochs, and one resumed
# with another seed, batch size, learning rate and rank count.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup train_bad_input
tool=${abs_top_builddir:-.}/test/ckpt_tool
test -x "$tool" || { echo "$tool: not built" >&2; exit 99; }
# A rank that fails makes Open MPI's mpirun wait 2 s before it ends the
# others; these runs fail on purpose.
OMPI_MCA_odls_base_sigkill_timeout=0
export OMPI_MCA_odls_base_sigkill_timeout
prog=examples/train_fmnist
script_tiny_fmnist "$dir/idx"
common="--data $dir/idx --batch-size 2 --seed 3 --progress lines"
script_launch "1 epoch" 2 $prog $common --epochs 1 \
    --checkpoint "$dir/good.ckpt" > /dev/null
size=$(wc -c < "$dir/good.ckpt")

# put FILE OFFSET OCTAL: FILE, a copy of good.ckpt with bytes OCTAL (printf
# escapes) at OFFSET.
put() {
    cp "$dir/good.ckpt" "$1"
    # shellcheck disable=SC2059 # OCTAL is the format
    printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc 2> /dev/null
}
# refused NAME PATTERN: --resume from $dir/NAME exits 1 on every rank, and
# rank 0 says "train_fmnist: --resume: checkpoint PATH: PATTERN".
refused() {
    script_expect "$1" 1 \
        "^train_fmnist: --resume: checkpoint $dir/$1: $2" 2 $prog $common \
        --epochs 2 --checkpoint "$dir/$1" --resume
}

# A folder to resume from: refused where the path is checked for writing,
# before the read; the read's own check, through ckpt_tool.
mkdir "$dir/folder.ckpt"
script_expect folder.ckpt 1 "^train_fmnist: checkpoint $dir/folder.ckpt: \
$dir/folder.ckpt is a folder, not a file$" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/folder.ckpt" --resume
if "$tool" check "$dir/folder.ckpt" 2> "$dir/err" ||
    ! grep -q "folder.ckpt: not a regular file$" "$dir/err"; then
    echo "FAIL: ckpt_read of a folder: $(cat "$dir/err")" >&2
    rc=1
fi
head -c 55 "$dir/good.ckpt" > "$dir/short.ckpt"
refused short.ckpt "truncated: 55 bytes, less than a header$"
{ cat "$dir/good.ckpt"; printf x; } > "$dir/long.ckpt"
refused long.ckpt \
    "wrong length: $((size + 1)) bytes, its header says $size$"
put "$dir/magic.ckpt" 0 'h'
refused magic.ckpt "bad magic: not a hvd checkpoint$"
put "$dir/v1.ckpt" 8 '\001'
"$tool" recrc "$dir/v1.ckpt" || exit 99
refused v1.ckpt "version 1, expected 2$"
"$tool" write "$dir/sizes.ckpt" 1 mlp 10 || exit 99
refused sizes.ckpt \
    "10 parameters and 10 momentum values, expected [0-9]* and [0-9]*$"
put "$dir/negative.ckpt" 36 '\377\377\377\377\377\377\377\377'
"$tool" recrc "$dir/negative.ckpt" || exit 99
refused negative.ckpt "negative epoch -1$"

# Writing into a folder that does not exist, or into a file: refused
# before the first step.
script_expect "missing folder" 1 "^train_fmnist: checkpoint \
$dir/none/c.ckpt: cannot write in its folder $dir/none: No such file or \
directory$" 2 $prog $common --epochs 1 --checkpoint "$dir/none/c.ckpt"
grep -q "^step" "$dir/out" && {
    echo "FAIL: missing folder: it trained before refusing" >&2
    rc=1
}
: > "$dir/plain"
script_expect "file as folder" 1 "^train_fmnist: checkpoint \
$dir/plain/c.ckpt: cannot write in its folder $dir/plain: Not a directory$" \
    2 $prog $common --epochs 1 --checkpoint "$dir/plain/c.ckpt"
# A folder where the checkpoint (or its PATH.tmp) would be written: the
# rename failed after the first epoch.
mkdir "$dir/adir" "$dir/t.ckpt.tmp" || exit 99
for path in "$dir/adir" "$dir/adir/" "$dir/t.ckpt"; do
    folder=$path
    test "$path" = "$dir/t.ckpt" && folder=$path.tmp
    script_expect "folder as checkpoint $path" 1 "^train_fmnist: checkpoint \
$path: $folder is a folder, not a file$" 2 $prog $common --epochs 1 \
        --checkpoint "$path"
    grep -q "^step" "$dir/out" && {
        echo "FAIL: folder as checkpoint $path: it trained first" >&2
        rc=1
    }
done
# A path whose PATH.tmp is past PATH_MAX (4096), its folder not: refused
# before the first step (the write failed after it).
long=$dir
while test ${#long} -lt 3900; do long=$long/.; done
name=$(printf "%0$((4094 - ${#long} - 1))d" 0)
script_expect "PATH.tmp too long" 1 "^train_fmnist: checkpoint: a path of \
4094 bytes (its name $((4094 - ${#long} - 1))), too long for its PATH.tmp: \
File name too long$" 2 $prog $common --epochs 1 --checkpoint "$long/$name"
# ... or a name of 253 bytes, whose PATH.tmp's passes NAME_MAX (255).
name=$(printf "%0253d" 0)
script_expect "PATH.tmp's name too long" 1 "^train_fmnist: checkpoint: a \
path of $((${#dir} + 254)) bytes (its name 253), too long for its PATH.tmp" 2 \
    $prog $common --epochs 1 --checkpoint "$dir/$name"
# A link to a folder is not a folder: the checkpoint replaces the link;
# but PATH.tmp is opened through it, so there it is refused.
ln -s adir "$dir/l.ckpt.tmp" || exit 99
script_expect "PATH.tmp a link to a folder" 1 "^train_fmnist: checkpoint \
$dir/l.ckpt: $dir/l.ckpt.tmp is a folder, not a file$" 2 $prog $common \
    --epochs 1 --checkpoint "$dir/l.ckpt"
ln -s adir "$dir/link.ckpt" || exit 99
script_launch "link to a folder" 2 $prog $common --epochs 1 \
    --checkpoint "$dir/link.ckpt" > "$dir/out"
if test -L "$dir/link.ckpt" || ! test -f "$dir/link.ckpt"; then
    echo "FAIL: link to a folder: the checkpoint did not replace it" >&2
    rc=1
fi
# A flag where the path belongs: getopt took it as the path, and the run
# wrote ./--resume with nothing resumed.
script_expect "flag as path" 2 "^train_fmnist: invalid value '--resume' \
for --checkpoint: expected a path" 2 $prog $common --epochs 1 --checkpoint \
    --resume
script_expect "short flag as path" 2 "^train_fmnist: invalid value '-h' \
for --checkpoint: expected a path" 2 $prog $common --epochs 1 --checkpoint -h
script_expect "short flag as data" 2 "^train_fmnist: invalid value '-h' \
for --data: expected a directory" 2 $prog --data -h --epochs 1

# Images of another shape than 1x28x28.
script_tiny_fmnist "$dir/idx8" 4 8
script_expect "8x8 images" 1 \
    "^train_fmnist: $dir/idx8: training images are 1x8x8, not 1x28x28$" 2 \
    $prog --data "$dir/idx8"

# Not errors: the epoch already reached; other settings than the writer's.
cp "$dir/good.ckpt" "$dir/done.ckpt"
script_launch "epoch reached" 2 $prog $common --epochs 1 \
    --checkpoint "$dir/done.ckpt" --resume > "$dir/out"
grep -q "^nothing to do: epoch 1 of 1 reached$" "$dir/out" || {
    echo "FAIL: epoch reached: no \"nothing to do: epoch 1 of 1 reached\"" >&2
    rc=1
}
cmp -s "$dir/good.ckpt" "$dir/done.ckpt" || {
    echo "FAIL: epoch reached: the checkpoint changed" >&2
    rc=1
}
# An epoch far beyond any --epochs (2^62; 4 steps an epoch at 1 rank):
# epoch x steps would overflow.
put "$dir/far.ckpt" 36 '\000\000\000\000\000\000\000\100'
"$tool" recrc "$dir/far.ckpt" || exit 99
script_launch "epoch 2^62" 1 $prog --data "$dir/idx" --batch-size 1 \
    --epochs 2 --checkpoint "$dir/far.ckpt" --resume > "$dir/out"
grep -q "^nothing to do: epoch 4611686018427387904 of 2 reached$" \
    "$dir/out" || {
    echo "FAIL: epoch 2^62: no \"nothing to do: epoch 4611686018427387904" \
        "of 2 reached\"" >&2
    cat "$dir/out" >&2
    rc=1
}
cp "$dir/good.ckpt" "$dir/other.ckpt"
script_launch "other settings" 1 $prog --data "$dir/idx" --seed 9 \
    --batch-size 1 --lr 0.01 --epochs 2 --checkpoint "$dir/other.ckpt" \
    --resume > "$dir/out"
grep -q "^resumed from $dir/other.ckpt at epoch 1$" "$dir/out" || {
    echo "FAIL: other settings: no \"resumed from ... at epoch 1\"" >&2
    rc=1
}
script_finish train_bad_input
