#!/bin/sh
# Starts (or stops) a one-node Slurm from Debian's packages for the end-to-end suite: munged,
# slurmctld and slurmd under $DIR, two fake V100 GPUs (plain files) with 8 gres shards,
# Tandem's SPANK plugin in plugstack.conf and its job_submit.lua.
# Usage: cluster.sh start DIR PLUGIN_SO LUA SERVICE | cluster.sh stop DIR |
#        cluster.sh restart-ctld DIR (slurmctld again, in the caller's environment: what
#        job_submit.lua reads from it)
set -eu
cmd=$1 dir=$2
if [ "$cmd" = restart-ctld ]; then
  p=$(cat "$dir/slurmctld.pid")
  kill "$p"
  i=0
  while [ $i -lt 40 ] && kill -0 "$p" 2>/dev/null; do sleep 0.25; i=$((i + 1)); done
  SLURM_CONF="$dir/etc/slurm.conf" /usr/sbin/slurmctld
  exit 0
fi
if [ "$cmd" = stop ]; then
  # Jobs first, so that no slurmstepd or job outlives the daemons.
  if [ -f "$dir/slurmctld.pid" ]; then
    jobs=$(SLURM_CONF="$dir/etc/slurm.conf" squeue -h -o %i 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      SLURM_CONF="$dir/etc/slurm.conf" scancel $jobs 2>/dev/null || true
      i=0
      while [ $i -lt 20 ] && [ -n "$(SLURM_CONF="$dir/etc/slurm.conf" squeue -h -o %i 2>/dev/null)" ]; do
        sleep 0.5; i=$((i + 1))
      done
      sleep 1
    fi
  fi
  for pid in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [ -f "$pid" ] || continue
    p=$(cat "$pid")
    kill "$p" 2>/dev/null || continue
    # slurmctld saves its state before it exits: wait for it (10 s at most).
    i=0
    while [ $i -lt 40 ] && kill -0 "$p" 2>/dev/null; do sleep 0.25; i=$((i + 1)); done
  done
  exit 0
fi
plugin=$3 lua=$4 service=$5
host=$(hostname -s)
mkdir -p "$dir/etc" "$dir/state" "$dir/spool" "$dir/log" "$dir/munge"
if [ ! -f "$dir/munge/munge.key" ]; then
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 400 "$dir/munge/munge.key"
fi
/usr/sbin/munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
touch "$dir/fake-nvidia0" "$dir/fake-nvidia1"

cat > "$dir/etc/slurm.conf" <<CONF
ClusterName=tandemtest
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu,shard
ReturnToService=2
JobSubmitPlugins=lua
SchedulerParameters=sched_interval=1
MinJobAge=300
SlurmdParameters=config_overrides
NodeName=$host CPUs=16 RealMemory=4000 Gres=gpu:v100:2,shard:8 State=UNKNOWN
PartitionName=main Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
cat > "$dir/etc/gres.conf" <<CONF
NodeName=$host Name=gpu Type=v100 File=$dir/fake-nvidia0
NodeName=$host Name=gpu Type=v100 File=$dir/fake-nvidia1
NodeName=$host Name=shard Count=8
CONF
# The plugin and the hook make their MUNGE credentials with this cluster's munged.
echo "required $plugin service=$service timeout_ms=1000 munge_socket=$dir/munge/munge.socket" \
  > "$dir/etc/plugstack.conf"
cp "$lua" "$dir/etc/job_submit.lua"
export SLURM_CONF="$dir/etc/slurm.conf"
# job_submit.lua reads the service's address and munged's socket from slurmctld's environment.
export TANDEM_SERVICE="$service"
export TANDEM_MUNGE_SOCKET="$dir/munge/munge.socket"
/usr/sbin/slurmctld -i
/usr/sbin/slurmd
