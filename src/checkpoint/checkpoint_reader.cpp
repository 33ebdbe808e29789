// The checkpoint reader shared by DCT_Checkpoint_load and dct-ckpt: opening validates the file
// and its metadata, each residual row is checked against its checksum as it is read.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checkpoint_format.hpp"
#include "checkpoint/checkpoint_pieces.hpp"
#include "checkpoint/checkpoint_seal.hpp"
#include "core/error.hpp"
#include "core/number_text.hpp"

namespace dct::detail {
namespace {

/// Where `dataset` starts in the file if a plain read of `bytes` bytes there gives its values
/// as `type` holds them: contiguous (no chunks, no filters, no external file), stored as
/// `type`, `bytes` long and within the file's `file_bytes`; else 0 (HDF5 reads it).
std::uint64_t plain_offset(hid_t dataset, hid_t type, std::uint64_t bytes,
                           std::uint64_t file_bytes) {
  h5::Handle creation(H5Dget_create_plist(dataset), H5Pclose, DCT_ERR_CKPT_FORMAT,
                      "H5Dget_create_plist failed");
  if (H5Pget_layout(creation.get()) != H5D_CONTIGUOUS || H5Pget_external_count(creation.get()) != 0)
    return 0;
  h5::Handle stored(H5Dget_type(dataset), H5Tclose, DCT_ERR_CKPT_FORMAT, "H5Dget_type failed");
  if (H5Tequal(stored.get(), type) <= 0) return 0;
  const haddr_t at = H5Dget_offset(dataset);  // counts the user block
  if (at == HADDR_UNDEF || at == 0 || H5Dget_storage_size(dataset) != bytes || at > file_bytes ||
      bytes > file_bytes - at)
    return 0;
  return at;
}

}  // namespace

CheckpointReader::CheckpointReader(const std::string &path, MPI_Comm comm, bool sealed) {
  h5::QuietHdf5 quiet;
  require_regular_file(path);
  // Alone (dct-ckpt), every byte is checked against the seal before HDF5 reads any: HDF5
  // trusts its metadata (checkpoint_seal.hpp). A load checks it first, shared by its ranks.
  const bool alone = comm == MPI_COMM_SELF;
  const Seal seal = alone && !sealed ? check_seal(path) : Seal::sealed;
  require(H5Fis_hdf5(path.c_str()) > 0, DCT_ERR_CKPT_FORMAT, path + " is not an HDF5 file");
  h5::Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  collective_ = comm != MPI_COMM_SELF;
  if (collective_)
    h5::check_h5(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), DCT_ERR_CKPT_IO,
                 "H5Pset_fapl_mpio failed");
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get());
  require(file_ >= 0, DCT_ERR_CKPT_TRUNCATED,
          path + " is an HDF5 file that HDF5 cannot open: truncated or damaged");
  try {
    // The rows' bytes are read with plain reads where the layout allows (reads_rows_directly).
    std::uint64_t file_bytes = 0;
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat status;
    if (fd_ >= 0 && ::fstat(fd_, &status) == 0) file_bytes = std::uint64_t(status.st_size);
    require(
        H5Aexists(file_, "format") > 0 && h5::read_string(file_, "format") == kCheckpointFormatName,
        DCT_ERR_CKPT_FORMAT, path + " is an HDF5 file but not a dct checkpoint");
    // The int64 attributes are range-checked before they are narrowed to int (2^32 + 2 is
    // not version 2).
    const std::int64_t version = h5::read_int(file_, "format_version");
    require(version >= kCheckpointOldestReadableVersion && version <= kCheckpointFormatVersion,
            DCT_ERR_CKPT_VERSION,
            path + " has checkpoint format version " + std::to_string(version) +
                "; this dct reads versions " + std::to_string(kCheckpointOldestReadableVersion) +
                " to " + std::to_string(kCheckpointFormatVersion));
    format_version_ = static_cast<int>(version);
    require(version < 3 || seal == Seal::sealed, DCT_ERR_CKPT_CHECKSUM,
            path + " has format version " + std::to_string(version) + " but no seal");
    dct_version_ = h5::read_string(file_, "dct_version");
    const std::int64_t ranks = h5::read_int(file_, "ranks");
    require(ranks >= 1 && ranks <= std::numeric_limits<int>::max(), DCT_ERR_CKPT_FORMAT,
            "ranks attribute is not a positive int");
    ranks_ = static_cast<int>(ranks);

    h5::Handle requests(H5Gopen2(file_, kCheckpointRequestsGroup, H5P_DEFAULT), H5Gclose,
                        DCT_ERR_CKPT_FORMAT, "group 'requests' is missing");
    H5G_info_t group_info;
    h5::check_h5(H5Gget_info(requests.get(), &group_info), DCT_ERR_CKPT_FORMAT,
                 "H5Gget_info failed");
    for (hsize_t i = 0; i < group_info.nlinks; ++i) {
      const ssize_t length = H5Lget_name_by_idx(requests.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i,
                                                nullptr, 0, H5P_DEFAULT);
      require(length > 0, DCT_ERR_CKPT_FORMAT, "cannot read a request name");
      SavedRequest saved;
      saved.name.assign(static_cast<std::size_t>(length) + 1, '\0');
      H5Lget_name_by_idx(requests.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, saved.name.data(),
                         saved.name.size(), H5P_DEFAULT);
      saved.name.resize(static_cast<std::size_t>(length));
      h5::Handle group(H5Gopen2(requests.get(), saved.name.c_str(), H5P_DEFAULT), H5Gclose,
                       DCT_ERR_CKPT_FORMAT, "cannot open request " + saved.name);
      saved.kind = h5::read_string(group.get(), "kind");
      saved.count = h5::read_int(group.get(), "count");
      const std::int64_t element_size = h5::read_int(group.get(), "element_size");
      require(saved.count >= 0 && (element_size == 4 || element_size == 8), DCT_ERR_CKPT_FORMAT,
              "request " + saved.name + " has an invalid count or type");
      saved.element_size = static_cast<int>(element_size);
      saved.calls = h5::read_int(group.get(), "calls");
      saved.density = h5::read_double(group.get(), "density");
      saved.interval = h5::read_int(group.get(), "interval");
      saved.algorithm = h5::read_string(group.get(), "algorithm");
      saved.has_residual = h5::read_int(group.get(), "has_residual") != 0;
      saved.has_velocity = format_version_ >= 4 && h5::read_int(group.get(), "has_velocity") != 0;
      saved.state_words =
          format_version_ >= 5 ? h5::read_int(group.get(), "state_words") : std::int64_t(0);
      require(saved.state_words >= 0 && saved.state_words <= kMaxStateWords, DCT_ERR_CKPT_FORMAT,
              "request " + saved.name + " has an invalid state_words");
      // Written only where it is 1.
      saved.has_last_update = format_version_ >= 6 &&
                              H5Aexists(group.get(), "has_last_update") > 0 &&
                              h5::read_int(group.get(), "has_last_update") != 0;
      // Optional (files of format 5 written before it lack it): covered by the seal alone.
      if (format_version_ >= 5 && H5Aexists(group.get(), "result_nonzeros") > 0)
        saved.result_nonzeros = h5::read_int(group.get(), "result_nonzeros");
      require(saved.result_nonzeros >= 0 && saved.result_nonzeros <= saved.count,
              DCT_ERR_CKPT_FORMAT, "request " + saved.name + " has an invalid result_nonzeros");
      saved.tau = h5::read_vector<double>(group.get(), "tau", H5T_NATIVE_DOUBLE,
                                          static_cast<hsize_t>(ranks_));
      saved.checksums = h5::read_vector<std::uint32_t>(group.get(), "checksum", H5T_NATIVE_UINT32,
                                                       static_cast<hsize_t>(ranks_));
      require(saved.calls >= 0, DCT_ERR_CKPT_FORMAT,
              "request " + saved.name + " has a negative call counter");
      for (int r = 0; r < ranks_; ++r) {
        const double tau = saved.tau[static_cast<std::size_t>(r)];
        require(std::isfinite(tau) && tau >= 0, DCT_ERR_CKPT_FORMAT,
                "request " + saved.name + " has an invalid threshold for rank " +
                    std::to_string(r) + ": " + decimal(tau));
        if (!saved.has_row_data() && format_version_ >= 2)  // no data to read: check now
          require(row_checksum(nullptr, 0, tau, saved.calls) ==
                      saved.checksums[static_cast<std::size_t>(r)],
                  DCT_ERR_CKPT_CHECKSUM,
                  "the threshold or call counter of '" + saved.name + "' saved by rank " +
                      std::to_string(r) + " does not match its checksum: the file is corrupt");
      }
      struct Part {
        const char *name;
        bool present;
        std::int64_t width;  // of a row
        std::uint64_t *at;   // where a plain read finds it (nullptr: HDF5 reads it always)
      };
      for (const auto &[part, present, width, at] :
           {Part{"residual", saved.has_residual, saved.count, &saved.residual_at},
            Part{"velocity", saved.has_velocity, saved.count, &saved.velocity_at},
            Part{"state", saved.state_words > 0, saved.state_words, nullptr},
            Part{"last_update", saved.has_last_update, saved.count, &saved.last_update_at}}) {
        if (!present) continue;
        h5::Handle dataset(H5Dopen2(group.get(), part, H5P_DEFAULT), H5Dclose, DCT_ERR_CKPT_FORMAT,
                           "request " + saved.name + " has no " + part);
        h5::Handle space(H5Dget_space(dataset.get()), H5Sclose, DCT_ERR_CKPT_FORMAT,
                         "H5Dget_space failed");
        hsize_t dims[2] = {0, 0};
        require(H5Sget_simple_extent_ndims(space.get()) == 2 &&
                    H5Sget_simple_extent_dims(space.get(), dims, nullptr) == 2 &&
                    dims[0] == static_cast<hsize_t>(ranks_) &&
                    dims[1] == static_cast<hsize_t>(width),
                DCT_ERR_CKPT_FORMAT,
                std::string("the ") + part + " of " + saved.name +
                    " does not have the shape [ranks, count] ([ranks, state_words] for state)");
        std::uint64_t bytes = 0;  // dims[1] == count fits in int64, ranks in int
        if (at != nullptr && file_bytes > 0 &&
            !__builtin_mul_overflow(dims[0] * std::uint64_t(saved.element_size), dims[1], &bytes))
          *at = plain_offset(dataset.get(), h5::file_type(saved.element_size), bytes, file_bytes);
      }
      requests_.push_back(std::move(saved));
    }
  } catch (...) {
    H5Fclose(file_);
    file_ = -1;
    if (fd_ >= 0) ::close(fd_);
    throw;
  }
}

