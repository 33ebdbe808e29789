// The Kokkos core (backends/kokkos/backend.hpp) instantiated for each execution space of this
// build's Kokkos, for the kernel tests: the same source the library runs on its default host
// space, checked on every space the build has.
#pragma once

#include "kernels.hpp"

namespace dct::detail::test {

/// The Kokkos core as a Backend on the execution space named `name` ("Serial", "OpenMP",
/// "Cuda", "HIP"), or nullptr when this build's Kokkos does not have that space.
Backend *kokkos_space_backend(const char *name);

}  // namespace dct::detail::test
