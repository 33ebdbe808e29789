// Over 450 lines: the structured mutator builds every attribute the reader checks.
// libFuzzer harness of the checkpoint reader (CheckpointReader, checkpoint_reader.cpp and the
// attribute readers of checkpoint_format.cpp), which validates what a checkpoint file holds
// before DCT_Checkpoint_load or dct-ckpt trust it. Raw bytes are not the input: fuzzing them
// as an HDF5 file would mostly fuzz HDF5's own parser. The input decides the file's structure
// and values instead: each attribute and dataset of docs/checkpoint-format.md is written as the
// writer does, or with another value, another HDF5 type, another shape, or not at all. The
// file (a temporary file of this process) is then opened as dct-ckpt does, with MPI_COMM_SELF.
//
// Findings (abort): a crash, an exception other than dct's Error, an error code other than a
// DCT_ERR_CKPT_* one; an accepted file whose metadata break the reader's promises (ranks >= 1,
// count >= 0, element_size 4 or 8, calls >= 0, one finite tau >= 0 and one checksum per rank,
// a velocity only from format 4 on, has_velocity present in format 4, a state and state_words
// only from format 5 on, state words finite and fewer than the row holds); a row (residual,
// velocity and state, read by read_row into buffers of exactly count * element_size bytes: ASan)
// accepted that does not match its checksum, or read_residual and read_row disagreeing on a row;
// an accepted value other than the one written (for the attributes written in a type HDF5
// converts exactly; has_velocity from format 4 on); a fully valid file (the writer's types,
// format 4 with has_velocity and sealed, consistent ranks and shapes, correct checksums) refused
// or read back different (residual and velocity rows bit for bit); an HDF5 identifier (file,
// group, dataset, attribute, dataspace, type, property list) left open.
//
// Input (bytes that run out read as zero: an empty input is a valid 1-rank checkpoint):
//   [rows u8] rows = 1 + rows % 8 written per dataset; [requests u8] 1 + requests % 3;
//   attributes format, format_version, dct_version, ranks: each a field (below);
//   [group u8] /requests: 0 a group; 1 missing; 2 a dataset; 3-7 a group that also holds a
//     dataset, a dangling soft link, a soft link to the first request, an external link to a
//     missing file, a hard link to the first request;
//   per request: [flags u8] bit 0: double (else float); bit 1: has a residual; bit 2: taus
//     are raw 64-bit patterns (else u16 / 1024); bit 3: a fuzzed name [length u8 % 13][bytes];
//     bit 4: has a velocity (dct_momentum, format 4); bit 5: has_velocity and the velocity are
//     fuzzed (else written as the writer does); bit 6: has a state row per rank (format 5,
//     DCT-MP: [words used, words...], width 2 + [u8 after the name] % 4); bit 7: state_words
//     and the state are fuzzed; [count u8] % 65; [data seed u16]; [calls u16];
//     then the fields kind, count, element_size, datatype, calls, density, interval,
//     algorithm, has_residual; [tau form u8] and per row [u16] or [u64]; [checksum form u8]
//     (bit 3: the velocity left out, as format 3 computed it); [residual form u8]; with bit 5
//     the field has_velocity and [velocity form u8] (as the residual's); with bit 7 the field
//     state_words and [state form u8] (see the functions below). Inputs without bits 4 and 5
//     mean what they meant in format 3, without bits 6 and 7 what they meant in format 4.
//   A field is [how u8]: how & 7 is its form (0: as the writer writes it; 1: missing; 2-5:
//   other HDF5 types; 6: two elements; 7: a null dataspace) and how & 8 says that a value of
//   its own follows ([i64], [u64 bit pattern of a double], or [length u8 % 25][bytes]).
// The seed corpus, corpus/checkpoint_header/, is written by checkpoint_header_seeds.py (valid
// checkpoints of 1 and 3 ranks, float and double, with and without residual, with velocity with
// and without residual; the inputs of the reader bugs this harness found). HDF5 opens serial
// files without MPI_Init.
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checkpoint_format.hpp"
#include "checkpoint/checkpoint_seal.hpp"
#include "core/error.hpp"
#include "fuzz_input.hpp"

