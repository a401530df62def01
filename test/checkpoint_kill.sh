#!/bin/sh
# test/checkpoint_kill.sh: a checkpoint write stopped at any point leaves
# the previous checkpoint loadable (issue 7). Deterministic, not timed:
# strace kills the writer (SIGKILL) as it enters its N-th call of a system
# call, for every call the writer makes.
#   1. test/ckpt_tool writes seed 2 over seed 1 (and over nothing), killed
#      at each of its system calls in turn: the file then loads and holds
#      seed 1 or seed 2, whole (or, with nothing before, is absent or seed
#      2); a leftover PATH.tmp does not stop the next write, which must
#      load and leave no PATH.tmp.
#   2. The trace of a whole write: the temporary file is fsync'ed before
#      the rename and the folder after it (what a kill cannot show: a
#      power cut).
#   3. Each call on PATH.tmp (open, write, fsync, close, rename) failing
#      instead (ENOSPC for writes, EIO else): ckpt_write says which and of
#      what, exit 1, the old file kept, no PATH.tmp; the folder's fsync
#      failing: "fsync of its directory failed".
#   4. train_fmnist at 2 ranks on a tiny data set, rank 0 killed at the
#      rename of its epoch-2 checkpoint: the file is the epoch-1
#      checkpoint byte for byte, --resume starts at epoch 1 and ends equal
#      to 2 epochs straight.
# Skips (77) without strace or where it cannot trace (a container without
# ptrace); scripts/install-deps installs strace.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup checkpoint_kill
if ! command -v strace > /dev/null 2>&1; then
    echo "SKIP: no strace (scripts/install-deps installs it)"
    exit 77
fi
if ! strace -o /dev/null true 2> "$dir/err"; then
    echo "SKIP: strace cannot trace here: $(cat "$dir/err")"
    exit 77
fi
tool=${abs_top_builddir:-.}/test/ckpt_tool
test -x "$tool" || { echo "$tool: not built" >&2; exit 99; }
# A rank that fails makes Open MPI's mpirun wait 2 s before it ends the
# others; these runs fail on purpose.
OMPI_MCA_odls_base_sigkill_timeout=0
export OMPI_MCA_odls_base_sigkill_timeout
ck=$dir/c.ckpt

fail() {
    echo "FAIL: $*" >&2
    rc=1
}

# ---- 1. killed at every system call ----

# The calls of one whole write, in order, with the files behind the fds.
"$tool" write "$ck" 1 || exit 99
strace -y -o "$dir/trace" "$tool" write "$ck" 2 || exit 99
test "$("$tool" check "$ck")" = "seed 2" || fail "an unkilled write"
# Not execve: strace does not stop the one that starts the program.
sed -n 's/^\([a-z0-9_]*\)(.*/\1/p' "$dir/trace" | grep -v '^execve$' |
    sort | uniq -c > "$dir/calls"

# killed_at CALL N OLD: seed 2 written over seed OLD (0: no file), killed
# as it enters its N-th CALL; then checks and a fresh write of seed 3.
killed_at() {
    what="$1 #$2 over $(test "$3" -eq 0 && echo nothing || echo seed "$3")"
    rm -f "$ck" "$ck.tmp"
    test "$3" -eq 0 || "$tool" write "$ck" "$3" || exit 99
    # (the outer redirection takes the shell's own "Killed" line)
    { strace -o /dev/null -e trace="$1" -e inject="$1:signal=KILL:when=$2" \
        "$tool" write "$ck" 2 2> "$dir/err"; } 2> /dev/null
    status=$?
    test $status -eq 137 || fail "$what: not killed (exit $status)"
    if test -e "$ck"; then
        got=$("$tool" check "$ck" 2>&1)
    else
        got=absent
    fi
    case "$3:$got" in
    1:"seed 1" | 1:"seed 2" | 0:absent | 0:"seed 2") ;;
    *) fail "$what: the checkpoint is \"$got\"" ;;
    esac
    test -e "$ck.tmp" && leftovers=$((leftovers + 1))
    case $3:$got in 1:"seed 1") olds=$((olds + 1)) ;; esac
    "$tool" write "$ck" 3 || fail "$what: the next write failed"
    got=$("$tool" check "$ck" 2>&1)
    test "$got" = "seed 3" || fail "$what: after the next write: \"$got\""
    test -e "$ck.tmp" && fail "$what: the next write left $ck.tmp"
}

points=0 olds=0 leftovers=0
while read -r n call; do
    i=1
    while test $i -le "$n"; do
        killed_at "$call" $i 1
        killed_at "$call" $i 0
        points=$((points + 1))
        i=$((i + 1))
    done
done < "$dir/calls"
echo "killed at each of $points system calls ($(tr -s ' \n' ' ' \
    < "$dir/calls")), over seed 1 and over nothing: seed 1 left $olds" \
    "times of $points, PATH.tmp $leftovers times of $((points * 2))"
test $points -ge 10 || fail "only $points system calls in a write"

# ---- 2. the order of the calls that make it durable ----

tmp_fsync=$(grep -n "^fsync([0-9]*<$ck.tmp>)" "$dir/trace" | cut -d: -f1)
renamed=$(grep -n "^rename[a-z0-9]*(.*\"$ck.tmp\", .*\"$ck\"" "$dir/trace" |
    cut -d: -f1)
