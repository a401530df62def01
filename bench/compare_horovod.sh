#!/bin/bash
# bench/compare_horovod.sh: hvd.torch against Horovod 0.28.1 and PyTorch DDP
# on the same PyTorch script.
#
# For each round (3 by default), each rank count (1 2), each model (mlp
# cnn), runs three peers one right after the other, their order rotating
# from round to round (round 1: hvd.torch Horovod DDP, round 2: Horovod DDP
# hvd.torch, ...):
#   hvd.torch  examples/torch/synthetic_benchmark.py as it is, on Debian's
#              /usr/bin/python3 with PYTHONPATH=<repo> and
#              HVD_LIBRARY=<builddir>/libhvd.so;
#   Horovod    a copy of the same file in a temporary folder whose one line
#              `import hvd.torch as hvd` sed has made
#              `import horovod.torch as hvd`, on the venv's python (Horovod
#              0.28.1 built against Debian's torch 1.13 and Open MPI,
#              HOROVOD_CPU_OPERATIONS=MPI, no gloo);
#   DDP        bench/torch_ddp_bench.py (the same models, batch, SGD, timing
#              and output; torch.distributed gloo);
# then, at each --small-np rank count, the three peers' --small-tensors
# timing (1000 x 4 KiB float32 allreduces per iteration: allreduce_async_ +
# synchronize, or all_reduce(async_op=True) + wait). Then it prints a table
# of medians over the rounds: total images/s of each peer, the ratios
# hvd.torch/Horovod and hvd.torch/DDP, the scaling from the smallest rank
# count to the others (images/s at N / images/s at the smallest), and the
# small-tensor milliseconds per iteration. Raw outputs, the command lines
# and the table go to the results folder (default
# bench/results/issue24/<date-time>/).
#
# One thread per rank everywhere (the scripts set OMP/OpenBLAS/MKL before
# torch loads). mpirun gets --allow-run-as-root (as root) --oversubscribe
# --bind-to none --mca mpi_yield_when_idle 1. The last matters for Horovod
# alone: hvd asks Open MPI to yield in blocking waits itself when it starts
# MPI, and DDP does not use MPI; without it Horovod's MPI calls spin on the
# core of the other rank's training thread (at 2 ranks on 2 cores: cnn ~700
# instead of ~1100 img/s, mlp 3,000-16,000 instead of ~25,000).
# These 2-vCPU machines vary between launches (../shared/BENCHMARKING.md):
# only the interleaved medians mean anything.
#
# Usage: bench/compare_horovod.sh [--install] [--rounds N] [--np "1 2"]
#            [--models "mlp cnn"] [more: --help]
#   --install     installs Horovod first (apt-get: cmake g++ python3-dev
#                 python3-venv libopenmpi-dev libtorch-dev pybind11-dev ...; a venv
#                 /usr/bin/python3 -m venv --system-site-packages at
#                 $HVD_HOROVOD_VENV, default ~/.cache/hvd-horovod-venv;
#                 pip install --no-build-isolation horovod==0.28.1 with
#                 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_MPI=1
#                 HOROVOD_WITHOUT_GLOO=1 ... MAKEFLAGS=-j2) and prints how
#                 long it took (about 5 minutes of compiling on 2 cores). Without
#                 --install and with no Horovod in the venv it exits 2.
#   --install-only  the same, then exit.
#
# Environment: HVD_HOROVOD_VENV, HVD_HOROVOD_VERSION (0.28.1), BUILDDIR
# (the folder holding libhvd.so; default the repository root), PYTHON
# (/usr/bin/python3), MPIRUN (mpirun), MPIRUN_ARGS (replaces the flags above).
# Exit status: 0; 1 (a run failed, not built, install failed); 2 (bad flags,
# or Horovod missing without --install).
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
prog=compare_horovod

venv=${HVD_HOROVOD_VENV:-$HOME/.cache/hvd-horovod-venv}
horovod_version=${HVD_HOROVOD_VERSION:-0.28.1}
python=${PYTHON:-/usr/bin/python3}
mpirun=${MPIRUN:-mpirun}
builddir=${BUILDDIR:-$root}
if [ -n "${MPIRUN_ARGS:-}" ]; then
    mpirun_args=$MPIRUN_ARGS
