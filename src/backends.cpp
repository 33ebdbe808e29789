// Which backend runs the kernels of a call.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "error.hpp"
#include "kernels.hpp"

namespace dct::detail::kernels {
namespace {

Backend *compiled(DCT_Backend kind) {
  switch (kind) {
    case DCT_BACKEND_KOKKOS:
      return kokkos_backend();
    case DCT_BACKEND_CUDA:
      return cuda_backend();
    case DCT_BACKEND_HIP:
      return hip_backend();
    default:
      return nullptr;
  }
}

}  // namespace

Backend &backend_for(const void *buffer, DCT_Backend requested) {
  Backend *gpu_owner = nullptr;
  for (Backend *gpu : {cuda_backend(), hip_backend()})
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

template <typename T>
T sampled_kth_largest_abs(Backend &backend, const T *send, const T *residual, std::size_t n,
                          std::size_t k, std::size_t m, std::uint64_t seed, std::vector<T> &scratch,
                          Stream stream) {
  require(m >= 1 && m <= n && k >= 1 && k <= n, DCT_ERR_INTERNAL,
          "sampled_kth_largest_abs: bad sizes");
  scratch.resize(m);
  backend.gather_abs_sample(send, residual, n, m, seed, scratch.data(), stream);
  for (T &v : scratch)
    if (v != v) v = std::numeric_limits<T>::infinity();  // NaN ranks above everything
  std::size_t rank = static_cast<std::size_t>(std::ceil(double(k) * double(m) / double(n)));
  rank = rank < 1 ? 1 : (rank > m ? m : rank);
  std::nth_element(scratch.begin(), scratch.begin() + (rank - 1), scratch.end(), std::greater<T>());
  return scratch[rank - 1];
}
template float sampled_kth_largest_abs(Backend &, const float *, const float *, std::size_t,
                                       std::size_t, std::size_t, std::uint64_t,
                                       std::vector<float> &, Stream);
template double sampled_kth_largest_abs(Backend &, const double *, const double *, std::size_t,
                                        std::size_t, std::size_t, std::uint64_t,
                                        std::vector<double> &, Stream);

}  // namespace dct::detail::kernels
