#include "checkpoint/checkpoint_format.hpp"

#include <libdeflate.h>

#include <algorithm>
#include <cstring>

#include "checkpoint/checkpoint.hpp"

namespace dct::detail {

std::uint32_t row_checksum(const void *residual, std::size_t bytes, double tau, std::int64_t calls,
                           const void *velocity, std::size_t velocity_bytes, const void *state,
                           std::size_t state_bytes, const void *last_update,
                           std::size_t last_update_bytes) {
  std::uint32_t crc = checksum(residual, bytes);
  crc = checksum(velocity, velocity_bytes, crc);
  crc = checksum(state, state_bytes, crc);
  crc = checksum(last_update, last_update_bytes, crc);
  return row_checksum_end(crc, tau, calls);
}

std::uint32_t row_checksum_end(std::uint32_t crc, double tau, std::int64_t calls) {
  std::byte tail[16];  // little endian on every machine dct runs on, as the file is
  std::memcpy(tail, &tau, 8);
  std::memcpy(tail + 8, &calls, 8);
  return checksum(tail, sizeof tail, crc);
}

bool all_zero(const void *data, std::size_t bytes) {
  // In blocks, so that memory that is not zeros is found without reading all of it.
  constexpr std::size_t kBlock = 4096;
  const auto *p = static_cast<const unsigned char *>(data);
  for (std::size_t start = 0; start < bytes; start += kBlock) {
    const std::size_t end = std::min(bytes, start + kBlock);
    std::uint64_t any = 0;
    std::size_t i = start;
    for (; i + 8 <= end; i += 8) {
      std::uint64_t word;
      std::memcpy(&word, p + i, 8);
      any |= word;
    }
    for (; i < end; ++i) any |= p[i];
    if (any != 0) return false;
  }
  return true;
}

std::uint32_t checksum(const void *data, std::size_t bytes, std::uint32_t start) {
  return bytes == 0 ? start : libdeflate_crc32(start, data, bytes);
}

namespace h5 {

void check_h5(herr_t rc, int code, const std::string &what) {
  require(rc >= 0, code, what);
}

hid_t memory_type(int element_size) {
  return element_size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
}
hid_t file_type(int element_size) {
  return element_size == 4 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
}

namespace {

void write_attribute(hid_t object, const char *name, hid_t stored, hid_t memory,
                     const void *value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, DCT_ERR_CKPT_IO, "H5Screate failed");
  Handle attribute(H5Acreate2(object, name, stored, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                   H5Aclose, DCT_ERR_CKPT_IO, std::string("cannot create attribute ") + name);
  check_h5(H5Awrite(attribute.get(), memory, value), DCT_ERR_CKPT_IO,
           std::string("cannot write attribute ") + name);
}

Handle open_attribute(hid_t object, const char *name) {
  require(H5Aexists(object, name) > 0, DCT_ERR_CKPT_FORMAT,
          std::string("attribute '") + name + "' is missing");
  return Handle(H5Aopen(object, name, H5P_DEFAULT), H5Aclose, DCT_ERR_CKPT_FORMAT,
                std::string("cannot open attribute ") + name);
}

/// H5Aread writes every element of an attribute: one that holds other than one value (an
/// array, a null dataspace) would overflow the value read into, or leave it unset.
void require_one_value(const Handle &attribute, const char *name) {
  Handle space(H5Aget_space(attribute.get()), H5Sclose, DCT_ERR_CKPT_FORMAT, "H5Aget_space failed");
  require(H5Sget_simple_extent_npoints(space.get()) == 1, DCT_ERR_CKPT_FORMAT,
          std::string("attribute '") + name + "' does not hold one value");
}

}  // namespace

void write_attribute(hid_t object, const char *name, std::int64_t value) {
  write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}
void write_attribute(hid_t object, const char *name, double value) {
  write_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}
void write_attribute(hid_t object, const char *name, const std::string &value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose, DCT_ERR_CKPT_IO, "H5Tcopy failed");
  check_h5(H5Tset_size(type.get(), std::max<std::size_t>(value.size(), 1)), DCT_ERR_CKPT_IO,
           "H5Tset_size failed");
  check_h5(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), DCT_ERR_CKPT_IO, "H5Tset_strpad failed");
  std::string padded = value;
  padded.resize(std::max<std::size_t>(value.size(), 1), '\0');
  write_attribute(object, name, type.get(), type.get(), padded.data());
}

