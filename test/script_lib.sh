# test/script_lib.sh: what the script tests (test/*.sh) share, sourced
# by them, not run: a scratch folder removed on exit, one launch of a test
# program through test/mpirun.sh with its exit status sorted, one that
# must fail with a given status and message, the resume check of the
# training programs, a tiny data set in Fashion-MNIST's format, and the
# verdict at the end.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir.
# Left out: what each script checks in the program's output.
# shellcheck shell=sh

# script_setup NAME: $dir, a new scratch folder (NAME.XXXXXX under TMPDIR)
# removed on exit, and rc=0, the verdict so far. Exits 99 without a folder.
script_setup() {
    dir=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 99
    trap 'rm -rf "$dir"' EXIT
    rc=0
}

# script_have_fmnist: $data, the Fashion-MNIST folder (TRAIN_DATA, by
# default Debian's), and whether its training images are there.
script_have_fmnist() {
    data=${TRAIN_DATA:-/usr/share/datasets/fashion-mnist}
    test -r "$data/train-images-idx3-ubyte.gz" ||
        test -r "$data/train-images-idx3-ubyte"
}

# script_tiny_fmnist DIR [COUNT [SIDE [PIXELS]]]: a tiny data set in
# Fashion-MNIST's IDX format (unzipped) in the new folder DIR: in each
# split, COUNT (4) images of SIDE x SIDE (28) pixels read from the file
# PIXELS (/dev/zero: blank; /dev/urandom: noise, which a wrong copy of an
# image shows in the loss), labels 0, 1, 2, ... (mod 10); enough for
# train_fmnist to run, not to learn. COUNT and SIDE under 256. Exits 99
# when it cannot write them.
script_tiny_fmnist() {
    count=${2:-4} side=${3:-28} pixels=${4:-/dev/zero}
    n=$(printf '\\%03o' "$count") s=$(printf '\\%03o' "$side")
    mkdir "$1" || exit 99
    for split in train t10k; do
        {
            # shellcheck disable=SC2059 # the octal escapes are the format
            printf "\\000\\000\\010\\003\\000\\000\\000$n\\000\\000\\000$s"
            # shellcheck disable=SC2059
            printf "\\000\\000\\000$s"
            head -c $((count * side * side)) "$pixels"
        } > "$1/$split-images-idx3-ubyte" || exit 99
        {
            # shellcheck disable=SC2059
            printf "\\000\\000\\010\\001\\000\\000\\000$n"
            i=0
            while test $i -lt "$count"; do
                # shellcheck disable=SC2059
                printf "$(printf '\\%03o' $((i % 10)))"
                i=$((i + 1))
            done
        } > "$1/$split-labels-idx1-ubyte" || exit 99
    done
}

# script_torch_python: $python, the Python that has PyTorch ($PYTHON, else
# Debian's /usr/bin/python3 with python3-torch, else python3 on PATH), and
# HVD_LIBRARY and PYTHONPATH exported for hvd.torch from this tree;
# returns 1, saying why, when no Python has torch.
script_torch_python() {
    python=
    for candidate in ${PYTHON:-} /usr/bin/python3 python3; do
        if "$candidate" -c 'import torch' > /dev/null 2>&1; then
            python=$(command -v "$candidate")
            break
        fi
    done
    if test -z "$python"; then
        echo "no python3 with torch (scripts/install-deps installs" \
            "python3-torch)"
        return 1
    fi
    src=$(cd "${srcdir:-.}" && pwd)
    HVD_LIBRARY=$(cd "${abs_top_builddir:-.}" && pwd)/libhvd.so
    PYTHONPATH=$src${PYTHONPATH:+:$PYTHONPATH}
    export HVD_LIBRARY PYTHONPATH
}

# script_launch WHAT NP PROGRAM [ARGS...]: runs PROGRAM (relative to the
# build directory) at NP ranks through test/mpirun.sh; its stderr is kept
# in $dir/err and copied to ours. A skip (77) or hard error (99) ends the
# script with that status; any other failure says "FAIL: WHAT: ..." and
# sets rc=1.
script_launch() {
    what=$1
    shift
    echo "$*" > "$dir/spec"
    sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" 2> "$dir/err"
    status=$?
    cat "$dir/err" >&2
    case $status in
    0) ;;
    77 | 99) exit $status ;;
    *) echo "FAIL: $what: ${2##*/} exited $status" >&2; rc=1 ;;
    esac
}

# script_expect WHAT STATUS PATTERN NP PROGRAM [ARGS...]: runs PROGRAM as
# script_launch does, expecting it to fail: it must exit STATUS and its
# stderr match the grep pattern PATTERN; otherwise "FAIL: WHAT: ..." with
# the stderr, and rc=1. Its stdout is kept in $dir/out.
script_expect() {
    what=$1 want=$2 pattern=$3
    shift 3
    echo "$*" > "$dir/spec"
    sh "${srcdir:-.}/test/mpirun.sh" "$dir/spec" > "$dir/out" 2> "$dir/err"
    status=$?
    case $status in 77 | 99) cat "$dir/err" >&2; exit $status ;; esac
    if test "$status" -ne "$want"; then
        echo "FAIL: $what: exited $status, expected $want" >&2
        cat "$dir/err" >&2
        rc=1
    elif ! grep -q -e "$pattern" "$dir/err"; then
        echo "FAIL: $what: stderr does not match \"$pattern\":" >&2
        cat "$dir/err" >&2
        rc=1
    else
        echo "expected ($what): $(grep -m 1 -e "$pattern" "$dir/err")"
    fi
}

# script_resume_equal NP PROGRAM [ARGS...]: a training program's bitwise
# resume: 2 epochs straight ($dir/a.ckpt) and 1 epoch ($dir/b1.ckpt kept)
# + --resume + 1 epoch ($dir/b.ckpt) must end with equal checkpoints, and
# the epoch-1 one must differ from them; otherwise "FAIL: ..." and rc=1.
script_resume_equal() {
    np=$1
    shift
    script_launch "2 epochs" "$np" "$@" --epochs 2 --checkpoint "$dir/a.ckpt"
    script_launch "1 epoch" "$np" "$@" --epochs 1 --checkpoint "$dir/b.ckpt"
    cp "$dir/b.ckpt" "$dir/b1.ckpt"
    script_launch "resume" "$np" "$@" --epochs 2 \
        --checkpoint "$dir/b.ckpt" --resume
    if ! cmp "$dir/a.ckpt" "$dir/b.ckpt"; then
        echo "FAIL: 2 epochs and 1 + resume + 1 differ" >&2
        rc=1
    fi
    if cmp -s "$dir/a.ckpt" "$dir/b1.ckpt"; then
        echo "FAIL: the epoch-1 checkpoint equals the epoch-2 one" >&2
        rc=1
    fi
}

# script_finish NAME: says "NAME ok" when nothing failed; exits with rc.
script_finish() {
    test "$rc" -eq 0 && echo "$1 ok"
    exit "$rc"
}
