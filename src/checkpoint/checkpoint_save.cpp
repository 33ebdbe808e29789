// The checkpoint writer: DCT_Checkpoint_save, one collective parallel-HDF5 file written under a
// temporary name and renamed only when complete (docs/checkpoint-format.md).
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checkpoint_collective.hpp"
#include "checkpoint/checkpoint_format.hpp"
#include "checkpoint/checkpoint_pending.hpp"
#include "checkpoint/checkpoint_seal.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/request_engine.hpp"
#include "core/test_hooks.hpp"

namespace dct::detail {
namespace {

void sync_to_disk(const std::string &path, int code) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  require(fd >= 0, code, "cannot open " + path + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int error = errno;  // before close() may change it
  ::close(fd);
  require(rc == 0, code, "fsync of " + path + " failed: " + std::strerror(error));
}

/// Each engine's state row (format 5): [words used, EngineState::extra()..., zeros], as wide as the
/// widest rank's (one row width per dataset); empty for engines with no extra state anywhere.
/// The rows are taken under run_agreed first, so that no rank fails between collectives.
std::vector<std::vector<double>> state_rows(MPI_Comm comm,
                                            const std::vector<RequestEngine *> &engines) {
  std::vector<std::vector<double>> rows;
  run_agreed(comm, [&] {
    for (const RequestEngine *engine : engines) {
      rows.push_back(engine->state()->extra());
      if (!rows.back().empty()) rows.back().insert(rows.back().begin(), double(rows.back().size()));
      require(std::int64_t(rows.back().size()) <= kMaxStateWords, DCT_ERR_INTERNAL,
              "the state of '" + engine->name() + "' is too large for a checkpoint");
    }
  });
  std::vector<long long> widths;
  for (const std::vector<double> &row : rows) widths.push_back(static_cast<long long>(row.size()));
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, widths.data(), static_cast<int>(widths.size()),
                          MPI_LONG_LONG, MPI_MAX, comm),
            "MPI_Allreduce");
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i].resize(std::size_t(widths[i]), 0.0);
  return rows;
}

/// The residual and velocity datasets the file will hold: the extents its seal leaves to the
/// rows' own checksums (checkpoint_seal.hpp), which size its user block.
std::size_t bulk_datasets(const std::vector<RequestEngine *> &engines) {
  std::size_t datasets = 0;
  for (const RequestEngine *engine : engines)
    datasets += std::size_t(has_residual(*engine)) + std::size_t(has_velocity(*engine)) +
                std::size_t(has_last_update(*engine));
  return datasets;
}

/// `part` of `bytes` at `row` (none for nullptr), in place or (`copy`) copied.
void take(RowPart &part, const void *row, std::size_t bytes, bool copy) {
  if (row == nullptr || bytes == 0) return;
  part.data = static_cast<const std::byte *>(row);
  if (!copy) return;
  part.copy = staging_buffer(bytes);
  std::memcpy(part.copy.get(), row, bytes);
  part.data = part.copy.get();
}

