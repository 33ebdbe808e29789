// Compiled when the CUDA backend is not: dct still links, and asking for it by name gives
// DCT_ERR_NOT_COMPILED (see backends::backend_for).
#include "core/compute_backend.hpp"

namespace dct::detail::backends {

Backend *cuda_backend() {
  return nullptr;
}

}  // namespace dct::detail::backends
