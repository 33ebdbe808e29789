// The HIP side of backends/common/cuda_hip/: the runtime API (memory, streams, pointer
// attributes, errors), the scan primitive (rocPRIM) and the GPU-aware MPI query, under the
// names the common code uses. Included by backends/hip/hip_kernels.hip only.
#pragma once

#include <hip/hip_runtime.h>
#include <mpi.h>

#include <cstddef>
#include <rocprim/rocprim.hpp>  // the umbrella: device_scan.hpp alone misses <iostream> (5.3)

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI 5: MPIX_ROCM_AWARE_SUPPORT, MPIX_Query_rocm_support()
#endif

#include "dct/dct.h"

#define DCT_GPU_NAMESPACE hip
#define DCT_GPU_NAME "HIP"
#define DCT_GPU_KIND DCT_BACKEND_HIP

namespace dct::detail::hip::api {

using error_t = hipError_t;
using stream_t = hipStream_t;
constexpr error_t success = hipSuccess;

inline const char *error_name(error_t error) {
  return hipGetErrorName(error);
}
inline const char *error_string(error_t error) {
  return hipGetErrorString(error);
}
/// Returns and clears the last error of this thread (sticky errors stay in the context).
inline error_t get_last_error() {
  return hipGetLastError();
}
inline bool is_out_of_memory(error_t error) {
  return error == hipErrorOutOfMemory;
}
/// Errors after which the device context is corrupt and only a new process recovers.
inline bool is_sticky(error_t error) {
  switch (error) {
    case hipErrorIllegalAddress:
    case hipErrorLaunchFailure:
    case hipErrorAssert:
    case hipErrorECCNotCorrectable:
    case hipErrorLaunchTimeOut:
    case hipErrorUnknown:
      return true;
    default:
      return false;
  }
}

inline error_t device_count(int *count) {
  return hipGetDeviceCount(count);
}
inline error_t malloc_device(void **pointer, std::size_t bytes) {
  return hipMalloc(pointer, bytes);
}
inline error_t free_device(void *pointer) {
  return hipFree(pointer);
}
inline error_t malloc_host(void **pointer, std::size_t bytes) {
  return hipHostMalloc(pointer, bytes, hipHostMallocDefault);
}
inline error_t free_host(void *pointer) {
  return hipHostFree(pointer);
}
/// Any direction; the runtime infers it from the pointers (unified virtual addressing).
inline error_t copy_async(void *destination, const void *source, std::size_t bytes,
                          stream_t stream) {
  return hipMemcpyAsync(destination, source, bytes, hipMemcpyDefault, stream);
}
inline error_t zero_async(void *destination, std::size_t bytes, stream_t stream) {
  return hipMemsetAsync(destination, 0, bytes, stream);
}
inline error_t stream_create(stream_t *stream) {
  return hipStreamCreateWithFlags(stream, hipStreamNonBlocking);
}
inline error_t stream_synchronize(stream_t stream) {
  return hipStreamSynchronize(stream);
}

/// Whether `pointer` is device or managed memory. HIP before 6.0 answers hipErrorInvalidValue
/// for host memory it does not know (the caller clears it); 6.0 renamed memoryType to type.
inline error_t is_device_pointer(const void *pointer, bool *device) {
  hipPointerAttribute_t attributes{};
  const error_t error = hipPointerGetAttributes(&attributes, pointer);
#if HIP_VERSION_MAJOR >= 6
  *device = error == hipSuccess &&
            (attributes.type == hipMemoryTypeDevice || attributes.type == hipMemoryTypeManaged);
#else
  *device = error == hipSuccess &&
            (attributes.memoryType == hipMemoryTypeDevice || attributes.isManaged != 0);
#endif
  return error;
}

/// out[i] = flag(0) + ... + flag(i) for a functor `flag` of the index (read through a transform
/// iterator, never stored); with temporary == nullptr only sets temporary_bytes.
template <typename Flag>
error_t inclusive_sum_of(void *temporary, std::size_t &temporary_bytes, Flag flag, std::size_t n,
                         unsigned int *out, stream_t stream) {
  const auto in =
      rocprim::make_transform_iterator(rocprim::make_counting_iterator<std::size_t>(0), flag);
  return rocprim::inclusive_scan(temporary, temporary_bytes, in, out, n,
                                 rocprim::plus<unsigned int>(), stream);
}

/// The MPI library's own answer (Open MPI 5's ROCm extension, MPICH's MPIX_GPU_query_support);
/// false for MPI libraries that declare neither.
inline bool mpi_accepts_device_memory() {
#if defined(MPIX_ROCM_AWARE_SUPPORT)  // Open MPI
  return MPIX_Query_rocm_support() == 1;
#elif defined(MPIX_GPU_SUPPORT_HIP)  // MPICH 4 (and derived MPIs)
  int supported = 0;
  return MPIX_GPU_query_support(MPIX_GPU_SUPPORT_HIP, &supported) == MPI_SUCCESS && supported != 0;
#else
  return false;
#endif
}

}  // namespace dct::detail::hip::api
