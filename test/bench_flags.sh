#!/bin/sh
# test/bench_flags.sh: the programs' bad flags, one run each at 1 rank
# through test/mpirun.sh: the benchmarks (bench/ and the synthetic
# benchmark of examples/) and the training programs (train_fmnist,
# train_cifar10: one parser) exit 2 with the message of test/README.md's
# bad-input table; so do bench/compare_torch.sh, share_machine.sh and the
# plots' scripts, run directly. The other scripts, run directly too:
# scripts/test and install-deps with arguments, quickstart and
# examples/slurm/ passing a bad flag to train_fmnist, compare_torch.sh
# without what it needs, and the test scripts' bad input and environment;
# each stops before any install. allreduce_perf at 2 ranks whose
# arguments or devices differ: every rank stops. One run that is not a
# refusal:
# allreduce_perf -G --compare at np=2 on the emulated device, its columns
# and its check.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup bench_flags
# A rank that exits 2 makes Open MPI's mpirun wait 2 s before it ends the
# others; every run here fails on purpose, before any MPI traffic.
OMPI_MCA_odls_base_sigkill_timeout=0
export OMPI_MCA_odls_base_sigkill_timeout

# expect_refused MESSAGE PROGRAM ARGS...: exit 2, and stderr or stdout
# holds MESSAGE (a fixed string). ARGS cannot hold spaces or be empty
# (test/mpirun.sh's spec): "--data=" gives an empty value.
expect_refused() {
    want=$1
    shift
    echo "1 $*" > "$dir/spec"
    sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > "$dir/out" 2>&1
    status=$?
    case $status in 77 | 99) exit $status ;; esac
    if test $status -ne 2 || ! grep -q -F -- "$want" "$dir/out"; then
        cat "$dir/out" >&2
        echo "FAIL: '$*' exited $status, want 2 and \"$want\"" >&2
        rc=1
    fi
}

# with NAME=VALUE COMMAND ARGS...: COMMAND with NAME exported as VALUE;
# NAME is then as it was before.
with() {
    with_name=${1%%=*} with_old='' with_set=''
    eval "with_old=\${$with_name-} with_set=\${$with_name+set}"
    # shellcheck disable=SC2163 # "$1" is NAME=VALUE
    export "$1"
    shift
    "$@"
    if test "$with_set" = set; then
        export "$with_name=$with_old"
    else
        unset "$with_name"
    fi
}

# ---- bench/allreduce_perf, bench/fusion_perf (bench/common.c), soak ----
ar=bench/allreduce_perf fu=bench/fusion_perf
a="allreduce_perf: invalid value" f="fusion_perf: invalid value"
expect_refused "$a '1.5M' for -b/--minbytes: expected bytes such as 8, \
64K, 16M or 1G" $ar -b 1.5M
expect_refused "$a '12Q' for -e/--maxbytes: expected bytes" $ar -e 12Q
expect_refused "$a '1' for -f/--stepfactor: expected an integer >= 2" \
    $ar -f 1
expect_refused "$a 'complex' for -d/--datatype: expected float, double, \
half, bfloat16, int32, int64 or uint8" $ar -d complex
expect_refused "$a 'xor' for -o/--op: expected sum, avg, min, max or prod" \
    $ar -o xor
expect_refused "$a 'fastest' for --algo: expected auto, ring or rdb" \
    $ar --algo fastest
expect_refused "$a 'fastest' for --impl: expected ring, mpi, noreduce, shm, \
hier or hiershm" $ar --impl fastest
expect_refused "$a '0' for -n/--iters: expected an integer >= 1" $ar -n 0
a=allreduce_perf:
expect_refused "$a -b/--minbytes must be at least 1" $ar -b 0
expect_refused "$a -e/--maxbytes is smaller than -b/--minbytes" \
    $ar -b 64 -e 8
expect_refused "$a --compare runs ring, mpi, noreduce and shm: drop --impl" \
    $ar --compare --impl mpi
