#!/bin/bash
# One-off device run 2: GPU tests after the IPC and stream changes, allreduce_perf -G, training speed.
set -u
R=$PWD O=/tmp/o; mkdir -p $O
export CC=mpicc OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pack() { tar czf $OUT/res.tgz -C /tmp o; }
trap pack EXIT
t0=$SECONDS
(sh autogen.sh && ./configure -q --with-cuda=/usr/local/cuda --with-cuda-arch=90 && make -j16 && make -j16 check TESTS=) > $O/build.log 2>&1 || { echo build failed; tail -20 $O/build.log; exit 1; }
echo "built at $((SECONDS-t0))s"
T="test/test_models_cuda test/ring_device_gpu_np2.mpi test/ring_device_gpu_np4.mpi test/ring_device_gpu_np3_staged.mpi test/hvd_device_gpu_np2.mpi test/hvd_device_gpu_np3.mpi test/dist_opt_device_gpu_np2.mpi test/device_buffers_np2.mpi test/train_gpu.sh"
TRAIN_DATA=$R/.dev/fmnist timeout 120 make -j4 check TESTS="$T" > $O/tests.log 2>&1; echo "tests rc=$? at $((SECONDS-t0))s"
grep -E "^(PASS|FAIL|SKIP|ERROR):" $O/tests.log; cp test/*.log $O/ 2>/dev/null
M="mpirun --allow-run-as-root --oversubscribe --bind-to none"
for np in 2 4; do timeout 40 $M -np $np bench/allreduce_perf -G --compare -b 1M -e 64M -f 4 -n 10 -w 3 -r 3 > $O/bench_np$np.txt 2>&1; done
grep -E "^ +[0-9]+ " $O/bench_np2.txt $O/bench_np4.txt | awk '{print $1,$2,"staged",$6,"mpi_hc",$7,"ipc",$8,"limit",$10}'
echo "bench at $((SECONDS-t0))s"
for m in mlp cnn; do for np in 1 2; do
  timeout 30 $M -np $np examples/train_fmnist --data $R/.dev/fmnist --model $m --device cuda --batch-size 64 --max-steps 600 --epochs 100 --progress lines > $O/ours_${m}_np$np.txt 2>&1
  echo "$m np$np: $(grep '^done' $O/ours_${m}_np$np.txt)"
done; done
HVD_TIMELINE=$O/timeline_cnn_np2.json timeout 30 $M -np 2 examples/train_fmnist --data $R/.dev/fmnist --model cnn --device cuda --batch-size 64 --max-steps 100 --epochs 100 --progress lines > $O/timeline_run.txt 2>&1
HVD_RING_IPC=off timeout 30 $M -np 2 examples/train_fmnist --data $R/.dev/fmnist --model cnn --device cuda --batch-size 64 --max-steps 600 --epochs 100 --progress lines > $O/ours_cnn_np2_ipcoff.txt 2>&1; echo "cnn np2 ipc off: $(grep '^done' $O/ours_cnn_np2_ipcoff.txt)"
echo "training at $((SECONDS-t0))s"
if [ $SECONDS -lt 170 ]; then PYTHON=$(command -v python3) NO_INSTALL=1 STEPS_CNN=600 STEPS_MLP=1000 timeout 90 bench/compare_torch.sh --device cuda --reps 1 --ranks 1 --batch-size 512 --data $R/.dev/fmnist --results $O/ct512 > $O/ct512.txt 2>&1; tail -8 $O/ct512.txt; fi
echo "end at $((SECONDS-t0))s"