CheckpointReader::~CheckpointReader() {
  if (file_ >= 0) {
    h5::QuietHdf5 quiet;
    H5Fclose(file_);
  }
  if (fd_ >= 0) ::close(fd_);
}

const SavedRequest *CheckpointReader::find(const std::string &name) const {
  for (const SavedRequest &saved : requests_)
    if (saved.name == name) return &saved;
  return nullptr;
}

namespace {

/// Reads saved rank `rank`'s row (`elements` wide, as `memory_type`) of the [ranks, elements]
/// dataset `part` of `request` into `out` (collectively where `collective`; rank -1 takes
/// nothing).
void read_dataset_row(hid_t file, const SavedRequest &request, const char *part, int rank,
                      void *out, bool collective, hsize_t elements, hid_t memory_type) {
  const std::string where = std::string(kCheckpointRequestsGroup) + "/" + request.name + "/" + part;
  h5::Handle dataset(H5Dopen2(file, where.c_str(), H5P_DEFAULT), H5Dclose, DCT_ERR_CKPT_FORMAT,
                     "cannot open " + where);
  h5::Handle space(H5Dget_space(dataset.get()), H5Sclose, DCT_ERR_CKPT_FORMAT,
                   "H5Dget_space failed");
  h5::Handle row_space(H5Screate_simple(1, &elements, nullptr), H5Sclose, DCT_ERR_CKPT_IO,
                       "H5Screate_simple failed");
  if (rank >= 0) {
    const hsize_t start[2] = {static_cast<hsize_t>(rank), 0};
    const hsize_t count[2] = {1, elements};
    h5::check_h5(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
                 DCT_ERR_CKPT_FORMAT, "H5Sselect_hyperslab failed");
  } else {  // a collective read in which this rank takes nothing
    h5::check_h5(H5Sselect_none(space.get()), DCT_ERR_CKPT_FORMAT, "H5Sselect_none failed");
    h5::check_h5(H5Sselect_none(row_space.get()), DCT_ERR_CKPT_FORMAT, "H5Sselect_none failed");
  }
  h5::Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  if (collective)
    h5::check_h5(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE), DCT_ERR_CKPT_IO,
                 "H5Pset_dxpl_mpio failed");
  h5::check_h5(
      H5Dread(dataset.get(), memory_type, row_space.get(), space.get(), transfer.get(), out),
      DCT_ERR_CKPT_TRUNCATED, "cannot read " + where + " of saved rank " + std::to_string(rank));
}

