#!/usr/bin/env bash
# The prepared GPU check (issue 39): one command on a lent GPU node (the device tool), from the
# repository root, after the builds were made and packed on the CI machine:
#
#   # here (CUDA toolkit in /usr/local/cuda; Kokkos from .ci/kokkos.sh --backend cuda):
#   cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DDCT_ENABLE_CUDA=ON \
#     -DCMAKE_CUDA_ARCHITECTURES=90 -DDCT_BUILD_TESTS=ON -DDCT_WERROR=ON
#   cmake --build build-cuda -j && .ci/gpu/pack.sh build-cuda .gpu
#   (optional) build-kokkos-cuda as in .ci/run, then .ci/gpu/pack.sh build-kokkos-cuda .gpu-kokkos
#   # there (carry .gpu and .gpu-kokkos; OUT is where the raw outputs go):
#   OUT=$OUT .ci/gpu/check.sh
#
# Runs, each under its own time limit and writing its raw output to $OUT/<step>.txt: the suite's
# tests that can run there, compute-sanitizer memcheck of the CUDA kernel tests, the Kokkos
# core's kernel tests on Kokkos::Cuda (when .gpu-kokkos came along), dct-bench kernels on the
# CUDA backend and dct-bench device at 1, 2 and 4 ranks (dct, staged MPI_Allreduce, NCCL).
# A failing step does not stop the others; $OUT/summary.txt lists each one's exit code and
# seconds. Sized for about 6 minutes on an H100 (earlier runs: suite 34 s, benches ~2 min).
set -uo pipefail
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
# shellcheck source=.ci/gpu/setup.sh
source .ci/gpu/setup.sh .gpu build-cuda > "$out/setup.txt" 2>&1
if [ -f .gpu-kokkos/build.tar.gz ]; then  # its libraries (Kokkos 4.6 for CUDA) and build tree
  tar -xzf .gpu-kokkos/deps.tar.gz -C / ./opt/dctdeps/lib >> "$out/setup.txt" 2>&1
  [ -d build-kokkos-cuda ] || tar -xzf .gpu-kokkos/build.tar.gz -C "$(pwd -P)"
fi
: > "$out/summary.txt"
step() {  # step NAME LIMIT-SECONDS COMMAND...
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  rc=$?
  echo "$name: exit $rc in $(($(date +%s) - start)) s" | tee -a "$out/summary.txt"
}
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
git log -1 --oneline > "$out/commit.txt" 2>&1 || true
step ctest 150 ctest --test-dir build-cuda -E 'install|dlrm|netem|slurm|median' -j 8 \
  --output-on-failure
step memcheck 90 compute-sanitizer --tool memcheck build-cuda/tests/unit/dct_unit_tests \
  --gtest_filter='Kernels/cuda*'
# The whole call under memcheck, once: filter, trim, the device block codec, the sum (1 rank:
# NCCL's communicator of one and MPI's staging both run).
step memcheck-device 90 compute-sanitizer --tool memcheck \
  build-cuda/tests/mpi/dct_device_buffer_tests \
  --gtest_filter='DeviceBuffers.CompressedSums*:DeviceBuffers.PeerError*'
if [ -x build-kokkos-cuda/tests/unit/dct_unit_tests ]; then
  step kokkos-cuda 90 build-kokkos-cuda/tests/unit/dct_unit_tests \
    --gtest_filter='Kernels/kokkos_Cuda*:Selection/kokkos_Cuda*' --gtest_brief=1
fi
step kernels-float 90 mpiexec -n 1 build-cuda/hpc/bench/dct-bench kernels --backend cuda \
  --sizes 4M-1G --seconds 0.2
# dct_transport=auto: NCCL at 1 rank, MPI where NCCL refuses two ranks on one GPU (the
# header says which); and MPI at 1 rank for the difference the transport makes.
for ranks in 1 2 4; do
  step "device-np$ranks" 60 mpiexec -n "$ranks" build-cuda/hpc/bench/dct-bench device \
    --sizes 4M,64M,256M
done
step device-np1-mpi 40 mpiexec -n 1 build-cuda/hpc/bench/dct-bench device --sizes 4M,64M,256M \
  --transport mpi --no-nccl
