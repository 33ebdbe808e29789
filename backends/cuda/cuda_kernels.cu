// The native CUDA backend: the common CUDA/HIP source compiled by nvcc against CUDA and CUB.
#include "cuda_api.hpp"  // first: it selects the CUDA names for the common code

#include "common/cuda_hip/cuda_hip_backend.hpp"

namespace dct::detail::backends {

Backend *cuda_backend() {
  // Never destroyed: static destructors may run after the CUDA runtime has been unloaded.
  static Backend *const backend = new cuda::GpuBackend();
  return backend;
}

}  // namespace dct::detail::backends
