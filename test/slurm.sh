#!/bin/sh
# test/slurm.sh: hvd under Slurm, on a private one-node cluster that
# test/slurm/start-local-slurm.sh starts here (installing slurm-wlm and
# munge when missing) and stops on exit. Through srun, with the PMI that
# Slurm and Open MPI share (PMIx):
#   - test_hvd, test_ring, test_dist_opt at 2 ranks; test_hvd,
#     test_hvd_join, test_dist_opt and allreduce_perf at 3, more ranks
#     than a 2-core machine has cores (--overcommit). Each must exit 0
#     and rank 0 alone print its size ("n=N", "nranks N"): ranks started
#     as separate worlds of 1 (a PMI that MPI does not speak) would each
#     print n=1;
#   - test_hvd_bind's placement lines: rank i is local rank i of N;
#   - train_fmnist for 300 steps at 2 ranks by srun, and by sbatch --wait
#     with both examples/slurm/ scripts (the several-node one shaped to
#     this node): "2 ranks", "done: 300 steps" and the test accuracy that
#     the same run reaches under mpirun, in srun's output and the jobs'
#     output files;
#   - hvd.torch's examples/torch/ scripts at 2 ranks by srun (when a
#     Python has torch): synthetic_benchmark.py, and train_fmnist.py for
#     20 steps.
# Skips (77), saying why, when MPI is not Open MPI, when Slurm cannot be
# installed here, and when Fashion-MNIST is missing (TRAIN_DATA, default
# /usr/share/datasets/fashion-mnist) once the rest has passed.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir,
# HVD_TEST_TIMEOUT (seconds per srun or sbatch, 120).
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup slurm
start=${srcdir:-.}/test/slurm/start-local-slurm.sh
timeout=${HVD_TEST_TIMEOUT:-120}
# munged wants every folder above its socket searchable by all.
chmod 711 "$dir"
HVD_SLURM_DIR=$dir/slurm
SLURM_CONF=$HVD_SLURM_DIR/slurm.conf
# Ranks outnumber cores at 3; spinning waits would starve the others.
OMPI_MCA_mpi_yield_when_idle=1
export HVD_SLURM_DIR SLURM_CONF OMPI_MCA_mpi_yield_when_idle

if test -z "$MPIRUN" || ! "$MPIRUN" --version 2>&1 | grep -q "Open MPI"; then
    echo "SKIP: this test knows Open MPI's PMI only (MPIRUN='$MPIRUN')"
    exit 77
fi

# The daemons would outlive this shell: stop them on every way out.
trap 'bash "$start" stop; rm -rf "$dir"' EXIT
trap 'exit 1' HUP INT TERM
bash "$start" start
case $? in
0) ;;
3)
    echo "SKIP: Slurm and munge are not installed and cannot be here"
    exit 77
    ;;
*)
    echo "FAIL: test/slurm/start-local-slurm.sh start" >&2
    exit 1
    ;;
esac

# The PMI both sides speak: Slurm's plugins against Open MPI's PMI
# clients (its "pmix" components; ext3x is PMIx). Debian's Open MPI has
# no client for Slurm's pmi2, where every rank aborts.
srun --mpi=list > "$dir/mpis" 2>&1
echo "srun --mpi=list:"
cat "$dir/mpis"
clients=$(ompi_info --parsable 2> /dev/null |
    awk -F: '$1 == "mca" && $2 == "pmix" { print $3 }' | sort -u |
    tr '\n' ' ')
echo "Open MPI's PMI clients: $clients"
if ! grep -q -w pmix "$dir/mpis"; then
    echo "FAIL: this Slurm has no pmix plugin, which Open MPI needs" >&2
    exit 1
fi
case " $clients" in
*" ext"* | *" pmix"*) ;;
*)
    echo "FAIL: this Open MPI has no PMIx client for srun --mpi=pmix" >&2
    exit 1
    ;;
esac
cpus=$(sinfo -h -N -o %c | head -n 1)

# slurm_run WHAT NP PROGRAM [ARGS...]: PROGRAM (relative to the build
# folder) at NP tasks through srun, --overcommit when NP exceeds the
# node's CPUs. Its stdout is kept in $dir/out and copied to ours, its
# stderr in $dir/err, shown when srun fails ("FAIL: WHAT", rc=1,
# returns 1).
slurm_run() {
    what=$1 np=$2
    shift 2
    set -- --mpi=pmix -n "$np" "$@"
    test "$np" -gt "$cpus" && set -- --overcommit "$@"
    echo "srun $*"
    timeout "$timeout" srun "$@" > "$dir/out" 2> "$dir/err"
    status=$?
    cat "$dir/out"
    test $status -eq 0 && return 0
    cat "$dir/err" >&2
    echo "FAIL: $what: srun exited $status" >&2
    rc=1
    return 1
}

# expect_out WHAT PATTERN...: every grep pattern matches $dir/out.
expect_out() {
    what=$1
    shift
    for pattern; do
        grep -q -e "$pattern" "$dir/out" && continue
        echo "FAIL: $what: no line matches \"$pattern\"" >&2
        rc=1
    done
}

