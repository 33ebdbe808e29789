// Which backend runs the kernels of a call.
#include <string>

#include "core/compute_backend.hpp"
#include "core/device_transport.hpp"
#include "core/error.hpp"
#include "core/test_hooks.hpp"

namespace dct::detail::backends {
namespace {

Backend *cuda() {
#ifdef DCT_TESTING
  if (testing::emulated_gpu != nullptr) return testing::emulated_gpu;
#endif
  return cuda_backend();
}

Backend *compiled(DCT_Backend kind) {
  switch (kind) {
    case DCT_BACKEND_KOKKOS:
      return kokkos_backend();
    case DCT_BACKEND_CUDA:
      return cuda();
    case DCT_BACKEND_HIP:
      return hip_backend();
    default:
      return nullptr;
  }
}

}  // namespace

Backend &backend_for(const void *buffer, DCT_Backend requested) {
  Backend *gpu_owner = nullptr;
  for (Backend *gpu : {cuda(), hip_backend()})
    if (gpu && gpu->available() && buffer && gpu->owns(buffer)) gpu_owner = gpu;
  if (requested == DCT_BACKEND_AUTO) return gpu_owner ? *gpu_owner : *kokkos_backend();

  Backend *backend = compiled(requested);
  require(backend != nullptr, DCT_ERR_NOT_COMPILED,
          std::string("dct_backend=") + DCT_Backend_name(requested) +
              ": this build of dct does not include that backend");
  require(backend->available(), DCT_ERR_NOT_COMPILED,
          std::string("dct_backend=") + DCT_Backend_name(requested) +
              ": compiled, but no usable device on this node");
  if (backend->kind() == DCT_BACKEND_KOKKOS) {
    require(gpu_owner == nullptr, DCT_ERR_BUFFER,
            "dct_backend=kokkos runs on the host, but the buffer is device memory");
  } else {
    require(gpu_owner == backend, DCT_ERR_BUFFER,
            std::string("dct_backend=") + DCT_Backend_name(requested) +
                " needs buffers in that device's memory");
  }
  return *backend;
}

bool device_transport_compiled() {
#ifdef DCT_TESTING
  if (testing::make_device_transport != nullptr) return true;
#endif
  return nccl_compiled();
}

std::unique_ptr<DeviceTransport> make_device_transport(MPI_Comm comm, std::string &why) {
#ifdef DCT_TESTING
  if (testing::make_device_transport != nullptr) return testing::make_device_transport(comm);
#endif
  return nccl_transport(comm, why);
}

}  // namespace dct::detail::backends
