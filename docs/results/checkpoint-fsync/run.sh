#!/usr/bin/env bash
# dct-bench checkpoint at 1, 2 and 4 ranks x 64 MiB, on the VM's disk (/tmp) and on tmpfs
# (/dev/shm), with the plain independent write + fsync baseline; one output file per case.
# Run from the repository root after a Release build in ./build.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
out=${1:-docs/results/checkpoint-fsync}
for dir in /tmp/dct-ckb /dev/shm/dct-ckb; do
  mkdir -p "$dir"
  fs=$([ "$dir" = /tmp/dct-ckb ] && echo disk || echo tmpfs)
  for ranks in 1 2 4; do
    mpiexec -n "$ranks" build/hpc/bench/dct-bench checkpoint --mib 64 --iters 5 --dir "$dir" \
      > "$out/output-$fs-np$ranks.txt" 2>&1
  done
  rm -rf "$dir"
done
