#!/bin/sh
# A real single-node SLURM cluster with 2 fake GPUs, for the SLURM client's tests and CI
# (recipe: shared/design/slurm-notes.md). Idempotent: a re-run that finds all up is a no-op.
# Needs root and apt-get (Debian's slurmctld/slurmd/slurm-client/munge); without them it exits
# non-zero with one line saying why. No systemd here: the daemons are started by hand.
set -eu

fail() { echo "slurm_up: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (installs packages, starts munged/slurmctld/slurmd)"
command -v apt-get >/dev/null 2>&1 || fail "needs apt-get (Debian's SLURM packages)"

HOST=$(hostname -s)
CONF_DIR=/etc/slurm
GPU_DIR=/var/lib/slurm/fake-gpus
STATE=/var/lib/slurm

idle() { sinfo -h -o %T 2>/dev/null | grep -qx idle; }

# Fast path: everything already up and the node idle (or busy with jobs: still up).
running() { pgrep -x "$1" >/dev/null 2>&1; }
if running munged && running slurmctld && running slurmd && [ -f "$CONF_DIR/slurm.conf" ] \
    && sinfo -h -o %T 2>/dev/null | grep -qxE 'idle|mixed|allocated'; then
    exit 0
fi

PKGS="slurmctld slurmd slurm-client munge"
missing=""
for pkg in $PKGS; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
    # Without --no-install-recommends apt pulls 43 packages instead of 8. Refresh the package
    # lists only when the install fails (a fresh container may have none).
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2086
    apt-get install -y -q --no-install-recommends $missing >/dev/null 2>&1 || {
        apt-get update -q >/dev/null 2>&1 || fail "apt-get update failed"
        apt-get install -y -q --no-install-recommends $missing >/dev/null \
            || fail "apt-get install$missing failed"
    }
fi

CPUS=$(nproc)
# RealMemory a bit under MemTotal: slurmd drains a node that reports less than configured.
MEM_MB=$(awk '/^MemTotal:/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)

install -d -o slurm -g slurm "$STATE" "$STATE/ctld" "$STATE/d" /var/log/slurm /run/slurm
install -d "$GPU_DIR" "$CONF_DIR"
# Character devices with NVIDIA's major number (195), no driver behind them: gres.conf rejects
# plain files, and a file-less Count=2 gets the node drained.
for n in 0 1; do
    [ -c "$GPU_DIR/gpu$n" ] || { rm -f "$GPU_DIR/gpu$n"; mknod -m 666 "$GPU_DIR/gpu$n" c 195 "$n"; }
done

cat >"$CONF_DIR/slurm.conf.new" <<EOF
# Written by scripts/slurm_up.sh (AgentSys test cluster): edits are overwritten.
ClusterName=agentsys-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=300
MailProg=/bin/true
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM_MB Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$CONF_DIR/gres.conf.new" <<EOF
# Written by scripts/slurm_up.sh: two fake GPUs (device nodes without a driver).
AutoDetect=off
NodeName=$HOST Name=gpu File=$GPU_DIR/gpu[0-1]
EOF
changed=""
for f in slurm.conf gres.conf; do
    if cmp -s "$CONF_DIR/$f.new" "$CONF_DIR/$f"; then
        rm -f "$CONF_DIR/$f.new"
    else
        mv "$CONF_DIR/$f.new" "$CONF_DIR/$f"
        changed=1
    fi
done

if ! running munged; then
    install -d -o munge -g munge /run/munge
    runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
fi
# A changed config reaches running daemons only through a restart.
if [ -n "$changed" ]; then
    for d in slurmd slurmctld; do
        # By the pid in the daemon's own pid file, never by name.
        if running "$d" && [ -f "/run/slurm/$d.pid" ]; then
            kill "$(cat "/run/slurm/$d.pid")" 2>/dev/null || true
            i=0
            while running "$d" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
        fi
    done
fi
running slurmctld || /usr/sbin/slurmctld || fail "slurmctld did not start (see /var/log/slurm/slurmctld.log)"
running slurmd || /usr/sbin/slurmd || fail "slurmd did not start (see /var/log/slurm/slurmd.log)"

i=0
until idle; do
    i=$((i + 1))
    if [ $i -gt 120 ]; then
        state=$(sinfo -h -o '%T %E' 2>&1 | head -n 1)
        fail "node not idle after 60 s (sinfo: ${state:-no answer}; see /var/log/slurm/)"
    fi
    # A node drained before (e.g. by an earlier bad config) comes back on its own only with
    # ReturnToService; resume it explicitly.
    if sinfo -h -o %T 2>/dev/null | grep -qE '^drain'; then
        scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true
    fi
    sleep 0.5
done
