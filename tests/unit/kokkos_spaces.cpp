// Instantiates the Kokkos core for each execution space that Kokkos was built with. With a
// device-enabled Kokkos this file is compiled for the device too (KOKKOS_LAMBDA is
// __host__ __device__), which is what checks that the kernels are portable.
#include "kokkos_spaces.hpp"

#include <Kokkos_Core.hpp>

#include <string>

#include "backend.hpp"

namespace dct::detail::test {

Backend *kokkos_space_backend(const char *name) {
  const std::string space(name);
#if defined(KOKKOS_ENABLE_SERIAL)
  if (space == "Serial") {
    static kernels::kokkos::KokkosBackend<Kokkos::Serial> backend;
    return &backend;
  }
#endif
#if defined(KOKKOS_ENABLE_OPENMP)
  if (space == "OpenMP") {
    static kernels::kokkos::KokkosBackend<Kokkos::OpenMP> backend;
    return &backend;
  }
#endif
#if defined(KOKKOS_ENABLE_CUDA)
  if (space == "Cuda") {
    static kernels::kokkos::KokkosBackend<Kokkos::Cuda> backend;
    return &backend;
  }
#endif
#if defined(KOKKOS_ENABLE_HIP)
  if (space == "HIP") {
    static kernels::kokkos::KokkosBackend<Kokkos::HIP> backend;
    return &backend;
  }
#endif
  return nullptr;
}

}  // namespace dct::detail::test