expect_refused "$a -o avg needs a floating-point -d (float, double, half, \
bfloat16)" $ar -o avg -d int32
expect_refused "$a -e/--maxbytes 6 is less than one double element (8 \
bytes): no size to run" $ar -b 6 -e 6 -d double
expect_refused "$f '0' for -n/--iters: expected an integer >= 1" $fu -n 0
expect_refused "$f 'maybe' for --fusion: expected on or off" \
    $fu --fusion maybe
expect_refused "$f 'xor' for -o/--op: expected sum or avg" $fu -o xor
expect_refused "$f 'big' for --workload: expected all, small or resnet50" \
    $fu --workload big
expect_refused "$f 'random' for --order: expected interleaved or separate" \
    $fu --order random
for prog in $ar $fu; do
    p=${prog#bench/}
    expect_refused "$p: invalid value '-1' for -w/--warmup_iters: expected \
an integer >= 0" $prog -w -1
    expect_refused "$p: invalid value '0' for -r/--rounds: expected an \
integer >= 1" $prog -r 0
    expect_refused "$p: invalid value '2' for -c/--check: expected 0 or 1" \
        $prog -c 2
    expect_refused "$p: unknown option '--bogus'" $prog --bogus
    expect_refused "$p: missing value for '-n'" $prog -n
    expect_refused "$p: unexpected argument 'x'" $prog x
done
for zero in 0 0K 00M; do
    with HVD_FUSION_THRESHOLD=$zero expect_refused "fusion_perf: --fusion \
on, but HVD_FUSION_THRESHOLD=$zero turns fusion off: unset it or pass \
--fusion off" $fu
done
expect_refused "usage: soak [--seconds S (0 < S <= 86400)] [--seed X]  \
(bad: \"0\")" bench/soak --seconds 0

# -e beyond memory: 3 buffers of 2 GiB under a 3 GB limit of address space
# (ulimit -v, which dash and bash have); MPI_Abort, exit 1.
# shellcheck disable=SC3045
if (ulimit -v 3000000) 2> /dev/null; then
    echo "1 $ar -b 2G -e 2G -n 1 -w 0" > "$dir/spec"
    # shellcheck disable=SC3045
    (ulimit -v 3000000 && sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec") \
        > "$dir/out" 2>&1
    status=$?
    case $status in 77 | 99) cat "$dir/out" >&2; exit $status ;; esac
    want="rank 0: cannot allocate 6442450944 bytes for 3 buffers of \
-e/--maxbytes each (lower it)"
    if test $status -ne 1 || ! grep -q -F -- "$want" "$dir/out"; then
        cat "$dir/out" >&2
        echo "FAIL: allreduce_perf -e 2G under ulimit -v: exited $status," \
            "want 1 and \"$want\"" >&2
        rc=1
    fi
else
    echo "note: this shell has no ulimit -v; allreduce_perf out of memory" \
        "is not tried"
fi

# -G with no device: no emulation, and no GPU seen even on a GPU node
# (by hand, as `with` takes one variable).
cvd_old=${CUDA_VISIBLE_DEVICES-} cvd_set=${CUDA_VISIBLE_DEVICES+set}
CUDA_VISIBLE_DEVICES=''
export CUDA_VISIBLE_DEVICES
with HVD_DEVICE_EMULATE=0 expect_refused "allreduce_perf: -G: no device: \
no GPU visible in this CUDA build (or HVD_DEVICE_EMULATE for the emulated \
one)" $ar -G
with HVD_DEVICE_EMULATE=0 expect_refused "model_perf: --device cuda: " \
    bench/model_perf --device cuda
if test "$cvd_set" = set; then
    CUDA_VISIBLE_DEVICES=$cvd_old
else
    unset CUDA_VISIBLE_DEVICES
fi
# Ranks that disagree at the start (an MPMD launch or a wrapper; a node
# without a GPU) all stop, before any collective, where the others waited
# in one for the rank that stopped alone: 2 ranks, rank 1 through
# $dir/rank1 with RANK1_ENV set and RANK1_ARGS added.
cat > "$dir/rank1" << 'EOF'
#!/bin/sh
test "${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-}}" = 1 || exec "$@"
# shellcheck disable=SC2086 # RANK1_ARGS: words
exec env $RANK1_ENV "$@" $RANK1_ARGS
EOF
chmod +x "$dir/rank1" || exit 99
expect_apart() {
    want=$1
    shift
    echo "2 $dir/rank1 ${abs_top_builddir:-.}/$ar -b 1K -e 1K -n 2 -w 1 $*" \
        > "$dir/spec"
    HVD_TEST_TIMEOUT=60 sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" \
        > "$dir/out" 2>&1
    status=$?
    case $status in 77 | 99) cat "$dir/out" >&2; exit $status ;; esac
    if test $status -ne 2 || ! grep -q -F -- "$want" "$dir/out"; then
        cat "$dir/out" >&2
        echo "FAIL: allreduce_perf, ranks apart ($RANK1_ENV $RANK1_ARGS):" \
            "exited $status, want 2 and \"$want\"" >&2
        rc=1
    fi
}
export RANK1_ENV='' RANK1_ARGS='-d complex'
expect_apart "allreduce_perf: the ranks were given different arguments: \
every rank must run the same command"
RANK1_ARGS='-n 3' expect_apart "the ranks were given different arguments"
RANK1_ENV=HVD_DEVICE_EMULATE=0 RANK1_ARGS='' with HVD_DEVICE_EMULATE=1 \
    expect_apart "allreduce_perf: -G: rank 1 has no device where other \
ranks have one" -G
expect_refused "allreduce_perf: --impl mpi runs on host buffers: with -G, \
--impl takes staged, ipc, mpi_hostcopy or nccl" $ar -G --impl mpi
expect_refused "allreduce_perf: --impl staged runs on device buffers (-G): \
without -G, --impl takes ring" $ar --impl staged

