// Checkpoints of the error-feedback state in one parallel-HDF5 file (docs/checkpoint-format.md).
// The format lives in checkpoint_format.hpp (constants, checksums, HDF5 helpers), used by
// DCT_Checkpoint_save/load and the dct-ckpt tool alike.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/internal_api.hpp"

namespace dct::detail {

class CommContext;
class PendingSave;  // checkpoint_pending.hpp

/// Collective over `comm`; the semantics are DCT_Checkpoint_save's and DCT_Checkpoint_load's.
void checkpoint_save(MPI_Comm comm, const std::string &path);
void checkpoint_load(MPI_Comm comm, const std::string &path);
/// DCT_Checkpoint_isave's collective half: returns the save (owned by the caller, whose writer
/// thread runs) for checkpoint_wait, which alone ends it.
PendingSave *checkpoint_isave(MPI_Comm comm, const std::string &path);
/// DCT_Checkpoint_wait: collective over the save's communicator; deletes `save` whatever the
/// outcome (the same on every rank).
void checkpoint_wait(PendingSave *save);
/// Whether `save` is a save of this process between isave and wait (a handle to trust).
bool is_pending_save(const PendingSave *save);
/// The communicator `save` runs on, for the caller's entry (ContextEntry).
std::shared_ptr<CommContext> pending_save_context(const PendingSave *save);

/// CRC-32 (zlib's polynomial and conventions, libdeflate's implementation) of `bytes` bytes,
/// continuing the CRC `start` (0: a new one).
std::uint32_t checksum(const void *data, std::size_t bytes, std::uint32_t start = 0);
/// What a checkpoint stores per request and saved rank (format version 2): the CRC-32 of the
/// rank's residual bytes (none without residual), then (version 4) of its momentum velocity's
/// (none without), followed by its tau and the call counter.
/// Format 5: then of its state row (the words of EngineState::extra, see
/// docs/checkpoint-format.md), format 6: then of its last update (none without), before tau
/// and the counter.
std::uint32_t row_checksum(const void *residual, std::size_t bytes, double tau, std::int64_t calls,
                           const void *velocity = nullptr, std::size_t velocity_bytes = 0,
                           const void *state = nullptr, std::size_t state_bytes = 0,
                           const void *last_update = nullptr, std::size_t last_update_bytes = 0);
/// The end of row_checksum: `crc` (of the row's data) continued over its tau and call counter.
std::uint32_t row_checksum_end(std::uint32_t crc, double tau, std::int64_t calls);
/// Whether `bytes` bytes at `data` are all zero bits.
bool all_zero(const void *data, std::size_t bytes);

/// The widest state row a checkpoint may hold (words), a bound on what a file can make a
/// reader allocate.
inline constexpr std::int64_t kMaxStateWords = std::int64_t(1) << 20;

/// One request as a checkpoint holds it.
struct SavedRequest {
  std::string name;
  std::string kind;  // EngineState::kind(): "allreduce", "alltoallv", "alltoallv_backward"
  std::int64_t count = 0;
  int element_size = 0;  // 4: float, 8: double
  bool has_residual = false;
  bool has_velocity = false;     // dct_momentum's velocity (format 4 on)
  bool has_last_update = false;  // dct_momentum_result=gradient's last update (format 6 on)
  std::int64_t state_words = 0;  // width of the per-rank state rows (format 5; 0: none)
  std::int64_t calls = 0;
  std::int64_t result_nonzeros = 0;  // EngineState::result_nonzeros (0 where absent)
  double density = 0;
  std::int64_t interval = 0;
  std::string algorithm;
  std::vector<double> tau;               // one per saved rank
  std::vector<std::uint32_t> checksums;  // one per saved rank (0 without residual)
  /// Where saved row 0 of the residual, velocity and last update starts in the file, for
  /// reads that bypass HDF5: set where the dataset is contiguous, stored as the native type
  /// and lies whole within the file; 0 where HDF5 must read it (it converts or gathers).
  std::uint64_t residual_at = 0, velocity_at = 0, last_update_at = 0;
  /// Whether its rows hold data beyond tau and the call counter (what read_row reads).
  bool has_row_data() const {
    return has_residual || has_velocity || state_words > 0 || has_last_update;
  }
};

/// Read access to a checkpoint. Opening validates the file (throws DCT_ERR_CKPT_NOT_FOUND,
/// _FORMAT, _TRUNCATED, _VERSION) and reads every request's metadata.
class DCT_INTERNAL_API CheckpointReader {
 public:
  /// `comm`: the ranks opening the file together with MPI-IO, or MPI_COMM_SELF for one process
  /// (which first checks the whole file against its seal, unless `sealed`: the caller did).
  CheckpointReader(const std::string &path, MPI_Comm comm, bool sealed = false);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader &) = delete;
  CheckpointReader &operator=(const CheckpointReader &) = delete;

