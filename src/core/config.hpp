// The configuration of a compressed collective: one table of knobs (config.cpp) read from
// MPI_Info keys with defaults from DCT_* environment variables.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/float16.hpp"
#include "core/internal_api.hpp"
#include "dct/dct.h"

namespace dct::detail {

/// The alpha-beta network model behind dct_algorithm=auto (see cost_model.hpp).
struct NetworkModel {
  double alpha_us = 2.0;    ///< latency of one message, microseconds
  double beta_gbps = 12.5;  ///< bandwidth per rank, GB/s (12.5 GB/s = 100 Gb/s)
};

/// How DCT-MP chooses the kept entries of each row (dct_mp_select).
enum class MpSelect { exact, laplace, threshold };

/// DCT-MP's compressor (dct_mp_compressor): top-k per row, or every value within an error bound.
enum class MpCompressor { topk, error_bounded };

/// The lossless stage of the error-bounded compressor (dct_lossless): chosen per message by
/// the modelled speed-up (automatic), or always the one named.
enum class LosslessChoice { automatic, none, lz4, zstd };

/// The error-bounded compressor's knobs (Feng et al., SC'24; docs/alltoallv.md).
struct ErrorBoundConfig {
  /// Relative bounds (of each block's max - min): one for every table, or one per table of
  /// the rows this rank sends. 0 sends exactly.
  std::vector<double> bounds{0.01};
  /// auto: each table's bound is the loosest of `classes` under which its rows stay distinct
  /// (see error_bounded.hpp); `bounds` is then unused.
  bool automatic = false;
  std::vector<double> classes{0.05, 0.03, 0.01};
  /// Iteration-wise level: the bound is multiplied by a factor going linearly from `start` to
  /// 1 over the first `calls` forward calls.
  double schedule_start = 1.0;
  std::int64_t schedule_calls = 0;
  /// Columns of one table in a row (0: the whole row is one table).
  std::int64_t table_columns = 0;
  /// The backward's relative bound; < 0: the backward travels uncompressed.
  double backward_bound = -1.0;
  LosslessChoice lossless = LosslessChoice::automatic;
};

/// What a dct_momentum request's result is (dct_momentum_result).
enum class MomentumResult {
  update,    ///< the summed update, applied as plain SGD (the application's momentum 0)
  gradient,  ///< a gradient whose heavy-ball momentum (the application's own) is that update
};

/// How tau moves between exact selections (dct_tau_control; see tau_control.hpp).
enum class TauControl {
  adaptive,  ///< corrected after every call, selected exactly when the density leaves its band
  fixed,     ///< the paper's: unchanged between the re-estimations every `interval` calls
};

/// How a GPU request's compressed blocks travel between ranks (dct_transport).
enum class Transport {
  automatic,  ///< NCCL where dct has it and every rank's buffers are CUDA memory, else MPI
  mpi,        ///< MPI (device pointers when it is GPU-aware, else pinned host staging)
  nccl,       ///< NCCL, device to device; refused where it cannot run
};

/// DCT-DP's sparsity warm-up (dct_density_warmup; DGC's warm-up, Lin et al. 2018): the density
/// starts at `start` and falls geometrically to dct_density over the first `calls` calls, so
/// the first calls, where the residual is empty and the gradients change fastest, send more.
struct DensityWarmup {
  double start = 1.0;
  std::int64_t calls = 0;  ///< 0: no warm-up
  /// Whether call `call` (0-based) is inside the warm-up.
  bool active(std::int64_t call) const { return call < calls; }
};

/// Where a configuration key acts (bits): persistent allreduces, the drop-in DCT_Allreduce
/// states of a communicator, DCT-MP alltoallv requests.
struct KnobUse {
  static constexpr unsigned allreduce = 1, drop_in = 2, alltoallv = 4, pmpi = 8, checkpoint = 16;
  static constexpr unsigned every = allreduce | drop_in | alltoallv | pmpi | checkpoint;
};

struct Config {
  double density = 0.01;
  DensityWarmup density_warmup;
  /// split only: the fraction of the tensor the summed result may keep (1: all of it).
  double result_density = 1.0;
  std::int64_t interval = 1000;
  TauControl tau_control = TauControl::adaptive;
  /// Momentum correction (DGC): the request keeps each rank's SGD velocity and compresses it
  /// instead of the raw gradient; 0 turns it off.
  double momentum = 0.0;
  /// What the result of a momentum-corrected request is: the update itself, or a gradient
  /// whose momentum is the update (the request then keeps the last update, one more tensor).
  MomentumResult momentum_result = MomentumResult::update;
  DCT_Algorithm algorithm = DCT_ALGORITHM_AUTO;
  /// hierarchical: ranks per group (0: a node's, or about sqrt(P); dp/exchange/exchange.hpp).
  int group_size = 0;
  /// Where the kernels run (auto: from where the buffers live).
  DCT_Backend backend = DCT_BACKEND_AUTO;
  /// How kept values travel: the tensor's type, or rounded to fp16/bf16 (error fed back).
  ValueCoding values = ValueCoding::native;
  /// How a GPU request's blocks travel between ranks.
  Transport transport = Transport::automatic;
  /// tau from an exact k-th largest (false) or from a random sample of `sample_size` entries.
  bool sampled_threshold = false;
  std::int64_t sample_size = 65536;
  std::string name;
  NetworkModel network;
  /// DCT-MP: row length d (0: not given; DCT_Alltoallv_init requires it), fraction of each
  /// row kept, and how the kept entries are chosen.
  std::int64_t row_length = 0;
  double keep = 0.05;
  MpSelect mp_select = MpSelect::exact;
  MpCompressor mp_compressor = MpCompressor::topk;
  ErrorBoundConfig error_bound;
  /// Drop-in DCT_Allreduce states kept per communicator (environment only), LRU beyond.
  long long drop_in_limit = 16384;
  long long drop_in_memory = 1LL << 30;  ///< bytes of the drop-in states per communicator
  /// A checkpoint saved on another number of ranks: this request's state is refused
  /// (strict) or redistributed (dct_restart, read at DCT_Allreduce_init like every key).
  bool redistribute_on_restart = false;
  /// libdct_pmpi (environment only): on/off, smallest count compressed, summary at finalize,
  /// no line at MPI_Init saying it is on.
  bool pmpi_enabled = false;
  long long pmpi_min_count = 4096;
  bool pmpi_report = false;
  bool pmpi_quiet = false;
  /// DCT_Checkpoint_save/load (environment only): the residual and velocity rows moved with
  /// collective MPI-IO (two-phase, through aggregators) instead of independent reads and writes
  /// of each rank's contiguous row.
  bool checkpoint_collective_io = false;
  /// DCT_Checkpoint_save/load (environment only): each rank's row checksums on a second
  /// thread beside its transfers (on), in line (off), or on a second thread where the rank
  /// has a core to spare (automatic; checkpoint_pieces.hpp).
  enum class ChecksumThread { automatic, on, off };
  ChecksumThread checkpoint_checksum_thread = ChecksumThread::automatic;

