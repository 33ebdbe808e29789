// Instantiates the Kokkos backend for each execution space that Kokkos was built with. With a
// device-enabled Kokkos this file is compiled for the device too (KOKKOS_LAMBDA is
// __host__ __device__), which is what checks that the kernels are portable.
#include "kokkos_spaces.hpp"

#include <Kokkos_Core.hpp>

#include <string>

#include "kokkos_backend.hpp"

namespace dct::detail::test {
namespace {

template <typename Exec>
Backend *instance() {
  static backends::kokkos::KokkosBackend<Exec> backend;
  return &backend;
}

}  // namespace

Backend *kokkos_space_backend(const char *name) {
  const std::string space(name);
#if defined(KOKKOS_ENABLE_SERIAL)
  if (space == "Serial") return instance<Kokkos::Serial>();
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  if (space == "OpenMP") return instance<Kokkos::OpenMP>();
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  if (space == "Cuda") return instance<Kokkos::Cuda>();
#endif
#if defined(KOKKOS_ENABLE_HIP)
  if (space == "HIP") return instance<Kokkos::HIP>();
#endif
  return nullptr;
}

int host_simd_tiers() {
  return backends::kokkos::detect_host_simd() == HostSimd::avx512 ? 2 : 1;
}

void set_host_simd_tier(int tier) {
  backends::kokkos::host_simd = static_cast<HostSimd>(tier);
}

}  // namespace dct::detail::test
