#!/bin/bash
# One-off device run: real-data train_gpu.sh, noise CPU/GPU loss traces, compare_torch on cuda.
set -u
R=$PWD O=/tmp/o; mkdir -p $O
export CC=mpicc OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pack() { tar czf $OUT/res.tgz -C /tmp o; }
trap pack EXIT
echo "python3: $(command -v python3) $(python3 -c 'import torch;print(torch.__version__)')" | tee $O/info.txt
t0=$SECONDS
(sh autogen.sh && ./configure -q --with-cuda=/usr/local/cuda --with-cuda-arch=90 && make -j16 && make -j16 check TESTS=) > $O/build.log 2>&1 || { echo build failed; tail -20 $O/build.log; exit 1; }
echo "built in $((SECONDS-t0))s"
TRAIN_DATA=$R/.dev/fmnist timeout 150 make check TESTS=test/train_gpu.sh > $O/make_train_gpu.log 2>&1; echo "train_gpu.sh real data rc=$? at $((SECONDS-t0))s"
cp test/train_gpu.log $O/ 2>/dev/null; grep -m5 FAIL $O/train_gpu.log
. test/script_lib.sh; script_tiny_fmnist /tmp/noise 200 28 /dev/urandom
M="mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2"
for m in cnn mlp; do for lr in 0.05 0.01; do for d in cpu cuda; do
  timeout 40 $M examples/train_fmnist --data /tmp/noise --model $m --batch-size 32 --progress lines --max-steps 300 --lr $lr --device $d --shard-optimizer off > $O/noise_${m}_${lr}_$d.txt 2>&1
done; done; done
echo "noise traces done at $((SECONDS-t0))s"
PYTHON=python3 NO_INSTALL=1 STEPS_CNN=1000 timeout 240 bench/compare_torch.sh --device cuda --reps 1 --data $R/.dev/fmnist --results $O/ct > $O/compare_torch.txt 2>&1; echo "compare_torch rc=$? at $((SECONDS-t0))s"
tail -15 $O/compare_torch.txt
