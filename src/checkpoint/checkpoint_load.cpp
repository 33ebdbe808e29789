// The checkpoint loader and its restart policy: DCT_Checkpoint_load validates the file against
// every live request on every rank before any state changes, and on a different rank count
// (dct_restart=redistribute) gives each rank the saved rows r with r mod ranks == rank.
#include <sys/mman.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checkpoint_collective.hpp"
#include "checkpoint/checkpoint_seal.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/request_engine.hpp"

namespace dct::detail {
namespace {

/// Staging memory for a loaded residual, in transparent huge pages where the kernel offers
/// them: first-touch page faults dominate a load into fresh memory, and huge pages make far
/// fewer (measured: docs/performance.md, "Checkpoints").
class StagingBuffer {
 public:
  explicit StagingBuffer(std::size_t bytes) {
    constexpr std::size_t kHugePage = std::size_t(2) << 20;
    void *memory = nullptr;
    if (bytes == 0 || ::posix_memalign(&memory, kHugePage, bytes) != 0) throw std::bad_alloc();
    ::madvise(memory, bytes, MADV_HUGEPAGE);  // advice only: failure just means small pages
    data_ = static_cast<std::byte *>(memory);
  }
  ~StagingBuffer() { std::free(data_); }
  StagingBuffer(const StagingBuffer &) = delete;
  StagingBuffer &operator=(const StagingBuffer &) = delete;
  std::byte *data() const { return data_; }