# -G --compare on the emulated device (guard: host code that touches device
# memory faults), np=2, three small sizes: exit 0, every column named in
# the table's header, each row checked with nothing wrong, and the
# columns that run here (staged, mpi_hostcopy, ipc, limit) numbers.
# run_spec: the spec's run, output to $dir/out, its exit status in $status
# (`with` returns its own).
run_spec() {
    sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > "$dir/out" 2>&1
    status=$?
}
echo "2 $ar -G --compare -b 1K -e 64K -f 8 -n 2 -w 1" > "$dir/spec"
with HVD_DEVICE_EMULATE=guard run_spec
case $status in 77 | 99) cat "$dir/out" >&2; exit $status ;; esac
header=$(grep '^# *size ' "$dir/out")
missing=''
for col in staged mpi_hostcopy ipc nccl limit \
    staged/mpi_hostcopy ipc/limit ipc/staged ipc/nccl staged_oop \
    mpi_hostcopy_oop ipc_oop nccl_oop '#wrong'; do
    case " $header " in *" $col "*) ;; *) missing="$missing $col" ;; esac
done
# Rows: size count type redop staged mpi_hostcopy ipc nccl limit ...
# #wrong.
rows=$(awk '$1 ~ /^[0-9]+$/ && $3 == "float" && $NF == "0" && \
    $5 != "n/a" && $6 != "n/a" && $7 != "n/a" && $9 != "n/a" { n++ }
    END { print n + 0 }' "$dir/out")
if test $status -ne 0 || test -n "$missing" || test "$rows" != 3 ||
    ! grep -q -F "# Out of bounds values : 0 OK" "$dir/out" ||
    ! grep -q -F "# Device: device=emulated" "$dir/out"; then
    cat "$dir/out" >&2
    echo "FAIL: allreduce_perf -G --compare (emulated, np=2): exited" \
        "$status (want 0), columns missing:${missing:- none}, $rows good" \
        "rows of 3" >&2
    rc=1
fi

# model_perf on the emulated device: the device's step, timed as one.
echo "1 bench/model_perf --device cuda --model cnn --batch-size 4 --steps 2 \
--reps 1" > "$dir/spec"
with HVD_DEVICE_EMULATE=1 run_spec
if test $status -ne 0 || ! grep -q "^cnn batch 4: [0-9.]* ms on cuda \
(emulated) per step (best of 1 x 2), [0-9]* images/s$" "$dir/out"; then
    cat "$dir/out" >&2
    echo "FAIL: model_perf --device cuda (emulated): exited $status" \
        "(want 0), or no step line" >&2
    rc=1
fi

# ---- examples/synthetic_benchmark, bench/model_perf, bench/cross_core:
# prog/prog.c's grammar, as the benchmarks above ----
sb="synthetic_benchmark:" mp="model_perf:" cc="cross_core:"
expect_refused "$sb invalid value '0' for --batch-size: expected an integer \
from 1 to 65536" examples/synthetic_benchmark --batch-size 0
expect_refused "$sb invalid value 'resnet' for --model: expected mlp or cnn" \
    examples/synthetic_benchmark --model resnet
expect_refused "$sb unknown option '--bogus'" \
    examples/synthetic_benchmark --bogus
expect_refused "$sb missing value for '--num-iters'" \
    examples/synthetic_benchmark --num-iters
expect_refused "$sb invalid value 'x' for --seed: expected an integer from \
0 to 2^62" examples/synthetic_benchmark --seed x
expect_refused "$sb invalid value '0' for --num-iters: expected an integer \
from 1 to 1000000" examples/synthetic_benchmark --num-iters 0
expect_refused "$sb '--fp16-allreduce' takes no value" \
    examples/synthetic_benchmark --fp16-allreduce=1
expect_refused "$sb '--help' takes no value" \
    examples/synthetic_benchmark --help=1
expect_refused "$sb unexpected argument 'x'" examples/synthetic_benchmark x
expect_refused "$mp invalid value '0' for -s/--steps: expected an integer \
from 1 to 65536" bench/model_perf --steps 0
expect_refused "$mp invalid value 'resnet' for -m/--model: expected mlp or \
cnn" bench/model_perf --model resnet
expect_refused "$mp unknown option '--bogus'" bench/model_perf --bogus
expect_refused "$mp missing value for '--reps'" bench/model_perf --reps
expect_refused "$mp invalid value 'x' for -r/--reps: expected an integer \
from 1 to 65536" bench/model_perf --reps=x
expect_refused "$mp invalid value 'gpu' for -d/--device: expected cpu or \
cuda" bench/model_perf --device gpu
expect_refused "$cc invalid value '2' for -b/--bytes: expected an integer \
from 4 to 1073741824" bench/cross_core --bytes 2
expect_refused "$cc unknown option '--bogus'" bench/cross_core --bogus
expect_refused "$cc missing value for '--iters'" bench/cross_core --iters
expect_refused "$cc '--help' takes no value" bench/cross_core --help=1
expect_refused "$cc '--stream' takes no value" bench/cross_core --stream=1
# On one PU there is no other core to read from: said, exit 1, no hang.
taskset -c 0 bench/cross_core --iters 1 > "$dir/out" 2>&1
status=$?
if test $status -ne 1 || ! grep -q "$cc needs two PUs" "$dir/out"; then
    cat "$dir/out" >&2
    echo "FAIL: cross_core on one PU exited $status, want 1" >&2
    rc=1
fi
if test "$(getconf _NPROCESSORS_ONLN)" -ge 2 &&
    ! bench/cross_core --iters 20 | grep -q "cross-core read+add of 481280"; then
    echo "FAIL: bench/cross_core --iters 20 printed no measurement" >&2
    rc=1
fi
if test "$(getconf _NPROCESSORS_ONLN)" -ge 2 &&
    ! bench/cross_core --iters 20 --stream | grep -q "non-temporal stores"; then
    echo "FAIL: bench/cross_core --stream printed no writer's time" >&2
    rc=1
fi

# ---- examples/train_fmnist, examples/train_cifar10 (one parser, in
# prog/prog.c's grammar) ----
tf="train_fmnist: invalid value" tc="train_cifar10: invalid value"
expect_refused "$tf 'x' for --lr: expected a number > 0 and <= 100" \
    examples/train_fmnist --lr x
expect_refused "$tf 'inf' for --lr: expected a number" \
    examples/train_fmnist --lr inf
expect_refused "$tc 'nan' for --lr: expected a number" \
    examples/train_cifar10 --lr nan
u64="expected an unsigned 64-bit integer"
expect_refused "$tf '-1' for --seed: $u64" examples/train_fmnist --seed -1
expect_refused "$tf '0x10' for --seed: $u64" examples/train_fmnist --seed 0x10
expect_refused "$tf 'x' for --seed: $u64" examples/train_fmnist --seed=x
expect_refused "$tf 'tpu' for --device: expected cpu, cuda or auto" \
    examples/train_fmnist --device tpu
expect_refused "$tc 'x' for --progress: expected auto, bar or lines" \
    examples/train_cifar10 --progress x
expect_refused "$tf '' for --data: expected a directory" \
    examples/train_fmnist --data=
expect_refused "$tf '' for --checkpoint: expected a path" \
    examples/train_fmnist --checkpoint=
expect_refused "$tf '0' for --max-steps: expected an integer >= 1" \
    examples/train_fmnist --max-steps 0
expect_refused "$tc '0' for --train-limit: expected an integer >= 1" \
    examples/train_cifar10 --train-limit 0
tf="train_fmnist:" tc="train_cifar10:"
expect_refused "$tf '--resume' takes no value" \
    examples/train_fmnist --resume=yes
expect_refused "$tc '--help' takes no value" examples/train_cifar10 --help=1
expect_refused "$tf unknown option '--bogus'" examples/train_fmnist --bogus
expect_refused "$tf missing value for '--epochs'" \
    examples/train_fmnist --epochs
expect_refused "$tf unexpected argument 'x'" examples/train_fmnist x

# ---- shell scripts, run directly by the shell of their #! line: flags
# are checked before anything is installed or run ----
# expect_script STATUS MESSAGE SCRIPT ARGS...: exits STATUS, and the output
# holds MESSAGE (a fixed string).
expect_script() {
    want=$1 message=$2
    shift 2
    shell=$(sed -n '1s|^#! *\(/usr/bin/env  *\)\{0,1\}||p' "$1")
    ${shell:-sh} "$@" > "$dir/out" 2>&1
    status=$?
    if test $status -ne "$want" || ! grep -q -F -- "$message" "$dir/out"
    then
        cat "$dir/out" >&2
        echo "FAIL: '$*' exited $status, want $want and \"$message\"" >&2
        rc=1
    fi
}
top=${srcdir:-.} bench=${srcdir:-.}/bench
# A PATH of the few tools the scripts below need up to their checks: with
# a check broken, the script would stop at its first install, build or
# MPI step (no dpkg-query, apt-get, make or mpirun) instead of doing it.
mkdir "$dir/bin" || exit 99
for tool in awk basename bash cat cut dirname getconf grep head id mktemp mount \
    rm sed sh tr unshare; do
    if path=$(command -v $tool); then
        ln -s "$path" "$dir/bin/$tool" || exit 99
    fi
done
for s in test install-deps; do
    with PATH="$dir/bin" expect_script 2 "scripts/$s: takes no arguments \
(got: --bogus x)" "$top/scripts/$s" --bogus x
    with PATH="$dir/bin" expect_script 0 "scripts/$s: install" \
        "$top/scripts/$s" --help
done
with PATH="$dir/bin" expect_script 2 "scripts/sanitize: unknown mode \
\"bogus\" (address or thread)" "$top/scripts/sanitize" bogus
sm="share_machine:"
expect_script 2 "$sm --model: \"x\" is not mlp or cnn" \
    "$bench/share_machine.sh" --model x
expect_script 2 "$sm --reps: \"0\" is not an integer >= 1" \
    "$bench/share_machine.sh" --reps 0
expect_script 2 "$sm --reps needs a value" "$bench/share_machine.sh" --reps
expect_script 2 "$sm unknown flag \"--bogus\" (try --help)" \
    "$bench/share_machine.sh" --bogus
expect_script 1 "$sm $dir/none/examples/train_fmnist is not built" \
    "$bench/share_machine.sh" --baseline "$dir/none"
ct="compare_torch:"
expect_script 2 "$ct --reps: \"x\" is not an integer >= 1" \
    "$bench/compare_torch.sh" --reps x
expect_script 2 "$ct --batch-size: \"0\" is not an integer >= 1" \
    "$bench/compare_torch.sh" --batch-size 0
expect_script 2 "$ct --normalize: \"maybe\" (on or off)" \
    "$bench/compare_torch.sh" --normalize maybe
expect_script 2 "$ct --models: unknown model \"resnet\" (mlp, cnn)" \
    "$bench/compare_torch.sh" --models resnet
expect_script 2 "$ct unknown flag \"--bogus\" (try --help)" \
    "$bench/compare_torch.sh" --bogus
expect_script 2 "$ct --reps needs a value" "$bench/compare_torch.sh" --reps
expect_script 2 "$ct --steps-mlp: \"x\" is not an integer >= 1" \
    "$bench/compare_torch.sh" --steps x
expect_script 2 "$ct --steps-cnn: \"0\" is not an integer >= 1" \
    "$bench/compare_torch.sh" --steps-cnn 0
expect_script 2 "$ct --timeout: \"x\" is not an integer >= 1" \
    "$bench/compare_torch.sh" --timeout x
expect_script 2 "$ct --epochs: \"x\" is not an integer >= 0" \
    "$bench/compare_torch.sh" --epochs x
expect_script 2 "$ct --ranks: \"0\" is not a rank count" \
    "$bench/compare_torch.sh" --ranks 0
expect_script 2 "$ct --torch-cudnn: \"tf32\" (fast or exact)" \
    "$bench/compare_torch.sh" --torch-cudnn tf32
expect_script 2 "$ct --models: empty" "$bench/compare_torch.sh" --models ""
expect_script 2 "$ct --ranks: empty" "$bench/compare_torch.sh" --ranks ""
with REPS=x expect_script 2 "$ct --reps: \"x\" is not an integer >= 1" \
    "$bench/compare_torch.sh"
with MODELS=resnet expect_script 2 \
    "$ct --models: unknown model \"resnet\" (mlp, cnn)" \
    "$bench/compare_torch.sh"
with NO_INSTALL=yes expect_script 2 "$ct NO_INSTALL: \"yes\" (0 or 1)" \
    "$bench/compare_torch.sh"
# expect_alone MESSAGE SCRIPT ARGS...: as expect_script 1 MESSAGE, and
# MESSAGE is all the output: the script stopped there, having run nothing.
expect_alone() {
    expect_script 1 "$@"
    if test "$(cat "$dir/out")" != "$1"; then
        cat "$dir/out" >&2
        shift
        echo "FAIL: '$*' printed more than its message" >&2
        rc=1
    fi
}
# compare_torch.sh without what its runs need: each is found missing
# before any run. Its tree is $tree, of links: first without train_fmnist,
# then with a stand-in; mpirun, then a stand-in, on the PATH of $dir/bin.
tree=$dir/ct abs_bench=$(cd "$bench" && pwd) && mkdir -p "$tree/bench" &&
    ln -s "$abs_bench/compare_torch.sh" "$abs_bench/torch_fmnist.py" \
        "$tree/bench/" || exit 99
expect_alone "$ct $tree/examples/train_fmnist is not built: run \
./configure && make in $tree" "$tree/bench/compare_torch.sh"
mkdir "$tree/examples" && printf '#!/bin/sh\nexit 1\n' > "$dir/stub" &&
    chmod +x "$dir/stub" && ln -s "$dir/stub" "$tree/examples/train_fmnist" ||
    exit 99
with PATH="$dir/bin" expect_alone "$ct mpirun not found (install \
openmpi-bin)" "$tree/bench/compare_torch.sh"
ln -s "$dir/stub" "$dir/bin/mpirun" || exit 99
with PATH="$dir/bin" expect_alone "$ct Fashion-MNIST missing: no \
$dir/nodata/train-images-idx3-ubyte.gz (Debian package \
dataset-fashion-mnist; scripts/install-deps installs it)" \
    "$tree/bench/compare_torch.sh" --data "$dir/nodata"
# Its python is /usr/bin/python3, where Debian's python3-torch goes: in a
# mount namespace of its own (root only), as_python3 FILE SCRIPT ARGS runs
# SCRIPT with FILE there: one that cannot run, or the stand-in (no torch).
script_tiny_fmnist "$dir/tiny"
cat > "$dir/as_python3" << 'EOF' || exit 99
#!/bin/sh
exec unshare -m sh -c \
    'mount --bind "$1" /usr/bin/python3 && shift && exec sh "$@"' sh "$@"
EOF
: > "$dir/noexec" || exit 99
if sh "$dir/as_python3" "$dir/stub" /dev/null 2> /dev/null; then
    for py in noexec stub; do
        case $py in
        noexec) want="/usr/bin/python3 not found (Debian's python3)" ;;
        stub) want="/usr/bin/python3 cannot import torch and --no-install \
was given (apt-get install python3-torch)" ;;
        esac
        with PATH="$dir/bin" expect_alone "$ct $want" \
            "$dir/as_python3" "$dir/$py" "$tree/bench/compare_torch.sh" \
            --data "$dir/tiny" --no-install
    done
    with PATH="$dir/bin" expect_alone "$ct /usr/bin/python3 cannot \
import torch and there is no apt-get to install python3-torch" \
        "$dir/as_python3" "$dir/stub" "$tree/bench/compare_torch.sh" \
        --data "$dir/tiny"
