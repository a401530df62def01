#!/bin/sh
# test/train_device.sh: --device as a user meets it, on a small data set
# of noise images this script writes. With no GPU visible (no emulation,
# CUDA_VISIBLE_DEVICES empty, so on a GPU node too) --device cuda exits 2
# naming why before any work (and --device cpu, when HVD_CONV has a bad
# value; and --device cuda where HVD_DEVICE_EMULATE has a value ring
# refuses), and --device auto trains on the CPU, saying so (there too). On the emulated
# device (HVD_DEVICE_EMULATE=1: the model's memory is the device's own,
# reached only by copies, models/backend_emu.c, and it is ring's emulated
# device memory, so the gradients take hvd's device path) --device cuda
# trains bitwise the numbers the CPU trains, at 1 and 2 ranks, mlp and
# cnn; a checkpoint it writes resumes on the CPU and the CPU's on it, both
# ending equal to a run that was not interrupted; and --shard-optimizer
# on is refused there; a rank that runs out of device memory making the
# model says so itself; --profile counts an epoch's first batch, sent
# before its first step. synthetic_benchmark's --device the same way. What
# the GPU itself computes is test_models_cuda's (scripts/gpu-check).
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup train_device
OMPI_MCA_odls_base_sigkill_timeout=0 # runs that exit 2 on purpose
export OMPI_MCA_odls_base_sigkill_timeout
tf=examples/train_fmnist
script_tiny_fmnist "$dir/idx" 48 28 /dev/urandom
common="--data $dir/idx --batch-size 8 --progress lines"

# ---- no GPU ----
HVD_DEVICE_EMULATE=0 CUDA_VISIBLE_DEVICES=
export HVD_DEVICE_EMULATE CUDA_VISIBLE_DEVICES
script_expect "cuda without a GPU" 2 "^train_fmnist: --device cuda: ." 2 \
    $tf $common --epochs 1 --device cuda
if grep -q "^step" "$dir/out"; then
    echo "FAIL: cuda without a GPU: it trained" >&2
    rc=1
fi
script_expect "synthetic_benchmark: cuda without a GPU" 2 \
    "^synthetic_benchmark: --device cuda: ." 1 \
    examples/synthetic_benchmark --num-iters 1 --device cuda
# HVD_CONV's bad value is refused on the CPU too, by name, before work.
HVD_CONV=xyz
export HVD_CONV
script_expect "HVD_CONV=xyz on the CPU" 2 \
    "^train_fmnist: --device cpu: HVD_CONV=xyz: expected cudnn or im2col$" 2 \
    $tf $common --epochs 1 --device cpu
if grep -q "^step" "$dir/out"; then
    echo "FAIL: HVD_CONV=xyz on the CPU: it trained" >&2
    rc=1
fi
unset HVD_CONV
script_launch "auto without a GPU" 1 $tf $common --epochs 1 \
    --device auto > "$dir/out"
grep -q "on cpu (--device auto)$" "$dir/out" || {
    cat "$dir/out" >&2
    echo "FAIL: auto without a GPU: no \"on cpu (--device auto)\"" >&2
    rc=1
}

