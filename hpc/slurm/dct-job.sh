#!/usr/bin/env bash
# The steps every dct job script runs (sourced by cpu.sbatch, nvidia-gpu.sbatch, amd-gpu.sbatch
# after they set the variables below): the DLRM training demo, dense against dct, then
# `dct-bench allreduce`. Results go to dct-<job id>/ in the job's working directory:
#   dlrm.txt, dlrm.json   the demo's table and every metric (per epoch and final)
#   bench.txt             dct-bench allreduce's table (MPI_Allreduce and dct, same run)
#   job.txt               where and how the job ran (nodes, ranks, launcher, MPI, modules)
#
# Variables (the job scripts set them; every one has a default here):
#   DCT_BUILD        dct build directory (examples/dlrm/dct-dlrm, hpc/bench/dct-bench)
#   DCT_DATA         Fashion-MNIST directory (the four gzipped IDX files)
#   DCT_LAUNCH       the launcher, a command line the ranks' command is appended to
#   DCT_EPOCHS, DCT_TRAIN_LIMIT, DCT_TEST_LIMIT, DCT_DLRM_ARGS   the demo's size and options
#   DCT_BENCH_SIZES, DCT_BENCH_ITERS, DCT_BENCH_ARGS           dct-bench allreduce's
set -euo pipefail

DCT_BUILD=${DCT_BUILD:-$HOME/dct/build}
DCT_DATA=${DCT_DATA:-/usr/share/datasets/fashion-mnist}
DCT_LAUNCH=${DCT_LAUNCH:-srun}
DCT_EPOCHS=${DCT_EPOCHS:-5}
DCT_TRAIN_LIMIT=${DCT_TRAIN_LIMIT:-0}
DCT_TEST_LIMIT=${DCT_TEST_LIMIT:-0}
DCT_DLRM_ARGS=${DCT_DLRM_ARGS:-}
DCT_BENCH_SIZES=${DCT_BENCH_SIZES:-1M,4M,16M,64M}
DCT_BENCH_ITERS=${DCT_BENCH_ITERS:-20}
DCT_BENCH_ARGS=${DCT_BENCH_ARGS:-}

dlrm=$DCT_BUILD/examples/dlrm/dct-dlrm
bench=$DCT_BUILD/hpc/bench/dct-bench
for program in "$dlrm" "$bench"; do
  [ -x "$program" ] || { echo "dct-job: $program not found: set DCT_BUILD" >&2; exit 1; }
done
[ -d "$DCT_DATA" ] || { echo "dct-job: no data in $DCT_DATA: set DCT_DATA" >&2; exit 1; }

out=$PWD/dct-${SLURM_JOB_ID:-interactive}
mkdir -p "$out"
read -r -a launch <<< "$DCT_LAUNCH"
{
  echo "job ${SLURM_JOB_ID:-none} on ${SLURM_JOB_NODELIST:-$(hostname -s)}:" \
    "${SLURM_NNODES:-1} node(s), ${SLURM_NTASKS:-?} ranks"
  echo "launcher: $DCT_LAUNCH"
  echo "dct build: $DCT_BUILD"
  ldd "$bench" | grep -E 'libmpi|libmpich|libcuda|libamdhip' || true
  if command -v module > /dev/null 2>&1; then module list 2>&1 || true; fi
} | tee "$out/job.txt"

timed() {  # timed LABEL COMMAND...: runs it and says how long it took
  local label=$1 start=$SECONDS
  shift
  "$@"
  echo "($label: $((SECONDS - start)) s)"
}

echo "== DLRM demo: dense against dct, $DCT_EPOCHS epoch(s)"
# shellcheck disable=SC2086 # DCT_DLRM_ARGS: options, split on purpose
timed "demo" "${launch[@]}" "$dlrm" --data "$DCT_DATA" --modes dense,dct --epochs "$DCT_EPOCHS" \
  --train-limit "$DCT_TRAIN_LIMIT" --test-limit "$DCT_TEST_LIMIT" --json "$out/dlrm.json" \
  --quiet $DCT_DLRM_ARGS | tee "$out/dlrm.txt"

echo "== dct-bench allreduce: MPI_Allreduce against dct, sizes $DCT_BENCH_SIZES"
# shellcheck disable=SC2086 # DCT_BENCH_ARGS: options, split on purpose
timed "bench" "${launch[@]}" "$bench" allreduce --sizes "$DCT_BENCH_SIZES" \
  --iters "$DCT_BENCH_ITERS" $DCT_BENCH_ARGS | tee "$out/bench.txt"
echo "== results in $out"