else
    echo "note: no mount namespace here (unshare -m needs root);" \
        "compare_torch.sh without python3 or torch is not tried"
fi
# The plots' checks, under a PATH without gnuplot: what is wrong with
# the arguments and inputs is said before that gnuplot is missing.
nognu() { with PATH="$dir/bin" expect_script "$@"; }
echo "no epochs here" > "$dir/log.txt"
printf 'epoch 1/1  train_loss 0.5  test_loss 0.4  test_acc 0.8\n' \
    > "$dir/epochs.txt"
nognu 2 "usage: $bench/plot.sh IN.txt OUT.png" "$bench/plot.sh" x
nognu 2 "usage: $bench/plot_training.sh LOG [LOG...] OUT.png" \
    "$bench/plot_training.sh" x
nognu 2 "plot_training.sh: the last argument, \"x.txt\", should be the \
.png to write" "$bench/plot_training.sh" x x.txt
nognu 1 "$dir/missing.txt" "$bench/plot_training.sh" "$dir/missing.txt" \
    "$dir/out.png"
nognu 1 "plot_training.sh: $dir/log.txt has no \"epoch E/N  train_loss ...  \
test_loss ...  test_acc ...\" lines" \
    "$bench/plot_training.sh" "$dir/log.txt" "$dir/out.png"
