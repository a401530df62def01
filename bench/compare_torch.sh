#!/bin/sh
# bench/compare_torch.sh: our training against PyTorch's DistributedDataParallel,
# side by side. For each model (mlp, cnn), each rank count (1, 2) and each
# repetition, runs examples/train_fmnist and bench/torch_fmnist.py (Debian's
# python3-torch 1.13, gloo, CPU) one right after the other (which goes first
# alternates between repetitions), with the same model, initial weights,
# data order, batch per rank, optimiser and one thread per rank; then prints
# a table of images/s (median and range over repetitions), the ratio ours /
# torch, and the scaling efficiency from 1 to 2 ranks of each.
#
# Throughput: the programs' own images/s of their training steps, so
# start-up (MPI, Python and torch imports, data loading) and the test-set
# evaluation are left out. Both print a progress line every tenth of an
# epoch with the images/s of that window; the figure used is that of all
# windows after the first (the first window, 93 steps at 1 rank and 46 at 2
# with batch 64, is warm-up: first touch of buffers, DDP's bucket rebuild).
# A run too short to have a second window falls back to its "done:" line
# (all steps) and is marked "*" in the table.
#
# Usage: bench/compare_torch.sh [options]   (from anywhere; --help for all)
#   bench/compare_torch.sh                          # defaults, ~8 min quiet
#   bench/compare_torch.sh --reps 1 --steps 60 --results /tmp/ct   # smoke
# Options have environment equivalents (MODELS, RANKS, REPS, STEPS_MLP,
# STEPS_CNN, EPOCHS, BATCH, DATA, NORMALIZE, DEVICE, TORCH_CUDNN, RESULTS, RUN_TIMEOUT, MPIRUN_ARGS,
# PYTHON (the interpreter that imports torch),
# NO_INSTALL=1); flags win.
#
# Exit status: 0; 1 (a run failed, torch missing, not built, no data);
# 2 (bad flags).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
python=${PYTHON:-/usr/bin/python3} # Debian's, which sees python3-torch

cmdline="$0 $*"
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') # nproc heeds OMP_NUM_THREADS
models=${MODELS:-"mlp cnn"}
ranks=${RANKS:-"1 2"}
reps=${REPS:-3}
steps_mlp=${STEPS_MLP:-2000}
steps_cnn=${STEPS_CNN:-300}
epochs=${EPOCHS:-0}
batch=${BATCH:-64}
data_dir=${DATA:-/usr/share/datasets/fashion-mnist}
normalize=${NORMALIZE:-off}
device=${DEVICE:-cpu}
torch_cudnn=${TORCH_CUDNN:-fast}
results=${RESULTS:-$root/bench/results/compare_torch}
run_timeout=${RUN_TIMEOUT:-1800}
mpirun_args=${MPIRUN_ARGS:-"--allow-run-as-root --oversubscribe --bind-to none"}
no_install=${NO_INSTALL:-0}

usage() {
    cat <<EOF
usage: $0 [options]
  --models "mlp cnn"   models to compare (\$MODELS; default "mlp cnn")
  --ranks "1 2"        rank counts (\$RANKS; default "1 2"); the scaling
                       efficiency needs 1 and 2
  --reps R             repetitions of every run (\$REPS; 3)
  --steps K            steps per run, both models (sets the two below)
  --steps-mlp K        steps per mlp run (\$STEPS_MLP; 2000)
  --steps-cnn K        steps per cnn run (\$STEPS_CNN; 300)
  --epochs E           full epochs instead of a number of steps
                       (\$EPOCHS; 0: use the steps)
  --batch-size B       samples per batch per rank (\$BATCH; 64)
  --data DIR           Fashion-MNIST IDX files, for both (\$DATA;
                       /usr/share/datasets/fashion-mnist)
  --normalize on|off   mean/std normalisation for both (\$NORMALIZE; off,
                       train_fmnist's default)
  --device cpu|cuda    where both train (\$DEVICE; cpu): on cuda every
                       rank shares the node's GPU (ours: the device
                       hvd_init chose; torch: cuda:0, gloo)
  --torch-cudnn fast|exact  torch's convolutions on cuda (\$TORCH_CUDNN;
                       fast): its defaults (TF32, any algorithm), or
                       float FMAs and deterministic algorithms, as ours
                       by default (torch_fmnist.py --cudnn)
  --results DIR        raw outputs and the table (\$RESULTS;
                       bench/results/compare_torch)
  --timeout S          seconds before a run is killed (\$RUN_TIMEOUT; 1800)
  --no-install         fail instead of installing python3-torch (\$NO_INSTALL=1)
  --help               this text