namespace {

namespace h5 = dct::detail::h5;
using dct::detail::row_checksum;
using dct::fuzz::Input;

void check(bool condition, const char *what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz_checkpoint_header: %s\n", what);
  std::abort();
}

/// An HDF5 identifier closed at scope exit (negative: creating it failed).
class Id {
 public:
  Id(hid_t id, herr_t (*closer)(hid_t)) : id_(id), close_(closer) {}
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  Id(const Id &) = delete;
  Id &operator=(const Id &) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

enum Form : unsigned { kWriters = 0, kMissing = 1, kTwoElements = 6, kNullSpace = 7 };

/// The dataspace of an attribute of form `form`: scalar, two elements or null.
hid_t attribute_space(unsigned form) {
  if (form == kNullSpace) return H5Screate(H5S_NULL);
  if (form != kTwoElements) return H5Screate(H5S_SCALAR);
  const hsize_t two = 2;
  return H5Screate_simple(1, &two, nullptr);
}

/// Writes attribute `name` of type `stored` from `value` in memory type `memory` (two copies
/// for form kTwoElements); false if HDF5 refused.
bool put_attribute(hid_t object, const char *name, hid_t stored, hid_t memory, unsigned form,
                   const void *value) {
  Id space(attribute_space(form), H5Sclose);
  if (!space.ok()) return false;
  Id attribute(H5Acreate2(object, name, stored, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  return attribute.ok() && H5Awrite(attribute.get(), memory, value) >= 0;
}

/// A fixed-length string type of `size` bytes with padding `pad`.
hid_t string_type(std::size_t size, H5T_str_t pad) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  if (type >= 0 &&
      (H5Tset_size(type, std::max<std::size_t>(size, 1)) < 0 || H5Tset_strpad(type, pad) < 0)) {
    H5Tclose(type);
    return -1;
  }
  return type;
}

bool put_string(hid_t object, const char *name, const std::string &value, unsigned form,
                H5T_str_t pad = H5T_STR_NULLPAD, std::size_t extra = 0) {
  Id type(string_type(value.size() + extra, pad), H5Tclose);
  if (!type.ok()) return false;
  std::string padded = value;  // two copies, each of the type's size
  padded.resize(H5Tget_size(type.get()), pad == H5T_STR_SPACEPAD ? ' ' : '\0');
  padded += padded;
  return put_attribute(object, name, type.get(), type.get(), form, padded.data());
}

/// What was written for an attribute: whether it exists, whether the reader must read exactly
/// `value` if it accepts the file, whether it is what the writer writes.
template <typename Value>
struct Field {
  Value value{};
  bool present = false;
  bool exact = false;
  bool writers = false;
};

std::string take_string(Input &in, std::size_t longest) {
  std::string value(in.take<std::uint8_t>() % (longest + 1), '\0');
  for (char &c : value) c = static_cast<char>(in.take<std::uint8_t>());
  return value;
}

/// The value a fixed-length, null-padded string attribute holding `value` reads back as.
std::string up_to_nul(const std::string &value) {
  return value.substr(0, value.find('\0'));
}

/// Form kWriters: the attribute written by the writer's own function, with `written`.
template <typename Value, typename Written>
void put_as_writer(hid_t object, const char *name, const Written &written, Field<Value> &field) {
  try {
    h5::write_attribute(object, name, written);
    field.present = field.exact = field.writers = true;
  } catch (const dct::detail::Error &) {
  }
}

/// Another HDF5 type a number may be stored as (forms 3-5), and whether the reader then reads
/// the value back exactly.
struct OtherType {
  hid_t stored;
  bool exact;
};

/// Writes a number attribute in form `how & 7`: the writer's, missing, as a string, as one of
/// `others`, or in its own type `stored` with two elements or none.
template <typename Value>
Field<Value> put_number(unsigned how, hid_t object, const char *name, Value value, hid_t memory,
                        hid_t stored, const OtherType (&others)[3]) {
  Field<Value> field;
  field.value = value;
  const Value two[2] = {value, value};
  switch (how & 7) {
    case kWriters:
      put_as_writer(object, name, value, field);
      return field;
    case kMissing:
      return field;
    case 2:
      field.present = put_string(object, name, std::to_string(value), 0);
      return field;
    case 3:
    case 4:
    case 5: {
      const OtherType &other = others[(how & 7) - 3];
      field.present = put_attribute(object, name, other.stored, memory, 0, two);
      field.exact = field.present && other.exact;
      return field;
    }
    default:  // two elements, or none
      field.present = put_attribute(object, name, stored, memory, how & 7, two);
      return field;
  }
}

/// An integer attribute in the form `how` (how & 8: its value follows in the input).
Field<std::int64_t> put_int(unsigned how, Input &in, hid_t object, const char *name,
                            std::int64_t value) {
  if (how & 8) value = static_cast<std::int64_t>(in.take<std::uint64_t>());
  const OtherType others[3] = {
      {H5T_IEEE_F64LE, false},  // HDF5 converts: a double
      // a 32-bit integer, exact if the value fits (HDF5 clamps it otherwise)
      {H5T_STD_I32LE, value >= INT32_MIN && value <= INT32_MAX},
      {H5T_STD_I64BE, true}};  // big endian: exact
  return put_number(how, object, name, value, H5T_NATIVE_INT64, H5T_STD_I64LE, others);
}

Field<std::int64_t> put_int(Input &in, hid_t object, const char *name, std::int64_t value) {
  const unsigned how = in.take<std::uint8_t>();
  return put_int(how, in, object, name, value);
}

Field<double> put_double(Input &in, hid_t object, const char *name, double value) {
  const unsigned how = in.take<std::uint8_t>();
  if (how & 8) {
    const std::uint64_t bits = in.take<std::uint64_t>();
    std::memcpy(&value, &bits, sizeof value);
  }
  const OtherType others[3] = {{H5T_STD_I64LE, false},   // HDF5 converts (and clamps): an integer
                               {H5T_IEEE_F32LE, false},  // a float
                               {H5T_IEEE_F64BE, true}};  // big endian: exact
  return put_number(how, object, name, value, H5T_NATIVE_DOUBLE, H5T_IEEE_F64LE, others);
}

/// `value` is what the reader must read: the written string up to its first NUL.
Field<std::string> put_text(Input &in, hid_t object, const char *name, std::string value) {
  const unsigned how = in.take<std::uint8_t>();
  if (how & 8) value = take_string(in, 24);
  Field<std::string> field;
  field.value = up_to_nul(value);
  switch (how & 7) {
    case kWriters:
      put_as_writer(object, name, value, field);
      return field;
    case kMissing:
      return field;
    case 2: {  // an integer
      const std::int64_t two[2] = {7, 7};
      field.present = put_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, 0, two);
      return field;
    }
    case 3: {  // a variable-length string
      Id type(H5Tcopy(H5T_C_S1), H5Tclose);
      const std::string text = field.value;
      const char *data = text.c_str();
      field.present = type.ok() && H5Tset_size(type.get(), H5T_VARIABLE) >= 0 &&
                      put_attribute(object, name, type.get(), type.get(), 0, &data);
      return field;
    }
    case 4:  // space padded, three spaces longer
      field.present = put_string(object, name, value, 0, H5T_STR_SPACEPAD, 3);
      return field;
    case 5:  // null terminated, one byte longer: reads back the same
      field.present = field.exact = put_string(object, name, value, 0, H5T_STR_NULLTERM, 1);
      return field;
    default:
      field.present = put_string(object, name, value, how & 7);
      return field;
  }
}

/// Creates dataset `name` of `ndims` dimensions `dims` and type `stored`, and writes `data` (in
/// memory type `memory`, as many elements as the dims hold) unless it is null.
bool put_dataset(hid_t group, const char *name, hid_t stored, hid_t memory, int ndims,
                 const hsize_t *dims, const void *data, hid_t create = H5P_DEFAULT) {
  Id space(ndims == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(ndims, dims, nullptr), H5Sclose);
  if (!space.ok()) return false;
  Id dataset(H5Dcreate2(group, name, stored, space.get(), H5P_DEFAULT, create, H5P_DEFAULT),
             H5Dclose);
  if (!dataset.ok()) return false;
  return data == nullptr ||
         H5Dwrite(dataset.get(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
}

/// One request as written, and what the reader must make of it.
struct Request {
  std::string name;
  bool created = false;
  int data_element_size = 4;  // of the residual and velocity rows written
  bool data_residual = false, data_velocity = false;
  std::int64_t data_count = 0;
  std::vector<std::vector<std::byte>> rows;      // the residual rows written, as bytes
  std::vector<std::vector<std::byte>> velocity;  // the velocity rows written, as bytes
  bool data_state = false;                       // format 5: a state row per rank
  std::int64_t data_state_words = 0;             // its width: [words used, words...]
  std::vector<std::vector<std::byte>> state;     // the state rows written, as bytes
  Field<std::string> kind, algorithm;
  Field<std::int64_t> count, element_size, calls, interval, has_residual, has_velocity, state_words;
  Field<std::int64_t> result_nonzeros;  // optional: absent reads as 0
  Field<double> density;
  std::vector<double> tau;               // one per row written
  std::vector<std::uint32_t> checksums;  // one per row written
  bool valid = false;
};

struct Checkpoint {
  int rows = 1;
  bool group_exists = false;
  Field<std::string> format, dct_version;
  Field<std::int64_t> format_version, ranks;
  std::vector<Request> requests;
  bool valid = false;
};

/// Writes the taus of `request` as dataset "tau"; true if written as the writer does.
bool put_tau(Input &in, unsigned form, hid_t group, const Request &request, int rows) {
  const hsize_t n = static_cast<hsize_t>(rows);
  std::vector<double> values = request.tau;
  switch (form) {
    case kWriters:
      return put_dataset(group, "tau", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &n, values.data());
    case kMissing:
      return false;
    case 2:  // another length
    {
      const hsize_t length = in.take<std::uint8_t>() % 10;
      values.resize(std::max<hsize_t>(length, 1), 0.5);
      put_dataset(group, "tau", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &length, values.data());
      return false;
    }
    case 3:  // floats
      put_dataset(group, "tau", H5T_IEEE_F32LE, H5T_NATIVE_DOUBLE, 1, &n, values.data());
      return false;
    case 4: {  // [rows, 1]
      const hsize_t dims[2] = {n, 1};
      put_dataset(group, "tau", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 2, dims, values.data());
      return false;
    }
    case 5: {  // strings
      Id type(string_type(8, H5T_STR_NULLPAD), H5Tclose);
      std::vector<char> text(values.size() * 8, '1');
      if (type.ok()) put_dataset(group, "tau", type.get(), type.get(), 1, &n, text.data());
      return false;
    }
    case 6:  // integers (HDF5 converts and clamps)
      put_dataset(group, "tau", H5T_STD_I64LE, H5T_NATIVE_DOUBLE, 1, &n, values.data());
      return false;
    default:  // a scalar
      put_dataset(group, "tau", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 0, nullptr, values.data());
      return false;
  }
}

/// Writes dataset "checksum"; true if it holds the correct format-4 checksums (residual, then
/// velocity, tau and calls) as the writer writes them. request.checksums becomes the correct
/// ones.
bool put_checksums(Input &in, hid_t group, Request &request, int rows) {
  const unsigned how = in.take<std::uint8_t>();
  const unsigned form = how & 7;
  const hsize_t n = static_cast<hsize_t>(rows);
  std::vector<std::uint32_t> values;  // bit 3: format 3's, without the velocity
  for (int r = 0; r < rows; ++r) {
    const auto &row = request.rows[static_cast<std::size_t>(r)];
    const auto &velocity = request.velocity[static_cast<std::size_t>(r)];
    const void *residual = request.data_residual ? row.data() : nullptr;
    const std::size_t bytes = request.data_residual ? row.size() : 0;
    const double tau = request.tau[static_cast<std::size_t>(r)];
    const auto &state = request.state[static_cast<std::size_t>(r)];
    request.checksums.push_back(row_checksum(residual, bytes, tau, request.calls.value,
                                             request.data_velocity ? velocity.data() : nullptr,
                                             request.data_velocity ? velocity.size() : 0,
                                             request.data_state ? state.data() : nullptr,
                                             request.data_state ? state.size() : 0));
    values.push_back(how & 8 ? row_checksum(residual, bytes, tau, request.calls.value)
                             : request.checksums.back());
  }
  values.push_back(values.back());  // room for form 5
  switch (form) {
    case kWriters:
      return put_dataset(group, "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32, 1, &n,
                         values.data()) &&
             std::equal(request.checksums.begin(), request.checksums.end(), values.begin());
    case kMissing:
      return false;
    case 2:  // fuzzed
      for (std::uint32_t &value : values) value = in.take<std::uint32_t>();
      break;
    case 3:  // format 1: the residual's CRC alone, 0 without one
      for (int r = 0; r < rows; ++r) {
        const auto &row = request.rows[static_cast<std::size_t>(r)];
        values[static_cast<std::size_t>(r)] =
            request.data_residual ? dct::detail::checksum(row.data(), row.size()) : 0;
      }
      break;
    case 4:  // 64-bit integers
      put_dataset(group, "checksum", H5T_STD_I64LE, H5T_NATIVE_UINT32, 1, &n, values.data());
      return false;
    case 5: {  // one more
      const hsize_t more = n + 1;
      put_dataset(group, "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32, 1, &more, values.data());
      return false;
    }
    case 6: {  // strings
      Id type(string_type(4, H5T_STR_NULLPAD), H5Tclose);
      if (type.ok()) put_dataset(group, "checksum", type.get(), type.get(), 1, &n, values.data());
      return false;
    }
    default:  // a scalar
      put_dataset(group, "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32, 0, nullptr, values.data());
      return false;
  }
  put_dataset(group, "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32, 1, &n, values.data());
  return std::equal(request.checksums.begin(), request.checksums.end(), values.begin());
}

/// Writes dataset `name` (the residual or the velocity) of `rows` [count] rows; true if written
/// as the writer does (or absent without one, `present` false).
bool put_rows(Input &in, hid_t group, const char *name,
              const std::vector<std::vector<std::byte>> &rows, bool present, int size,
              std::int64_t data_count) {
  const unsigned form = in.take<std::uint8_t>() % 8;
  const hsize_t count = static_cast<hsize_t>(data_count);
  const hsize_t dims[2] = {static_cast<hsize_t>(rows.size()), count};
  std::vector<std::byte> all;
  for (const auto &row : rows) all.insert(all.end(), row.begin(), row.end());
  if (all.empty()) all.resize(8);
  const hid_t memory = h5::memory_type(size);
  if (form == kWriters || form == kMissing) {
    if (!present || form == kMissing) return !present;
    return put_dataset(group, name, h5::file_type(size), memory, 2, dims, all.data());
  }
  switch (form) {
    case 2: {  // other dimensions, filled with the rows' bytes as far as they go
      const hsize_t other[2] = {in.take<std::uint8_t>() % 10u, in.take<std::uint8_t>() % 66u};
      all.resize(std::max<std::size_t>(other[0] * other[1] * size, all.size()));
      put_dataset(group, name, h5::file_type(size), memory, 2, other, all.data());
      break;
    }
    case 3: {  // one dimension
      const hsize_t n = dims[0] * dims[1];
      put_dataset(group, name, h5::file_type(size), memory, 1, &n, all.data());
      break;
    }
    case 4:  // the other floating-point type (HDF5 converts; exact from float to double)
      put_dataset(group, name, h5::file_type(12 - size), memory, 2, dims, all.data());
      break;
    case 5:  // 32-bit integers (HDF5 converts and clamps)
      put_dataset(group, name, H5T_STD_I32LE, memory, 2, dims, all.data());
      break;
    case 6: {  // strings of the element's size
      Id type(string_type(static_cast<std::size_t>(size), H5T_STR_NULLPAD), H5Tclose);
      if (type.ok()) put_dataset(group, name, type.get(), type.get(), 2, dims, all.data());
      break;
    }
    default: {  // chunked, compressed: another layout of the same data
      Id create(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
      const hsize_t chunk[2] = {1, std::max<hsize_t>(count, 1)};
      if (create.ok() && count > 0 && H5Pset_chunk(create.get(), 2, chunk) >= 0 &&
          H5Pset_deflate(create.get(), 1) >= 0)
        put_dataset(group, name, h5::file_type(size), memory, 2, dims, all.data(), create.get());
      break;
    }
  }
  return false;
}

std::string request_name(Input &in, bool fuzzed, std::size_t index) {
  const std::string fallback = "allreduce." + std::to_string(index);
  if (!fuzzed) return fallback;
  std::string name = up_to_nul(take_string(in, 12));
  std::replace(name.begin(), name.end(), '/', '_');  // a path, not a name
  return name.empty() || name == "." ? fallback : name;
}

/// `rows` rows of `count` elements of `size` bytes drawn from `engine` (zeros where not
/// `present`): floats, so that a double row converts to float exactly.
std::vector<std::vector<std::byte>> random_rows(std::mt19937 &engine, int rows, bool present,
                                                std::int64_t count, int size) {
  std::vector<std::vector<std::byte>> out;
  for (int r = 0; r < rows; ++r) {
    std::vector<std::byte> row(static_cast<std::size_t>(count) * static_cast<std::size_t>(size));
    for (std::int64_t i = 0; i < (present ? count : 0); ++i) {
      const float value = static_cast<float>(static_cast<std::int32_t>(engine())) / 65536.0f;
      const double wide = value;
      std::memcpy(row.data() + i * size, size == 4 ? static_cast<const void *>(&value) : &wide,
                  static_cast<std::size_t>(size));
    }
    out.push_back(std::move(row));
  }
  return out;
}

void write_request(Input &in, hid_t requests, Request &request, int rows, std::size_t index) {
  const unsigned flags = in.take<std::uint8_t>();
  request.data_element_size = flags & 1 ? 8 : 4;
  request.data_residual = flags & 2;
  request.data_velocity = flags & 16;
  request.data_count = in.take<std::uint8_t>() % 65;
  std::mt19937 engine(in.take<std::uint16_t>());
  const std::int64_t calls = in.take<std::uint16_t>();
  request.name = request_name(in, flags & 8, index);
  // The residual's rows first: an input of format 3 draws the same ones.
  request.rows = random_rows(engine, rows, request.data_residual, request.data_count,
                             request.data_element_size);
  request.velocity = random_rows(engine, rows, request.data_velocity, request.data_count,
                                 request.data_element_size);
  // Format 5's state rows (bit 6): [words used, words...] of width 2 + [u8] % 4, all used.
  request.data_state = flags & 64;
  request.data_state_words = request.data_state ? 2 + in.take<std::uint8_t>() % 4 : 0;
  request.state = random_rows(engine, rows, request.data_state, request.data_state_words, 8);
  for (auto &row : request.state) {
    if (!request.data_state) continue;
    const double used = double(request.data_state_words - 1);
    std::memcpy(row.data(), &used, sizeof used);
  }
  Id group(H5Gcreate2(requests, request.name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
           H5Gclose);
  request.created = group.ok();  // not if the name repeats one, or HDF5 refuses it
  if (!request.created) return;
  const hid_t g = group.get();
  const bool residual = request.data_residual, velocity = request.data_velocity;
  request.kind = put_text(in, g, "kind", "allreduce");
  request.count = put_int(in, g, "count", request.data_count);
  request.element_size = put_int(in, g, "element_size", request.data_element_size);
  const Field<std::string> datatype =
      put_text(in, g, "datatype", request.data_element_size == 4 ? "float" : "double");
  request.calls = put_int(in, g, "calls", calls);
  request.density = put_double(in, g, "density", 0.01);
  request.interval = put_int(in, g, "interval", 1);
  request.algorithm = put_text(in, g, "algorithm", "auto");
  request.has_residual = put_int(in, g, "has_residual", residual ? 1 : 0);
  const unsigned tau_byte = in.take<std::uint8_t>();
  const unsigned tau_form = tau_byte % 8;
  for (int r = 0; r < rows; ++r) {
    if (flags & 4) {
      const std::uint64_t bits = in.take<std::uint64_t>();
      double tau;
      std::memcpy(&tau, &bits, sizeof tau);
      request.tau.push_back(tau);
    } else {
      request.tau.push_back(in.take<std::uint16_t>() / 1024.0);
    }
  }
  const bool tau_ok = put_tau(in, tau_form, g, request, rows);
  const bool checksums_ok = put_checksums(in, g, request, rows);
  const bool residual_ok = put_rows(in, g, "residual", request.rows, residual,
                                    request.data_element_size, request.data_count);
  // Format 4's has_velocity and velocity: fuzzed with bit 5, else as the writer writes them
  // (form 0 of both, which reads no byte).
  const bool fuzzed = flags & 32;
  request.has_velocity =
      put_int(fuzzed ? in.take<std::uint8_t>() : 0u, in, g, "has_velocity", velocity ? 1 : 0);
  static const std::uint8_t nothing = 0;
  Input none(&nothing, 0);
  const bool velocity_ok = put_rows(fuzzed ? in : none, g, "velocity", request.velocity, velocity,
                                    request.data_element_size, request.data_count);
  // Format 5's state_words and state: fuzzed with bit 7, else as the writer writes them.
  const bool state_fuzzed = flags & 128;
  request.state_words = put_int(state_fuzzed ? in.take<std::uint8_t>() : 0u, in, g, "state_words",
                                request.data_state_words);
  const bool state_ok = put_rows(state_fuzzed ? in : none, g, "state", request.state,
                                 request.data_state, 8, request.data_state_words);
  // result_nonzeros: fuzzed with bit 3 of the tau form's byte, else as the writer writes it.
  request.result_nonzeros = put_int(tau_byte & 8 ? in.take<std::uint8_t>() : 0u, in, g,
                                    "result_nonzeros", request.data_count / 2);
  const Field<std::int64_t> &hint = request.result_nonzeros;
  const bool hint_ok =
      !hint.present || (hint.writers && hint.value >= 0 && hint.value <= request.data_count);
  bool taus_valid = true;
  for (double tau : request.tau) taus_valid = taus_valid && std::isfinite(tau) && tau >= 0;
  // Valid: what the writer writes, consistent with the rows written. (It writes no residual
  // and no velocity for count 0.)
  request.valid = request.kind.writers && request.count.writers && request.element_size.writers &&
                  datatype.writers && request.calls.writers && request.density.writers &&
                  request.interval.writers && request.algorithm.writers &&
                  request.has_residual.writers && request.has_velocity.writers &&
                  request.state_words.writers && tau_ok && checksums_ok && residual_ok &&
                  velocity_ok && state_ok && taus_valid && hint_ok &&
                  request.state_words.value == request.data_state_words &&
                  request.calls.value >= 0 && request.has_residual.value == (residual ? 1 : 0) &&
                  request.has_velocity.value == (velocity ? 1 : 0) &&
                  request.element_size.value == request.data_element_size &&
                  request.count.value == request.data_count &&
                  !(residual && request.data_count == 0) && !(velocity && request.data_count == 0);
}

/// Extra links in /requests (group form 3-7); false if there are any.
bool put_links(unsigned form, hid_t file, hid_t requests, const std::vector<Request> &written) {
  const char *first = nullptr;
  std::string target;
  for (const Request &request : written)
    if (request.created) {
      target = "/requests/" + request.name;
      first = target.c_str();
      break;
    }
  switch (form) {
    case 3: {
      const hsize_t one = 1;
      const double value = 1;
      put_dataset(requests, "~dataset", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1, &one, &value);
      return false;
    }
    case 4:
      H5Lcreate_soft("/requests/nowhere", requests, "~dangling", H5P_DEFAULT, H5P_DEFAULT);
      return false;
    case 5:
      if (first) H5Lcreate_soft(first, requests, "~alias", H5P_DEFAULT, H5P_DEFAULT);
      return false;
    case 6:
      H5Lcreate_external("/nonexistent/dct-fuzz.h5", "/requests/x", requests, "~external",
                         H5P_DEFAULT, H5P_DEFAULT);
      return false;
    case 7:
      if (first) H5Lcreate_hard(file, first, requests, "~hard", H5P_DEFAULT, H5P_DEFAULT);
      return false;
    default:
      return true;
  }
}

/// Writes the file at `path` as the input says; what it holds is returned.
Checkpoint write_checkpoint(Input &in, const std::string &path) {
  Checkpoint written;
  written.rows = 1 + in.take<std::uint8_t>() % 8;
  const std::size_t requests = 1 + in.take<std::uint8_t>() % 3u;
  // The core driver writes the file in one piece when it is closed.
  Id access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  check(access.ok() && H5Pset_fapl_core(access.get(), 1 << 16, 1) >= 0, "H5Pset_fapl_core");
  // With the user block of the seal, written once the file is closed (the caller).
  Id creation(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  check(creation.ok() && H5Pset_userblock(creation.get(), dct::detail::kSealBytes) >= 0,
        "H5Pset_userblock");
  Id file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, creation.get(), access.get()), H5Fclose);
  check(file.ok(), "cannot create the temporary file");
  const hid_t f = file.get();
  written.format = put_text(in, f, "format", dct::detail::kCheckpointFormatName);
  written.format_version = put_int(in, f, "format_version", dct::detail::kCheckpointFormatVersion);
  written.dct_version = put_text(in, f, "dct_version", "0.3.0");
  written.ranks = put_int(in, f, "ranks", written.rows);
  const unsigned group_form = in.take<std::uint8_t>() % 8;
  bool valid = written.format.writers && written.format.value == "dct-checkpoint" &&
               written.format_version.writers &&
               written.format_version.value == dct::detail::kCheckpointFormatVersion &&
               written.dct_version.writers && written.ranks.writers &&
               written.ranks.value == written.rows && group_form == 0;
  if (group_form == kMissing) {
    written.valid = false;
    return written;
  }
  if (group_form == 2) {
    const hsize_t one = 1;
    const double value = 1;
    put_dataset(f, dct::detail::kCheckpointRequestsGroup, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, 1,
                &one, &value);
    written.valid = false;
    return written;
  }
  Id group(
      H5Gcreate2(f, dct::detail::kCheckpointRequestsGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      H5Gclose);
  check(group.ok(), "cannot create group requests");
  written.group_exists = true;
  written.requests.resize(requests);
  for (std::size_t i = 0; i < requests; ++i)
    write_request(in, group.get(), written.requests[i], written.rows, i);
  valid = put_links(group_form, f, group.get(), written.requests) && valid;
  for (const Request &request : written.requests)
    valid = valid && (!request.created || request.valid);
  written.valid = valid;
  return written;
}

template <typename Value>
void check_field(const Field<Value> &field, const Value &read, const char *what) {
  if (field.exact && !(read == field.value)) {
    std::fprintf(stderr, "fuzz_checkpoint_header: %s read back differently\n", what);
    std::abort();
  }
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

/// A buffer of exactly `bytes` bytes on the heap (ASan sees a byte written past it), or none.
class RowBuffer {
 public:
  RowBuffer(bool wanted, std::size_t bytes)
      : data_(wanted ? new std::byte[bytes] : nullptr), bytes_(wanted ? bytes : 0) {}
  std::byte *get() const { return data_.get(); }
  std::size_t bytes() const { return bytes_; }
  bool same(const std::vector<std::byte> &other) const {
    return other.size() == bytes_ && (bytes_ == 0 || std::memcmp(get(), other.data(), bytes_) == 0);
  }

 private:
  std::unique_ptr<std::byte[]> data_;
  std::size_t bytes_;
};

/// Runs `read` (a row read by `what`); false if the reader refused the row, with a checkpoint
/// error code (printed where `loud`).
template <typename Read>
bool read_or_refuse(Read read, const char *what, bool loud = false) {
  try {
    read();
    return true;
  } catch (const dct::detail::Error &e) {
    if (loud) std::fprintf(stderr, "refused: %s\n", e.what());
    if (!(e.code() >= DCT_ERR_CKPT_NOT_FOUND && e.code() <= DCT_ERR_CKPT_IO)) {
      std::fprintf(stderr, "fuzz_checkpoint_header: %s threw error code %d: %s\n", what, e.code(),
                   e.what());
      std::abort();
    }
    return false;
  }
}

/// Row `r` of an accepted request with a residual or a velocity, read as DCT_Checkpoint_load
/// reads it (read_row) and as dct-ckpt does (read_residual, or read_row without buffers);
/// `valid`: the request as written in a fully valid file, else null.
void check_row(const dct::detail::CheckpointReader &reader, const dct::detail::SavedRequest &saved,
               int r, const Request *valid) {
  const std::size_t bytes =
      static_cast<std::size_t>(saved.count) * static_cast<std::size_t>(saved.element_size);
  const auto row = static_cast<std::size_t>(r);
  RowBuffer residual(saved.has_residual, bytes), velocity(saved.has_velocity, bytes);
  std::vector<double> state;
  const bool accepted =
      read_or_refuse([&] { reader.read_row(saved, r, residual.get(), velocity.get(), &state); },
                     "read_row", valid != nullptr);
  check(accepted || valid == nullptr, "a valid file's row was refused");
  // The same row read without the velocity's buffer (the reader checks it in a scratch buffer)
  // is accepted or refused alike.
  if (saved.has_residual) {
    RowBuffer alone(true, bytes);
    const bool also =
        read_or_refuse([&] { reader.read_residual(saved, r, alone.get()); }, "read_residual");
    check(also == accepted, "read_residual and read_row disagree on a row");
    check(!also || std::memcmp(alone.get(), residual.get(), bytes) == 0,
          "read_residual and read_row read a residual differently");
  } else {
    const bool also =
        read_or_refuse([&] { reader.read_row(saved, r, nullptr, nullptr); }, "read_row");
    check(also == accepted, "read_row with and without a velocity buffer disagree on a row");
  }
  if (!accepted) return;
  // The state row as stored: [words used, the words, zeros] (the reader checks the padding).
  check(state.size() < std::size_t(std::max<std::int64_t>(saved.state_words, 1)),
        "read_row returned more state words than the row holds");
  for (double word : state) check(std::isfinite(word), "read_row accepted a state not finite");
  std::vector<double> stored;
  if (saved.state_words > 0) {
    stored.assign(std::size_t(saved.state_words), 0.0);
    stored[0] = double(state.size());
    std::copy(state.begin(), state.end(), stored.begin() + 1);
  }
  const std::uint32_t expected =
      reader.format_version() >= 2 ? row_checksum(residual.get(), residual.bytes(), saved.tau[row],
                                                  saved.calls, velocity.get(), velocity.bytes(),
                                                  stored.data(), stored.size() * sizeof(double))
                                   : dct::detail::checksum(residual.get(), residual.bytes());
  check(expected == saved.checksums[row], "read_row accepted a row whose checksum does not match");
  if (valid == nullptr) return;
  check(!saved.has_residual || residual.same(valid->rows[row]),
        "a valid file's residual read back differently");
  check(!saved.has_velocity || velocity.same(valid->velocity[row]),
        "a valid file's velocity read back differently");
  if (valid->data_state) {
    std::vector<std::byte> bytes_read(stored.size() * sizeof(double));
    std::memcpy(bytes_read.data(), stored.data(), bytes_read.size());
    check(bytes_read == valid->state[row], "a valid file's state read back differently");
  }
}

/// The reader accepted the file: its promises, and the values written.
void check_accepted(const dct::detail::CheckpointReader &reader, const Checkpoint &written) {
  const int ranks = reader.ranks();
  check(ranks >= 1, "accepted ranks < 1");
  check(reader.format_version() >= dct::detail::kCheckpointOldestReadableVersion &&
            reader.format_version() <= dct::detail::kCheckpointFormatVersion,
        "accepted an unknown format version");
  check(written.format.present && written.format.value == "dct-checkpoint",
        "accepted a file that is not a checkpoint");
  check_field(written.format_version, std::int64_t{reader.format_version()}, "format_version");
  check_field(written.ranks, std::int64_t{ranks}, "ranks");
  check_field(written.dct_version, reader.dct_version(), "dct_version");
  check(written.group_exists, "accepted a file without group requests");
  std::size_t created = 0;
  for (const Request &request : written.requests) {
    if (!request.created) continue;
    ++created;
    const dct::detail::SavedRequest *saved = reader.find(request.name);
    check(saved != nullptr, "a request of the file is missing");
    check_field(request.kind, saved->kind, "kind");
    check_field(request.count, saved->count, "count");
    check_field(request.element_size, std::int64_t{saved->element_size}, "element_size");
    check_field(request.calls, saved->calls, "calls");
    check_field(request.interval, saved->interval, "interval");
    check_field(request.algorithm, saved->algorithm, "algorithm");
    check(!request.density.exact || same_bits(request.density.value, saved->density),
          "density read back differently");
    check(!request.has_residual.exact || (request.has_residual.value != 0) == saved->has_residual,
          "has_residual read back differently");
    // Format 4 on: the writer always writes has_velocity, the reader reads it (earlier
    // formats have no velocity, whatever the file holds).
    if (reader.format_version() >= 4) {
      check(request.has_velocity.present, "accepted a format-4 request without has_velocity");
      check(!request.has_velocity.exact || (request.has_velocity.value != 0) == saved->has_velocity,
            "has_velocity read back differently");
    }
    if (reader.format_version() >= 5) {
      check(request.state_words.present, "accepted a format-5 request without state_words");
      check_field(request.state_words, saved->state_words, "state_words");
      if (request.result_nonzeros.present)
        check_field(request.result_nonzeros, saved->result_nonzeros, "result_nonzeros");
      else
        check(saved->result_nonzeros == 0, "an absent result_nonzeros read as other than 0");
    } else {
      check(saved->result_nonzeros == 0, "result_nonzeros read from a file of format 4 or older");
    }
  }
  for (const dct::detail::SavedRequest &saved : reader.requests()) {
    check(saved.count >= 0 && (saved.element_size == 4 || saved.element_size == 8),
          "accepted an invalid count or element size");
    check(saved.calls >= 0, "accepted a negative call counter");
    check(saved.result_nonzeros >= 0 && saved.result_nonzeros <= saved.count,
          "accepted an invalid result_nonzeros");
    check(saved.tau.size() == static_cast<std::size_t>(ranks) &&
              saved.checksums.size() == static_cast<std::size_t>(ranks),
          "accepted a tau or checksum per rank missing");
    for (double tau : saved.tau) check(std::isfinite(tau) && tau >= 0, "accepted a bad tau");
    const Request *request = nullptr;
    for (const Request &candidate : written.requests)
      if (candidate.created && candidate.name == saved.name) request = &candidate;
    const bool valid = written.valid && request != nullptr;
    if (valid) {
      check(saved.tau.size() == request->tau.size() &&
                std::equal(saved.tau.begin(), saved.tau.end(), request->tau.begin(), same_bits),
            "a valid file's taus read back differently");
      check(saved.checksums == request->checksums,
            "a valid file's checksums read back differently");
    }
    check(!saved.has_velocity || reader.format_version() >= 4,
          "accepted a velocity in a file of format 3 or older");
    check(saved.state_words == 0 || reader.format_version() >= 5,
          "accepted a state in a file of format 4 or older");
    check(saved.state_words >= 0 && saved.state_words <= dct::detail::kMaxStateWords,
          "accepted an invalid state_words");
    if (!saved.has_residual && !saved.has_velocity && saved.state_words == 0) {
      if (reader.format_version() >= 2)
        for (int r = 0; r < ranks; ++r)
          check(saved.checksums[static_cast<std::size_t>(r)] ==
                    row_checksum(nullptr, 0, saved.tau[static_cast<std::size_t>(r)], saved.calls),
                "accepted a row whose checksum does not match");
      continue;
    }
    for (int r = 0; r < ranks; ++r) check_row(reader, saved, r, valid ? request : nullptr);
  }
  if (written.valid) check(reader.requests().size() == created, "a valid file's requests differ");
}

/// How many HDF5 identifiers of each kind the writer and the reader create are open.
std::vector<hsize_t> open_identifiers() {
  std::vector<hsize_t> counts;
  for (H5I_type_t type :
       {H5I_FILE, H5I_GROUP, H5I_DATATYPE, H5I_DATASPACE, H5I_DATASET, H5I_ATTR, H5I_GENPROP_LST}) {
    hsize_t n = 0;
    if (H5Inmembers(type, &n) < 0) n = 0;  // none of that kind created yet
    counts.push_back(n);
  }
  return counts;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  static const std::string path =
      "/tmp/dct_fuzz_checkpoint_header." + std::to_string(::getpid()) + ".h5";
  static const bool quiet = H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr) >= 0;  // HDF5's prints
  (void)quiet;
  const std::vector<hsize_t> identifiers = open_identifiers();
  Input in(data, size);
  Checkpoint written;
  {
    h5::QuietHdf5 quiet_writes;
    written = write_checkpoint(in, path);
  }
  // The seal is not what this harness fuzzes (tests/mpi/test_checkpoint_faults.cpp flips the
  // file's bits): every file is sealed, so that the reader's checks behind it are reached.
  dct::detail::seal_file(path);
  try {
    dct::detail::CheckpointReader reader(path, MPI_COMM_SELF);
    check_accepted(reader, written);
  } catch (const dct::detail::Error &e) {
    check(e.code() >= DCT_ERR_CKPT_NOT_FOUND && e.code() <= DCT_ERR_CKPT_IO,
          "the reader threw an error code other than a checkpoint one");
    if (written.valid) std::fprintf(stderr, "refused: %s\n", e.what());
    check(!written.valid, "a valid checkpoint was refused");
  }
  std::remove(path.c_str());
  check(open_identifiers() == identifiers, "an HDF5 identifier was left open");
  return 0;
}