/// Writes the file's HDF5 part; returns where the residual, velocity and last-update datasets'
/// raw data lie, in file order. Their rows and the checksums are written by HDF5 only without
/// `rows` (DCT_CHECKPOINT_IO=collective): else each request's row goes into `rows` (copied with
/// `copy`, for DCT_Checkpoint_isave) with where its parts go, for write_rows.
std::vector<Extent> write_file(const std::string &path, const Collective &c,
                               const std::vector<std::vector<double>> &states,
                               std::uint64_t user_block, std::vector<FileRow> *rows, bool copy) {
  const int rank = c.rank, ranks = c.ranks;
  const std::vector<RequestEngine *> &engines = c.engines;
  h5::QuietHdf5 quiet;
  h5::Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  h5::check_h5(H5Pset_fapl_mpio(access.get(), c.comm, MPI_INFO_NULL), DCT_ERR_CKPT_IO,
               "H5Pset_fapl_mpio failed");
  // The user block holds the seal (checkpoint_seal.hpp), written once HDF5 is done.
  h5::Handle creation(H5Pcreate(H5P_FILE_CREATE), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  // No modification times in object headers: the same state saves to the same bytes.
  h5::Handle groups(H5Pcreate(H5P_GROUP_CREATE), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  for (const hid_t list : {creation.get(), groups.get()})
    h5::check_h5(H5Pset_obj_track_times(list, false), DCT_ERR_CKPT_IO,
                 "H5Pset_obj_track_times failed");
  h5::check_h5(H5Pset_userblock(creation.get(), user_block), DCT_ERR_CKPT_IO,
               "H5Pset_userblock failed");
  h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, creation.get(), access.get()), H5Fclose,
                  DCT_ERR_CKPT_IO, "cannot create " + path);
  h5::write_attribute(file.get(), "format", std::string(kCheckpointFormatName));
  h5::write_attribute(file.get(), "format_version", kCheckpointFormatVersion);
  h5::write_attribute(file.get(), "dct_version",
                      std::to_string(DCT_VERSION_MAJOR) + "." + std::to_string(DCT_VERSION_MINOR) +
                          "." + std::to_string(DCT_VERSION_PATCH));
  h5::write_attribute(file.get(), "ranks", static_cast<std::int64_t>(ranks));
  h5::Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  h5::check_h5(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE), DCT_ERR_CKPT_IO,
               "H5Pset_dxpl_mpio failed");
  h5::Handle requests(
      H5Gcreate2(file.get(), kCheckpointRequestsGroup, H5P_DEFAULT, groups.get(), H5P_DEFAULT),
      H5Gclose, DCT_ERR_CKPT_IO, "cannot create group requests");
  std::vector<Extent> bulk;
  for (std::size_t e = 0; e < engines.size(); ++e) {
    const RequestEngine *engine = engines[e];
    const std::vector<double> &state = states[e];
    h5::Handle group(
        H5Gcreate2(requests.get(), engine->name().c_str(), H5P_DEFAULT, groups.get(), H5P_DEFAULT),
        H5Gclose, DCT_ERR_CKPT_IO, "cannot create group for " + engine->name());
    const Config &config = engine->config();
    const bool residual = has_residual(*engine);
    h5::write_attribute(group.get(), "kind", std::string(engine->state()->kind()));
    // DCT-MP's counts are per rank (in the state row); an allreduce's is every rank's.
    h5::write_attribute(
        group.get(), "count",
        static_cast<std::int64_t>(engine->state()->counts_per_rank() ? 0 : engine->count()));
    h5::write_attribute(group.get(), "element_size",
                        static_cast<std::int64_t>(engine->element_size()));
    h5::write_attribute(group.get(), "datatype",
                        std::string(engine->element_size() == 4 ? "float" : "double"));
    h5::write_attribute(group.get(), "calls", static_cast<std::int64_t>(engine->calls()));
    h5::write_attribute(group.get(), "result_nonzeros", engine->state()->result_nonzeros());
    h5::write_attribute(group.get(), "density", config.density);
    h5::write_attribute(group.get(), "interval", config.interval);
    h5::write_attribute(group.get(), "algorithm", std::string(algorithm_name(config.algorithm)));
    h5::write_attribute(group.get(), "has_residual", static_cast<std::int64_t>(residual));
    const double tau = engine->state()->tau();
    const void *data = nullptr;
    const void *velocity = nullptr;
    const void *last_update = nullptr;
    {  // may run kernels (pending writes, a device copy)
      const KernelTurn kernels;
      if (residual) data = engine->state()->residual();
      velocity = engine->state()->velocity();  // nullptr without momentum or elements
      last_update =
          engine->state()->last_update();  // nullptr but with dct_momentum_result=gradient
    }
    h5::write_attribute(group.get(), "has_velocity",
                        static_cast<std::int64_t>(velocity != nullptr));
    if (last_update != nullptr)
      h5::write_attribute(group.get(), "has_last_update", std::int64_t(1));
    h5::write_attribute(group.get(), "state_words", static_cast<std::int64_t>(state.size()));
    const std::size_t bytes = static_cast<std::size_t>(engine->count()) * engine->element_size();
    const std::int64_t calls = static_cast<std::int64_t>(engine->calls());
    FileRow *taken = nullptr;
    if (rows != nullptr) {
      taken = &rows->emplace_back();
      take(taken->residual, data, bytes, copy);
      take(taken->velocity, velocity, bytes, copy);
      take(taken->last_update, last_update, bytes, copy);
      taken->bytes = bytes;
      taken->state = state;
      taken->tau = tau;
      taken->calls = calls;
    }
    const std::uint32_t crc = taken != nullptr
                                  ? 0
                                  : row_checksum(data, residual ? bytes : 0, tau, calls, velocity,
                                                 velocity != nullptr ? bytes : 0, state.data(),
                                                 state.size() * sizeof(double), last_update,
                                                 last_update != nullptr ? bytes : 0);
    if (!state.empty())
      h5::write_rank_row(group.get(), "state", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, ranks, rank,
                         static_cast<hsize_t>(state.size()), true, state.data(), transfer.get());
    for (const auto &[part, row, at] :
         {std::tuple{"residual", data, taken ? &taken->residual.at : nullptr},
          std::tuple{"velocity", velocity, taken ? &taken->velocity.at : nullptr},
          std::tuple{"last_update", last_update, taken ? &taken->last_update.at : nullptr}})
      if (row != nullptr) {
        const Extent raw = h5::write_rank_row(
            group.get(), part, h5::file_type(engine->element_size()),
            h5::memory_type(engine->element_size()), ranks, rank,
            static_cast<hsize_t>(engine->count()), true, taken ? nullptr : row, transfer.get());
        if (raw.end > raw.begin) bulk.push_back(raw);  // else sealed with the rest
        if (at != nullptr) *at = raw.begin + std::uint64_t(rank) * bytes;
      }
    h5::write_rank_row(group.get(), "tau", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, ranks, rank, 1, false,
                       &tau, transfer.get());
    const Extent checksums =
        h5::write_rank_row(group.get(), "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32, ranks, rank,
                           1, false, taken ? nullptr : &crc, transfer.get());
    if (taken != nullptr) {
      require(checksums.end >= checksums.begin + 4 * std::uint64_t(ranks), DCT_ERR_CKPT_IO,
              "HDF5 did not place the checksums of '" + engine->name() + "' in " + path);
      taken->checksum_at = checksums.begin + 4 * std::uint64_t(rank);
    }
  }
