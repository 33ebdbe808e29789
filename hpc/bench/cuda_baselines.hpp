// CUDA baselines of `dct-bench device` compiled by nvcc (cuda_baselines.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace dct::bench {

/// Throws std::runtime_error naming `what` and the CUDA error unless `error` is cudaSuccess.
void check_cuda(cudaError_t error, const char *what);

/// Best time in milliseconds of `repetitions` CUB radix sorts (cub::DeviceRadixSort::SortKeys,
/// 32-bit keys, after one warm-up) of the n keys at `device_keys` (not modified).
double cub_radix_sort_ms(const float *device_keys, std::size_t n, int repetitions);

}  // namespace dct::bench