  /// How read_row moves residual and velocity rows on a file opened by several ranks:
  /// collective MPI-IO, or (the default) independent reads of each rank's contiguous row
  /// (DCT_CHECKPOINT_IO, docs/configuration.md). Every rank must choose alike.
  void set_collective_rows(bool collective) { collective_rows_ = collective; }
  /// Whether plain reads of rows (reads_rows_directly) checksum each piece on a second thread
  /// while the next is read (checkpoint_pieces.hpp); off by default.
  void set_checksum_thread(bool threaded) { checksum_thread_ = threaded; }

  int ranks() const { return ranks_; }
  int format_version() const { return format_version_; }
  const std::string &dct_version() const { return dct_version_; }
  const std::vector<SavedRequest> &requests() const { return requests_; }
  /// nullptr if the checkpoint has no request of that name.
  const SavedRequest *find(const std::string &name) const;
  /// Reads saved rank `rank`'s residual of `request` (count * element_size bytes) into `out`
  /// and checks it against its checksum (throws DCT_ERR_CKPT_CHECKSUM). On a file opened by
  /// several ranks the read is collective: every rank must call it, in the same order, with
  /// `rank` = -1 (and any `out`) on the ranks that take no row.
  void read_residual(const SavedRequest &request, int rank, void *out) const;
  /// As read_residual, with the row's velocity into `velocity` (count * element_size bytes)
  /// where the request has one; either output is ignored where the request lacks that part,
  /// and the checksum covers both.
  /// `state` (may be nullptr) receives the row's state words (format 5; empty without),
  /// `last_update` (may be nullptr) its last update (format 6; count * element_size bytes).
  void read_row(const SavedRequest &request, int rank, void *residual, void *velocity,
                std::vector<double> *state = nullptr, void *last_update = nullptr) const;
  /// Whether read_row moves `request`'s rows with plain reads (independent row I/O, every
  /// part contiguous in the file): each piece is then checked against the row's CRC-32 while
  /// it is still in cache, one pass over memory.
  bool reads_rows_directly(const SavedRequest &request) const;
  /// read_row of `rank`'s residual and velocity (no state, no last update) into memory that
  /// should hold zeros (a request that has not run), for reads_rows_directly requests: each
  /// piece is checked to be zeros just before it is read over. Returns false, with both
  /// targets as they were, where a piece is not; a read that fails puts back the zeros it
  /// read over before it throws. Not collective.
  bool read_row_over_zeros(const SavedRequest &request, int rank, void *residual,
                           void *velocity) const;

 private:
  /// Reads `bytes` at `at` into `out` and continues the CRC-32 `crc` over them (see read_row).
  std::uint32_t read_checked(const SavedRequest &request, const char *part, std::uint64_t at,
                             std::byte *out, std::size_t bytes, std::uint32_t crc, bool over_zeros,
                             bool &not_zeros) const;

  std::int64_t file_ = -1;  // hid_t
  int fd_ = -1;             // the same file, for reads_rows_directly
  bool checksum_thread_ = false;
  bool collective_ = false;
  bool collective_rows_ = false;
  int ranks_ = 0;
  int format_version_ = 0;
  std::string dct_version_;
  std::vector<SavedRequest> requests_;
};

}  // namespace dct::detail