 private:
  std::byte *data_ = nullptr;
};

/// What a load will install into one engine, prepared before anything is touched.
struct PendingState {
  RequestEngine *engine = nullptr;
  const SavedRequest *saved = nullptr;
  std::vector<int> rows;  // saved ranks whose residuals (and velocities) this rank takes
  std::unique_ptr<StagingBuffer> residual, velocity;
  double tau = 0;
  std::vector<double> extra;  // the saved row's state words (format 5), checked by the engine
  std::unique_ptr<StagingBuffer> last_update;  // dct_momentum_result=gradient (one row, exact)
  // The request's own residual and velocity, read into directly (see direct_targets), once
  // they are found to hold zeros (`zeros_known`: before any read; else as they are read).
  void *direct_residual = nullptr, *direct_velocity = nullptr;
  std::size_t direct_bytes = 0;
  bool zeros_known = false;
  bool direct_read = false;  // the row is in them, checked
  const void *residual_data() const { return direct_residual ? direct_residual : staged(residual); }
  const void *velocity_data() const { return direct_velocity ? direct_velocity : staged(velocity); }
  bool has_rows() const {
    return saved->has_residual || saved->has_velocity || saved->has_last_update;
  }
  static const void *staged(const std::unique_ptr<StagingBuffer> &buffer) {
    return buffer ? buffer->data() : nullptr;
  }
  /// A failed load: what was read straight into the request goes back to the zeros it held
  /// (a failed read_row_over_zeros put them back itself).
  void undo_direct() const {
    if (!direct_read) return;
    if (direct_residual) std::memset(direct_residual, 0, direct_bytes);
    if (direct_velocity) std::memset(direct_velocity, 0, direct_bytes);
  }
};

/// MPI_Bcast from rank 0 of `bytes` bytes, in pieces of at most INT_MAX.
void bcast_bytes(std::byte *data, std::size_t bytes, MPI_Comm comm) {
  for (std::size_t offset = 0; offset < bytes; offset += INT_MAX) {
    const int piece = static_cast<int>(std::min<std::size_t>(bytes - offset, INT_MAX));
    check_mpi(MPI_Bcast(data + offset, piece, MPI_BYTE, 0, comm), "MPI_Bcast");
  }
}

/// A restart loads into requests that have not run: their residual and velocity are zeros in
/// host memory. Those are read into directly, without staging memory of their own (fresh pages
/// cost the load more than the read itself: docs/performance.md), since a failed load can put
/// them back exactly by zeroing them. Anything else (state to keep, device memory, several
/// rows summed on another rank count) is staged. Where the reader reads the row with plain
/// reads, each piece is checked to be zeros as it is read over (no pass of its own);
/// otherwise both are checked here.
void direct_targets(const CheckpointReader &reader, PendingState &state, bool redistribute) {
  const SavedRequest &saved = *state.saved;
  // (A last update is staged: one more part is not worth a path of its own.)
  if (redistribute || saved.has_last_update || saved.state_words > 0 ||
      (!saved.has_residual && !saved.has_velocity))
    return;
  const KernelTurn kernels;  // the residual's pending writes may run kernels
  void *residual = saved.has_residual ? state.engine->state()->loadable_residual() : nullptr;
  void *velocity = saved.has_velocity ? state.engine->state()->loadable_velocity() : nullptr;
  const std::size_t bytes = static_cast<std::size_t>(saved.count) * saved.element_size;
  if ((saved.has_residual && residual == nullptr) || (saved.has_velocity && velocity == nullptr))
    return;
  state.zeros_known = !reader.reads_rows_directly(saved);
  if (state.zeros_known &&
      ((residual && !all_zero(residual, bytes)) || (velocity && !all_zero(velocity, bytes))))
    return;
  state.direct_residual = residual;
  state.direct_velocity = velocity;
  state.direct_bytes = bytes;
}

/// The saved rows this rank takes on a restart: its own (same ranks), or every saved rank r
/// with r mod ranks == rank (redistribute).
std::vector<int> rows_for(int rank, int ranks, int saved_ranks, bool redistribute) {
  if (!redistribute) return {rank};
  std::vector<int> rows;
  for (int r = rank; r < saved_ranks; r += ranks) rows.push_back(r);
  return rows;
}

/// Checks `engine` against the checkpoint's metadata (no data is read).
PendingState plan(const CheckpointReader &reader, RequestEngine *engine, int rank, int ranks,
                  bool redistribute) {
  const SavedRequest *saved = reader.find(engine->name());
  require(saved != nullptr, DCT_ERR_CKPT_MISMATCH,
          "request '" + engine->name() + "' is not in the checkpoint");
  require(saved->kind == engine->state()->kind(), DCT_ERR_CKPT_MISMATCH,
          "request '" + engine->name() + "' is an " + engine->state()->kind() +
              " request, the checkpoint holds an " + saved->kind + " one");
  const MPI_Count count = engine->state()->counts_per_rank() ? 0 : engine->count();  // see the save
  require(
      saved->count == count && saved->element_size == engine->element_size(), DCT_ERR_CKPT_MISMATCH,
      "request '" + engine->name() + "' has " + std::to_string(engine->count()) + " elements of " +
          std::to_string(engine->element_size()) + " bytes, the checkpoint has " +
          std::to_string(saved->count) + " of " + std::to_string(saved->element_size));
  require(saved->has_residual == has_residual(*engine), DCT_ERR_CKPT_MISMATCH,
          "request '" + engine->name() +
              "' keeps a residual in one run and not in the other "
              "(density 1 on one side?)");
  require(saved->has_velocity == has_velocity(*engine), DCT_ERR_CKPT_MISMATCH,
          "request '" + engine->name() +
              "' keeps a momentum velocity (dct_momentum) in one run and not in the other");
  require(saved->has_last_update == has_last_update(*engine), DCT_ERR_CKPT_MISMATCH,
          "request '" + engine->name() +
              "' returns gradients (dct_momentum_result=gradient) in one run and not in the "
              "other");
  PendingState state;
  state.engine = engine;
  state.saved = saved;
  state.rows = rows_for(rank, ranks, reader.ranks(), redistribute);
  state.tau = saved->tau[static_cast<std::size_t>(rank % reader.ranks())];
  return state;
}

/// The rows of one part (residual or velocity) as they arrive: straight into the staging
/// buffer for one row (exact), summed in double and rounded once for several (redistribute:
/// the total over ranks, the mass error feedback and momentum carry, is kept).
template <typename T>
class RowSum {
 public:
  RowSum(std::unique_ptr<StagingBuffer> &staging, std::size_t n, std::size_t rows)
      : n_(n), rows_(rows), row_(rows > 1 ? new T[n] : nullptr), sum_(rows > 1 ? n : 0, 0.0) {
    staging = std::make_unique<StagingBuffer>(n * sizeof(T));
    result_ = reinterpret_cast<T *>(staging->data());
  }
  T *into() { return rows_ == 1 ? result_ : row_.get(); }
  void add() {
    if (rows_ > 1)
      for (std::size_t i = 0; i < n_; ++i) sum_[i] += row_[i];
  }
  void finish() {
    if (rows_ == 0) std::fill(result_, result_ + n_, T(0));
    if (rows_ > 1)
      for (std::size_t i = 0; i < n_; ++i) result_[i] = static_cast<T>(sum_[i]);
  }

