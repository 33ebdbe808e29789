#!/bin/bash
# Issue 13, fourth round: 20-epoch runs (seeds 1-5) and time to dense's best accuracy on an
# emulated 1 Gbit/s link (seeds 1-3). From a build with -DDCT_BUILD_EXAMPLES=ON, as root.
# The 5-epoch isolation runs of docs/performance.md ("Fourth round") are the same command with
# --epochs 5 and the settings named in its table (mode eb: --error-bound B --backward-error-bound B
# --lossless zstd; DP dense: --density 1; MP uncompressed: --keep 1).
set -e
cd "$(dirname "$0")/../../../build"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
out=${OUT:-/tmp/training-4-seeds-netem}
mkdir -p "$out"
sign="--values sign --mp-values fp16 --momentum-correction --density 0.015 --bucket-mb 25"
eb="--error-bound 0.2 --backward-error-bound 0.2 --lossless zstd"
for seed in 1 2 3 4 5; do
  # shellcheck disable=SC2086
  mpiexec -n 4 examples/dlrm/dct-dlrm --quiet --seed $seed --epochs 20 --modes dense,dct,eb \
    $sign $eb --json "$out/e20_s$seed.json"
done
for seed in 1 2 3; do
  # shellcheck disable=SC2086
  ../hpc/netem/dct-netem --rate 1gbit -- mpiexec -n 4 examples/dlrm/dct-dlrm --seed $seed \
    --epochs 20 --modes dense,dct $sign --json "$out/netem_s$seed.json" > "$out/netem_s$seed.txt" 2>&1
done
