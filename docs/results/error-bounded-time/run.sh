#!/bin/bash
# Issue 18's two missing measurements (docs/alltoallv.md, "Measured"):
#  1. time per epoch of the DLRM demo on an emulated 1 Gbit/s network (hpc/netem/dct-netem), 4
#     ranks, modes dense, dct and eb (error-bounded embedding all-to-all as in
#     docs/results/error-bounded-accuracy/run.sh), and eb with the lossless stage chosen by the cost model for
#     that link (--beta-gbps 0.125), seeds 1-3, EPOCHS epochs (default 5, the demo's);
#  2. dct-bench alltoallv on the demo's real embedding lookups (dct-dlrm --dump-lookups, the
#     last steps of a 5-epoch dense run) against random rows of the same shape, in the same run.
# From the repository root, with a build in build/ (-DDCT_BUILD_EXAMPLES=ON), as root (or with
# unprivileged user namespaces, docs/netem.md). Every run holds /tmp/dct-cpu.lock (other jobs on
# the machine wait for it, and it for them).
set -eu
cd "$(dirname "$0")/../../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export OPENBLAS_NUM_THREADS=1
out=${OUT:-docs/results/error-bounded-time}
epochs=${EPOCHS:-5}
D=build/examples/dlrm/dct-dlrm
B=build/hpc/bench/dct-bench
lock() { flock /tmp/dct-cpu.lock "$@"; }
eb="--error-bound 0.05 --backward-error-bound 0.05"

# 1. Time per epoch at 1 Gbit/s.
for seed in ${SEEDS:-1 2 3}; do
  # shellcheck disable=SC2086
  lock hpc/netem/dct-netem --rate 1gbit -- mpiexec -n 4 $D --seed $seed --epochs $epochs \
    --modes dense,dct,eb $eb --lossless zstd --json "$out/netem_s$seed.json" \
    > "$out/netem_s$seed.txt" 2>&1
  # shellcheck disable=SC2086
  lock hpc/netem/dct-netem --rate 1gbit -- mpiexec -n 4 $D --seed $seed --epochs $epochs \
    --modes eb $eb --beta-gbps 0.125 --json "$out/netem_model_s$seed.json" \
    > "$out/netem_model_s$seed.txt" 2>&1
done

# 2. The codecs on real lookups: one step (the demo's own 32-row blocks) and 16 steps (512-row
#    blocks: B = 2048, d = 64, the shape of the N(0,1) rows of docs/results/error-bounded-accuracy).
tmp=$(mktemp -d)
for steps in 1 16; do
  lock mpiexec -n 4 $D --seed 1 --epochs 5 --modes dense --quiet \
    --dump-lookups "$tmp/lookups_$steps.bin" --dump-steps $steps > "$out/dump_$steps.txt" 2>&1
  lock mpiexec -n 4 $B alltoallv --blocks "$tmp/lookups_$steps.bin" \
    --data blocks,gaussian,uniform --compressor topk,error_bounded --keep 0.05 \
    --values native --error-bound 0.01,0.05 --lossless zstd,lz4 --iters 10 --warmup 2 \
    --codec-seconds 0.2 > "$out/bench_steps$steps.txt" 2>&1
done
rm -rf "$tmp"