# expect_world WHAT NP: one world of NP ranks, whose rank 0 alone printed
# its size as "n=NP".
expect_world() {
    if test "$(grep -c 'n=[0-9]' "$dir/out")" -ne 1 ||
        ! grep -q "n=$2[ :]" "$dir/out"; then
        echo "FAIL: $1: want one line \"n=$2\", from rank 0 alone" >&2
        rc=1
    fi
}

for prog in test/test_hvd test/test_dist_opt test/test_ring; do
    slurm_run "$prog at 2" 2 "$prog" && expect_world "$prog at 2" 2
done
for prog in test/test_hvd test/test_hvd_join test/test_dist_opt; do
    slurm_run "$prog at 3" 3 "$prog" && expect_world "$prog at 3" 3
done
slurm_run "allreduce_perf at 3" 3 bench/allreduce_perf -b 8 -e 1M -f 4 \
    -n 2 -w 1 -c 1 --compare &&
    expect_out "allreduce_perf at 3" "nranks 3 " \
        "Out of bounds values : 0 OK"

for np in 2 3; do
    if slurm_run "placement at $np" "$np" --export=ALL,HVD_LOG_LEVEL=info \
        test/test_hvd_bind default; then
        grep "placement: rank" "$dir/err"
        if test "$(grep -c "placement: rank" "$dir/err")" -ne "$np"; then
            echo "FAIL: placement at $np: want $np placement lines:" >&2
            cat "$dir/err" >&2
            rc=1
        fi
        i=0
        while test $i -lt "$np"; do
            grep -q "placement: rank $i on .*, local rank $i of $np:" \
                "$dir/err" || {
                echo "FAIL: placement at $np: rank $i is not local" \
                    "rank $i of $np" >&2
                rc=1
            }
            i=$((i + 1))
        done
    fi
done

# hvd.torch through srun: a Horovod script with its import changed.
if script_torch_python; then
    slurm_run "synthetic_benchmark.py at 2" 2 "$python" \
        "$src/examples/torch/synthetic_benchmark.py" --model cnn \
        --num-warmup-batches 1 --num-batches-per-iter 2 --num-iters 2 \
        --batch-size 16 &&
        expect_out "synthetic_benchmark.py at 2" "^Total img/sec on 2 CPU"
fi

if ! script_have_fmnist; then
    test "$rc" -eq 0 || exit "$rc"
    echo "SKIP: the rest passed; the training parts need Fashion-MNIST" \
        "in $data"
    exit 77
fi

# The reference: the same 300 steps under mpirun. Training is
# deterministic for a given rank count, so Slurm's runs must reach the
# same test accuracy.
train="examples/train_fmnist --model mlp --max-steps 300 --seed 7 \
--progress lines --data $data"
echo "2 $train" > "$dir/spec"
sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > "$dir/out" 2> "$dir/err"
status=$?
cat "$dir/out"
case $status in
0) ;;
77 | 99) cat "$dir/err" >&2; exit $status ;;
*) cat "$dir/err" >&2; echo "FAIL: train_fmnist under mpirun" >&2; exit 1 ;;
esac
acc=$(sed -n 's/^done: 300 steps, .* test_acc \([0-9.]*\)$/\1/p' "$dir/out")
test -n "$acc" || {
    echo "FAIL: train_fmnist under mpirun printed no \"done: 300 steps\"" >&2
    exit 1
}

# shellcheck disable=SC2086
slurm_run "train_fmnist" 2 $train &&
    expect_out "train_fmnist" "2 ranks," "^done: 300 steps, .* test_acc $acc\$"

if test -n "$python"; then
    slurm_run "train_fmnist.py at 2" 2 "$python" \
        "$src/examples/torch/train_fmnist.py" --data "$data" --max-steps 20 &&
        expect_out "train_fmnist.py at 2" "2 ranks," "^epoch 1/2 "
fi

# sbatch_train SCRIPT [SBATCH FLAGS...]: examples/slurm/SCRIPT through
# sbatch --wait with those flags and the training's arguments. sbatch
# copies the script and runs it in the folder it was submitted from, this
# build folder, where it finds examples/train_fmnist. The job must exit 0
# and its output file say what the mpirun run did.
sbatch_train() {
    script=$1
    shift
    rm -f "$dir/job.out"
    echo "sbatch --wait $* -o $dir/job.out examples/slurm/$script" \
        "${train#* }"
    # shellcheck disable=SC2086
    timeout "$timeout" sbatch --wait "$@" -o "$dir/job.out" \
        "${srcdir:-.}/examples/slurm/$script" ${train#* }
    status=$?
    cp "$dir/job.out" "$dir/out" 2> /dev/null || : > "$dir/out"
    echo "---- the job's output ----"
    cat "$dir/out"
    if test $status -ne 0; then
        echo "FAIL: $script: sbatch --wait exited $status" >&2
        rc=1
    fi
    expect_out "$script" "2 ranks," "^done: 300 steps, .* test_acc $acc\$"
}

sbatch_train train_fmnist_1node.sbatch -n 2 -c 1
# The several-node script in a one-node shape; this node has no GPUs.
sbatch_train train_fmnist_multinode.sbatch -N 1 --ntasks-per-node=2 -c 1 \
    --gpus-per-task=0
script_finish slurm
