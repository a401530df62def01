#!/bin/bash
# bench/results/issue23/cpu_pairs.sh PREV MAIN [REPS]: alternated pairs of
# train_fmnist on the CPU, the build in tree PREV (the base) and the one
# in tree MAIN, one thread a rank; mlp 2000 steps and cnn 300, at 1 and 2
# ranks, REPS rounds (3). Output: "rep model ranks tree images/s" lines,
# tree "prev" or "main", images/s of the "done:" line. The pairs.txt of
# issue 23's *_cpu_20261127 folders are its output.
set -u
[ $# -ge 2 ] || { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 2; }
prev=$1 main=$2 reps=${3:-3}
M="mpirun --allow-run-as-root --oversubscribe --bind-to none"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
for rep in $(seq "$reps"); do
  for model in mlp cnn; do
    steps=2000; [ $model = cnn ] && steps=300
    for np in 1 2; do
      for tree in prev main; do
        d=$prev; [ $tree = main ] && d=$main
        r=$($M -np $np "$d/examples/train_fmnist" --model $model --epochs 100000 --max-steps $steps --progress lines 2>&1 | grep '^done' | sed 's/.*: \([0-9]*\) images\/s.*/\1/')
        echo "$rep $model $np $tree $r"
      done
    done
  done
done