mpirun gets \$MPIRUN_ARGS ("$mpirun_args") and -np N.
The header names the commit: \$HVD_COMMIT, else git's HEAD.
EOF
}

die() {
    echo "compare_torch: $*" >&2
    exit 1
}

need_value() {
    [ $# -ge 2 ] || { echo "compare_torch: $1 needs a value" >&2; exit 2; }
}

while [ $# -gt 0 ]; do
    case $1 in
        --models) need_value "$@"; models=$2; shift 2 ;;
        --ranks) need_value "$@"; ranks=$2; shift 2 ;;
        --reps) need_value "$@"; reps=$2; shift 2 ;;
        --steps) need_value "$@"; steps_mlp=$2; steps_cnn=$2; shift 2 ;;
        --steps-mlp) need_value "$@"; steps_mlp=$2; shift 2 ;;
        --steps-cnn) need_value "$@"; steps_cnn=$2; shift 2 ;;
        --epochs) need_value "$@"; epochs=$2; shift 2 ;;
        --batch-size) need_value "$@"; batch=$2; shift 2 ;;
        --data) need_value "$@"; data_dir=$2; shift 2 ;;
        --normalize) need_value "$@"; normalize=$2; shift 2 ;;
        --device) need_value "$@"; device=$2; shift 2 ;;
        --torch-cudnn) need_value "$@"; torch_cudnn=$2; shift 2 ;;
        --results) need_value "$@"; results=$2; shift 2 ;;
        --timeout) need_value "$@"; run_timeout=$2; shift 2 ;;
        --no-install) no_install=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "compare_torch: unknown flag \"$1\" (try --help)" >&2; exit 2 ;;
    esac
done

is_uint() {
    case $1 in ''|*[!0-9]*) return 1 ;; *) return 0 ;; esac
}
bad() {
    echo "compare_torch: $*" >&2
    exit 2
}
# need_count FLAG VALUE: VALUE is an integer >= 1, or exit 2 naming FLAG.
need_count() {
    if ! { is_uint "$2" && [ "$2" -ge 1 ]; }; then
        bad "$1: \"$2\" is not an integer >= 1"
    fi
}
need_count --reps "$reps"
need_count --steps-mlp "$steps_mlp"
need_count --steps-cnn "$steps_cnn"
need_count --batch-size "$batch"
need_count --timeout "$run_timeout"
is_uint "$epochs" || bad "--epochs: \"$epochs\" is not an integer >= 0"
[ -n "$models" ] || bad "--models: empty"
for m in $models; do
    case $m in mlp|cnn) ;; *) bad "--models: unknown model \"$m\" (mlp, cnn)" ;; esac
done
[ -n "$ranks" ] || bad "--ranks: empty"
for n in $ranks; do
    if ! { is_uint "$n" && [ "$n" -ge 1 ]; }; then
        bad "--ranks: \"$n\" is not a rank count"
    fi
done
case $normalize in on|off) ;; *) bad "--normalize: \"$normalize\" (on or off)" ;; esac
case $device in cpu|cuda) ;; *) bad "--device: \"$device\" (cpu or cuda)" ;; esac
case $torch_cudnn in fast|exact) ;; *) bad "--torch-cudnn: \"$torch_cudnn\" (fast or exact)" ;; esac
case $no_install in 0|1) ;; *) bad "NO_INSTALL: \"$no_install\" (0 or 1)" ;; esac

# ---- what the runs need ----
ours=$root/examples/train_fmnist
peer=$here/torch_fmnist.py
[ -x "$ours" ] || die "$ours is not built: run ./configure && make in $root"
[ -r "$peer" ] || die "$peer is missing"
command -v mpirun >/dev/null 2>&1 || die "mpirun not found (install openmpi-bin)"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte \
         t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    [ -r "$data_dir/$f.gz" ] || [ -r "$data_dir/$f" ] ||
        die "Fashion-MNIST missing: no $data_dir/$f.gz (Debian package dataset-fashion-mnist; scripts/install-deps installs it)"
