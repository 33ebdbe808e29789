// Built instead of the checkpoint_*.cpp sources when dct is configured without HDF5: the entry
// points link and say so.
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"

namespace dct::detail {
namespace {
constexpr const char *kNoHdf5 = "dct was built without HDF5 (DCT_ENABLE_HDF5=OFF)";
}

void checkpoint_save(MPI_Comm, const std::string &) {
  fail(DCT_ERR_NOT_COMPILED, kNoHdf5);
}

void checkpoint_load(MPI_Comm, const std::string &) {
  fail(DCT_ERR_NOT_COMPILED, kNoHdf5);
}

PendingSave *checkpoint_isave(MPI_Comm, const std::string &) {
  fail(DCT_ERR_NOT_COMPILED, kNoHdf5);
}

// No save is ever pending without HDF5: DCT_Checkpoint_wait refuses every handle first.
void checkpoint_wait(PendingSave *) {
  fail(DCT_ERR_NOT_COMPILED, kNoHdf5);
}
bool is_pending_save(const PendingSave *) {
  return false;
}
std::shared_ptr<CommContext> pending_save_context(const PendingSave *) {
  return nullptr;
}

}  // namespace dct::detail