#ifdef DCT_TESTING
  testing::crash_in_checkpoint_save(rank);  // dies here, the file half-written
#endif
  requests.close(DCT_ERR_CKPT_IO, "closing group requests failed");
  file.close(DCT_ERR_CKPT_IO, "closing " + path + " failed");
  std::sort(bulk.begin(), bulk.end(),
            [](const Extent &a, const Extent &b) { return a.begin < b.begin; });
  return bulk;
}

/// About what the file will hold: every residual row, tau and checksum, and HDF5's metadata
/// (counted 4x over what was measured: docs/internals.md, measured reasons).
std::uint64_t estimated_file_bytes(const std::vector<RequestEngine *> &engines,
                                   const std::vector<std::vector<double>> &states, int ranks,
                                   std::uint64_t user_block) {
  std::uint64_t bytes = user_block + 8192;
  for (std::size_t e = 0; e < engines.size(); ++e) {
    const RequestEngine *engine = engines[e];
    bytes += 16384 + 12 * std::uint64_t(ranks) + 8 * states[e].size() * std::uint64_t(ranks);
    const std::uint64_t row = std::uint64_t(engine->count()) *
                              std::uint64_t(engine->element_size()) * std::uint64_t(ranks);
    if (has_residual(*engine)) bytes += row;
    if (has_velocity(*engine)) bytes += row;
    if (has_last_update(*engine)) bytes += row;
  }
  return bytes;
}

