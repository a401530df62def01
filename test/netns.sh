#!/bin/sh
# test/netns.sh: hvd across nodes, on fake hosts made of network namespaces
# by test/netns/testbed.sh, so that ranks on different hosts talk TCP
# through a real network stack and hvd_cross_size() is above 1.
#
#   2 hosts, ranks placed node by node: 4 ranks (2 + 2) run test_hvd,
#     test_dist_opt and test_hvd_join; 3 ranks (2 + 1) test_ring,
#     test_hvd and test_dist_opt;
#   2 hosts, ranks dealt round-robin (mpirun --map-by node): test_hvd at 4
#     and 3, allreduce_perf's check at 4, and 300 steps of train_fmnist
#     (mlp) at 4, which must end with a test accuracy of at least 0.7;
#   3 hosts, 5 ranks round-robin: test_hvd;
#   device buffers on the emulated device: test_ring_device at 2+2
#     hierarchical (IPC within each host, staged across) and at 2+1.
#
# Beyond each program's own checks (test_hvd compares hvd's local and cross
# ranks and sizes with MPI's view of the nodes, and every result with
# MPI's collectives), rank 0 must log the topology hvd found: the number of
# nodes, the ranks per node, and a ring order in which each node's ranks
# are adjacent (0 2 | 1 3 for 4 ranks dealt round-robin); and the hosts'
# links must have carried the traffic of test_hvd.
#
# Skips (77), saying why, only where this machine cannot make the bed (not
# root, no namespaces, bridges or veth links) or mpirun is not Open
# MPI's (the bed starts ranks through its rsh agent). Holds a lock on
# /run/lock/hvd-testbed.lock from setup to teardown: one bed at a time.
# Environment: as test/mpirun.sh (MPIRUN, abs_top_builddir), srcdir,
# TRAIN_DATA (Fashion-MNIST, /usr/share/datasets/fashion-mnist).
# shellcheck source=test/script_lib.sh
. "${srcdir:-.}/test/script_lib.sh"
script_setup netns
bed=$(cd "${srcdir:-.}/test/netns" && pwd)/testbed.sh
lock=/run/lock/hvd-testbed.lock
# Ranks on the other hosts find programs by absolute path only.
abs_top_builddir=${abs_top_builddir:-$(pwd)}
export abs_top_builddir

if test -z "$MPIRUN" || ! command -v "$MPIRUN" > /dev/null 2>&1; then
    echo "SKIP: no mpirun (install openmpi-bin and re-run configure)"
    exit 77
fi
if ! "$MPIRUN" --version 2>&1 | grep -q "Open MPI"; then
    echo "SKIP: $MPIRUN is not Open MPI's; the test bed starts ranks" \
        "through Open MPI's rsh agent (plm_rsh_agent)"
    exit 77
fi
for tool in flock ip unshare; do
    if ! command -v $tool > /dev/null 2>&1; then
        echo "SKIP: no $tool (the test bed needs iproute2 and util-linux)"
        exit 77
    fi
done
if ! (: >> "$lock") 2> /dev/null; then
    echo "SKIP: cannot write $lock (the test bed needs root)"
    exit 77
fi
exec 9>> "$lock"
if ! flock -w 900 9; then
    echo "FAIL: another test bed held $lock for 15 minutes" >&2
    exit 1
fi
trap 'sh "$bed" teardown; rm -rf "$dir"' EXIT
trap 'exit 1' HUP INT TERM

# bed_setup NHOSTS: a bed of NHOSTS hosts; 77 with the reason when this
# machine cannot make one, 99 when making it went wrong otherwise.
bed_setup() {
    sh "$bed" setup "$1" > "$dir/setup" 2>&1
    status=$?
    cat "$dir/setup"
    case $status in
    0) ;;
    77) echo "SKIP: $(tail -n 1 "$dir/setup")"; exit 77 ;;
    *) echo "ERROR: the test bed could not be set up" >&2; exit 99 ;;
    esac
}

# topology WHAT NODES SIZES ORDER: rank 0 logged NODES nodes of SIZES
# ranks ("2 1") and the ring ORDER ("0 2 | 1"), as hvd/topology.c words it.
topology() {
    for line in "hvd[0] info: topology: $2 nodes, ranks per node $3" \
        "hvd[0] info: topology: ring order $4 (| between nodes)"; do
        if ! grep -qxF -e "$line" "$dir/err"; then
            echo "FAIL: $1: rank 0 did not log \"$line\"" >&2
            rc=1
        fi
    done
}

# test/mpirun.sh launches every program through the bed.
printf '#!/bin/sh\nexec sh "%s" run "$@"\n' "$bed" > "$dir/mpirun"
chmod +x "$dir/mpirun"
TESTBED_MPIRUN=$MPIRUN
MPIRUN=$dir/mpirun
export TESTBED_MPIRUN MPIRUN

bed_setup 2
sent=$(sh "$bed" traffic)
script_launch "2+2 test_hvd" 4 test/test_hvd HVD_LOG_LEVEL=info
topology "2+2 test_hvd" 2 "2 2" "0 1 | 2 3"
sent=$(($(sh "$bed" traffic) - sent))
echo "test_hvd at 2+2: the hosts sent $sent bytes over their links"
if test "$sent" -lt 1000000; then
    echo "FAIL: 2+2 test_hvd: under 1 MB crossed the hosts' links" >&2
    rc=1
