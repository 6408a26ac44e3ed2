#!/usr/bin/env bash
# A single-node Slurm cluster on localhost, for the tests: Debian's slurmctld, slurmd and
# munge; linuxproc process tracking, no cgroups, no accounting; squeue answers status
# queries (MinJobAge keeps finished jobs visible to it). Needs root. Idempotent.
set -euo pipefail
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurmctld slurmd slurm-client munge >/dev/null
fi
if scontrol ping 2>/dev/null | grep -q UP && sinfo -h -o %T 2>/dev/null | grep -qx idle; then
  exit 0
fi
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo) - 1024 ))
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
cat > /etc/slurm/slurm.conf <<CONF
ClusterName=hitchhiker
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=600
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName=localhost NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
[ -s /etc/munge/munge.key ] || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
chown -R munge:munge /etc/munge /run/munge 2>/dev/null || true
chmod 400 /etc/munge/munge.key
pgrep -x munged >/dev/null || munged --force
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd -N localhost
for _ in $(seq 60); do
  if sinfo -h -o %T 2>/dev/null | grep -qx idle; then exit 0; fi
  scontrol update nodename=localhost state=resume >/dev/null 2>&1 || true
  sleep 1
done
echo "start-cluster: the Slurm node did not become idle; see /var/log/slurm/" >&2
sinfo >&2 || true
exit 1
