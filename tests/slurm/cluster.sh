#!/usr/bin/env bash
# A private single-node Slurm for tests (Debian/Ubuntu): munge, slurmctld and slurmd on loopback,
# partitions `cpu` (default) and `gpu`, one fake GPU (gres.conf File=/dev/null), no accounting.
#
#   tests/slurm/cluster.sh install install the packages if missing (CI does this as a phase of its own)
#   tests/slurm/cluster.sh up      install the packages if missing, write the config, start the daemons,
#                                  wait until the node is idle (a no-op where it is already up)
#   tests/slurm/cluster.sh down    cancel this cluster's jobs, stop the daemons this script started
#                                  (by their PID files, nothing else); logs are kept
#   tests/slurm/cluster.sh status  daemons, sinfo, squeue
#   tests/slurm/cluster.sh env     the lines to eval for the Slurm clients (SLURM_CONF and PATH)
#   tests/slurm/cluster.sh logs    the tails of every log
#
# Everything lives in $SLURM_CI_DIR (default /tmp/axisrl-slurm-ci): etc/ (slurm.conf, gres.conf),
# munge/ (a private key and socket), state/, spool/, run/ (PID files), log/, bin/ (an srun shim).
# No system file is written apart from the apt install; clients find this cluster through SLURM_CONF.
# The shim is needed because the Snakemake jobstep plugin (0.6.1) removes every SLURM_* variable,
# SLURM_CONF included, before its `srun` inside a job: bin/srun puts SLURM_CONF back and runs the
# real srun, so jobs need PATH=$SLURM_CI_DIR/bin:$PATH (`cluster.sh env` prints both).
# Exit status 77: Slurm cannot be set up here (not root, or missing and apt-get cannot install it), so callers skip.
set -Eeuo pipefail

DIR=${SLURM_CI_DIR:-/tmp/axisrl-slurm-ci}
CTLD_PORT=${SLURM_CI_CTLD_PORT:-16817}  # off the default 6817/6818, so a system Slurm can coexist
SLURMD_PORT=${SLURM_CI_SLURMD_PORT:-16818}
CONF=$DIR/etc/slurm.conf
MUNGE_DIR=$DIR/munge
SOCKET=$MUNGE_DIR/munged.sock
PACKAGES=(slurmctld slurmd slurm-client munge)
COMMANDS=(slurmctld slurmd slurmstepd sinfo squeue sbatch srun scontrol scancel munged mungekey munge unmunge)
SKIP=77
export SLURM_CONF=$CONF

say() { echo "cluster.sh: $*"; }
die() {
    echo "cluster.sh: ERROR: $*" >&2
    show_logs >&2 || true
    exit 1
}
trap 'die "command failed (line $LINENO): $BASH_COMMAND"' ERR

