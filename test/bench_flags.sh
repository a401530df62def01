#!/bin/sh
# test/bench_flags.sh: the benchmarks (bench/ and the synthetic benchmark
# of examples/) refuse bad flags with exit status 2
# and a message naming the flag, at 1 rank through test/mpirun.sh; so do
# bench/compare_torch.sh, and bench/plot_training.sh refuses a missing log.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup bench_flags

# expect_refused FLAG PROGRAM ARGS...: exit 2, stderr or stdout names FLAG.
expect_refused() {
    flag=$1
    shift
    echo "1 $*" > "$dir/spec"
    sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > "$dir/out" 2>&1
    status=$?
    case $status in 77 | 99) exit $status ;; esac
    if test $status -ne 2 || ! grep -q -- "$flag" "$dir/out"; then
        cat "$dir/out" >&2
        echo "FAIL: '$*' exited $status, want 2 and a message naming $flag" >&2
        rc=1
    fi
}

expect_refused --minbytes bench/allreduce_perf -b 1.5M
expect_refused --maxbytes bench/allreduce_perf -e 12Q
expect_refused --stepfactor bench/allreduce_perf -f 1
expect_refused --datatype bench/allreduce_perf -d complex
expect_refused --op bench/allreduce_perf -o xor
expect_refused --algo bench/allreduce_perf --algo fastest
expect_refused --seconds bench/soak --seconds 0
expect_refused --impl bench/allreduce_perf --impl fastest
expect_refused --iters bench/fusion_perf -n 0
expect_refused --fusion bench/fusion_perf --fusion maybe
expect_refused --batch-size examples/synthetic_benchmark --batch-size 0
expect_refused --model examples/synthetic_benchmark --model resnet
expect_refused --steps bench/model_perf --steps 0
expect_refused --model bench/model_perf --model resnet
expect_refused --bogus bench/model_perf --bogus
# The training comparison and the plot, shell scripts run directly: flags
# are checked before anything is installed or run.
# expect_script STATUS PATTERN SCRIPT ARGS...: exits STATUS, output matches.
expect_script() {
    want=$1 pattern=$2
    shift 2
    sh "$@" > "$dir/out" 2>&1
    status=$?
    if test $status -ne "$want" || ! grep -q -- "$pattern" "$dir/out"; then
        cat "$dir/out" >&2
        echo "FAIL: '$*' exited $status, want $want and \"$pattern\"" >&2
        rc=1
    fi
}
bench=${srcdir:-.}/bench
expect_script 2 --reps "$bench/compare_torch.sh" --reps x
expect_script 2 --batch-size "$bench/compare_torch.sh" --batch-size 0
expect_script 2 --normalize "$bench/compare_torch.sh" --normalize maybe
expect_script 2 --models "$bench/compare_torch.sh" --models resnet
expect_script 2 --bogus "$bench/compare_torch.sh" --bogus
expect_script 1 "$dir/missing.txt" "$bench/plot_training.sh" \
    "$dir/missing.txt" "$dir/out.png"
script_finish bench_flags