/// Rank 0, before any collective HDF5 call: room for the file, asked of the file system
/// (fallocate), so that a full one ends in DCT_ERR_CKPT_IO on every rank instead of a
/// write failing on some ranks inside HDF5's collective calls (issue 35: every rank hung, the
/// temporary file stayed). File systems that cannot reserve space are not asked. On tmpfs and
/// ramfs a reservation is memory, allocated and zeroed (a large share of a save; measured:
/// docs/performance.md, "Checkpoints: the asynchronous save"): there the free space the file
/// system reports is compared instead.
void require_room(const std::string &temporary, std::uint64_t bytes) {
  const std::string directory = directory_of(temporary);
  struct statfs system {};
  if (::statfs(directory.c_str(), &system) == 0 &&
      (system.f_type == TMPFS_MAGIC || system.f_type == RAMFS_MAGIC)) {
    const std::uint64_t free = std::uint64_t(system.f_bavail) * std::uint64_t(system.f_bsize);
    require(free >= bytes, DCT_ERR_CKPT_IO,
            "not enough room for the checkpoint in " + directory + ": it needs about " +
                std::to_string(bytes) + " bytes (" + std::to_string(free) + " free)");
    return;
  }
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int open_error = errno;
  require(fd >= 0, DCT_ERR_CKPT_IO,
          "cannot create " + temporary + ": " + std::strerror(open_error));
  // fallocate, not posix_fallocate: glibc emulates the latter by writing every block.
  const int rc = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  ::close(fd);
  std::remove(temporary.c_str());
  require(rc != ENOSPC && rc != EFBIG && rc != EDQUOT, DCT_ERR_CKPT_IO,
          "not enough room for the checkpoint in " + directory + ": it needs about " +
              std::to_string(bytes) + " bytes (" + std::strerror(rc) + ")");
}

/// Rank 0: temporaries of saves to `path` whose process is gone (killed during a save) are
/// removed; a live process's (another save in progress on this node) is left alone.
void remove_stale_temporaries(const std::string &path) {
  const std::string directory = directory_of(path);
  const std::string prefix = path.substr(path.find_last_of('/') + 1) + ".tmp.";
  DIR *listing = ::opendir(directory.c_str());
  if (listing == nullptr) return;
  while (const dirent *entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const long number = std::strtol(pid.c_str(), nullptr, 10);
    if (number <= 0 || (::kill(static_cast<pid_t>(number), 0) != 0 && errno == ESRCH))
      std::remove((directory + "/" + name).c_str());
  }
  ::closedir(listing);
}

/// Rank 0's temporary name for `path` (its process id: remove_stale_temporaries), on every rank.
std::string agreed_temporary(MPI_Comm comm, const std::string &path) {
  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  int length = static_cast<int>(temporary.size());
  check_mpi(MPI_Bcast(&length, 1, MPI_INT, 0, comm), "MPI_Bcast");
  temporary.resize(static_cast<std::size_t>(length));
  check_mpi(MPI_Bcast(temporary.data(), length, MPI_CHAR, 0, comm), "MPI_Bcast");
  return temporary;
}

/// What a save has settled before it writes the file.
struct Plan {
  std::vector<std::vector<double>> states;
  std::uint64_t user_block = 0;
};

/// Collective, before the temporary is touched: an asynchronous save to `path` still pending
/// has the same temporary (and its rename would come after this save's).
void require_no_pending_save(MPI_Comm comm, const std::string &path) {
  run_agreed(comm, [&] {
    require(!pending_save_to(path), DCT_ERR_ACTIVE,
            "an asynchronous save to " + path +
                " is in progress: complete it with DCT_Checkpoint_wait first");
  });
}

/// Collective: everything a save checks and settles before the file is created.
Plan plan_save(const Collective &c, const std::string &path, const std::string &temporary) {
  run_agreed(c.comm, [&] { avoid_lockedfile_overflow(temporary, c.ranks); });
  Plan plan{state_rows(c.comm, c.engines), seal_user_block(bulk_datasets(c.engines))};
  run_agreed(c.comm, [&] {
    if (c.rank != 0) return;
    remove_stale_temporaries(path);
    require_room(temporary, estimated_file_bytes(c.engines, plan.states, c.ranks, plan.user_block));
  });
  return plan;
}