show_logs() {
    local log
    for log in "$DIR"/log/*.log "$MUNGE_DIR"/munged.log; do
        [[ -s $log ]] || continue
        echo "---- tail of $log"
        tail -n 30 "$log"
    done
}

# --- PID files: a daemon counts as ours only if its PID file names a live process of that binary ---
pidfile() {
    case $1 in
        munged) echo "$MUNGE_DIR/munged.pid" ;;
        *) echo "$DIR/run/$1.pid" ;;
    esac
}

alive() { # alive NAME: the PID recorded for NAME, if that process runs the NAME binary
    local file pid exe
    file=$(pidfile "$1")
    [[ -s $file ]] || return 1
    pid=$(tr -dc 0-9 <"$file")
    [[ -n $pid && -d /proc/$pid ]] || return 1
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
    [[ $(basename "$exe") == "$1"* ]] || return 1 # e.g. slurmctld -> slurmctld-wlm
    echo "$pid"
}

stop() { # stop NAME: TERM the recorded PID, KILL it after 20 s
    local pid i
    if ! pid=$(alive "$1"); then
        say "$1 not running (nothing to stop)"
        rm -f "$(pidfile "$1")"
        return 0
    fi
    say "stopping $1 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 200; i++)); do
        [[ -d /proc/$pid ]] || break
        sleep 0.1
    done
    if [[ -d /proc/$pid ]]; then
        say "$1 (pid $pid) ignored TERM for 20 s: KILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$(pidfile "$1")"
}

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND...: poll until COMMAND succeeds
    local seconds=$1 what=$2 i
    shift 2
    for ((i = 0; i < seconds * 5; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    die "timed out after ${seconds}s waiting for $what"
}

# --- install ---
missing_commands() {
    local c
    for c in "${COMMANDS[@]}"; do command -v "$c" >/dev/null 2>&1 || echo "$c"; done
}

install() {
    local missing
    missing=$(missing_commands | tr '\n' ' ')
    if [[ -z $missing ]]; then
        say "packages present"
    else
        if ! command -v apt-get >/dev/null 2>&1; then
            say "SKIP: Slurm is not installed (missing: $missing) and there is no apt-get"
            exit $SKIP
        fi
        mkdir -p "$DIR/log"
        say "installing ${PACKAGES[*]} (apt-get, no recommends; log: $DIR/log/install.log)"
        export DEBIAN_FRONTEND=noninteractive
        if ! apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${PACKAGES[@]}" >>"$DIR/log/install.log" 2>&1; then
            say "install failed; apt-get update and retry"
            # No package source reachable means Slurm cannot be installed here: skip, loudly, with the log.
            if ! { apt-get update && apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends \
                       "${PACKAGES[@]}"; } >>"$DIR/log/install.log" 2>&1; then
                say "SKIP: apt-get cannot install ${PACKAGES[*]}; last lines of $DIR/log/install.log:"
                tail -n 5 "$DIR/log/install.log" >&2
                exit $SKIP
            fi
        fi
        missing=$(missing_commands | tr '\n' ' ')
        [[ -z $missing ]] || die "still missing after install: $missing"
    fi
    id munge >/dev/null 2>&1 || die "no 'munge' user (the munge package creates it)"
}

# --- config ---
write_config() {
    local node hw mem
    node=$(hostname -s)
    # The node as slurmd sees it (CPUs, sockets, cores, threads), so it is never INVAL; a little less
    # memory than it has, since a node reporting less than configured is drained.
    hw=$(slurmd -C | head -n 1)
    [[ $hw == NodeName=* ]] || die "unexpected 'slurmd -C' output: $hw"
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
    hw=$(sed -e 's/^NodeName=[^ ]* //' -e 's/ *RealMemory=[0-9]*//' <<<"$hw")
    mkdir -p "$DIR/etc" "$DIR/run" "$DIR/log"
    rm -rf "$DIR/state" "$DIR/spool"
    mkdir -p "$DIR/state" "$DIR/spool"
    cat >"$CONF" <<EOF
# Written by tests/slurm/cluster.sh: a loopback single-node cluster, no accounting.
ClusterName=axisrl-ci
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
# Finished jobs stay visible to squeue/scontrol for an hour: the executor polls with squeue
# (no sacct without accounting) and the tests read partitions and gres back with scontrol.
MinJobAge=3600
KillWait=5
MailProg=/bin/true
MpiDefault=none
GresTypes=gpu
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node $hw RealMemory=$((mem * 9 / 10)) Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$node Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$node MaxTime=INFINITE State=UP
EOF
    write_srun_shim
    # A GRES needs a device file: /dev/null stands in for the GPU (Count=1 alone leaves the node INVAL).
    echo "NodeName=$node Name=gpu File=/dev/null" >"$DIR/etc/gres.conf"
    say "wrote $CONF (node $node: $hw RealMemory=$((mem * 9 / 10)))"
}

write_srun_shim() {
    local entry real=""
    local -a entries
    IFS=: read -ra entries <<<"$PATH"
    for entry in "${entries[@]}"; do # the real srun: the first on PATH that is not this shim
        if [[ $entry != "$DIR/bin" && -x $entry/srun ]]; then
            real=$entry/srun
            break
        fi
    done
    [[ -n $real ]] || die "no srun on PATH"
    mkdir -p "$DIR/bin"
    cat >"$DIR/bin/srun" <<EOF
#!/bin/sh
# Written by tests/slurm/cluster.sh: Snakemake's jobstep plugin drops SLURM_CONF before srun in a job.
SLURM_CONF=\${SLURM_CONF:-$CONF}
export SLURM_CONF
exec $real "\$@"
EOF
    chmod 0755 "$DIR/bin/srun"
}

# --- daemons ---
munge_works() { munge -n -S "$SOCKET" | unmunge -S "$SOCKET"; }