elif [ "$(id -u)" = 0 ]; then
    mpirun_args="--allow-run-as-root --oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
else
    mpirun_args="--oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
fi

install=0 install_only=0
rounds=3 nps="1 2" models="mlp cnn"
iters=5 per_iter=10 warmup=5 batch=64
small=1000 small_nps=2 small_iters=10
run_timeout=300 results=""
cmdline="$0 $*"

log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() { log "$1"; exit "${2:-1}"; }
bad() { die "$1" 2; }

usage() {
    cat <<EOF
usage: $0 [options]
  --install             install Horovod $horovod_version first (see the top of this file)
  --install-only        install Horovod, print how long it took, and exit
  --rounds N            rounds of interleaved runs (3)
  --np "1 2"            rank counts of the model runs (scaling: from the first)
  --models "mlp cnn"    models (mlp, cnn; torchvision names if installed)
  --num-iters I         timed iterations per run (5)
  --num-batches-per-iter K  batches per iteration (10)
  --num-warmup-batches W    batches before timing (5)
  --batch-size B        images per batch per rank (64)
  --small-tensors N     tensors of 4 KiB per small-tensor iteration (1000; 0: skip)
  --small-np "2"        rank counts of the small-tensor runs (2)
  --small-iters K       timed small-tensor iterations per run (10; 2 warm-up)
  --timeout S           seconds before one run is killed (300)
  --results DIR         raw outputs and table (bench/results/issue24/<date-time>)
  --help                this text
Environment: HVD_HOROVOD_VENV ($venv), BUILDDIR ($builddir),
PYTHON ($python), MPIRUN ($mpirun), MPIRUN_ARGS ("$mpirun_args").
EOF
}

need_value() { [ $# -ge 2 ] || bad "$1 needs a value"; }
is_uint() { case $1 in ''|*[!0-9]*) return 1 ;; *) return 0 ;; esac; }
need_count() { # FLAG VALUE MIN
    { is_uint "$2" && [ "$2" -ge "$3" ]; } || bad "$1: \"$2\" is not an integer >= $3"
}

while [ $# -gt 0 ]; do
    case $1 in
        --install) install=1; shift ;;
        --install-only) install=1; install_only=1; shift ;;
        --rounds) need_value "$@"; rounds=$2; shift 2 ;;
        --np) need_value "$@"; nps=$2; shift 2 ;;
        --models) need_value "$@"; models=$2; shift 2 ;;
        --num-iters) need_value "$@"; iters=$2; shift 2 ;;
        --num-batches-per-iter) need_value "$@"; per_iter=$2; shift 2 ;;
        --num-warmup-batches) need_value "$@"; warmup=$2; shift 2 ;;
        --batch-size) need_value "$@"; batch=$2; shift 2 ;;
        --small-tensors) need_value "$@"; small=$2; shift 2 ;;
        --small-np) need_value "$@"; small_nps=$2; shift 2 ;;
        --small-iters) need_value "$@"; small_iters=$2; shift 2 ;;
        --timeout) need_value "$@"; run_timeout=$2; shift 2 ;;
        --results) need_value "$@"; results=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) bad "unknown flag \"$1\" (try --help)" ;;
    esac
done

need_count --rounds "$rounds" 1
need_count --num-iters "$iters" 1
need_count --num-batches-per-iter "$per_iter" 1
need_count --num-warmup-batches "$warmup" 0
need_count --batch-size "$batch" 1
need_count --small-tensors "$small" 0
need_count --small-iters "$small_iters" 1
need_count --timeout "$run_timeout" 1
[ -n "${nps// /}" ] || bad "--np: empty"
for n in $nps $small_nps; do
    { is_uint "$n" && [ "$n" -ge 1 ]; } || bad "--np/--small-np: \"$n\" is not a rank count"
done
[ -n "${models// /}" ] || [ "$small" -gt 0 ] || bad "--models: empty and --small-tensors 0: nothing to run"
for m in $models; do
    case $m in *[!A-Za-z0-9_]*) bad "--models: \"$m\" is not a model name" ;; esac
