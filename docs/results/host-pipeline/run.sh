#!/usr/bin/env bash
# The measurements of docs/performance.md "The whole call on the host" (issue 33), one after the
# other (never two at once on a 2-core machine). Usage, from the repository root after
# ./quickstart.sh (and, for the OpenMP rows, the Kokkos 4.6 build of .ci/run):
#   docs/results/host-pipeline/run.sh [BUILD_DIR] [KOKKOS46_BUILD_DIR] [OUT_DIR]
# Each file OUT_DIR/<case>.txt is the tool's own output; before/ holds main 9683a80's.
set -euo pipefail
build=${1:-build}
kokkos46=${2:-build-kokkos46}
out=${3:-docs/results/host-pipeline/after}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
bench=$build/hpc/bench/dct-bench
run() {  # run CASE COMMAND...: the command's output to OUT_DIR/CASE.txt and to the terminal
  local case=$1
  shift
  echo "== $case: $*"
  "$@" 2>&1 | tee "$out/$case.txt"
}
# 1 rank: the whole call against a STREAM triad over the same arrays (triad_x), new gradients
# every call, library defaults.
run r1_float_fresh mpiexec -n 1 "$bench" allreduce --sizes 4M,16M,64M,256M,1G --iters 10
run r1_float_cycle mpiexec -n 1 "$bench" allreduce --sizes 4M,64M --iters 10 --input cycle
run r1_float_slow mpiexec -n 1 "$bench" allreduce --sizes 4M,64M --iters 10 --input slow
run r1_double_fresh mpiexec -n 1 "$bench" allreduce --sizes 8M,32M,128M,512M --iters 10 \
  --type double
# 4 ranks against MPI_Allreduce: TCP loopback and shared memory.
run r4_tcp_fresh mpiexec -n 4 --mca btl tcp,self "$bench" allreduce --sizes 16M,64M --iters 10
run r4_shm_fresh mpiexec -n 4 "$bench" allreduce --sizes 1M,4M,16M --iters 10
# The per-call overhead at 1,000 floats (median of 20,000 calls, MPI_Allreduce timed alternately).
run overhead_np2 mpiexec -n 2 "$bench" allreduce --sizes 4000 --iters 20000 --warmup 500 \
  --input cycle --stat median
run overhead_np4 mpiexec -n 4 "$bench" allreduce --sizes 4000 --iters 20000 --warmup 500 \
  --input cycle --stat median
# DCT-MP over TCP: top-k fp16 at keep 0.05, and the error-bounded compressor.
run mp_tcp mpiexec -n 4 --mca btl tcp,self "$bench" alltoallv --rows 2048 --d 256 --keep 0.05 \
  --values fp16 --iters 20
run eb_tcp mpiexec -n 4 --mca btl tcp,self "$bench" alltoallv --rows 2048 --d 256 \
  --compressor error_bounded --keep 0.01 --iters 20
# The DLRM demo on a 10 Gbit/s shaped link (root: a private network namespace; docs/netem.md).
run dlrm_netem_10gbit hpc/netem/dct-netem --rate 10gbit -- mpiexec -n 4 \
  "$build/examples/dlrm/dct-dlrm" --modes dense,dct --epochs 5 --quiet
# Kokkos 4.6 OpenMP: the same call at 1 and at 2 threads, 64M floats.
if [ -x "$kokkos46/hpc/bench/dct-bench" ]; then
  for threads in 1 2; do
    OMP_NUM_THREADS=$threads OMP_PROC_BIND=false OMP_WAIT_POLICY=passive run \
      "openmp_${threads}threads" mpiexec -n 1 --bind-to none -x OMP_NUM_THREADS -x OMP_PROC_BIND \
      -x OMP_WAIT_POLICY "$kokkos46/hpc/bench/dct-bench" allreduce --sizes 256M --iters 10
  done
fi