done
[ -x "$python" ] || die "$python not found (Debian's python3)"

if ! "$python" -c 'import torch' >/dev/null 2>&1; then
    [ "$no_install" = 1 ] && die "$python cannot import torch and --no-install was given (apt-get install python3-torch)"
    command -v apt-get >/dev/null 2>&1 || die "$python cannot import torch and there is no apt-get to install python3-torch"
    sudo=
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "installing python3-torch needs root (or sudo)"
        sudo=sudo
    fi
    echo "compare_torch: installing Debian's python3-torch (large; a few minutes)" >&2
    $sudo apt-get update -q >&2 || die "apt-get update failed"
    $sudo env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends python3-torch >&2 ||
        die "apt-get install python3-torch failed"
    "$python" -c 'import torch' || die "python3-torch installed, but $python still cannot import torch"
fi
torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)

# Normalisation: the same for both (ours trains on raw pixels by default).
ours_norm_flag="--normalize $normalize"

mkdir -p "$results" || die "cannot create $results"
results=$(cd "$results" && pwd)

# One thread per rank for both (before any BLAS or OpenMP starts).
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
threads_x="-x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS -x MKL_NUM_THREADS"

if [ "$epochs" -gt 0 ]; then
    length_desc="$epochs epochs"
else
    length_desc=steps
    for m in $models; do
        if [ "$m" = mlp ]; then length_desc="$length_desc mlp $steps_mlp"; else length_desc="$length_desc cnn $steps_cnn"; fi
    done
fi
# HVD_COMMIT: the commit, where the tree is a copy without .git
commit=${HVD_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null ||
    echo unknown)}
cudnn_desc=""
[ "$device" = cuda ] && cudnn_desc=", torch's cuDNN $torch_cudnn"
ompi=$(mpirun --version 2>/dev/null | head -n 1)
header="# $cmdline
# compare_torch: commit $commit, $cpus CPUs, load average at start $(cut -d' ' -f1-3 /proc/loadavg)
# ours: examples/train_fmnist; torch: bench/torch_fmnist.py, torch $torch_version DDP gloo ($ompi)
# batch $batch per rank, 1 thread per rank, $length_desc, $reps reps, normalize $normalize, device $device$cudnn_desc"
printf '%s\n' "$header" > "$results/summary.txt"
printf '%s\n' "$header"

# rate FILE NP: "IMAGES_PER_S METHOD" from a log: the windows after the
# first (steady) or, with fewer than two windows, the done: line (done).
rate() {
    tr '\r' '\n' < "$1" | awk -v bs="$batch" -v np="$2" '
        /^step [0-9]+\/[0-9]+ / {
            split($2, a, "/"); s = a[1] + 0; r = 0
            for (i = 3; i <= NF; i++) if ($i == "images/s") r = $(i - 1) + 0
            w++
            if (w > 1 && r > 0) { img = (s - prev) * bs * np; I += img; T += img / r }
            prev = s
        }
        /^done: / { for (i = 1; i <= NF; i++) if ($i == "images/s") d = $(i - 1) }
        END {
            if (d == "") exit 1
            if (w >= 2 && T > 0) printf "%.1f steady\n", I / T
            else printf "%s done\n", d
        }'
}

runs_total=0
for m in $models; do for n in $ranks; do runs_total=$((runs_total + 2)); done; done
runs_total=$((runs_total * reps))
run_no=0
rates=$results/rates.txt # rep model np impl rate method
: > "$rates"