done

# ---- Horovod: install (--install), or check ----

install_horovod() {
    local t0 t1 pkgs missing p sudo=
    t0=$(date +%s)
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "installing Debian packages needs root (or sudo)"
        sudo=sudo
    fi
    # libtorch-dev, pybind11-dev: Debian's python3-torch ships no C++ headers
    # (torch/include/torch links to /usr/include/torch), which Horovod's
    # torch extension needs (torch/extension.h, which includes pybind11).
    pkgs="cmake g++ make python3-dev python3-venv python3-pip python3-torch libtorch-dev pybind11-dev libopenmpi-dev openmpi-bin"
    missing=""
    for p in $pkgs; do
        dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        log "apt-get install$missing"
        $sudo apt-get update -q >&2 || die "apt-get update failed"
        # shellcheck disable=SC2086
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >&2 \
            || die "apt-get install$missing failed"
    fi
    if [ ! -x "$venv/bin/python" ]; then
        log "creating the venv $venv (/usr/bin/python3 -m venv --system-site-packages)"
        /usr/bin/python3 -m venv --system-site-packages "$venv" \
            || die "cannot create the venv $venv"
    fi
    log "pip install --no-build-isolation horovod==$horovod_version into $venv (compiles; about 5 minutes on 2 cores)"
    HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 \
    HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_MPI=1 HOROVOD_WITHOUT_GLOO=1 \
    HOROVOD_CPU_OPERATIONS=MPI MAKEFLAGS=-j2 \
        "$venv/bin/python" -m pip install --no-cache-dir -v \
        --no-build-isolation "horovod==$horovod_version" >&2 \
        || die "pip install horovod==$horovod_version failed (its output is above)"
    "$venv/bin/python" -c 'import horovod.torch' \
        || die "horovod==$horovod_version installed, but its venv python cannot import horovod.torch"
    t1=$(date +%s)
    log "Horovod $horovod_version installed in $venv in $((t1 - t0)) s"
}

if [ "$install" = 1 ]; then
    install_horovod
    [ "$install_only" = 1 ] && exit 0
fi
if ! [ -x "$venv/bin/python" ] ||
   ! "$venv/bin/python" -c 'import horovod.torch' >/dev/null 2>&1; then
    die "Horovod is not installed in $venv (HVD_HOROVOD_VENV): pass --install to build it (about 5 minutes on 2 cores)" 2
fi
horovod_seen=$("$venv/bin/python" -c 'import horovod; print(horovod.__version__)' 2>/dev/null)

# ---- what the runs need ----
bench_py=$root/examples/torch/synthetic_benchmark.py
ddp_py=$here/torch_ddp_bench.py
builddir=$(cd "$builddir" 2>/dev/null && pwd) || die "BUILDDIR: no folder $BUILDDIR"
lib=$builddir/libhvd.so
[ -r "$bench_py" ] || die "$bench_py is missing"
[ -r "$ddp_py" ] || die "$ddp_py is missing"
[ -r "$root/hvd/torch/__init__.py" ] || die "$root/hvd/torch/__init__.py is missing (the hvd.torch package)"
[ -r "$lib" ] || die "$lib is not built: run ./configure && make in $builddir"
command -v "$mpirun" >/dev/null 2>&1 || die "$mpirun not found (install openmpi-bin)"
"$python" -c 'import torch' >/dev/null 2>&1 || die "$python cannot import torch (apt-get install python3-torch)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/compare_horovod.XXXXXX") || die "mktemp failed"
trap 'rm -rf "$tmp"' EXIT
horovod_py=$tmp/synthetic_benchmark.py
sed 's/^\([[:space:]]*\)import hvd\.torch as hvd$/\1import horovod.torch as hvd/' \
    "$bench_py" > "$horovod_py" || die "sed failed"
changed=$(diff "$bench_py" "$horovod_py" | grep -c '^>')
[ "$changed" = 1 ] || die "expected one line \"import hvd.torch as hvd\" in $bench_py, changed $changed"

if [ -z "$results" ]; then
    results=$root/bench/results/issue24/$(date +%Y-%m-%d_%H%M%S)