nognu 1 "plot_training.sh: gnuplot not found; install gnuplot-nox" \
    "$bench/plot_training.sh" "$dir/epochs.txt" "$dir/out.png"
nognu 1 "plot.sh: cannot read $dir/missing.txt" "$bench/plot.sh" \
    "$dir/missing.txt" "$dir/out.png"
nognu 1 "plot.sh: $dir/log.txt is not allreduce_perf --compare output" \
    "$bench/plot.sh" "$dir/log.txt" "$dir/out.png"
nognu 1 "plot.sh: $bench/results/np2_run1.txt comes from an allreduce_perf \
without shm in --compare; its columns differ (rerun it)" \
    "$bench/plot.sh" "$bench/results/np2_run1.txt" "$dir/out.png"
nognu 1 "plot.sh: gnuplot not found; install gnuplot-nox" \
    "$bench/plot.sh" "$bench/results/shm/np2_run1.txt" "$dir/out.png"
# The Python helpers (argparse runs before torch is imported).
expect_script 2 "torch_fmnist.py: error: --epochs: 0 is out of range \
1..100000" "$bench/torch_fmnist.py" --epochs 0
expect_script 2 "torch_fmnist.py: error: argument --model: invalid choice" \
    "$bench/torch_fmnist.py" --model resnet