# one IMPL MODEL NP REP
one() {
    o_impl=$1 o_m=$2 o_n=$3 o_r=$4
    if [ "$epochs" -gt 0 ]; then
        len="--epochs $epochs"
    elif [ "$o_m" = mlp ]; then
        len="--epochs 100000 --max-steps $steps_mlp"
    else
        len="--epochs 100000 --max-steps $steps_cnn"
    fi
    log=$results/${o_m}_np${o_n}_${o_impl}_rep$o_r.txt
    run_no=$((run_no + 1))
    printf '[%d/%d] %s np %s %s rep %s: ' "$run_no" "$runs_total" "$o_m" "$o_n" "$o_impl" "$o_r" >&2
    # shellcheck disable=SC2086
    if [ "$o_impl" = ours ]; then
        set -- "$ours" --model "$o_m" $len --batch-size "$batch" --data "$data_dir" --progress lines $ours_norm_flag --device "$device"
    else
        set -- "$python" "$peer" --model "$o_m" $len --batch-size "$batch" --data "$data_dir" --normalize "$normalize" --device "$device" --cudnn "$torch_cudnn"
    fi
    # shellcheck disable=SC2086
    if ! timeout -k 10 "$run_timeout" mpirun $mpirun_args $threads_x -np "$o_n" "$@" \
            > "$log" 2>&1; then
        echo "FAILED" >&2
        tail -n 15 "$log" >&2
        die "run failed: mpirun -np $o_n $* (output in $log)"
    fi
    if ! got=$(rate "$log" "$o_n"); then
        die "no \"done:\" line in $log"
    fi
    echo "$got" | awk '{printf "%.0f images/s (%s)\n", $1, $2}' >&2
    echo "$o_r $o_m $o_n $o_impl $got" >> "$rates"
}

r=1
while [ "$r" -le "$reps" ]; do
    for m in $models; do
        for n in $ranks; do
            if [ $((r % 2)) = 1 ]; then
                one ours "$m" "$n" "$r"; one torch "$m" "$n" "$r"
            else
                one torch "$m" "$n" "$r"; one ours "$m" "$n" "$r"
            fi
        done
    done
    r=$((r + 1))
done

# ---- the table ----
table=$(awk -v models="$models" -v ranks="$ranks" '
    function med(arr, k,   i, j, t) { # sorts arr[1..k] in place, returns median
        for (i = 2; i <= k; i++) { t = arr[i]; for (j = i - 1; j >= 1 && arr[j] > t; j--) arr[j + 1] = arr[j]; arr[j + 1] = t }
        return k % 2 ? arr[(k + 1) / 2] : (arr[k / 2] + arr[k / 2 + 1]) / 2
    }
    function stat(fmt, arr, k,   md) {
        md = med(arr, k)
        return sprintf(fmt " (" fmt "-" fmt ")", md, arr[1], arr[k])
    }
    {
        v[$1, $2, $3, $4] = $5
        if ($6 != "steady") { mark[$2, $3, $4] = "*"; nmark++ }
        if ($1 + 0 > nrep + 0) nrep = $1 + 0
    }
    END {
        nm = split(models, M, " "); nn = split(ranks, N, " ")
        printf "# model np | ours img/s median (min-max)  | torch img/s median (min-max) | ours/torch, paired per rep\n"
        for (a = 1; a <= nm; a++) for (b = 1; b <= nn; b++) {
            m = M[a]; n = N[b]; k = 0
            for (r = 1; r <= nrep; r++) {
                k++; o[k] = v[r, m, n, "ours"]; t[k] = v[r, m, n, "torch"]; q[k] = o[k] / t[k]
            }
            printf "  %-5s %2s | %-29s | %-28s | %s\n", m, n,
                stat("%.0f", o, k) mark[m, n, "ours"], stat("%.0f", t, k) mark[m, n, "torch"],
                stat("%.2f", q, k)
        }
        if (index(" " ranks " ", " 1 ") && index(" " ranks " ", " 2 ")) {
            printf "# scaling efficiency 1->2 ranks: img/s at np2 / (2 x img/s at np1), paired per rep, median (min-max)\n"
            printf "# model | ours              | torch\n"
            for (a = 1; a <= nm; a++) {
                m = M[a]
                for (r = 1; r <= nrep; r++) {
                    eo[r] = v[r, m, 2, "ours"] / (2 * v[r, m, 1, "ours"])
                    et[r] = v[r, m, 2, "torch"] / (2 * v[r, m, 1, "torch"])
                }
                printf "  %-5s | %-17s | %s\n", m, stat("%.2f", eo, nrep), stat("%.2f", et, nrep)
            }
        }
        if (nmark) printf "# *: some runs too short for a second progress window: rate of all steps (done: line)\n"
    }' "$rates")
printf '%s\n' "$table" >> "$results/summary.txt"
echo "# load average at end $(cut -d' ' -f1-3 /proc/loadavg)" >> "$results/summary.txt"
printf '%s\n' "$table"
echo "# load average at end $(cut -d' ' -f1-3 /proc/loadavg); raw outputs in $results"