fi
mkdir -p "$results" || die "cannot create $results"
results=$(cd "$results" && pwd)
cp "$horovod_py" "$results/synthetic_benchmark_horovod.py"

torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?')
header="# $cmdline
# $prog: commit $commit, $cpus CPUs, load average at start $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%M:%SZ)
# hvd.torch: $python $bench_py, HVD_LIBRARY=$lib; Horovod $horovod_seen: $venv/bin/python (import line changed); DDP: $ddp_py, gloo; torch $torch_version; $($mpirun --version 2>/dev/null | head -n 1)
# batch $batch per rank, $warmup warm-up batches, $iters iterations x $per_iter batches, 1 thread per rank, $rounds rounds; small tensors: $small x 4 KiB, $small_iters iterations; mpirun $mpirun_args"
printf '%s\n' "$header" > "$results/summary.txt"
printf '%s\n' "$header"

peers="hvd horovod ddp"
read -r -a mpirun_argv <<< "$mpirun_args"
# peer_cmd PEER: sets the command line (an array) of PEER.
peer_cmd() {
    case $1 in
        hvd) cmd=(env "HVD_LIBRARY=$lib" "PYTHONPATH=$root${PYTHONPATH:+:$PYTHONPATH}"
                  "$mpirun" "${mpirun_argv[@]}" -x HVD_LIBRARY -x PYTHONPATH
                  -np "$2" "$python" "$bench_py") ;;
        horovod) cmd=(env -u PYTHONPATH "$mpirun" "${mpirun_argv[@]}"
                      -np "$2" "$venv/bin/python" "$horovod_py") ;;
        ddp) cmd=("$mpirun" "${mpirun_argv[@]}" -np "$2" "$python" "$ddp_py") ;;
    esac
}

nruns=0
for m in $models; do for n in $nps; do nruns=$((nruns + 3)); done; done
if [ "$small" -gt 0 ]; then for n in $small_nps; do nruns=$((nruns + 3)); done; fi
nruns=$((nruns * rounds))
run_no=0 failed=0
values=$results/values.txt # round what np peer value
: > "$values"

# one ROUND WHAT(model|small) NP PEER
one() {
    local r=$1 what=$2 n=$3 peer=$4 out flags val
    out=$results/r${r}_${what}_np${n}_${peer}.txt
    if [ "$what" = small ]; then
        flags=(--small-tensors "$small" --num-iters 1 --num-batches-per-iter "$small_iters"
               --num-warmup-batches 2)
    else
        flags=(--model "$what" --batch-size "$batch" --num-iters "$iters"
               --num-batches-per-iter "$per_iter" --num-warmup-batches "$warmup")
    fi
    peer_cmd "$peer" "$n"
    run_no=$((run_no + 1))
    printf '[%d/%d] round %d %s np %d %s: ' "$run_no" "$nruns" "$r" "$what" "$n" "$peer" >&2
    printf '%s\n' "${cmd[*]} ${flags[*]}" >> "$results/commands.txt"
    if ! timeout -k 10 "$run_timeout" "${cmd[@]}" "${flags[@]}" > "$out" 2>&1; then
        echo "FAILED (output in $out)" >&2
        tail -n 8 "$out" | sed 's/^/    /' >&2
        failed=$((failed + 1))
        return
    fi
    if [ "$what" = small ]; then
        val=$(sed -n 's/^small tensors: .*: \([0-9.]*\) ms per iteration.*/\1/p' "$out" | tail -n 1)
        unit="ms per iteration"
    else
        val=$(sed -n 's/^Total img\/sec on [0-9]* [A-Z]*(s): \([0-9.]*\) .*/\1/p' "$out" | tail -n 1)
        unit="img/s in total"
    fi
    if [ -z "$val" ]; then
        echo "no result line (output in $out)" >&2
        failed=$((failed + 1))
        return
    fi
    echo "$val $unit" >&2
    echo "$r $what $n $peer $val" >> "$values"
}

