// The CUDA baselines of `dct-bench device` (device_bench.cpp), compiled by nvcc: CUB's radix
// sort of the keys the exact selection ranks, timed with events on the device; and the CUDA
// error check the bench shares.
#include <cub/device/device_radix_sort.cuh>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda_baselines.hpp"

namespace dct::bench {

void check_cuda(cudaError_t error, const char *what) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
}

double cub_radix_sort_ms(const float *device_keys, std::size_t n, int repetitions) {
  // The same keys the selection ranks: the bits of |x| as unsigned integers.
  std::uint32_t *keys_in = nullptr, *keys_out = nullptr;
  void *scratch = nullptr;
  std::size_t scratch_bytes = 0;
  check_cuda(cudaMalloc(&keys_in, n * sizeof(std::uint32_t)), "cudaMalloc");
  check_cuda(cudaMalloc(&keys_out, n * sizeof(std::uint32_t)), "cudaMalloc");
  check_cuda(cudaMemcpy(keys_in, device_keys, n * sizeof(float), cudaMemcpyDeviceToDevice), "copy");
  check_cuda(cub::DeviceRadixSort::SortKeys(nullptr, scratch_bytes, keys_in, keys_out, n), "sort");
  check_cuda(cudaMalloc(&scratch, scratch_bytes), "cudaMalloc");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "event");
  check_cuda(cudaEventCreate(&stop), "event");
  float best = 1e30f;
  for (int rep = 0; rep <= repetitions; ++rep) {  // the first one warms up
    check_cuda(cudaEventRecord(start), "event");
    check_cuda(cub::DeviceRadixSort::SortKeys(scratch, scratch_bytes, keys_in, keys_out, n),
               "sort");
    check_cuda(cudaEventRecord(stop), "event");
    check_cuda(cudaEventSynchronize(stop), "event");
    float ms = 0;
    check_cuda(cudaEventElapsedTime(&ms, start, stop), "event");
    if (rep > 0 && ms < best) best = ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(scratch);
  cudaFree(keys_out);
  cudaFree(keys_in);
  return best;
}

}  // namespace dct::bench
