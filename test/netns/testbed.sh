#!/bin/sh
# test/netns/testbed.sh: several fake hosts on this one machine, so that an
# MPI job spans "nodes" whose ranks talk TCP through a real network stack.
#
#   testbed.sh setup [NHOSTS]   make the hosts (2 by default), replacing a
#                               bed left over; 77 with the reason when the
#                               machine cannot (no namespaces, bridge, veth)
#   testbed.sh teardown         remove all that setup made (safe to repeat)
#   testbed.sh run ARGS...      mpirun ARGS with TESTBED_SLOTS ranks (2) on
#                               each host: -np 3 on 2 hosts puts 2 + 1
#   testbed.sh traffic          bytes the hosts have sent over their links
#   testbed.sh agent HOST CMD   run CMD on HOST: Open MPI's rsh agent
#
# Each host is a network namespace, hvdtb1 .. hvdtbN, with one link (a veth
# pair) to a bridge in a head namespace, hvdtb0, where mpirun runs; the
# bridge holds 198.18.77.1/24 and host i 198.18.77.(10+i): RFC 2544's
# benchmarking range, which no real network uses. The root namespace's
# interfaces, routes and firewall are never touched, so the bed neither
# disturbs the machine nor depends on its firewall, and removing the
# namespaces removes everything. mpirun reaches the hosts through this
# script as its rsh agent, which also gives each command the host's own
# UTS namespace and hostname, as real hosts have: MPI_Get_processor_name,
# hvd's logs and anything else keyed on the hostname tell the hosts apart
# (Open MPI itself makes a node of each daemon it starts). Hosts are named
# to mpirun by address, so nothing needs /etc/hosts.
#
# Requires root (or CAP_SYS_ADMIN and CAP_NET_ADMIN), iproute2's ip,
# util-linux's unshare, and Open MPI (the agent is its plm_rsh_agent).
# Environment: TESTBED_MPIRUN (mpirun: Open MPI's), TESTBED_SLOTS (1 to 99;
# 2); setup and run exit 99 when one is not.
# Two beds cannot be up at once: callers that may run beside another (make
# check on a shared machine) hold a lock around setup ... teardown.

name=hvdtb
head=${name}0
net=198.18.77
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")

die() {
    echo "testbed: $*" >&2
    exit 99
}

# check_env: run's settings, checked before a bed is made or used: a bad
# one would otherwise show as an error of mpirun inside the bed.
check_env() {
    slots=${TESTBED_SLOTS:-2} mpirun=${TESTBED_MPIRUN:-mpirun}
    case $slots in
    [1-9] | [1-9][0-9]) ;;
    *) die "TESTBED_SLOTS is 1 to 99, not '$slots'" ;;
    esac
    "$mpirun" --version 2>&1 | grep -q "Open MPI" ||
        die "TESTBED_MPIRUN '$mpirun' is not Open MPI's mpirun (the bed" \
            "starts ranks through its rsh agent)"
}

# The hosts that are up, one name a line.
hosts() {
    ip netns list 2> /dev/null | awk -v p="$name" \
        '$1 ~ "^" p "[1-9][0-9]*$" { print $1 }' | sort -V
}

teardown() {
    for ns in $(hosts) $head; do
        if ip netns list 2> /dev/null | grep -q "^$ns\( \|$\)"; then
            ip netns del "$ns" || echo "testbed: could not remove $ns" >&2
        fi
    done
}

# step STATUS WHAT CMD...: runs CMD; when it fails, says WHAT could not be
# done and why, removes what setup made, and exits STATUS (77 where the
# failure means this machine cannot hold the bed, 99 otherwise).
step() {
    status=$1 what=$2
    shift 2
    if ! out=$("$@" 2>&1); then
        echo "testbed: $what: '$*' says: $out" >&2
        teardown
        exit "$status"
    fi
}

setup() {
    n=${1:-2}
    case $n in
    [2-9] | [1-9][0-9]) ;;
    *) die "setup: NHOSTS is 2 to 99, not '$n'" ;;
    esac
    check_env
    for tool in ip unshare; do
        command -v $tool > /dev/null 2>&1 ||
            { echo "testbed: no $tool on this machine" >&2; exit 77; }
    done
    teardown
    # The first of each kind of thing tells whether the machine allows it.
    step 77 "cannot make a network namespace" ip netns add "$head"
    step 77 "cannot make a bridge" ip -n "$head" link add br0 type bridge
    step 99 "bridge address" ip -n "$head" addr add "$net.1/24" dev br0
    step 99 "bridge up" ip -n "$head" link set br0 up
    step 99 "loopback up" ip -n "$head" link set lo up
    i=1
    while test $i -le "$n"; do
        ns=$name$i
        step 99 "host $i namespace" ip netns add "$ns"
        step 77 "cannot make a veth pair" ip -n "$head" link add "h$i" \
            type veth peer name eth0 netns "$ns"
        step 99 "host $i link" ip -n "$head" link set "h$i" master br0 up
        step 99 "host $i address" ip -n "$ns" addr add "$net.$((10 + i))/24" \
            dev eth0
        step 99 "host $i link up" ip -n "$ns" link set eth0 up
        step 99 "host $i loopback" ip -n "$ns" link set lo up
        i=$((i + 1))
    done
    step 77 "cannot give a host its own hostname" ip netns exec "${name}1" \
        unshare --uts hostname "${name}1"
    echo "testbed: $n hosts up: $(hosts | tr '\n' ' ')(mpirun in $head)"
}

# Open MPI calls its agent as ssh: HOST, then the words of a command line.
agent() {
    addr=$1
    shift
    i=${addr#"$net".}
    case $i in
    1[1-9] | [2-9][0-9] | 10[0-9]) ns=$name$((i - 10)) ;;
    *) die "agent: $addr is not a test bed host" ;;
    esac
    # The inner sh expands $1 and $*, in the host's UTS namespace.
    # shellcheck disable=SC2016
    exec ip netns exec "$ns" unshare --uts sh -c \
        'hostname "$1" && shift && exec sh -c "$*"' sh "$ns" "$@"
}

run() {
    check_env
    list=$(hosts)
    test -n "$list" || die "run: no hosts: run '$0 setup' first"
    case $self in *" "*) die "run: Open MPI splits the agent's path at spaces: $self" ;; esac
    spec=
    for ns in $list; do
        spec="$spec${spec:+,}$net.$((${ns#"$name"} + 10)):$slots"
    done
    # Daemons and ranks talk over the bed's network only: tcp between
    # nodes, vader (shared memory) within one.
    exec ip netns exec "$head" "$mpirun" \
        --allow-run-as-root --mca plm_rsh_agent "sh $self agent" \
        --mca oob_tcp_if_include "$net.0/24" \
        --mca btl tcp,self,vader --mca btl_tcp_if_include "$net.0/24" \
        -H "$spec" "$@"
}

traffic() {
    total=0
    for ns in $(hosts); do
        link=h${ns#"$name"}
        bytes=$(ip netns exec "$head" cat \
            "/sys/class/net/$link/statistics/rx_bytes") ||
            die "traffic: no counter for $link"
        total=$((total + bytes))
    done
    echo "$total"
}

cmd=$1
test $# -gt 0 && shift
case $cmd in
setup) setup "$@" ;;
teardown) teardown ;;
run) run "$@" ;;
traffic) traffic ;;
agent) agent "$@" ;;
*)
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
    exit 2
    ;;
esac
