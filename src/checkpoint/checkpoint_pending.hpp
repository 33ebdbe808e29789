// DCT_Checkpoint_isave's second half: a snapshot of this rank's rows, and the thread that puts
// them into the file while training goes on.
//
// The save's collective half (checkpoint_save.cpp) runs in the call: it creates the temporary
// file with parallel HDF5 exactly as DCT_Checkpoint_save does (every dataset, attribute, state
// and tau row), except that it writes no residual, velocity or last-update row and no
// checksum; it copies those rows into the snapshot and notes where each lies in the file
// (HDF5 allocates contiguous datasets at creation, H5Dget_offset). The writer thread then
// computes each row's CRC-32 from the snapshot, writes rows and CRCs with pwrite at those
// offsets (write_rows, which DCT_Checkpoint_save also runs, in the call and on the rows in
// place: one writer for both), and syncs its writes: no HDF5 and
// no MPI off the caller's thread (any MPI thread level will do). DCT_Checkpoint_wait joins it,
// agrees on the outcome, seals and renames, as the blocking save does: the file holds the same
// bytes either way, and the previous checkpoint at the path stays until the rename.
//
// Private header of src/: include it from the checkpoint sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_seal.hpp"

namespace dct::detail {

class CommContext;

/// Memory for `bytes` of a snapshot: a buffer an earlier save gave back if one is of that size
/// (fresh memory costs a page fault per page, on some VMs more than the copy itself), else new.
std::unique_ptr<std::byte[]> staging_buffer(std::size_t bytes);

/// One part of a row (residual, velocity or last update) and where it goes in the file.
struct RowPart {
  const std::byte *data = nullptr;    // nullptr where the request has no such part
  std::unique_ptr<std::byte[]> copy;  // what `data` points into, for an isave
  std::uint64_t at = 0;               // bytes from the file's start
};

/// One request's row on this rank: the parts HDF5 leaves to write_rows, with what their
/// CRC-32 covers besides (the checksums dataset holds it at `checksum_at`).
struct FileRow {
  RowPart residual, velocity, last_update;
  std::size_t bytes = 0;      // of each part
  std::vector<double> state;  // the state row (format 5), as HDF5 wrote it
  double tau = 0;
  std::int64_t calls = 0;
  std::uint64_t checksum_at = 0;
};

/// Writes every row's parts and CRC-32 (little-endian, as the checksum dataset stores it) into
/// the file at `path` with pwrite, then fdatasync: "" on success, else what failed. No MPI, no
/// HDF5: DCT_Checkpoint_save runs it in the call, DCT_Checkpoint_isave on its writer thread.
/// `rank` only selects the test hooks; `checksum_thread`: see move_and_checksum.
std::string write_rows(const std::string &path, int rank, const std::vector<FileRow> &rows,
                       bool checksum_thread);

/// An asynchronous save between DCT_Checkpoint_isave and DCT_Checkpoint_wait.
class PendingSave {
 public:
  /// Registers the save (pending_save_to answers for `path` from now on).
  PendingSave(std::shared_ptr<CommContext> context, MPI_Comm comm, int rank, int ranks,
              std::string path, std::string temporary);
  /// Joins the writer if it runs (it only writes a file: it ends by itself), unregisters.
  ~PendingSave();
  PendingSave(const PendingSave &) = delete;
  PendingSave &operator=(const PendingSave &) = delete;

  /// Starts the writer over `rows` (whose parts are copies, now owned by the save).
  void start(std::vector<FileRow> rows);
  /// Waits for the writer; "" when it wrote and synced every row, else what failed.
  std::string join();

  const std::shared_ptr<CommContext> &context() const { return context_; }
  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  const std::string &path() const { return path_; }
  const std::string &temporary() const { return temporary_; }
  /// What the seal needs (set by the collective half).
  std::uint64_t user_block = 0;
  std::vector<Extent> bulk;

 private:
  std::shared_ptr<CommContext> context_;
  MPI_Comm comm_;
  int rank_, ranks_;
  std::string path_, temporary_;
  std::vector<FileRow> rows_;
  std::thread writer_;
  std::string error_;  // the writer's, read after the join
};

/// Whether this process has a save to `path` between isave and wait.
bool pending_save_to(const std::string &path);

}  // namespace dct::detail