 private:
  std::size_t n_, rows_;
  T *result_ = nullptr;
  std::unique_ptr<T[]> row_;
  std::vector<double> sum_;
};

/// Reads this rank's rows of every planned residual and velocity with collective reads: every
/// rank makes the same calls (`max_rows` per request), and a failing row is remembered, not
/// thrown, so that no rank is left waiting in a collective read.
template <typename T>
void read_rows(const CheckpointReader &reader, PendingState &state, std::size_t max_rows,
               std::exception_ptr &failure) {
  if (state.direct_residual || state.direct_velocity) {  // one row: this rank's own
    try {
      if (state.zeros_known) {
        state.direct_read = true;  // (a failed read leaves them to undo_direct)
        reader.read_row(*state.saved, state.rows.at(0), state.direct_residual,
                        state.direct_velocity);
        return;
      }
      state.direct_read = reader.read_row_over_zeros(*state.saved, state.rows.at(0),
                                                     state.direct_residual, state.direct_velocity);
    } catch (...) {
      if (!failure) failure = std::current_exception();
      return;
    }
    if (state.direct_read) return;
    state.direct_residual = state.direct_velocity = nullptr;  // not zeros after all: staged
  }
  const std::size_t n = static_cast<std::size_t>(state.saved->count);
  std::optional<RowSum<T>> residual, velocity;
  if (state.saved->has_residual) residual.emplace(state.residual, n, state.rows.size());
  if (state.saved->has_velocity) velocity.emplace(state.velocity, n, state.rows.size());
  // Every saved row holds the same last update: this rank's first row's is taken (with
  // redistribute, rank 0's is then broadcast: see checkpoint_load).
  if (state.saved->has_last_update)
    state.last_update = std::make_unique<StagingBuffer>(n * sizeof(T));
  for (std::size_t k = 0; k < max_rows; ++k) {
    const int saved_rank = k < state.rows.size() ? state.rows[k] : -1;
    try {
      reader.read_row(*state.saved, saved_rank, residual ? residual->into() : nullptr,
                      velocity ? velocity->into() : nullptr, nullptr,
                      k == 0 && state.last_update ? state.last_update->data() : nullptr);
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    if (saved_rank < 0) continue;
    if (residual) residual->add();
    if (velocity) velocity->add();
  }
  if (residual) residual->finish();
  if (velocity) velocity->finish();
}

}  // namespace

void checkpoint_load(MPI_Comm user_comm, const std::string &path) {
  const Collective c = open_collective(user_comm, path);
  const MPI_Comm comm = c.comm;
  const int rank = c.rank, ranks = c.ranks;
  const std::vector<RequestEngine *> &engines = c.engines;
  // Every sealed byte is checked before HDF5 parses any (each rank its share, with plain
  // reads), then rank 0 looks at the metadata alone: a missing, foreign or damaged file never
  // reaches collective HDF5 calls. Bytes a seal 2 skips (residual and velocity data) are
  // checked against their rows' checksums as they are read.
  SealHeader seal;
  run_agreed(comm, [&] {
    if (rank != 0) return;
    require_regular_file(path);
    seal = read_seal_header(path);
  });
  share_seal_header(comm, seal);
  if (seal.seal == Seal::sealed) {
    SealShare mine;
    run_agreed(comm, [&] { mine = crc_of_share(path, seal, rank, ranks); });
    const std::uint32_t crc = combine_shares(comm, rank, ranks, mine);
    run_agreed(comm, [&] {
      if (rank == 0) require_seal_matches(path, seal, crc);
    });
  }
  run_agreed(comm, [&] {
    if (rank == 0) CheckpointReader probe(path, MPI_COMM_SELF, seal.seal == Seal::sealed);
  });
  run_agreed(comm, [&] { avoid_lockedfile_overflow(path, ranks); });
  std::unique_ptr<CheckpointReader> reader;
  std::vector<PendingState> pending;
  bool redistribute = false;  // the same ranks map to themselves either way
  run_agreed(comm, [&] {
    reader = std::make_unique<CheckpointReader>(path, comm);
    reader->set_collective_rows(c.collective_rows);
    reader->set_checksum_thread(c.checksum_thread);
    redistribute = reader->ranks() != ranks;
    // Each request's own dct_restart (from its info, else DCT_RESTART at its init) decides.
    for (const RequestEngine *engine : engines) {
      require(!redistribute || !engine->state()->counts_per_rank(), DCT_ERR_CKPT_MISMATCH,
              "the checkpoint was saved on " + std::to_string(reader->ranks()) +
                  " ranks and this job has " + std::to_string(ranks) + ": DCT-MP request '" +
                  engine->name() +
                  "' cannot restart on another rank count (its layout and state are per rank)");
      require(!redistribute || engine->config().redistribute_on_restart, DCT_ERR_CKPT_MISMATCH,
              "the checkpoint was saved on " + std::to_string(reader->ranks()) +
                  " ranks and this job has " + std::to_string(ranks) + ": request '" +
                  engine->name() +
                  "' has dct_restart=strict (set dct_restart=redistribute in its MPI_Info, or "
                  "DCT_RESTART=redistribute before creating it, to restart on another rank "
                  "count)");
    }
    for (RequestEngine *engine : engines) {
      // Files before format 5 hold no DCT-MP request: those keep the state they have.
      if (engine->state()->counts_per_rank() && reader->format_version() < 5) continue;
      pending.push_back(plan(*reader, engine, rank, ranks, redistribute));
      direct_targets(*reader, pending.back(), redistribute);
    }
  });
  try {
    run_agreed(comm, [&] {
      const std::size_t max_rows = (reader->ranks() + ranks - 1) / ranks;
      std::exception_ptr failure;
      for (PendingState &state : pending) {
        if (state.saved->state_words > 0) {  // DCT-MP (never redistributed): this rank's own row
          try {
            reader->read_row(*state.saved, rank, nullptr, nullptr, &state.extra);
          } catch (...) {
            if (!failure) failure = std::current_exception();
          }
        }
        if (!state.has_rows()) continue;
        if (state.saved->element_size == 4)
          read_rows<float>(*reader, state, redistribute ? max_rows : 1, failure);
        else
          read_rows<double>(*reader, state, redistribute ? max_rows : 1, failure);
        // On another rank count some ranks take no row: rank 0 (which takes saved row 0)
        // gives every rank its last update. Collective, so before any failure is thrown.
        if (redistribute && state.last_update)
          bcast_bytes(state.last_update->data(),
                      static_cast<std::size_t>(state.saved->count) * state.saved->element_size,
                      comm);
      }
      if (failure) std::rethrow_exception(failure);
      for (const PendingState &state : pending) state.engine->state()->check_extra(state.extra);
    });
  } catch (...) {
    for (const PendingState &state : pending) state.undo_direct();
    throw;
  }
  // Everything is validated on every rank: now, and only now, the state changes.
  const KernelTurn kernels;
  for (const PendingState &state : pending)
    state.engine->state()->restore(state.residual_data(), state.velocity_data(), state.tau,
                                   state.saved->calls);
  for (const PendingState &state : pending) {
    state.engine->state()->restore_extra(state.extra);
    if (state.last_update) state.engine->state()->restore_last_update(state.last_update->data());
    state.engine->state()->restore_result_nonzeros(state.saved->result_nonzeros);
  }
}

}  // namespace dct::detail
