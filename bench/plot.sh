#!/bin/sh
# bench/plot.sh: plots an `allreduce_perf --compare` output as bus bandwidth
# against message size (ring, MPI_Allreduce and no-reduction limit) with
# bench/plot.gp. Needs gnuplot with the pngcairo terminal (gnuplot-nox).
#
# Usage: bench/plot.sh IN.txt OUT.png
set -eu

if [ $# -ne 2 ]; then
    echo "usage: $0 IN.txt OUT.png   (IN.txt: allreduce_perf --compare output)" >&2
    exit 2
fi
in=$1
out=$2

if [ ! -r "$in" ]; then
    echo "$0: cannot read $in" >&2
    exit 1
fi
# The --compare table names noreduce in its column header; a single-impl
# table has other columns, and plotting it would draw nonsense.
if ! grep -q '^# *size .*noreduce' "$in"; then
    echo "$0: $in is not allreduce_perf --compare output" >&2
    exit 1
fi
# Before shm joined --compare, column 8 was a ratio, not shm's busbw.
if ! grep -q '^# *size .*noreduce  *shm' "$in"; then
    echo "$0: $in comes from an allreduce_perf without shm in --compare;" \
        "its columns differ (rerun it)" >&2
    exit 1
fi

# Title from the header: rank count, dtype and op, and the MPI library.
nranks=$(sed -n 's/^# allreduce_perf: nranks \([0-9]*\).*/\1/p' "$in" | head -n 1)
dtype_op=$(sed -n 's/^# Datatype: \([^ ]*\) *Op: \([^ ]*\).*/\1 \2/p' "$in" | head -n 1)
mpi=$(sed -n 's/^# MPI library: \([^,]*\).*/\1/p' "$in" | head -n 1)
title="allreduce ${dtype_op:-}, ${nranks:-?} ranks (MPI: ${mpi:-?})"

# Last: what was wrong with the arguments or inputs is said first.
if ! command -v gnuplot >/dev/null 2>&1; then
    echo "$0: gnuplot not found; install gnuplot-nox" >&2
    exit 1
fi
gnuplot -c "$(dirname "$0")/plot.gp" "$in" "$out" "$title"
