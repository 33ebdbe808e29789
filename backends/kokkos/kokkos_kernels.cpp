// The library's Kokkos backend: the Kokkos backend (kokkos_backend.hpp and the headers it includes)
// on Kokkos' default host execution space (Serial, OpenMP or Threads, whichever Kokkos was built
// with), on host memory; and the runtime that the library starts when the application did not.
#include <Kokkos_Core.hpp>

#include "core/compute_backend.hpp"
#include "core/error.hpp"
#include "kokkos_backend.hpp"

namespace dct::detail::backends {

namespace {
kokkos::KokkosBackend<Kokkos::DefaultHostExecutionSpace> &host_backend() {
  static kokkos::KokkosBackend<Kokkos::DefaultHostExecutionSpace> backend;
  return backend;
}
}  // namespace

Backend *kokkos_backend() {
  return &host_backend();
}

bool initialize_runtime() {
  if (Kokkos::is_initialized()) return false;
#if KOKKOS_VERSION >= 40000
  require(!Kokkos::is_finalized(), DCT_ERR_NOT_INITIALIZED,
          "Kokkos was already finalized by the application; dct cannot restart it");
#endif
  Kokkos::initialize();
  return true;
}

void finalize_runtime() {
  host_backend().release();
  if (Kokkos::is_initialized()) Kokkos::finalize();
}

}  // namespace dct::detail::backends
