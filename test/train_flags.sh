#!/bin/sh
# test/train_flags.sh: the training flags as a new user meets them, on a
# tiny data set this script writes. Ranks given different values of a
# flag that must agree (an MPMD mpirun line: rank 0 one value, rank 1
# another) all exit 2 before any training, each naming the flag and the
# other rank's value: train_fmnist's --seed, synthetic_benchmark's
# --batch-size; a bad flag on rank 1 alone is told by rank 0 too. What may
# differ does not stop a run: --data folders holding the same files; but
# folders of other data (a count, or the pixels) stop every rank, saying
# so.
# --max-steps K without --epochs trains K steps, past the default 2
# epochs, its learning rate's cosine ending with them. Before the agreement check, a bad flag on rank 1 alone hung.
# --profile: each rank's line of ms a step, the phases adding up to the
# total, the forward and backward (the CPU's compute) not zero, the first
# 10 steps left out (and said so when there were no more).
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup train_flags
# Ranks that exit 2 make Open MPI's mpirun wait 2 s before it ends the
# others; these runs fail on purpose.
OMPI_MCA_odls_base_sigkill_timeout=0
export OMPI_MCA_odls_base_sigkill_timeout
# A hang is the failure these runs look for: a minute, not test/mpirun.sh's
# ten.
HVD_TEST_TIMEOUT=${HVD_TEST_TIMEOUT:-60}
export HVD_TEST_TIMEOUT
build=${abs_top_builddir:-$(pwd)}
tf=examples/train_fmnist sb=examples/synthetic_benchmark
script_tiny_fmnist "$dir/idx"
script_tiny_fmnist "$dir/idx2"
common="--batch-size 2 --progress lines --epochs 1"

# split WHAT PATTERN PROGRAM ARGS0 -- ARGS1: PROGRAM at 2 ranks, rank 0
# with ARGS0 and rank 1 with ARGS1 (words, no spaces within), must exit 2
# with both ranks' lines "PROG: rank R: ..." matching PATTERN (R for the
# rank) on stderr, and train nothing. test/mpirun.sh runs the spec's
# words as they are: "1 PROG ARGS0 : -np 1 /abs/PROG ARGS1" is Open MPI's
# (and MPICH's) MPMD line, the second program named from the build folder.
split() {
    what=$1 pattern=$2 prog=$3
    shift 3
    a0=''
    while test "$1" != --; do a0="$a0 $1"; shift; done
    shift
    script_expect "$what" 2 "$(echo "$pattern" | sed 's/R/0/')" 1 \
        "$prog$a0 : -np 1 $build/$prog $*"
    if ! grep -q -e "$(echo "$pattern" | sed 's/R/1/')" "$dir/err"; then
        echo "FAIL: $what: rank 1 did not name the flag" >&2
        rc=1
    fi
    if grep -q -e "^step\|^Iter" "$dir/out"; then
        echo "FAIL: $what: it trained" >&2
        rc=1
    fi
}
split "seed differs" "^train_fmnist: rank R: --seed [12] here, [12] on rank" \
    $tf --data "$dir/idx" $common --seed 1 -- --data "$dir/idx" $common \
    --seed 2
split "batch size differs" \
    "^synthetic_benchmark: rank R: --batch-size [48] here, [48] on rank" \
    $sb --num-iters 1 --batch-size 4 -- --num-iters 1 --batch-size 8
split "max-steps on one rank" "^train_fmnist: rank R: --max-steps" \
    $tf --data "$dir/idx" $common --max-steps 1 -- --data "$dir/idx" $common
script_expect "bad flag on rank 1" 2 \
    "^train_fmnist: rank 1: unknown option '--bogus'" 1 \
    "$tf --data $dir/idx $common : -np 1 $build/$tf --data $dir/idx $common \
--bogus"

