// The Kokkos backend (backends/kokkos/kokkos_backend.hpp) instantiated for each execution space of
// this build's Kokkos, for the kernel tests: the same source the library runs on its default host
// space, checked on every space the build has.
#pragma once

#include "core/compute_backend.hpp"

namespace dct::detail::test {

/// The Kokkos backend as a Backend on the execution space named `name` ("Serial", "OpenMP",
/// "Cuda", "HIP"), or nullptr when this build's Kokkos does not have that space.
Backend *kokkos_space_backend(const char *name);

/// The host SIMD tiers of the Kokkos backend's selection pass that this CPU runs (backends/kokkos/
/// simd.hpp: 1, the portable one, or 2 with AVX-512), and the one the kernels take from now on
/// (0 .. tiers - 1; the best by default).
int host_simd_tiers();
void set_host_simd_tier(int tier);

}  // namespace dct::detail::test