fi
script_launch "2+2 test_dist_opt" 4 test/test_dist_opt
script_launch "2+2 test_hvd_join" 4 test/test_hvd_join
script_launch "2+1 test_ring" 3 test/test_ring
script_launch "2+1 test_hvd" 3 test/test_hvd HVD_LOG_LEVEL=info
topology "2+1 test_hvd" 2 "2 1" "0 1 | 2"
script_launch "2+1 test_dist_opt" 3 test/test_dist_opt passes=2
# Hierarchical: 2 + 2 runs it (rank 0 says so); 2 + 1 warns and stays flat.
script_launch "2+2 hierarchical test_hvd" 4 test/test_hvd HVD_LOG_LEVEL=info \
    HVD_HIERARCHICAL_ALLREDUCE=1
for line in "allreduce of 1 MiB: shm_hier" "of 1 KiB: hier"; do
    if ! grep -q "$line" "$dir/err"; then
        echo "FAIL: 2+2 hierarchical: rank 0 never said \"$line\"" >&2
        rc=1
    fi
done
# The node's stage forced through shared memory at every size, and off.
script_launch "2+2 hierarchical, shm at every size" 4 test/test_hvd \
    HVD_HIERARCHICAL_ALLREDUCE=1 HVD_INTRANODE=shm
script_launch "2+2 hierarchical, ring within nodes" 4 test/test_hvd \
    HVD_HIERARCHICAL_ALLREDUCE=1 HVD_INTRANODE=ring
HVD_HIERARCHICAL_ALLREDUCE=1 script_launch "2+2 hierarchical test_dist_opt" \
    4 test/test_dist_opt
script_launch "2+1 hierarchical test_hvd" 3 test/test_hvd \
    HVD_HIERARCHICAL_ALLREDUCE=1
if ! grep -q "nodes hold 2 and 1 ranks" "$dir/err"; then
    echo "FAIL: 2+1 hierarchical: no warning that the flat ring runs" >&2
    rc=1
fi
# Device buffers (the emulated device) across hosts: hierarchical, IPC
# within each host and staged across; flat, staged over the ring.
script_launch "2+2 hierarchical test_ring_device" 4 test/test_ring_device \
    --emulate delay:3 --staging-bytes 64K --ipc-bytes 64K --hier
# Guarded: a rank whose device cannot tell its memory refuses the call
# that would open the device windows, made over every host's ranks.
script_launch "2+2 hierarchical guarded test_ring_device" 4 \
    test/test_ring_device --emulate guard --quick --hier
script_launch "2+1 test_ring_device" 3 test/test_ring_device --emulate 1 \
    --staging-bytes 64K
# Shared memory cannot span hosts: forcing it must fail hvd_init, by name.
script_launch "2+1 HVD_INTRANODE=shm" 3 test/test_hvd_env HVD_INTRANODE=shm \
    bad
if ! grep -q "HVD_INTRANODE=shm: the 3 ranks span 2 nodes" "$dir/err"; then
    echo "FAIL: 2+1 HVD_INTRANODE=shm: no error naming it" >&2
    rc=1
fi

# Round-robin: neighbours in rank order sit on different hosts.
OMPI_MCA_rmaps_base_mapping_policy=node
export OMPI_MCA_rmaps_base_mapping_policy
script_launch "round-robin 4 test_hvd" 4 test/test_hvd HVD_LOG_LEVEL=info
topology "round-robin 4 test_hvd" 2 "2 2" "0 2 | 1 3"
script_launch "round-robin 3 test_hvd" 3 test/test_hvd HVD_LOG_LEVEL=info
topology "round-robin 3 test_hvd" 2 "2 1" "0 2 | 1"
script_launch "round-robin 4 allreduce_perf" 4 bench/allreduce_perf -b 8 \
    -e 1M -f 4 -n 2 -w 1 -c 1
if script_have_fmnist; then
    HVD_LOG_LEVEL=info
    export HVD_LOG_LEVEL
    script_launch "round-robin 4 train_fmnist" 4 \
        examples/train_fmnist --model mlp --max-steps 300 --progress lines \
        --data "$data" > "$dir/train"
    cat "$dir/train"
    topology "round-robin 4 train_fmnist" 2 "2 2" "0 2 | 1 3"
    if ! awk '/^done: 300 steps/ { found = 1; ok = $NF >= 0.7 }
              END { exit !(found && ok) }' "$dir/train"; then
        echo "FAIL: train_fmnist did not end 300 steps at test_acc 0.7" \
            "or more" >&2
        rc=1
    fi
else
    echo "note: no Fashion-MNIST in $data: train_fmnist not run"
fi

bed_setup 3
script_launch "3 hosts, round-robin 5 test_hvd" 5 test/test_hvd \
    HVD_LOG_LEVEL=info
topology "3 hosts, round-robin 5 test_hvd" 3 "2 2 1" "0 3 | 1 4 | 2"
script_finish netns
