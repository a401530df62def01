#!/bin/sh
# bench/share_machine.sh: a 1-rank training when the machine's other PUs
# are not free, which hvd's spare-PU spinning (HVD_SPIN_TIME,
# hvd/contention.c) must not make worse. Per repetition and build, three
# runs of examples/train_fmnist at 1 rank: alone; beside a shell busy loop
# (another program on the spare PU); and beside a second copy of itself
# (two 1-rank jobs on one node). Prints each run's images/s, then the
# median of each build and mode.
#
# Usage: bench/share_machine.sh [--model mlp|cnn] [--reps R]
#                               [--baseline BUILD_DIR]
#   --baseline: another build folder (of an earlier commit, say), run
#   interleaved with this one, each repetition both in turn.
# Exit status: 0; 1 (a run failed or printed no rate); 2 (bad flags).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
model=mlp
reps=3
builds=$root

usage() {
    sed -n '/^# Usage/,/^# Exit/p' "$0" | sed 's/^# \{0,1\}//'
}
die() {
    echo "share_machine: $*" >&2
    exit 1
}
bad() {
    echo "share_machine: $*" >&2
    exit 2
}
need_value() {
    [ $# -ge 2 ] || bad "$1 needs a value"
}
while [ $# -gt 0 ]; do
    case $1 in
        --model) need_value "$@"; model=$2; shift 2 ;;
        --reps) need_value "$@"; reps=$2; shift 2 ;;
        --baseline) need_value "$@"; builds="$2 $root"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) bad "unknown flag \"$1\" (try --help)" ;;
    esac
done
case $model in
    mlp) steps=3000 ;;
    cnn) steps=150 ;;
    *) bad "--model: \"$model\" is not mlp or cnn" ;;
esac
case $reps in
    ''|*[!0-9]*|0) bad "--reps: \"$reps\" is not an integer >= 1" ;;
esac
for b in $builds; do
    [ -x "$b/examples/train_fmnist" ] ||
        die "$b/examples/train_fmnist is not built"
done

mpirun=${MPIRUN:-mpirun}
out=$(mktemp -d)
busy=
stop_busy() {
    if [ -n "$busy" ]; then kill "$busy" 2>/dev/null || :; fi
    busy=
}
trap 'stop_busy; rm -rf "$out"' EXIT
# one BUILD: one 1-rank training; prints its images/s.
one() {
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        "$mpirun" --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 \
        -x OPENBLAS_NUM_THREADS=1 -np 1 "$1/examples/train_fmnist" \
        --model "$model" --epochs 100000 --max-steps "$steps" \
        --progress lines > "$out/log.$2" 2>&1 ||
        { tail -5 "$out/log.$2" >&2; die "a run of $1 failed"; }
    rate=$(sed -n 's/^done:.*: \([0-9]*\) images\/s.*/\1/p' "$out/log.$2")
    [ -n "$rate" ] || die "no rate from $1"
    echo "$rate"
}
# The median of the numbers on stdin, one a line.
median() {
    sort -n | awk '{ v[NR] = $1 }
        END { m = int((NR + 1) / 2)
              print (NR % 2) ? v[m] : int((v[m] + v[m + 1]) / 2) }'
}

echo "# share_machine: $model, 1 rank, $steps steps, $reps reps," \
     "$(getconf _NPROCESSORS_ONLN) PUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
rep=1
while [ "$rep" -le "$reps" ]; do
    for b in $builds; do
        a=$(one "$b" a)
        sh -c 'while :; do :; done' &
        busy=$!
        s=$(one "$b" b)
        stop_busy
        one "$b" c > "$out/twin" &
        t=$(one "$b" d)
        wait $!
        t2=$(cat "$out/twin")
        echo "rep $rep $b: alone $a, beside a busy loop $s," \
             "beside itself $t and $t2"
        echo "$b alone $a" >> "$out/rates"
        echo "$b busy $s" >> "$out/rates"
        echo "$b itself $t" >> "$out/rates"
        echo "$b itself $t2" >> "$out/rates"
    done
    rep=$((rep + 1))
done
echo "# median images/s: build | alone | beside a busy loop | beside itself"
for b in $builds; do
    line=$b
    for mode in alone busy itself; do
        m=$(awk -v b="$b" -v m="$mode" '$1 == b && $2 == m {print $3}' \
                "$out/rates" | median)
        line="$line | $m"
    done
    echo "$line"
done
