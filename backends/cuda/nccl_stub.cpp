// Compiled when NCCL is not (no CUDA backend, DCT_ENABLE_NCCL=OFF or no NCCL found): GPU
// requests then move their blocks over MPI, and dct_transport=nccl gives DCT_ERR_NOT_COMPILED.
#include "core/device_transport.hpp"

namespace dct::detail::backends {

bool nccl_compiled() {
  return false;
}

std::unique_ptr<DeviceTransport> nccl_transport(MPI_Comm, std::string &why) {
  why = "this build of dct does not include NCCL (configure with -DDCT_ENABLE_CUDA=ON and NCCL)";
  return nullptr;
}

}  // namespace dct::detail::backends
