#!/usr/bin/env bash
# The job scripts under a real Slurm: a one-node cluster on this machine (munged, slurmctld,
# slurmd; configuration, keys, sockets, state and logs in a temporary directory; ports on
# 127.0.0.1), the CPU script submitted with sbatch and its output checked, the GPU scripts
# checked with sbatch --test-only against GPUs declared as generic resources, every script with
# bash -n and shellcheck. Every daemon it started is stopped on exit, also on failure.
# usage: one_node_cluster.sh SOURCE_DIR BUILD_DIR   (exit 77: skipped, Slurm or root missing)
set -euo pipefail
source_dir=$(cd "$1" && pwd) build_dir=$(cd "$2" && pwd)
slurm_dir=$source_dir/hpc/slurm
scripts=("$slurm_dir"/*.sbatch "$slurm_dir"/dct-job.sh)

echo "== bash -n and shellcheck: ${scripts[*]##*/}"
for script in "${scripts[@]}"; do bash -n "$script"; done
if command -v shellcheck > /dev/null; then
  shellcheck -P SCRIPTDIR -x "${scripts[@]}"
else
  echo "shellcheck not installed (.ci/run installs it): only bash -n"
fi

for program in munged mungekey slurmctld slurmd sbatch squeue scontrol; do
  command -v "$program" > /dev/null ||
    { echo "skipped: $program missing (Debian slurm-wlm, munge: .ci/run installs them)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "skipped: slurmd needs root"; exit 77; }

work=$(mktemp -d /tmp/dct-slurm.XXXXXX)
chmod 755 "$work"  # munged wants its socket's directory searchable by all
daemons=()
stop_daemons() {
  local status=$? pid
  for pid in "${daemons[@]}"; do kill "$pid" 2> /dev/null || true; done
  for pid in "${daemons[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2> /dev/null || true
  done
  if [ "$status" -ne 0 ]; then
    for log in "$work"/*.log "$work"/jobs/*.out; do
      [ -f "$log" ] && { echo "---- $log"; tail -n 40 "$log"; }
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap stop_daemons EXIT
trap 'exit 1' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
host=$(hostname -s)
# nproc honours OMP_NUM_THREADS, which the test environment sets for Kokkos
cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)

echo "== munged (key, socket and logs in $work)"
mungekey --create --keyfile "$work/munge.key"
chmod 600 "$work/munge.key"
munged --force --foreground --key-file "$work/munge.key" --socket "$work/munge.socket" \
  --pid-file "$work/munged.pid" --log-file "$work/munged.log" --seed-file "$work/munged.seed" \
  > "$work/munged.stdout.log" 2>&1 &
daemons+=($!)
for _ in $(seq 50); do [ -S "$work/munge.socket" ] && break; sleep 0.1; done

echo "== slurm.conf: node $host, $cpus CPUs, 4 GPUs as gres (placeholder files)"
mkdir -p "$work/state" "$work/spool" "$work/jobs" "$work/dev"
for i in 0 1 2 3; do touch "$work/dev/gpu$i"; done
cat > "$work/slurm.conf" << CONF
ClusterName=dcttest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge.socket
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
SwitchType=switch/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus Gres=gpu:4 Features=gpu,cpu State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
cat > "$work/gres.conf" << CONF
AutoDetect=off
NodeName=$host Name=gpu File=$work/dev/gpu[0-3]
CONF
export SLURM_CONF=$work/slurm.conf

echo "== slurmctld, slurmd"
slurmctld -D -i -f "$SLURM_CONF" > "$work/slurmctld.stdout.log" 2>&1 &
daemons+=($!)
slurmd -D -N "$host" -f "$SLURM_CONF" > "$work/slurmd.stdout.log" 2>&1 &
daemons+=($!)
state=
for _ in $(seq 100); do
  state=$(sinfo -h -N -o %T 2> /dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.3
done
[ "$state" = idle ] || { echo "FAILED: node not idle (state: '$state')"; exit 1; }
sinfo -N -o "%N %T %c %G %f"

echo "== sbatch --test-only: the GPU scripts (GPUs as gres)"
# Sized down to this node; everything else (GPUs per task, binding, features) as written.
fit=(--test-only --partition=debug --nodes=1 --ntasks-per-node=2 --cpus-per-task=1)
for script in nvidia-gpu amd-gpu; do
  sbatch "${fit[@]}" "$slurm_dir/$script.sbatch" 2>&1 | tee "$work/$script.test-only"
  grep -q "to start at" "$work/$script.test-only" ||
    { echo "FAILED: sbatch --test-only $script.sbatch"; exit 1; }
done

echo "== sbatch cpu.sbatch: 2 ranks, a short demo and bench"
cd "$work/jobs"
job=$(DCT_SOURCE=$source_dir DCT_BUILD=$build_dir DCT_EPOCHS=1 DCT_TRAIN_LIMIT=2000 \
  DCT_TEST_LIMIT=500 DCT_BENCH_SIZES=64K,256K DCT_BENCH_ITERS=3 \
  DCT_LAUNCH="${DCT_TEST_LAUNCH:-srun --mpi=pmix}" \
  sbatch --parsable --partition=debug --nodes=1 --ntasks-per-node=2 --time=00:10:00 \
    "$slurm_dir/cpu.sbatch")
echo "job $job submitted"
for _ in $(seq 600); do
  [ -z "$(squeue -h -j "$job" 2> /dev/null)" ] && break
  sleep 0.5
done
job_state=$(scontrol show job "$job" | grep -o 'JobState=[A-Z_]*' || true)
output=$work/jobs/dct-cpu-$job.out
echo "---- $output ($job_state)"
cat "$output"
[ "$job_state" = JobState=COMPLETED ] || { echo "FAILED: job $job: $job_state"; exit 1; }
results=$work/jobs/dct-$job
for file in job.txt dlrm.txt dlrm.json bench.txt; do
  [ -s "$results/$file" ] || { echo "FAILED: $results/$file missing or empty"; exit 1; }
done
# The demo's table: both modes, and dct with compression ratios above 1.
grep -qE '^mode +test acc' "$results/dlrm.txt" || { echo "FAILED: no demo table"; exit 1; }
grep -qE '^dense +[0-9.]+% ' "$results/dlrm.txt" || { echo "FAILED: no dense row"; exit 1; }
# The ratios are the row's first two 'NNx' fields (the columns before them may hold spaces).
awk '$1 == "dct" { n = 0; for (i = 2; i <= NF; ++i) if ($i ~ /^[0-9.]+x$/) r[++n] = $i + 0
                   if (n >= 2 && r[1] > 1 && r[2] > 1) found = 1 } END { exit !found }' \
  "$results/dlrm.txt" || { echo "FAILED: no dct row with DP and MP ratios > 1"; exit 1; }
# The bench table: a row per size, dct sending fewer bytes than MPI_Allreduce.
grep -qE '^ +size\(B\) +target' "$results/bench.txt" || { echo "FAILED: no bench table"; exit 1; }
for size in 65536 262144; do
  awk -v size="$size" '$1 == size && $8 + 0 > 1 { found = 1 } END { exit !found }' \
    "$results/bench.txt" || { echo "FAILED: no bench row for $size with bytes_ratio > 1"; exit 1; }
done
echo "slurm: cpu.sbatch ran under Slurm (job $job); GPU scripts accepted by sbatch --test-only"
