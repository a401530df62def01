#!/usr/bin/env bash
# test/slurm/start-local-slurm.sh start|stop|status: a private one-node
# Slurm cluster on this machine, for test/slurm.sh and for trying
# examples/slurm/ by hand.
#
#   start   installs what is missing of Debian's slurm-wlm daemons,
#           munge and the library Slurm's pmix plugin loads (apt-get, as
#           root or through sudo -n), writes a slurm.conf for one node
#           (this host, its real cores, oversubscription allowed, no
#           cgroups, MpiDefault=pmix when Slurm has it), starts munged,
#           slurmctld and slurmd, and waits until the node is idle.
#           Already running from this folder: waits until the node takes
#           jobs (idle, or busy with some) and returns.
#   stop    cancels the cluster's jobs, then ends exactly the daemons that
#           start recorded (a pid counts only while its command line names
#           this folder, so a recycled pid is never killed).
#   status  each daemon's pid and the node's state; exit 0 when all run.
#
# Everything lives in HVD_SLURM_DIR (default /tmp/hvd-slurm-UID): the
# config, munge's key and socket, the daemons' state, pids and logs. The
# system's /etc/slurm and munge are left alone, and the ports are the first
# free pair from HVD_SLURM_PORT (6817) on, so a real Slurm may run beside.
# Clients find the cluster through SLURM_CONF, which start prints:
#   eval "$(test/slurm/start-local-slurm.sh start | grep ^export)"
#
# Exit: 0 done; 1 a daemon failed (the logs' tails are printed); 2 usage,
# or HVD_SLURM_PORT or HVD_SLURM_WAIT out of range; 3 the packages are
# missing and cannot be installed here.
# Environment: HVD_SLURM_DIR, HVD_SLURM_PORT (1 to 65534), HVD_SLURM_WAIT
# (seconds to wait for the node, 1 to 86400; 60).
set -euo pipefail

state=${HVD_SLURM_DIR:-${TMPDIR:-/tmp}/hvd-slurm-$(id -u)}
conf=$state/slurm.conf
socket=$state/munge/munge.socket
wait_s=${HVD_SLURM_WAIT:-60}
first_port=${HVD_SLURM_PORT:-6817}
# Bash arithmetic would take any text as an expression, and a bad port
# would show only in slurmctld's log: both are checked before anything runs.
need_count() {
    if ! [[ $2 =~ ^[1-9][0-9]{0,5}$ ]] || (($2 > $3)); then
        echo "start-local-slurm: $1 is 1 to $3, not '$2'" >&2
        exit 2
    fi
}
need_count HVD_SLURM_PORT "$first_port" 65534
need_count HVD_SLURM_WAIT "$wait_s" 86400
node=$(hostname -s)
# libpmix-dev: Debian's mpi/pmix plugin dlopens pmix2/lib/libpmix.so,
# which only that package ships; without it srun --mpi=list still shows
# pmix but every job fails "can not load PMIx library".
packages=(slurmctld slurmd slurm-client munge libpmix-dev)
export SLURM_CONF=$conf

say() { echo "start-local-slurm: $*"; }