expect_script 2 "torch_fmnist.py: error: argument --cudnn: invalid choice" \
    "$bench/torch_fmnist.py" --cudnn tf32
expect_script 1 "summarize.py" "$bench/summarize.py"
expect_script 1 "summarize.py: no common sizes (not --compare output?)" \
    "$bench/summarize.py" "$dir/log.txt"

# scripts/quickstart and the sbatch scripts pass their arguments to
# train_fmnist. quickstart runs in a tree of links whose install-deps,
# configure and Makefile do nothing, so only its mpirun (MPIRUN, first on
# PATH) is real; the sbatch scripts get a stand-in srun that drops its
# flags and runs the rest, from this build folder.
qs=$dir/qs && mkdir -p "$qs/scripts" "$qs/examples" "$dir/run" &&
    ln -s "$(cd "$top/scripts" && pwd)/quickstart" "$qs/scripts/" &&
    ln -s "${abs_top_builddir:-$(pwd)}/examples/train_fmnist" \
        "$qs/examples/" &&
    : > "$qs/scripts/install-deps" && ln -s "$dir/stub" "$qs/configure" &&
    echo "all:" > "$qs/Makefile" &&
    ln -s "$(command -v "$MPIRUN")" "$dir/run/mpirun" || exit 99
cat > "$dir/run/srun" << 'EOF' && chmod +x "$dir/run/srun" || exit 99
#!/bin/sh
while test "${1#--}" != "$1"; do shift; done
exec "$@"
EOF
old_path=$PATH PATH=$dir/run:$PATH
tf_bogus="train_fmnist: unknown option '--bogus'"
expect_script 2 "$tf_bogus" "$qs/scripts/quickstart" --bogus
unset SLURM_CPUS_PER_TASK
for s in 1node multinode; do
    with SLURM_CPUS_PER_TASK=1 expect_script 2 "$tf_bogus" \
        "$top/examples/slurm/train_fmnist_$s.sbatch" --bogus
    expect_script 2 "train_fmnist_$s.sbatch: not in a Slurm job (no" \
        "$top/examples/slurm/train_fmnist_$s.sbatch" --model mlp