# rotate R: the peers in round R's order.
rotate() {
    local k=$(( ($1 - 1) % 3 ))
    # shellcheck disable=SC2086 # peers: three words
    set -- $peers
    case $k in 0) echo "$1 $2 $3" ;; 1) echo "$2 $3 $1" ;; 2) echo "$3 $1 $2" ;; esac
}

t_start=$(date +%s)
r=1
while [ "$r" -le "$rounds" ]; do
    order=$(rotate "$r")
    for n in $nps; do
        for m in $models; do
            for p in $order; do one "$r" "$m" "$n" "$p"; done
        done
    done
    if [ "$small" -gt 0 ]; then
        for n in $small_nps; do
            for p in $order; do one "$r" small "$n" "$p"; done
        done
    fi
    r=$((r + 1))
done
t_end=$(date +%s)

# ---- the table ----
table=$("$python" - "$values" "$nps" "$models" "$small_nps" "$small" <<'EOF'
import statistics, sys
path, nps, models, small_nps, small = sys.argv[1:6]
nps = [int(n) for n in nps.split()]
small_nps = [int(n) for n in small_nps.split()] if int(small) else []
models = models.split()
v = {}
for line in open(path):
    r, what, n, peer, val = line.split()
    v.setdefault((what, int(n), peer), []).append(float(val))
names = {"hvd": "hvd.torch", "horovod": "Horovod", "ddp": "DDP"}

def med(what, n, peer):
    xs = v.get((what, n, peer))
    return statistics.median(xs) if xs else None

def f(x, fmt="%.0f"):
    return fmt % x if x is not None else "-"

def ratio(a, b):
    return a / b if a is not None and b else None

out = []
if models:
    out.append("# images/s in total, median over rounds (runs); ratios of the medians")
    out.append("| model | np | hvd.torch | Horovod | DDP | hvd.torch/Horovod | hvd.torch/DDP |")
    out.append("| --- | --- | --- | --- | --- | --- | --- |")
    for m in models:
        for n in nps:
            a, b, c = (med(m, n, p) for p in ("hvd", "horovod", "ddp"))
            k = len(v.get((m, n, "hvd"), []))
            out.append("| %s | %d | %s | %s | %s | %s | %s |" % (
                m, n, f(a), f(b), f(c), f(ratio(a, b), "%.2f"),
                f(ratio(a, c), "%.2f")))
    if len(nps) > 1:
        n0 = nps[0]
        out.append("")
        out.append("# scaling: images/s at np N / images/s at np %d (medians)" % n0)
        out.append("| model | np | hvd.torch | Horovod | DDP |")
        out.append("| --- | --- | --- | --- | --- |")
        for m in models:
            for n in nps[1:]:
                out.append("| %s | %d->%d | %s |" % (m, n0, n, " | ".join(
                    f(ratio(med(m, n, p), med(m, n0, p)), "%.2f")
                    for p in ("hvd", "horovod", "ddp"))))
for n in small_nps:
    out.append("")
    out.append("# small tensors: %s x 4 KiB allreduces, ms per iteration, "
               "median over rounds of each run's median" % small)
    out.append("| np | hvd.torch | Horovod | DDP | hvd.torch/Horovod | hvd.torch/DDP |")
    out.append("| --- | --- | --- | --- | --- | --- |")
    a, b, c = (med("small", n, p) for p in ("hvd", "horovod", "ddp"))
    out.append("| %d | %s | %s | %s | %s | %s |" % (
        n, f(a, "%.2f"), f(b, "%.2f"), f(c, "%.2f"), f(ratio(a, b), "%.2f"),
        f(ratio(a, c), "%.2f")))
    out.append("(time: lower is better; a ratio < 1 means hvd.torch is faster)")
print("\n".join(out))
EOF
)
{
    printf '%s\n' "$table"
    echo "# $((t_end - t_start)) s of runs, $failed failed; load average at end $(cut -d' ' -f1-3 /proc/loadavg)"
} >> "$results/summary.txt"
printf '%s\n' "$table"
echo "# $((t_end - t_start)) s of runs, $failed failed; load average at end $(cut -d' ' -f1-3 /proc/loadavg); raw outputs in $results"
[ "$failed" = 0 ] || exit 1
exit 0
