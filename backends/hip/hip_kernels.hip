// The native HIP backend: the common CUDA/HIP source compiled by hipcc against HIP and rocPRIM.
#include "hip_api.hpp"  // first: it selects the HIP names for the common code

#include "common/cuda_hip/cuda_hip_backend.hpp"

namespace dct::detail::backends {

Backend *hip_backend() {
  // Never destroyed: static destructors may run after the HIP runtime has been unloaded.
  static Backend *const backend = new hip::GpuBackend();
  return backend;
}

}  // namespace dct::detail::backends
