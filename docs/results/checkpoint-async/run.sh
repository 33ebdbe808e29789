#!/usr/bin/env bash
# DCT_Checkpoint_isave against DCT_Checkpoint_save and a plain parallel-HDF5 write, and what
# each costs 4 training steps (dct-bench checkpoint), at 1, 2 and 4 ranks on the VM's disk
# (/tmp) and at 4 ranks on tmpfs (/dev/shm). Usage: run.sh BUILD_DIR (output on stdout).
set -euo pipefail
build=${1:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
bench="$build/hpc/bench/dct-bench"
for setting in "1 128 /tmp" "2 64 /tmp" "4 64 /tmp" "4 64 /dev/shm"; do
  read -r ranks mib dir <<< "$setting"
  work="$dir/dct-checkpoint-async.$$" && mkdir -p "$work"
  mpirun -n "$ranks" "$bench" checkpoint --mib "$mib" --iters "${ITERS:-11}" --steps 4 --dir "$work"
  rm -rf "$work"
  echo
done