# A value of HVD_DEVICE_EMULATE that ring refuses (no device used): the
# model took emulated kernels all the same, and trained "on cuda". Now
# cuda is refused, naming it, and auto trains on the CPU.
for prog in "$tf $common --epochs 1" "examples/synthetic_benchmark \
--num-iters 1"; do
    name=${prog%% *}
    name=${name#examples/}
    HVD_DEVICE_EMULATE=yes script_expect "$name: HVD_DEVICE_EMULATE=yes" 2 \
        "^$name: --device cuda: HVD_DEVICE_EMULATE has a value the" 1 \
        $prog --device cuda
    if grep -q "^step\|^Iter" "$dir/out"; then
        echo "FAIL: $name: HVD_DEVICE_EMULATE=yes: it trained" >&2
        rc=1
    fi
done
for device in auto cpu; do
    want="^done: "
    test $device = auto && want="on cpu (--device auto)$"
    HVD_DEVICE_EMULATE=yes script_launch "$device, HVD_DEVICE_EMULATE=yes" \
        1 $tf $common --epochs 1 --device $device > "$dir/out"
    grep -q "$want" "$dir/out" || {
        cat "$dir/out" >&2
        echo "FAIL: $device, HVD_DEVICE_EMULATE=yes: no \"$want\"" >&2
        rc=1
    }
done

# ---- the emulated device ----
HVD_DEVICE_EMULATE=1
unset CUDA_VISIBLE_DEVICES
# trained NAME NP ARGS...: the run's output without the launch line,
# its opening line (which names the device) and its timings, into
# $dir/NAME.
trained() {
    name=$1 np=$2
    shift 2
    script_launch "$name" "$np" $tf $common "$@" > "$dir/$name.raw"
    sed -e '/^train_fmnist: /d; / -np [0-9]/d; s/ *[0-9.]* images\/s.*//' \
        -e 's/time [0-9.]* s//; s/in [0-9.]* s of training//' \
        "$dir/$name.raw" > "$dir/$name"
}
for np in 1 2; do
    for model in mlp cnn; do
        run="--model $model --epochs 2"
        trained cpu $np $run --device cpu --shard-optimizer off
        trained gpu $np $run --device cuda
        grep -q "on cuda (emulated)$" "$dir/gpu.raw" || {
            echo "FAIL: $model at $np: no \"on cuda (emulated)\"" >&2
            rc=1
        }
        grep -q "^done: " "$dir/gpu" && cmp -s "$dir/cpu" "$dir/gpu" || {
            diff "$dir/cpu" "$dir/gpu" >&2
            echo "FAIL: $model at $np: --device cuda trained otherwise" >&2
            rc=1
        }
    done
done
# The last (the cnn at 2) again with each of the device's queued
# operations first sleeping 0-200 us: a wait missing between the model's
# stream and hvd's gives other numbers.
HVD_DEVICE_EMULATE=delay:3
trained gpu_delay 2 $run --device cuda
HVD_DEVICE_EMULATE=1
grep -q "^done: " "$dir/gpu_delay" && cmp -s "$dir/cpu" "$dir/gpu_delay" || {
    diff "$dir/cpu" "$dir/gpu_delay" >&2
    echo "FAIL: cnn at 2 under delay: --device cuda trained otherwise" >&2
    rc=1
}

# A checkpoint of either device resumes on the other: 1 epoch there, 1
# here, equal to 2 epochs on the CPU.
cpu="--device cpu --shard-optimizer off" run="--model cnn"
trained whole 2 $run $cpu --epochs 2 --checkpoint "$dir/whole.ckpt"
for first in cuda cpu; do
    if test $first = cuda; then one="--device cuda" two="$cpu"
    else one="$cpu" two="--device cuda"; fi
    trained "half_$first" 2 $run $one --epochs 1 \
        --checkpoint "$dir/$first.ckpt"
    trained "rest_$first" 2 $run $two --epochs 2 \
        --checkpoint "$dir/$first.ckpt" --resume
    cmp "$dir/whole.ckpt" "$dir/$first.ckpt" || {
        echo "FAIL: 1 epoch on $first + 1 resumed elsewhere differs from" \
            "2 on the CPU" >&2
        rc=1
    }
done

script_launch "synthetic_benchmark on the device" 2 \
    examples/synthetic_benchmark --model cnn --num-warmup-batches 1 \
    --num-iters 2 --num-batches-per-iter 2 --device cuda > "$dir/out"
grep -q "^Device: cuda (emulated)$" "$dir/out" &&
    grep -q "^Total img/sec on 2 rank(s): " "$dir/out" || {
    cat "$dir/out" >&2
    echo "FAIL: synthetic_benchmark --device cuda did not run there" >&2
    rc=1
}

# One rank out of device memory (on a GPU, ranks sharing it): that rank
# says so itself (before, only rank 0 said why a model failed). Rank 1's
# emulated device memory is a file, capped at 64 MiB (MPI's own shared
# memory needs less); the mlp at batch 32768 needs more.
cat > "$dir/capped" << 'EOF'
#!/bin/sh
# capped KIB PROGRAM [ARGS...]: PROGRAM, rank 1's files capped at KIB KiB
case ${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}} in
1) trap '' XFSZ; ulimit -f "$1" ;;
esac
shift
exec "$@"
EOF
chmod +x "$dir/capped"
oom="rank 1: model mlp at batch 32768 on cuda: out of memory$"
script_expect "train_fmnist: rank 1 out of device memory" 1 \
    "^train_fmnist: $oom" 2 "$dir/capped" 65536 $tf --data "$dir/idx" \
    --model mlp --batch-size 32768 --epochs 1 --device cuda
script_expect "synthetic_benchmark: rank 1 out of device memory" 1 \
    "^synthetic_benchmark: $oom" 2 "$dir/capped" 65536 \
    examples/synthetic_benchmark --model mlp --batch-size 32768 \
    --num-iters 1 --device cuda

# --profile's batches include each epoch's first batch, which is sent
# ahead before the epoch's first step (one step an epoch here: before, the
# phase read 0.000, the batch not counted anywhere).
script_tiny_fmnist "$dir/idx240" 240 28 /dev/urandom
script_launch "profile, a step an epoch" 1 $tf --data "$dir/idx240" \
    --batch-size 240 --progress lines --epochs 14 --device cuda \
    --profile > "$dir/out"
awk '/^profile: rank 0: 4 steps, / {
        for (i = 1; i < NF; i++) if ($i == "batches") b = $(i + 1) + 0
        ok = b >= 0.005
    }
    END { exit !ok }' "$dir/out" || {
    cat "$dir/out" >&2
    echo "FAIL: --profile, a step an epoch: batches under 0.005 ms" >&2
    rc=1
}

script_expect "sharded step on the GPU" 2 \
    "^train_fmnist: --shard-optimizer on: the sharded step runs on the host" \
    2 $tf $common --epochs 1 --device cuda --shard-optimizer on
script_finish train_device
