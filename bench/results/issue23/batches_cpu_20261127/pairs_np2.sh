#!/bin/sh
# more alternated pairs at 2 ranks: base (ba19961) vs main (4c530d8)
out=/work/main/bench/results/issue23/batches_cpu_20261127/runs_4c530d8_np2_more.txt
: > $out
run() { OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np $3 \
        $1/examples/train_fmnist --model $2 --epochs 100000 --max-steps $4 --progress lines 2>&1 | grep "^done:" | sed 's/.*training: \([0-9]*\) images.*/\1/'; }
for rep in 4 5 6 7 8; do
  for cfg in "mlp 2 2000" "cnn 2 300"; do
    set -- $cfg
    if [ $((rep % 2)) = 1 ]; then order="base main"; else order="main base"; fi
    for b in $order; do
      d=/work/wt/base; [ $b = main ] && d=/work/main
      echo "rep $rep $1 np$2 $b $(run $d $1 $2 $3)" | tee -a $out
    done
  done
done