done
PATH=$old_path

# The test scripts' own inputs.
echo 2 > "$dir/bad.spec"
expect_script 99 "$dir/bad.spec: want 'NP PROGRAM [ARGS...]'" \
    "${srcdir:-.}/test/mpirun.sh" "$dir/bad.spec"
echo "1 test/not_built" > "$dir/spec"
expect_script 99 "/test/not_built: not built" \
    "${srcdir:-.}/test/mpirun.sh" "$dir/spec"
echo "1 test/ckpt_tool" > "$dir/spec"
with HVD_TEST_TIMEOUT=soon expect_script 125 "timeout: invalid time \
interval" "${srcdir:-.}/test/mpirun.sh" "$dir/spec"
with MPIRUN=false expect_script 99 "ERROR: 'false  -np 1 true' fails: MPI \
cannot start" "${srcdir:-.}/test/mpirun.sh" "$dir/spec"
expect_script 99 "testbed: setup: NHOSTS is 2 to 99, not '1'" \
    "${srcdir:-.}/test/netns/testbed.sh" setup 1
expect_script 2 "test/netns/testbed.sh: several fake hosts on this one \
machine" "${srcdir:-.}/test/netns/testbed.sh" bogus
expect_script 99 "testbed: agent: 10.9.9.9 is not a test bed host" \
    "${srcdir:-.}/test/netns/testbed.sh" agent 10.9.9.9 true
