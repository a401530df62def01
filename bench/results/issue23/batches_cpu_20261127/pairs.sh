#!/bin/sh
# alternated pairs of train_fmnist: base (ba19961) vs new (HEAD), CPU
out=/work/main/bench/results/issue23/batches_cpu_20261127/runs_HEAD.txt
: > $out
run() { # dir model np steps
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np $3 \
        $1/examples/train_fmnist --model $2 --epochs 100000 --max-steps $4 --progress lines 2>&1 | grep "^done:" | sed 's/.*training: \([0-9]*\) images.*/\1/'
}
for rep in 1 2 3 4; do
  for cfg in "mlp 1 2000" "mlp 2 2000" "cnn 1 300" "cnn 2 300"; do
    set -- $cfg
    if [ $((rep % 2)) = 1 ]; then order="base main"; else order="main base"; fi
    for b in $order; do
      d=/work/wt/base; [ $b = main ] && d=/work/main
      r=$(run $d $1 $2 $3)
      echo "rep $rep $1 np$2 $b $r" | tee -a $out
    done
  done
done