start_munged() {
    local pid
    if pid=$(alive munged); then
        say "munged already running (pid $pid)"
        return 0
    fi
    # munged refuses group/other-writable paths; its own directory belongs to the munge user.
    mkdir -p "$MUNGE_DIR"
    chmod 0755 "$DIR"
    chown munge:munge "$MUNGE_DIR"
    chmod 0755 "$MUNGE_DIR"
    rm -f "$SOCKET" "$SOCKET.lock"
    if [[ ! -s $MUNGE_DIR/munge.key ]]; then
        runuser -u munge -- mungekey --create --keyfile="$MUNGE_DIR/munge.key"
    fi
    say "starting munged (socket $SOCKET)"
    runuser -u munge -- munged --socket="$SOCKET" --key-file="$MUNGE_DIR/munge.key" \
        --pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_DIR/munged.log" \
        --seed-file="$MUNGE_DIR/munged.seed" ||
        die "munged did not start (see $MUNGE_DIR/munged.log)"
    wait_for 20 "munged to answer on $SOCKET" munge_works
}

start_slurmctld() {
    local pid
    if pid=$(alive slurmctld); then
        say "slurmctld already running (pid $pid)"
        return 0
    fi
    say "starting slurmctld"
    slurmctld -c -f "$CONF" || die "slurmctld did not start"
    wait_for 30 "slurmctld to answer (scontrol ping)" bash -c 'scontrol ping | grep -q UP'
}

start_slurmd() {
    local pid
    if pid=$(alive slurmd); then
        say "slurmd already running (pid $pid)"
        return 0
    fi
    say "starting slurmd"
    slurmd -f "$CONF" -N "$(hostname -s)" || die "slurmd did not start"
    wait_for 20 "slurmd's PID file" alive slurmd
}

node_state() { sinfo -h -N -n "$(hostname -s)" -o %T 2>/dev/null | head -n 1 || true; }

wait_idle() {
    local i state=""
    for ((i = 0; i < 300; i++)); do
        state=$(node_state)
        case $state in
            idle | mixed | allocated) say "node $(hostname -s) is $state"; return 0 ;;
        esac
        sleep 0.2
    done
    scontrol show node "$(hostname -s)" >&2 || true
    die "node $(hostname -s) not idle after 60 s (state: '${state:-none}')"
}

up() {
    if [[ $(id -u) != 0 ]]; then
        say "SKIP: running slurmd (and installing Slurm) needs root"
        exit $SKIP
    fi
    install
    if alive slurmctld >/dev/null && alive slurmd >/dev/null && alive munged >/dev/null &&
        [[ $(node_state) =~ ^(idle|mixed|allocated)$ ]]; then
        say "already up (SLURM_CONF=$CONF)"
        return 0
    fi
    if ! alive slurmctld >/dev/null; then
        stop slurmd # a slurmd without its controller was left over: start both afresh
        write_config
    fi
    start_munged
    start_slurmctld
    start_slurmd
    wait_idle
    # One tiny job on each partition, so a cluster that is "idle" but cannot run jobs fails here.
    local out
    out=$(timeout 120 srun --immediate=60 -p gpu --gres=gpu:1 -n1 -t 1 --mem=100 bash -c 'echo "gpu job: CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"' 2>&1) ||
        die "a test job on partition gpu failed: $out"
    say "$out"
    say "up (SLURM_CONF=$CONF, logs in $DIR/log)"
}

down() {
    local jobs
    if alive slurmctld >/dev/null; then
        jobs=$(squeue -h -t pending,running,suspended,completing -o %i 2>/dev/null | tr '\n' ' ')
        if [[ -n ${jobs// /} ]]; then
            say "cancelling this cluster's jobs: $jobs"
            # shellcheck disable=SC2086
            scancel $jobs || true
            for ((i = 0; i < 100; i++)); do
                [[ -z $(squeue -h -t pending,running,suspended,completing -o %i 2>/dev/null) ]] && break
                sleep 0.2
            done
        fi
    fi
    stop slurmd
    stop slurmctld
    stop munged
    say "down (logs kept in $DIR/log and $MUNGE_DIR/munged.log)"
}

status() {
    local name pid
    for name in munged slurmctld slurmd; do
        if pid=$(alive "$name"); then say "$name running (pid $pid)"; else say "$name not running"; fi
    done
    if alive slurmctld >/dev/null; then
        sinfo
        squeue -t all
    fi
}

case ${1:-} in
    install)
        if [[ $(id -u) != 0 ]]; then
            say "SKIP: installing Slurm needs root"
            exit $SKIP
        fi
        install
        ;;
    up) up ;;
    down) down ;;
    status) status ;;
    env)
        echo "export SLURM_CONF=$CONF"
        echo "export PATH=$DIR/bin:\$PATH"
        ;;
    logs) show_logs ;;
    *)
        echo "usage: $0 install|up|down|status|env|logs" >&2
        exit 2
        ;;
esac