expect_script 2 "usage: ${srcdir:-.}/test/slurm/start-local-slurm.sh \
start|stop|status (state in" "${srcdir:-.}/test/slurm/start-local-slurm.sh"
# Their environment; start-local-slurm.sh under the PATH of $dir/bin, where
# with its check broken it would stop at once (no hostname), not install.
bed=${srcdir:-.}/test/netns/testbed.sh
with TESTBED_SLOTS=0 expect_script 99 "testbed: TESTBED_SLOTS is 1 to 99, \
not '0'" "$bed" run true
with TESTBED_MPIRUN=false expect_script 99 "testbed: TESTBED_MPIRUN 'false' \
is not Open MPI's mpirun (the bed starts ranks through its rsh agent)" \
    "$bed" run true
slurm=${srcdir:-.}/test/slurm/start-local-slurm.sh old_path=$PATH
PATH=$dir/bin
with HVD_SLURM_PORT=65535 expect_script 2 "start-local-slurm: \
HVD_SLURM_PORT is 1 to 65534, not '65535'" "$slurm" start
with HVD_SLURM_WAIT=x expect_script 2 "start-local-slurm: HVD_SLURM_WAIT \
is 1 to 86400, not 'x'" "$slurm" start
PATH=$old_path
script_finish bench_flags