std::int64_t read_int(hid_t object, const char *name) {
  Handle attribute = open_attribute(object, name);
  require_one_value(attribute, name);
  std::int64_t value = 0;
  check_h5(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value), DCT_ERR_CKPT_FORMAT,
           std::string("cannot read attribute ") + name);
  return value;
}
double read_double(hid_t object, const char *name) {
  Handle attribute = open_attribute(object, name);
  require_one_value(attribute, name);
  double value = 0;
  check_h5(H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value), DCT_ERR_CKPT_FORMAT,
           std::string("cannot read attribute ") + name);
  return value;
}
std::string read_string(hid_t object, const char *name) {
  Handle attribute = open_attribute(object, name);
  require_one_value(attribute, name);
  Handle type(H5Aget_type(attribute.get()), H5Tclose, DCT_ERR_CKPT_FORMAT, "H5Aget_type failed");
  require(H5Tget_class(type.get()) == H5T_STRING && H5Tis_variable_str(type.get()) == 0,
          DCT_ERR_CKPT_FORMAT, std::string("attribute ") + name + " is not a fixed string");
  std::string value(H5Tget_size(type.get()), '\0');
  check_h5(H5Aread(attribute.get(), type.get(), value.data()), DCT_ERR_CKPT_FORMAT,
           std::string("cannot read attribute ") + name);
  value.resize(std::strlen(value.c_str()));
  return value;
}

Extent write_rank_row(hid_t group, const char *name, hid_t stored, hid_t memory, int ranks,
                      int rank, hsize_t row_length, bool matrix, const void *row, hid_t transfer) {
  const hsize_t dims[2] = {static_cast<hsize_t>(ranks), row_length};
  Handle space(H5Screate_simple(matrix ? 2 : 1, dims, nullptr), H5Sclose, DCT_ERR_CKPT_IO,
               "H5Screate_simple failed");
  Handle creation(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  check_h5(H5Pset_obj_track_times(creation.get(), false), DCT_ERR_CKPT_IO,
           "H5Pset_obj_track_times failed");  // the same state saves to the same bytes
  check_h5(H5Pset_fill_time(creation.get(), H5D_FILL_TIME_NEVER), DCT_ERR_CKPT_IO,
           "H5Pset_fill_time failed");  // every byte is written once, by the save
  Handle dataset(
      H5Dcreate2(group, name, stored, space.get(), H5P_DEFAULT, creation.get(), H5P_DEFAULT),
      H5Dclose, DCT_ERR_CKPT_IO, std::string("cannot create dataset ") + name);
  if (row != nullptr) {
    const hsize_t start[2] = {static_cast<hsize_t>(rank), 0};
    const hsize_t count[2] = {1, row_length};
    check_h5(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
             DCT_ERR_CKPT_IO, "H5Sselect_hyperslab failed");
    const hsize_t elements = matrix ? row_length : 1;
    Handle row_space(H5Screate_simple(1, &elements, nullptr), H5Sclose, DCT_ERR_CKPT_IO,
                     "H5Screate_simple failed");
    check_h5(H5Dwrite(dataset.get(), memory, row_space.get(), space.get(), transfer, row),
             DCT_ERR_CKPT_IO, std::string("cannot write dataset ") + name);
  }
  // The offset counts the user block (H5Dget_offset adds the file's base address).
  const haddr_t offset = H5Dget_offset(dataset.get());
  if (offset == HADDR_UNDEF) return Extent{};
  return Extent{offset, offset + H5Dget_storage_size(dataset.get())};
}

}  // namespace h5
}  // namespace dct::detail
