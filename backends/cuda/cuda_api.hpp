// The CUDA side of backends/common/cuda_hip/: the runtime API (memory, streams, pointer
// attributes, errors), the scan primitive (CUB from the CUDA toolkit) and the GPU-aware MPI
// query, under the names the common code uses. Included by backends/cuda/cuda_kernels.cu only.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>

#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <cstddef>
#include <cub/device/device_scan.cuh>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support()
#endif

#include "dct/dct.h"

// The namespace the common code is compiled into, so that a build with both GPU backends has
// no duplicate symbols.
#define DCT_GPU_NAMESPACE cuda
#define DCT_GPU_NAME "CUDA"
#define DCT_GPU_KIND DCT_BACKEND_CUDA

namespace dct::detail::cuda::api {

using error_t = cudaError_t;
using stream_t = cudaStream_t;
constexpr error_t success = cudaSuccess;

inline const char *error_name(error_t error) {
  return cudaGetErrorName(error);
}
inline const char *error_string(error_t error) {
  return cudaGetErrorString(error);
}
/// Returns and clears the last error of this thread (sticky errors stay in the context).
inline error_t get_last_error() {
  return cudaGetLastError();
}
inline bool is_out_of_memory(error_t error) {
  return error == cudaErrorMemoryAllocation;
}
/// Errors after which the CUDA context is corrupt: every later call of this process fails,
/// and only a new process recovers (CUDA runtime API, "sticky" errors).
inline bool is_sticky(error_t error) {
  switch (error) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorUnknown:
      return true;
    default:
      return false;
  }
}

inline error_t device_count(int *count) {
  return cudaGetDeviceCount(count);
}
inline error_t malloc_device(void **pointer, std::size_t bytes) {
  return cudaMalloc(pointer, bytes);
}
inline error_t free_device(void *pointer) {
  return cudaFree(pointer);
}
inline error_t malloc_host(void **pointer, std::size_t bytes) {
  return cudaMallocHost(pointer, bytes);
}
inline error_t free_host(void *pointer) {
  return cudaFreeHost(pointer);
}
/// Any direction; the runtime infers it from the pointers (unified virtual addressing).
inline error_t copy_async(void *destination, const void *source, std::size_t bytes,
                          stream_t stream) {
  return cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, stream);
}
inline error_t zero_async(void *destination, std::size_t bytes, stream_t stream) {
  return cudaMemsetAsync(destination, 0, bytes, stream);
}
inline error_t stream_create(stream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking);
}
inline error_t stream_synchronize(stream_t stream) {
  return cudaStreamSynchronize(stream);
}

/// Whether `pointer` is device or managed memory; an error for pointers the runtime does not
/// know on some versions (the caller clears it).
inline error_t is_device_pointer(const void *pointer, bool *device) {
  cudaPointerAttributes attributes{};
  const error_t error = cudaPointerGetAttributes(&attributes, pointer);
  *device = error == cudaSuccess &&
            (attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged);
  return error;
}

/// out[i] = flag(0) + ... + flag(i) for a functor `flag` of the index (read through a transform
/// iterator, never stored); with temporary == nullptr only sets temporary_bytes.
template <typename Flag>
error_t inclusive_sum_of(void *temporary, std::size_t &temporary_bytes, Flag flag, std::size_t n,
                         unsigned int *out, stream_t stream) {
  const auto in = thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0), flag);
  return cub::DeviceScan::InclusiveSum(temporary, temporary_bytes, in, out, n, stream);
}

/// The MPI library's own answer (Open MPI's CUDA extension, MPICH's MPIX_GPU_query_support);
/// false for MPI libraries that declare neither.
inline bool mpi_accepts_device_memory() {
#if defined(MPIX_CUDA_AWARE_SUPPORT)  // Open MPI
  return MPIX_Query_cuda_support() == 1;
#elif defined(MPIX_GPU_SUPPORT_CUDA)  // MPICH 4 (and derived MPIs)
  int supported = 0;
  return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &supported) == MPI_SUCCESS && supported != 0;
#else
  return false;
#endif
}

}  // namespace dct::detail::cuda::api
