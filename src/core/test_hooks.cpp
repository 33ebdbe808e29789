// Compiled into dct_testing only (see test_hooks.hpp).
#include "core/test_hooks.hpp"

#include <cstdlib>

namespace dct::detail::testing {

void (*tamper_allreduce_indices)(WireIndex *, std::size_t) = nullptr;
void (*tamper_forward_message)(int, std::byte *, std::size_t) = nullptr;
Backend *emulated_gpu = nullptr;
std::unique_ptr<DeviceTransport> (*make_device_transport)(MPI_Comm) = nullptr;
std::size_t max_mpi_count = 0;
std::size_t point_to_point_exchanges = 0;

void crash_in_checkpoint_save(int rank) {
  if (const char *crash = std::getenv("DCT_TEST_CRASH_IN_CHECKPOINT_SAVE"))
    if (std::atoi(crash) == rank) std::_Exit(42);
}

void crash_in_checkpoint_writer(int rank) {
  if (const char *crash = std::getenv("DCT_TEST_CRASH_IN_CHECKPOINT_WRITER"))
    if (std::atoi(crash) == rank) std::_Exit(42);
}

bool fail_in_checkpoint_writer(int rank) {
  const char *fail = std::getenv("DCT_TEST_FAIL_IN_CHECKPOINT_WRITER");
  return fail != nullptr && std::atoi(fail) == rank;
}

}  // namespace dct::detail::testing
