# test/script_lib.sh: what the script tests (test/*.sh) share, sourced
# by them, not run: a scratch folder removed on exit, one launch of a test
# program through test/mpirun.sh with its exit status sorted, and the
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

# script_finish NAME: says "NAME ok" when nothing failed; exits with rc.
script_finish() {
    test "$rc" -eq 0 && echo "$1 ok"
    exit "$rc"
}