# logs_tail: the end of every daemon's log, for a failure's report.
logs_tail() {
    local f
    for f in "$state"/*.log; do
        test -s "$f" || continue
        echo "---- last lines of $f ----"
        tail -n 15 "$f"
    done
}

fail() {
    say "FAILED: $*" >&2
    logs_tail >&2
    exit 1
}

# pid_of NAME: the pid start recorded for daemon NAME, printed only while
# that process is alive (not a zombie: a container's init may never reap
# it) and its command line names $state, i.e. it is still ours.
pid_of() {
    local pid
    pid=$(cat "$state/$1.pid" 2> /dev/null) || return 1
    test -r "/proc/$pid/cmdline" || return 1
    test "$(awk '{ print $3 }' "/proc/$pid/stat" 2> /dev/null)" != Z ||
        return 1
    tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null |
        grep -q -F "$state" || return 1
    echo "$pid"
}

install_packages() {
    local p missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2> /dev/null |
            grep -q "ok installed" || missing+=("$p")
    done
    test ${#missing[@]} -eq 0 && return 0
    command -v apt-get > /dev/null || {
        say "${missing[*]} missing and no apt-get to install them" >&2
        exit 3
    }
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        sudo -n true 2> /dev/null || {
            say "${missing[*]} missing; installing needs root or" \
                "password-less sudo" >&2
            exit 3
        }
        sudo=(sudo -n)
    fi
    say "installing ${missing[*]}"
    # Debian's packages would start system daemons on /etc/slurm's
    # config; ours run beside them on other ports, so that does no harm.
    if ! { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get update -q &&
        "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends "${missing[@]}"; } \
        > "$state/apt.out" 2>&1; then
        tail -n 20 "$state/apt.out" >&2
        say "apt-get could not install ${missing[*]}" >&2
        exit 3
    fi
}

# port_free PORT: nothing listens on TCP PORT (IPv4 or IPv6).
port_free() {
    local hex
    hex=$(printf ':%04X' "$1")
    ! awk -v h="$hex" '$4 == "0A" && substr($2, length($2) - 4) == h {
                           found = 1 }
                       END { exit !found }' /proc/net/tcp /proc/net/tcp6 \
        2> /dev/null
}

write_conf() {
    local port=$first_port tries=0 hw
    until port_free "$port" && port_free $((port + 1)); do
        port=$((port + 2))
        tries=$((tries + 1))
        [ $tries -lt 50 ] || fail "no two free TCP ports from" \
            "$first_port to $port"
    done
    # slurmd -C describes this host as slurm.conf wants it: CPUs, sockets,
    # cores, threads and memory. A node configured with more than it has
    # would be drained.
    hw=$(slurmd -C | grep "^NodeName=") || fail "slurmd -C printed no node"
    cat > "$conf" << EOF
# Written by test/slurm/start-local-slurm.sh: one node, this host.
ClusterName=hvdlocal
# Job numbers of this cluster's own, from its port: Open MPI names a
# step's shared-memory files after its job and step numbers, so two
# clusters on one host, both from job 1, opened each other's (vader
# segments; both steps died of SIGSEGV).
FirstJobId=$((port * 1000))
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$state/slurmctld
SlurmdSpoolDir=$state/slurmd
SlurmctldPidFile=$state/slurmctld.pidfile
SlurmdPidFile=$state/slurmd.pidfile
# No cgroups: they need a writable, delegated cgroup tree that containers
# and CI machines rarely give.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MailProg=/bin/true
$hw NodeAddr=127.0.0.1 State=UNKNOWN
# Jobs may share cores; a job with more tasks than cores asks for
# --overcommit.
PartitionName=local Nodes=$node Default=YES OverSubscribe=FORCE:4
EOF
    # Debian's Open MPI takes its ranks from PMIx; srun's default must
    # match it, or each rank starts alone as rank 0 of 1 (or aborts).
    if srun --mpi=list 2>&1 | grep -q -w pmix; then
        echo "MpiDefault=pmix" >> "$conf"
    else
        say "note: this Slurm has no pmix plugin (srun --mpi=list)"
    fi
}

# launch NAME COMMAND...: starts a daemon in the foreground of its own
# session, its output in NAME.log, its pid in NAME.pid.
launch() {
    local name=$1
    shift
    setsid "$@" < /dev/null > "$state/$name.log" 2>&1 &
    echo $! > "$state/$name.pid"
}

# wait_for WHAT TEST...: runs TEST each second until it succeeds, failing
# after $wait_s tries or at once when one of the daemons has died.
wait_for() {
    local what=$1 i d
    shift
    for ((i = 0; i < wait_s; i++)); do
        "$@" && return 0
        for d in munged slurmctld slurmd; do
            [ -e "$state/$d.pid" ] || continue
            pid_of "$d" > /dev/null || fail "$d died while waiting for $what"
        done
        sleep 1
    done
    sinfo -R 2> /dev/null >&2 || true
    fail "$what not reached after $wait_s s"
}

# node_ready: the node takes jobs: idle, or busy with jobs when start
# found the cluster running.
node_ready() {
    case $(sinfo -h -n "$node" -o %T 2> /dev/null) in
    idle | mixed | allocated) return 0 ;;
    *) return 1 ;;
    esac
}

start() {
    mkdir -p "$state"
    install_packages
    if pid_of munged > /dev/null && pid_of slurmctld > /dev/null &&
        pid_of slurmd > /dev/null; then
        say "already running in $state"
    else
        stop_daemons
        rm -rf "$state/slurmctld" "$state/slurmd" "$state/munge" \
            "$state"/*.log "$state"/*.pid
        mkdir -p "$state/slurmctld" "$state/slurmd" "$state/munge"
        # munged wants every folder on its socket's path searchable and
        # its key readable by its user alone.
        chmod 755 "$state" "$state/munge"
        mungekey --create --force --keyfile="$state/munge.key" ||
            fail "mungekey could not write $state/munge.key"
        chmod 600 "$state/munge.key"
        write_conf
        launch munged munged --foreground --socket="$socket" \
            --key-file="$state/munge.key" --pid-file="$state/munged.pidfile" \
            --seed-file="$state/munged.seed"
        wait_for "munged's socket" test -S "$socket"
        launch slurmctld slurmctld -D -f "$conf"
        wait_for "slurmctld answering" scontrol ping > /dev/null
        launch slurmd slurmd -D -f "$conf" -N "$node"
    fi
    # slurmctld reports the node idle for a while after slurmd died, so
    # wait_for checks the daemons themselves on every try.
    wait_for "node $node idle" node_ready
    say "node $node $(sinfo -h -n "$node" -o %T): munged $(pid_of munged)," \
        "slurmctld $(pid_of slurmctld), slurmd $(pid_of slurmd)"
    echo "export SLURM_CONF=$conf"
}

# stop_daemons: ends the daemons start recorded, slurmd first; TERM, then
# KILL after 10 s.
stop_daemons() {
    local d pid i
    for d in slurmd slurmctld munged; do
        pid=$(pid_of "$d") || continue
        kill -TERM "$pid" 2> /dev/null || true
        for ((i = 0; i < 20; i++)); do
            pid_of "$d" > /dev/null || break
            sleep 0.5
        done
        if pid_of "$d" > /dev/null; then
            say "$d ($pid) ignored TERM; sending KILL"
            kill -KILL "$pid" 2> /dev/null || true
        fi
        say "stopped $d ($pid)"
    done
    rm -f "$state"/*.pid
}

stop() {
    # Jobs first, through Slurm: their steps are not among our pids.
    local i
    if pid_of slurmctld > /dev/null && pid_of slurmd > /dev/null &&
        [ -n "$(squeue -h -o %i 2> /dev/null)" ]; then
        say "cancelling the jobs left: $(squeue -h -o %i | xargs)"
        scancel --full --user="$(id -un)" 2> /dev/null || true
        for ((i = 0; i < 10; i++)); do
            [ -z "$(squeue -h -o %i 2> /dev/null)" ] && break
            sleep 1
        done
    fi
    stop_daemons
}

status() {
    local d pid ok=0
    for d in munged slurmctld slurmd; do
        if pid=$(pid_of "$d"); then
            say "$d running, pid $pid"
        else
            say "$d not running"
            ok=1
        fi
    done
    [ $ok -eq 0 ] && sinfo -N -l
    return $ok
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) status ;;
*)
    echo "usage: $0 start|stop|status (state in $state)" >&2
    exit 2
    ;;
esac