dir_fsync=$(grep -n "^fsync([0-9]*<$dir>)" "$dir/trace" | cut -d: -f1)
if test -z "$tmp_fsync" || test -z "$renamed" || test -z "$dir_fsync" ||
    test "$tmp_fsync" -ge "$renamed" || test "$renamed" -ge "$dir_fsync"; then
    fail "want fsync of PATH.tmp, rename, fsync of the folder, in this" \
        "order; the trace has them at lines '$tmp_fsync' '$renamed'" \
        "'$dir_fsync'"
    cat "$dir/trace" >&2
fi
rename_call=$(sed -n "${renamed:-0}s/^\([a-z0-9]*\)(.*/\1/p" "$dir/trace")

# ---- 3. each call on PATH.tmp failing ----

# failing CALL N ERRNO PATTERN: the N-th CALL on PATH.tmp fails with ERRNO;
# exit 1, stderr matches PATTERN, seed 1 kept, no PATH.tmp.
failing() {
    what="$1 #$2 failing with $3"
    "$tool" write "$ck" 1 || exit 99
    strace -o /dev/null -P "$ck.tmp" -e trace="$1" \
        -e inject="$1:error=$3:when=$2" "$tool" write "$ck" 2 2> "$dir/err"
    status=$?
    if test $status -ne 1 || ! grep -q -e "$4" "$dir/err"; then
        fail "$what: exit $status, stderr not matching \"$4\":"
        cat "$dir/err" >&2
    else
        echo "expected ($what): $(cat "$dir/err")"
    fi
    got=$("$tool" check "$ck" 2>&1)
    test "$got" = "seed 1" || fail "$what: the checkpoint is \"$got\""
    test -e "$ck.tmp" && fail "$what: $ck.tmp left behind"
}

strace -y -o "$dir/tmp_trace" -P "$ck.tmp" "$tool" write "$ck" 2 || exit 99
sed -n 's/^\([a-z0-9_]*\)(.*/\1/p' "$dir/tmp_trace" | sort | uniq -c \
    > "$dir/tmp_calls"
failed=0
while read -r n call; do
    case $call in
    open | openat) op=open errno=EIO ;;
    write) op="\\(write\\|flush\\)" errno=ENOSPC ;;
    fsync | fdatasync) op=fsync errno=EIO ;;
    close) op=close errno=EIO ;;
    rename*) op=rename errno=EIO ;;
    *) continue ;; # tolerated by stdio (the fstat of the buffer size)
    esac
    i=1
    while test $i -le "$n"; do
        failing "$call" $i "$errno" "checkpoint $ck: $op of $ck.tmp failed: "
        failed=$((failed + 1))
        i=$((i + 1))
    done
done < "$dir/tmp_calls"
test $failed -ge 5 || fail "only $failed calls on PATH.tmp failed"

"$tool" write "$ck" 1 || exit 99
strace -o /dev/null -P "$dir" -e trace=fsync -e inject=fsync:error=EIO \
    "$tool" write "$ck" 2 2> "$dir/err"
status=$?
if test $status -ne 1 ||
    ! grep -q "checkpoint $ck: fsync of its directory failed" "$dir/err"; then
    fail "the folder's fsync failing: exit $status:"
    cat "$dir/err" >&2
fi

# ---- 4. train_fmnist killed while it writes its checkpoint ----

prog=examples/train_fmnist
script_tiny_fmnist "$dir/idx"
common="--data $dir/idx --batch-size 2 --seed 3 --progress lines"
script_launch "1 epoch" 2 $prog $common --epochs 1 \
    --checkpoint "$dir/one.ckpt" > /dev/null
script_launch "2 epochs" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/two.ckpt" > /dev/null
# strace follows mpirun into both ranks; only rank 0's main thread renames
# PATH.tmp, and the count is per thread: the 2nd is epoch 2's.
echo "2 $prog $common --epochs 2 --checkpoint $dir/t.ckpt" > "$dir/spec"
strace -f -o /dev/null -P "$dir/t.ckpt.tmp" -e trace="$rename_call" \
    -e inject="$rename_call:signal=KILL:when=2" \
    sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > "$dir/out" 2> "$dir/err"
status=$?
case $status in 77 | 99) cat "$dir/err" >&2; exit $status ;; esac
if test $status -eq 0 || ! test -e "$dir/t.ckpt.tmp"; then
    fail "train_fmnist: not killed at its second rename (exit $status)"
    cat "$dir/out" "$dir/err" >&2
fi
cmp "$dir/one.ckpt" "$dir/t.ckpt" ||
    fail "train_fmnist killed in epoch 2's write: not epoch 1's checkpoint"
script_launch "resume after the kill" 2 $prog $common --epochs 2 \
    --checkpoint "$dir/t.ckpt" --resume > "$dir/out"
grep -q "^resumed from $dir/t.ckpt at epoch 1$" "$dir/out" ||
    fail "resume after the kill: no \"resumed from ... at epoch 1\""
cmp "$dir/two.ckpt" "$dir/t.ckpt" ||
    fail "resume after the kill: not equal to 2 epochs straight"
test -e "$dir/t.ckpt.tmp" && fail "resume after the kill: PATH.tmp left"
script_finish checkpoint_kill
