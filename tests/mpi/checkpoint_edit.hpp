// Editing a saved checkpoint the way a corruption the seal cannot see would: a value changed
// inside a dataset, then the file sealed again (checkpoint_seal.hpp), so that only the row
// checksums stand between the edit and the live state.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "checkpoint/checkpoint_seal.hpp"

namespace dct::test {

/// Rank 0 adds `delta` to element `index` (row-major) of the floating-point dataset `dataset`
/// of the checkpoint at `path` and seals the file again; every rank waits for it.
inline void add_to_saved_value(const std::string &path, const char *dataset, std::size_t index,
                               double delta) {
  int me = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (me == 0) {
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t data = H5Dopen2(file, dataset, H5P_DEFAULT);
    const hid_t space = H5Dget_space(data);
    std::vector<double> values(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space)));
    H5Dread(data, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    values.at(index) += delta;
    H5Dwrite(data, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Sclose(space);
    H5Dclose(data);
    H5Fclose(file);
    detail::seal_file(path);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace dct::test