  /// The density in force on call `call` (0-based): dct_density, or during the warm-up
  /// start * (density / start)^(call / calls) when that is larger. Depends on the call number
  /// alone, so a resumed checkpoint continues the schedule where it stopped.
  DCT_INTERNAL_API double density_at(std::int64_t call) const;

  /// Each knob from its `info` key (info may be MPI_INFO_NULL), else from its DCT_* variable
  /// when the knob acts where `use` (KnobUse bits) says, else its default: a variable is read
  /// only as the default of an absent key, and only by the collectives it acts on. Throws
  /// DCT_ERR_INFO naming the key or variable and the bad value.
  DCT_INTERNAL_API static Config from(MPI_Info info, unsigned use = KnobUse::every);
  /// Every MPI_Info key acting where `use` (KnobUse bits) says, with its value in force,
  /// spelt so that Config::from reads it back to the same value.
  std::vector<std::pair<std::string, std::string>> in_force(unsigned use) const;
};

/// One row of the knob table, for the checks that the docs and dct.h list the same keys
/// (tests/unit/test_knob_docs.cpp).
struct KnobDescription {
  const char *info_key;       ///< nullptr: environment only
  const char *env_var;        ///< nullptr: no environment variable
  std::string default_value;  ///< as the key spells it (empty for environment-only knobs)
};
/// Every knob, in the table's order.
std::vector<KnobDescription> knob_descriptions();

/// The spelling of the dct_algorithm key's values; "unknown" for anything else.
const char *algorithm_name(int algorithm);
/// The spelling of the dct_backend key's values; "unknown" for anything else.
const char *backend_name(int backend);
/// The spelling of the dct_transport key's values.
const char *transport_name(Transport transport);
/// The spelling of the dct_values key's values.
DCT_INTERNAL_API const char *value_coding_name(ValueCoding coding);

}  // namespace dct::detail