std::string row_mismatch(const SavedRequest &request, int rank) {
  return "the residual, velocity, state, last update, threshold or call counter of '" +
         request.name + "' saved by rank " + std::to_string(rank) +
         " does not match its checksum: the file is corrupt";
}

}  // namespace

void CheckpointReader::read_residual(const SavedRequest &request, int rank, void *out) const {
  read_row(request, rank, out, nullptr);
}

bool CheckpointReader::reads_rows_directly(const SavedRequest &request) const {
  return fd_ >= 0 && !(collective_ && collective_rows_) && format_version_ >= 2 &&
         (!request.has_residual || request.residual_at != 0) &&
         (!request.has_velocity || request.velocity_at != 0) &&
         (!request.has_last_update || request.last_update_at != 0);
}

std::uint32_t CheckpointReader::read_checked(const SavedRequest &request, const char *part,
                                             std::uint64_t at, std::byte *out, std::size_t bytes,
                                             std::uint32_t crc, bool over_zeros,
                                             bool &not_zeros) const {
  std::size_t read = 0;  // bytes read over `out`, where it held zeros: they go back to them
  try {
    crc = move_and_checksum(
        out, bytes, crc, checksum_thread_, [&](std::size_t offset, std::size_t length) {
          if (over_zeros && !all_zero(out + offset, length)) {
            not_zeros = true;
            return false;
          }
          read = offset + length;
          for (std::size_t got = 0; got < length;) {
            const ssize_t n =
                ::pread(fd_, out + offset + got, length - got, off_t(at + offset + got));
            if (n < 0 && errno == EINTR) continue;
            require(n > 0, DCT_ERR_CKPT_TRUNCATED, [&] {
              return std::string("cannot read the ") + part + " of '" + request.name +
                     "': " + (n < 0 ? std::strerror(errno) : "the file ends before it");
            });
            got += std::size_t(n);
          }
          return true;
        });
  } catch (...) {  // (no checksum thread runs any more)
    if (over_zeros) std::memset(out, 0, read);
    throw;
  }
  if (not_zeros) std::memset(out, 0, read);
  return crc;
}