/// Collective, once every byte but the seal is in `temporary`: seals it, and only then gives
/// it the checkpoint's name (synced before and after the rename).
void seal_and_rename(MPI_Comm comm, int rank, int ranks, const std::string &temporary,
                     const std::string &path, std::uint64_t user_block,
                     const std::vector<Extent> &bulk) {
  run_agreed(comm, [&] { seal_file(temporary, comm, rank, ranks, user_block, bulk); });
  run_agreed(comm, [&] {
    if (rank != 0) return;
    sync_to_disk(temporary, DCT_ERR_CKPT_IO);
    const int renamed = std::rename(temporary.c_str(), path.c_str());
    const int error = errno;  // read before the message is built
    require(renamed == 0, DCT_ERR_CKPT_IO,
            "cannot rename " + temporary + " to " + path + ": " + std::strerror(error));
    sync_to_disk(directory_of(path), DCT_ERR_CKPT_IO);
  });
}

}  // namespace

namespace {

/// What every save starts with: the agreed requests and file (`c.path`, the one spelling of
/// `path` that every check below compares), no save pending to it, the agreed temporary name
/// and the plan; then `body(c, temporary, plan)`, the temporary removed (by rank 0) if
/// anything throws.
template <typename Body>
auto run_save(MPI_Comm user_comm, const std::string &path, Body &&body) {
  const Collective c = open_collective(user_comm, path);
  require_no_pending_save(c.comm, c.path);
  const std::string temporary = agreed_temporary(c.comm, c.path);
  try {
    return body(c, temporary, plan_save(c, c.path, temporary));
  } catch (...) {
    if (c.rank == 0) std::remove(temporary.c_str());
    throw;
  }
}

}  // namespace

void checkpoint_save(MPI_Comm user_comm, const std::string &path) {
  run_save(user_comm, path,
           [&](const Collective &c, const std::string &temporary, const Plan &plan) {
             // The rows with POSIX I/O in place (write_rows), unless DCT_CHECKPOINT_IO=collective.
             std::vector<FileRow> rows;
             std::vector<Extent> bulk;
             run_agreed(c.comm, [&] {
               bulk = write_file(temporary, c, plan.states, plan.user_block,
                                 c.collective_rows ? nullptr : &rows, false);
               if (!c.collective_rows) {
                 const std::string failed = write_rows(temporary, c.rank, rows, c.checksum_thread);
                 require(failed.empty(), DCT_ERR_CKPT_IO, failed);
               }
             });
             seal_and_rename(c.comm, c.rank, c.ranks, temporary, c.path, plan.user_block, bulk);
           });
}

PendingSave *checkpoint_isave(MPI_Comm user_comm, const std::string &path) {
  return run_save(
      user_comm, path, [&](const Collective &c, const std::string &temporary, const Plan &plan) {
        std::vector<FileRow> rows;
        std::vector<Extent> bulk;
        run_agreed(c.comm, [&] {
          bulk = write_file(temporary, c, plan.states, plan.user_block, &rows, true);
        });
        auto save =
            std::make_unique<PendingSave>(c.context, c.comm, c.rank, c.ranks, c.path, temporary);
        save->user_block = plan.user_block;
        save->bulk = std::move(bulk);
        // A thread that cannot start on one rank (EAGAIN) fails the isave on all; the others'
        // writers are joined as `save` goes (before rank 0 removes the file).
        run_agreed(c.comm, [&] { save->start(std::move(rows)); });
        return save.release();
      });
}

void checkpoint_wait(PendingSave *pending) {
  const std::unique_ptr<PendingSave> save(pending);
  const std::string failed = save->join();
  try {
    run_agreed(save->comm(), [&] { require(failed.empty(), DCT_ERR_CKPT_IO, failed); });
    seal_and_rename(save->comm(), save->rank(), save->ranks(), save->temporary(), save->path(),
                    save->user_block, save->bulk);
  } catch (...) {
    if (save->rank() == 0) std::remove(save->temporary().c_str());
    throw;
  }
}

}  // namespace dct::detail
