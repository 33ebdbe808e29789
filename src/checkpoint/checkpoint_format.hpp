// The building blocks of the checkpoint file format (docs/checkpoint-format.md) that the
// writer and the reader share: its constants, and in namespace h5 owned HDF5 identifiers and
// the reading and writing of the attributes and per-rank datasets a checkpoint holds. Every
// failure is a dct error with a checkpoint code. (The checksums are in checkpoint.hpp, which
// dct-ckpt sees.)
//
// Private header of src/: include it from the checkpoint sources only.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_seal.hpp"
#include "core/error.hpp"

namespace dct::detail {

inline constexpr const char *kCheckpointFormatName = "dct-checkpoint";
// Version 6: the last update of dct_momentum_result=gradient requests (dataset "last_update",
// attribute "has_last_update", absent = 0), under the row's checksum after the state row.
// Version 5: DCT-MP requests (kinds "alltoallv", "alltoallv_backward", count 0) and a per-rank
// state row (dataset "state", attribute "state_words") under the row's checksum. Version 4: the
// momentum velocity of dct_momentum requests (dataset "velocity", attribute
// "has_velocity"), under the row's checksum. Version 3: a seal (a CRC-32 of the whole file) in a
// 512-byte user block, checked before HDF5 opens the file (checkpoint_seal.hpp). Version 2: a row's
// CRC-32 also covers its tau and the call counter (version 1: the residual only; still read, with
// tau and the counter range-checked). Versions 1 and 2 are read unsealed.
inline constexpr std::int64_t kCheckpointFormatVersion = 6;
inline constexpr std::int64_t kCheckpointOldestReadableVersion = 1;
inline constexpr const char *kCheckpointRequestsGroup = "requests";

namespace h5 {

/// Silences HDF5's error printing while dct calls it (dct reports errors itself), and gives
/// the application its own handler back afterwards.
class QuietHdf5 {
 public:
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &handler_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, handler_, data_); }
  QuietHdf5(const QuietHdf5 &) = delete;
  QuietHdf5 &operator=(const QuietHdf5 &) = delete;

 private:
  H5E_auto2_t handler_ = nullptr;
  void *data_ = nullptr;
};

/// Owns an HDF5 identifier; a negative identifier is an error reported with `code`.
class Handle {
 public:
  Handle(hid_t id, herr_t (*closer)(hid_t), int code, const std::string &what)
      : id_(id), close_(closer) {
    require(id >= 0, code, what);
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  hid_t get() const { return id_; }
  /// Closes now and reports failure: closing a parallel file is where its data is flushed.
  void close(int code, const std::string &what) {
    const herr_t rc = close_(id_);
    id_ = -1;
    require(rc >= 0, code, what);
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void check_h5(herr_t rc, int code, const std::string &what);

/// The HDF5 types of a float (4) or double (8) element, in memory and in the file.
hid_t memory_type(int element_size);
hid_t file_type(int element_size);

// --- attributes: scalars written with their stored type, read back checked -----------------

void write_attribute(hid_t object, const char *name, std::int64_t value);
void write_attribute(hid_t object, const char *name, double value);
/// A fixed-length, null-padded string (h5dump shows it as text).
void write_attribute(hid_t object, const char *name, const std::string &value);

/// Throws DCT_ERR_CKPT_FORMAT if the attribute is missing or not of the expected kind.
std::int64_t read_int(hid_t object, const char *name);
double read_double(hid_t object, const char *name);
std::string read_string(hid_t object, const char *name);

// --- datasets: one row or one element per rank ----------------------------------------------

/// Creates `name` with shape [ranks, row_length] (`matrix`) or [ranks] and writes this rank's
/// row (or element) collectively with the dataset transfer list `transfer`; `row` nullptr
/// writes nothing (DCT_Checkpoint_isave's writer puts the bytes there later: no fill values
/// are ever written, so both leave the same bytes). Returns where the dataset's raw data lies
/// in the file (from its first byte, the user block included; empty when HDF5 cannot say: not
/// contiguous, not allocated).
Extent write_rank_row(hid_t group, const char *name, hid_t stored, hid_t memory, int ranks,
                      int rank, hsize_t row_length, bool matrix, const void *row, hid_t transfer);

/// Reads a whole 1-D dataset of `length` elements, checking its shape.
template <typename Value>
std::vector<Value> read_vector(hid_t group, const char *name, hid_t memory, hsize_t length) {
  Handle dataset(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose, DCT_ERR_CKPT_FORMAT,
                 std::string("dataset '") + name + "' is missing");
  Handle space(H5Dget_space(dataset.get()), H5Sclose, DCT_ERR_CKPT_FORMAT, "H5Dget_space failed");
  hsize_t dims[2] = {0, 0};
  require(H5Sget_simple_extent_ndims(space.get()) == 1 &&
              H5Sget_simple_extent_dims(space.get(), dims, nullptr) == 1 && dims[0] == length,
          DCT_ERR_CKPT_FORMAT, std::string("dataset '") + name + "' has the wrong shape");
  std::vector<Value> values(length);
  check_h5(H5Dread(dataset.get(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
           DCT_ERR_CKPT_TRUNCATED, std::string("cannot read dataset ") + name);
  return values;
}

}  // namespace h5
}  // namespace dct::detail