bool CheckpointReader::read_row_over_zeros(const SavedRequest &request, int rank, void *residual,
                                           void *velocity) const {
  require(reads_rows_directly(request) && request.state_words == 0 && !request.has_last_update &&
              rank >= 0 && rank < ranks_ && (residual != nullptr || !request.has_residual) &&
              (velocity != nullptr || !request.has_velocity),
          DCT_ERR_INTERNAL, "read_row_over_zeros: not a row it reads");
  const std::size_t bytes = static_cast<std::size_t>(request.count) * request.element_size;
  const std::uint64_t row_at = std::uint64_t(rank) * bytes;
  auto *residual_bytes = request.has_residual ? static_cast<std::byte *>(residual) : nullptr;
  auto *velocity_bytes = request.has_velocity ? static_cast<std::byte *>(velocity) : nullptr;
  // What was read over in whole goes back to zeros unless the row is complete and checked
  // (read_checked puts back a part it stops in).
  struct ZerosBack {
    std::byte *residual = nullptr, *velocity = nullptr;
    std::size_t bytes = 0;
    ~ZerosBack() {
      if (residual) std::memset(residual, 0, bytes);
      if (velocity) std::memset(velocity, 0, bytes);
    }
  } back{nullptr, nullptr, bytes};
  bool not_zeros = false;
  std::uint32_t crc = 0;
  if (residual_bytes) {
    crc = read_checked(request, "residual", request.residual_at + row_at, residual_bytes, bytes,
                       crc, true, not_zeros);
    if (not_zeros) return false;
    back.residual = residual_bytes;
  }
  if (velocity_bytes) {
    crc = read_checked(request, "velocity", request.velocity_at + row_at, velocity_bytes, bytes,
                       crc, true, not_zeros);
    if (not_zeros) return false;
    back.velocity = velocity_bytes;
  }
  crc = row_checksum_end(crc, request.tau[std::size_t(rank)], request.calls);
  require(crc == request.checksums[std::size_t(rank)], DCT_ERR_CKPT_CHECKSUM,
          [&] { return row_mismatch(request, rank); });
  back.residual = back.velocity = nullptr;  // the row is in, checked: it stays
  return true;
}

