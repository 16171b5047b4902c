#!/bin/bash
# run_slurm_check.sh — ibdt under Slurm, the way cluster users launch it.
#
# Starts a throw-away single-node Slurm (slurmctld + slurmd on localhost,
# auth/none), runs `srun --mpi=pmix -n N ibdt-launch-check ...` for every N
# given, and stops everything it started (by PID only). ibdt-launch-check
# verifies rank, size, node count and an all-to-all exchange of endpoint
# blobs through the Store, and prints the time from launch to "exchanged".
#
# usage: run_slurm_check.sh /path/to/ibdt-launch-check [N...]   (default 4 8)
# env:   REPS=1 (launches per N)  KEEP_LOGS=1 (leave $WORK for inspection)
# exit:  0 all passed, 77 skipped (no slurm, not root, no pmix plugin), else failed
#
# Pitfalls found on Debian 12 / Slurm 22.05 (see also
# ../shared/tools/slurm-local/run-slurm-job.sh): no systemd, so the daemons
# run in the foreground here; slurmd must start only after slurmctld answers
# `scontrol ping`; SlurmdParameters=config_overrides lets the node advertise
# more CPUs than it has; --mpi=pmix is required (the default is none).
set -u
PROBE=${1:?usage: $0 /path/to/ibdt-launch-check [N...]}
shift
SIZES=${*:-4 8}
REPS=${REPS:-1}
# Fixed ports and paths differ from the shared recipe's, so both can coexist;
# one project run at a time per host (flock below).
CTLD_PORT=16817
SLURMD_PORT=16818
WORK=/tmp/ibdt-slurm-check
NODE_CPUS=16

skip() { echo "run_slurm_check: SKIPPED: $*"; exit 77; }
for tool in slurmctld slurmd srun scontrol sinfo setsid flock; do
    command -v "$tool" >/dev/null || skip "$tool not found (apt-get install slurm-wlm)"
done
[ "$(id -u)" = 0 ] || skip "a throw-away Slurm needs root (SlurmUser=root)"
ls /usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix*.so >/dev/null 2>&1 || skip "Slurm's mpi_pmix plugin is not installed"
[ -x "$PROBE" ] || { echo "run_slurm_check: $PROBE is not executable" >&2; exit 2; }

exec 9>"$WORK.lock"
flock -w 300 9 || { echo "run_slurm_check: another run holds $WORK.lock" >&2; exit 2; }

CTLD_PID= SLURMD_PID=
stop() {  # stop PID: TERM, wait up to 10 s, then KILL
    local pid=$1 i
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < 200; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}
cleanup() {
    stop "$SLURMD_PID"
    stop "$CTLD_PID"
    [ "${KEEP_LOGS:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rm -rf "$WORK"
mkdir -p "$WORK"/{state/ctld,state/d,log}
HOST=$(hostname -s)
cat >"$WORK/slurm.conf" <<CONF
ClusterName=ibdtcheck
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/none
CredType=cred/none
StateSaveLocation=$WORK/state/ctld
SlurmdSpoolDir=$WORK/state/d
SlurmctldPidFile=$WORK/state/slurmctld.pid
SlurmdPidFile=$WORK/state/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
PlugStackConfig=$WORK/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$NODE_CPUS RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
: >"$WORK/plugstack.conf"
for v in $(compgen -e | grep '^SLURM_'); do unset "$v"; done
export SLURM_CONF=$WORK/slurm.conf

# setsid: keep terminal signals away from the daemons; 9>&-: not the lock.
setsid slurmctld -D -i -f "$SLURM_CONF" >"$WORK/log/slurmctld.out" 2>&1 9>&- &
CTLD_PID=$!
for ((i = 0; i < 200; i++)); do
    scontrol ping 2>/dev/null | grep -q 'is UP' && break
    kill -0 "$CTLD_PID" 2>/dev/null || break
    sleep 0.05
done
setsid slurmd -D -f "$SLURM_CONF" -N "$HOST" >"$WORK/log/slurmd.out" 2>&1 9>&- &
SLURMD_PID=$!
state=
for ((i = 0; i < 300; i++)); do
    state=$(sinfo -h -n "$HOST" -o %t 2>/dev/null)
    case $state in idle | mix | alloc) break ;; esac
    kill -0 "$CTLD_PID" 2>/dev/null && kill -0 "$SLURMD_PID" 2>/dev/null || break
    sleep 0.1
done
case $state in
idle | mix | alloc) ;;
*)  echo "run_slurm_check: the node never became idle (state '$state')" >&2
    tail -n 20 "$WORK/log/slurmctld.out" "$WORK/log/slurmd.out" "$WORK/log/"*.log >&2
    exit 3 ;;
esac

status=0
for n in $SIZES; do
    for ((rep = 0; rep < REPS; rep++)); do
        # Let the previous job finish its cleanup, so the launch is not queued.
        for ((i = 0; i < 100; i++)); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.05; done
        # -t: a hung step is cancelled by Slurm itself (minutes).
        if ! srun --mpi=pmix -n "$n" -t 2 "$PROBE" --expect-size "$n" --expect-nodes 1 \
                --launched-at "$(date +%s%N)" </dev/null 9>&-; then
            echo "run_slurm_check: srun --mpi=pmix -n $n failed" >&2
            status=1
        fi
    done
done
exit $status
