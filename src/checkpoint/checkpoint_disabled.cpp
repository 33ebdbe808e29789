// Built instead of the checkpoint_*.cpp sources when dct is configured without HDF5: the entry
// points link and say so.
#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"

namespace dct::detail {

void checkpoint_save(MPI_Comm, const std::string &) {
  fail(DCT_ERR_NOT_COMPILED, "dct was built without HDF5 (DCT_ENABLE_HDF5=OFF)");
}

void checkpoint_load(MPI_Comm, const std::string &) {
  fail(DCT_ERR_NOT_COMPILED, "dct was built without HDF5 (DCT_ENABLE_HDF5=OFF)");
}

}  // namespace dct::detail