void CheckpointReader::read_row(const SavedRequest &request, int rank, void *residual,
                                void *velocity, std::vector<double> *state,
                                void *last_update) const {
  h5::QuietHdf5 quiet;
  require(request.has_row_data() && rank >= -1 && rank < ranks_, DCT_ERR_INTERNAL,
          "read_row: no such row");
  const std::size_t bytes = static_cast<std::size_t>(request.count) * request.element_size;
  // A velocity or last update the caller does not want is still checked.
  std::vector<std::byte> scratch, scratch_update;
  if (request.has_velocity && velocity == nullptr) {
    scratch.resize(bytes);
    velocity = scratch.data();
  }
  if (request.has_last_update && last_update == nullptr) {
    scratch_update.resize(bytes);
    last_update = scratch_update.data();
  }
  const hsize_t elements = static_cast<hsize_t>(request.count);
  const hid_t memory = h5::memory_type(request.element_size);
  std::vector<double> row(static_cast<std::size_t>(request.state_words));
  const std::size_t residual_bytes = request.has_residual ? bytes : 0;
  const std::size_t velocity_bytes = request.has_velocity ? bytes : 0;
  const std::size_t update_bytes = request.has_last_update ? bytes : 0;
  std::uint32_t crc = 0;
  if (reads_rows_directly(request)) {
    // The state row stays with HDF5 (collective on a shared file: every rank reads it).
    if (request.state_words > 0)
      read_dataset_row(file_, request, "state", rank, row.data(), collective_,
                       static_cast<hsize_t>(request.state_words), H5T_NATIVE_DOUBLE);
    if (rank < 0) return;
    const std::uint64_t row_at = std::uint64_t(rank) * bytes;
    bool unused = false;
    if (residual_bytes)
      crc = read_checked(request, "residual", request.residual_at + row_at,
                         static_cast<std::byte *>(residual), bytes, crc, false, unused);
    if (velocity_bytes)
      crc = read_checked(request, "velocity", request.velocity_at + row_at,
                         static_cast<std::byte *>(velocity), bytes, crc, false, unused);
    crc = checksum(row.data(), row.size() * sizeof(double), crc);
    if (update_bytes)
      crc = read_checked(request, "last update", request.last_update_at + row_at,
                         static_cast<std::byte *>(last_update), bytes, crc, false, unused);
    crc = row_checksum_end(crc, request.tau[static_cast<std::size_t>(rank)], request.calls);
  } else {
    if (request.has_residual)
      read_dataset_row(file_, request, "residual", rank, residual, collective_ && collective_rows_,
                       elements, memory);
    if (request.has_velocity)
      read_dataset_row(file_, request, "velocity", rank, velocity, collective_ && collective_rows_,
                       elements, memory);
    if (request.state_words > 0)
      read_dataset_row(file_, request, "state", rank, row.data(), collective_,
                       static_cast<hsize_t>(request.state_words), H5T_NATIVE_DOUBLE);
    if (request.has_last_update)
      read_dataset_row(file_, request, "last_update", rank, last_update,
                       collective_ && collective_rows_, elements, memory);
    if (rank < 0) return;
    crc = format_version_ >= 2
              ? row_checksum(residual, residual_bytes, request.tau[static_cast<std::size_t>(rank)],
                             request.calls, velocity, velocity_bytes, row.data(),
                             row.size() * sizeof(double), last_update, update_bytes)
              : checksum(residual, residual_bytes);
  }
  require(crc == request.checksums[static_cast<std::size_t>(rank)], DCT_ERR_CKPT_CHECKSUM,
          [&] { return row_mismatch(request, rank); });
  if (request.state_words == 0) return;
  // [words used, words..., zeros]: the row is as wide as the widest rank's.
  const double used = row[0];
  require(used >= 0 && used < double(row.size()) && used == std::floor(used), DCT_ERR_CKPT_FORMAT,
          "the state of '" + request.name + "' saved by rank " + std::to_string(rank) +
              " has an invalid length");
  for (std::size_t i = 0; i < row.size(); ++i)
    require(i <= std::size_t(used) ? std::isfinite(row[i]) : row[i] == 0.0, DCT_ERR_CKPT_FORMAT,
            "the state of '" + request.name + "' saved by rank " + std::to_string(rank) +
                " holds a value that is not finite, or padding that is not zero");
  if (state != nullptr) state->assign(row.begin() + 1, row.begin() + 1 + std::ptrdiff_t(used));
}

}  // namespace dct::detail
