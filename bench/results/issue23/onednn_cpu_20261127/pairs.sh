#!/bin/bash
# Alternated pairs: train_fmnist of cb872e1 (/work/wt/prev) and of 9679e53
# (/work/main), on the CPU; output: "rep model ranks tree images/s" lines.
M="mpirun --allow-run-as-root --oversubscribe --bind-to none"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
for rep in 1 2 3; do
  for model in mlp cnn; do
    steps=2000; [ $model = cnn ] && steps=300
    for np in 1 2; do
      for tree in prev main; do
        d=/work/wt/prev; [ $tree = main ] && d=/work/main
        r=$($M -np $np $d/examples/train_fmnist --model $model --epochs 100000 --max-steps $steps --progress lines 2>&1 | grep '^done' | sed 's/.*: \([0-9]*\) images\/s.*/\1/')
        echo "$rep $model $np $tree $r"
      done
    done
  done
done