# --data may differ: the same files in two folders.
script_launch "data differs" 1 "$tf --data $dir/idx $common : -np 1 \
$build/$tf --data $dir/idx2 $common" > "$dir/out"
grep -q "^done: 1 steps" "$dir/out" || {
    cat "$dir/out" >&2
    echo "FAIL: data differs: no \"done: 1 steps\"" >&2
    rc=1
}
# ... but not the data in them: 6 images on rank 1 (3 steps an epoch to
# rank 0's 2: it stalled in hvd for minutes), or other pixels (other
# samples trained in silence); every rank exits 1 saying so, untrained.
script_tiny_fmnist "$dir/idx6" 6
script_tiny_fmnist "$dir/noise" 4 28 /dev/urandom
data_split() {
    what=$1 other=$2 pattern=$3
    script_expect "$what" 1 "^train_fmnist: rank 0: --data $dir/idx: $pattern" \
        1 "$tf --data $dir/idx $common : -np 1 $build/$tf --data $other $common"
    if ! grep -q "^train_fmnist: rank 1: --data $other: " "$dir/err" ||
        grep -q "^step" "$dir/out"; then
        echo "FAIL: $what: rank 1 said nothing, or it trained" >&2
        rc=1
    fi
}
data_split "data counts differ" "$dir/idx6" \
    "4 training images here, from 4 to 6 across the ranks"
data_split "data contents differ" "$dir/noise" "the training set differs"

# --max-steps 5 alone: 2 steps an epoch (4 images, batch 2, 1 rank), 5
# steps in 3 epochs, not the 4 of the default 2 epochs.
script_launch "max-steps alone" 1 $tf --data "$dir/idx" --batch-size 2 \
    --progress lines --max-steps 5 > "$dir/out"
grep -q "^done: 5 steps" "$dir/out" || {
    cat "$dir/out" >&2
    echo "FAIL: --max-steps 5 without --epochs: no \"done: 5 steps\"" >&2
    rc=1
}
# ... and its cosine ends with the 5 steps (2.5 epochs), not with the 3rd
# epoch: 0.05 x 1/4 at step 5 (epoch 2.0), where the 3 epochs gave 0.025.
grep -q "^step 5/5 .* lr 0.0125 " "$dir/out" || {
    grep "^step" "$dir/out" >&2
    echo "FAIL: --max-steps 5 without --epochs: lr not 0.0125 at step 5" >&2
    rc=1
}
# profile_check NP STEPS: the --profile lines of $dir/out, one per rank.
profile_check() {
    awk -v np="$1" -v steps="$2" '
        /^profile: / {
            n++
            seen[$3]++
            ok = $4 == steps && $5 == "steps," && $NF + 0 > 0
            sum = 0
            for (i = 8; i < NF - 1; i++)
                if ($(i + 1) ~ /^[0-9.]+,$/) { sum += $(i + 1); v[$i] = $(i + 1) + 0 }
            if (!ok || v["forward"] <= 0 || v["backward"] <= 0 ||
                sum - $NF > 0.004 || $NF - sum > 0.004) {
                print "bad line: " $0; bad = 1
            }
        }
        END {
            for (r = 0; r < np; r++) if (seen[r ":"] != 1) bad = 1
            exit bad || n != np
        }' "$dir/out"
}
script_launch "profile" 2 $tf --data "$dir/idx" --batch-size 1 \
    --progress lines --max-steps 14 --profile > "$dir/out"
profile_check 2 4 || {
    cat "$dir/out" >&2
    echo "FAIL: --profile: not one good line per rank of 4 steps" >&2
    rc=1
}
script_launch "profile, warm-up only" 1 $tf --data "$dir/idx" \
    --batch-size 2 --progress lines --max-steps 3 --profile > "$dir/out"
grep -q "^profile: rank 0: no steps after the first 10$" "$dir/out" || {
    cat "$dir/out" >&2
    echo "FAIL: --profile over 3 steps: no \"no steps\" line" >&2
    rc=1
}
script_finish train_flags
