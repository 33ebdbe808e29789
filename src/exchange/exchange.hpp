// The sparse exchanges of a compressed allreduce: how the kept (index, value) entries of every
// rank become their sum on every rank. One class per algorithm (allgather.cpp, split.cpp,
// recursive_doubling.cpp, dense.cpp), all written as resumable schedules of nonblocking MPI
// calls so that a started allreduce progresses while the application computes.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dct/dct.h"
#include "kernels.hpp"

namespace dct::detail {

/// A sequence of stages; each does local work and posts nonblocking MPI calls, and the next
/// starts once those completed.
class Schedule {
 public:
  virtual ~Schedule() = default;

  /// Runs every stage whose requests completed; with `block`, waits for them. Returns true
  /// once the last stage ran. Throws dct::Error; a schedule that threw must be dropped.
  bool advance(bool block);
  /// No MPI operation of this schedule (or of one it runs inside it) is pending: its buffers
  /// may be freed.
  bool idle() const { return pending_.empty() && (nested_ == nullptr || nested_->idle()); }
  /// Makes the schedule runnable again from its first stage (it must be idle).
  void restart() {
    next_stage_ = 0;
    done_ = false;
  }

 protected:
  /// Runs stage `stage` (0, 1, ...): local work, then requests posted into `pending_`.
  /// Returns false when there was no such stage (the schedule is complete).
  virtual bool run_stage(int stage) = 0;

  std::vector<MPI_Request> pending_;

  /// Runs `schedule` (restarted by the caller) to its end before this schedule's next stage,
  /// as part of this one (the hierarchical exchange runs a split inside its owners' stage).
  /// What it throws is kept, not thrown: take_nested_error() hands it to the next stage, which
  /// decides whether every rank must learn of it first.
  void run_nested(Schedule *schedule) { nested_ = schedule; }
  std::exception_ptr take_nested_error() { return std::exchange(nested_error_, nullptr); }
  /// Runs the current stage again once its requests (or its nested schedule) completed.
  void repeat_stage() { --next_stage_; }

 private:
  int next_stage_ = 0;
  bool done_ = false;
  Schedule *nested_ = nullptr;
  std::exception_ptr nested_error_;
};

/// What one call hands to an exchange: the shape every rank agreed on and this rank's entries.
/// Entries are sorted by index, indices < count, values nonzero (the keep rule).
template <typename T>
struct SparseInput {
  MPI_Comm comm;  ///< the request's own communicator (no other traffic on it)
  int rank;
  int ranks;
  std::size_t count;  ///< n, the tensor length
  /// Entries sent by every rank (`ranks` of them, validated); the caller's, unchanged until
  /// the call completes (a pointer: no copy per call).
  const std::int64_t *kept;
  const WireIndex *idx;  ///< this rank's entries
  const T *val;          ///< already rounded to `values` (wire_value)
  T *result;             ///< n elements: the sum, on every rank
  /// The backend whose kernels run on the exchange's host buffers (decode, scatter-add).
  Backend *host = nullptr;
  /// allgather only, GPU requests staged through the host: `result` is the user's device
  /// buffer and this its backend. The decoded entries (every rank's list, O(k P)) go to the
  /// device and are summed there, in rank order as on the host: the n-element result never
  /// passes through host memory.
  Backend *device = nullptr;
  ValueCoding values = ValueCoding::native;  ///< how this rank's own entries travel
  /// split only: entries the sum may keep over all owners (0: all). What an owner drops is
  /// added to its `residual` (n elements), so error feedback still conserves every input.
  std::size_t result_budget = 0;
  T *residual = nullptr;
  /// split only: recompute the segment boundaries first (decided by all ranks together).
  bool rebalance = false;
  /// allgather only: every rank's block, already gathered with the call's headers
  /// (call_message.hpp), rank r's at gathered + r * gathered_stride; null: the exchange
  /// gathers them itself.
  const std::byte *gathered = nullptr;
  std::size_t gathered_stride = 0;
};

/// Traffic of one exchange, as this rank sees it (DCT_Status fields).
struct ExchangeTraffic {
  MPI_Count bytes_sent = 0;
  MPI_Count bytes_received = 0;
  MPI_Count nnz_received = 0;
  /// Nonzeros of the sum, when the algorithm learns it on every rank identically; else -1.
  MPI_Count result_nnz = -1;
};

/// A sparse allreduce algorithm, one call at a time. Messages from peers are validated before
/// anything is written; a bad one is skipped (so that no rank is left waiting) and reported as
/// DCT_ERR_PEER when the exchange ends. An exchange object is reused from call to call, so its
/// buffers are allocated (and their pages faulted in) once, not on every call.
template <typename T>
class SparseExchange : public Schedule {
 public:
  /// Starts a call (the previous one must be complete); advance() then runs it.
  void begin(SparseInput<T> input) {
    in_ = std::move(input);
    traffic_ = ExchangeTraffic{};
    peer_error_.clear();
    restart();
    prepare();
  }
  const ExchangeTraffic &traffic() const { return traffic_; }

 protected:
  /// Per-call setup, after in_ is set.
  virtual void prepare() {}
  /// Records the first bad message; thrown by finish().
  void peer_error(int peer, const std::string &what);
  /// Throws DCT_ERR_PEER if a peer's message was rejected.
  void finish() const;
  /// Whether a peer's message was rejected in this call.
  bool failed() const { return !peer_error_.empty(); }

  SparseInput<T> in_;
  ExchangeTraffic traffic_;

 private:
  std::string peer_error_;
};

/// Where split's segment boundaries live between calls (one per request, identical on all
/// ranks): boundaries[r] .. boundaries[r+1] is rank r's segment of the index space.
struct SplitLayout {
  std::vector<std::uint64_t> boundaries;  ///< empty: not balanced yet
};

template <typename T>
std::unique_ptr<SparseExchange<T>> make_allgather_exchange();
template <typename T>
std::unique_ptr<SparseExchange<T>> make_dense_exchange(MPI_Datatype datatype);
/// `layout`: the request's segment boundaries, kept between calls.
template <typename T>
std::unique_ptr<SparseExchange<T>> make_split_exchange(SplitLayout &layout);
template <typename T>
std::unique_ptr<SparseExchange<T>> make_recursive_doubling_exchange();

/// The communicators of the hierarchical exchange, made once per request (collectively, by
/// make_hierarchy): the ranks split into groups of equal size, `group` those of this rank's
/// group and `cross` the ranks at this rank's position in every group. Freed by its owner.
struct Hierarchy {
  MPI_Comm group = MPI_COMM_NULL;
  MPI_Comm cross = MPI_COMM_NULL;
  int group_size = 0;  ///< G; 0: no hierarchy (fewer than 4 ranks, or a prime number)
  void free();
};

/// Splits `comm` (collective) into the groups of hierarchy_group_size (cost_model.hpp); no
/// communicator is made where that is 0.
Hierarchy make_hierarchy(MPI_Comm comm, int requested_group_size);

/// `layouts`: the segment boundaries of the group stage and of the cross stage, kept between
/// calls; `hierarchy` must have a group size.
template <typename T>
std::unique_ptr<SparseExchange<T>> make_hierarchical_exchange(const Hierarchy &hierarchy,
                                                              SplitLayout &group_layout,
                                                              SplitLayout &cross_layout);

// --- Helpers shared by the exchanges ------------------------------------------------------

namespace wire {

/// Messages travel in 8-byte units so that values stay aligned in every receive buffer.
constexpr std::size_t kUnitBytes = 8;

/// Units of a dense block of `elements` values, padded.
template <typename T>
std::size_t dense_units(std::size_t elements) {
  return (elements * sizeof(T) + kUnitBytes - 1) / kUnitBytes;
}

/// How the indices of a sparse block travel.
enum class IndexCoding : std::uint8_t {
  offsets,     ///< 32-bit offsets from the block's first index
  bitmap,      ///< one bit per index of the range
  elias_fano,  ///< ~2 + log2(range / entries) bits per entry (elias_fano.hpp)
};

/// How one sparse block travels: `entries` (index, value) pairs whose indices lie in a range
/// [begin, begin + range): [values][indices], padded to whole units. Values as `coding` says
/// (the sender already rounded them: wire_value; for `sign` every value is +-m, sent as m in
/// the tensor's type and one bit per entry, 1 = negative, padding bits zero); indices in the
/// smallest of the three IndexCoding forms for this (entries, range): Elias–Fano almost always, a
/// bitmap above about a quarter of the range, plain offsets only where Elias–Fano would need more
/// than 32 bits. Sender and receiver derive the format from what both know (entries, range,
/// coding): no header.
struct BlockFormat {
  std::size_t entries = 0;
  std::size_t range = 0;
  ValueCoding coding = ValueCoding::native;
  std::size_t native_bytes = 0;  ///< of one element of the tensor's type
  IndexCoding indices = IndexCoding::offsets;

  std::size_t values_bytes() const { return detail::values_bytes(coding, entries, native_bytes); }
  std::size_t index_bytes() const;
  std::size_t bytes() const { return values_bytes() + index_bytes(); }
  std::size_t units() const { return (bytes() + kUnitBytes - 1) / kUnitBytes; }
};

/// Bytes of each index coding for `entries` indices in a range of `range`.
std::size_t index_bytes(IndexCoding coding, std::size_t entries, std::size_t range);

template <typename T>
BlockFormat block_format(std::size_t entries, std::size_t range, ValueCoding coding) {
  BlockFormat format;
  format.entries = entries;
  format.range = range;
  format.coding = coding;
  format.native_bytes = sizeof(T);
  if (entries > 0) {  // the smallest; ties go to the simpler coding
    std::size_t best = index_bytes(IndexCoding::offsets, entries, range);
    for (IndexCoding candidate : {IndexCoding::bitmap, IndexCoding::elias_fano}) {
      const std::size_t bytes = index_bytes(candidate, entries, range);
      if (bytes < best) {
        best = bytes;
        format.indices = candidate;
      }
    }
  }
  return format;
}

/// A sparse block is sent when it is smaller than the dense one.
template <typename T>
bool sparse_is_smaller(std::size_t entries, std::size_t elements) {
  return block_format<T>(entries, elements, ValueCoding::native).bytes() < elements * sizeof(T);
}

/// Writes the block (format.units() units, padding zeroed). `idx` are absolute indices in
/// [begin, begin + format.range), strictly increasing; `val` already rounded for the coding.
template <typename T>
void encode_block(const BlockFormat &format, const WireIndex *idx, const T *val,
                  std::uint64_t begin, std::byte *out);

/// Reads a block of `in_bytes` received bytes into idx/val (format.entries each, absolute
/// indices) after validating it: the message holds the whole block, the indices strictly
/// increase and lie in [begin, begin + format.range), a bitmap or Elias–Fano code holds
/// exactly format.entries entries, and no padding bit is set. Returns false, with idx/val
/// unspecified, otherwise.
template <typename T>
bool decode_block(const BlockFormat &format, const std::byte *in, std::size_t in_bytes,
                  std::uint64_t begin, WireIndex *idx, T *val);

/// What decode_block checks of a block's indices, on a list this rank holds: strictly
/// increasing, in [begin, begin + range). One compare per entry, against a decode's unpacking.
inline bool indices_valid(const WireIndex *idx, std::size_t entries, std::uint64_t begin,
                          std::uint64_t range) {
  std::uint64_t next = begin;  // the least the next index may be
  for (std::size_t j = 0; j < entries; ++j) {
    if (idx[j] < next) return false;
    next = std::uint64_t(idx[j]) + 1;
  }
  return next <= begin + range;
}

/// Bytes per rank of a bandwidth-optimal (ring) allreduce of `bytes`: 2 (P-1)/P bytes.
inline MPI_Count ring_bytes(MPI_Count bytes, int ranks) {
  return ranks > 1 ? 2 * (ranks - 1) * bytes / ranks : 0;
}

/// `v.assign(size, value)` (or the range), its storage grown with room to spare (a quarter more
/// than asked, at least half more than it had) when it must grow: assign allocates exactly what
/// it needs, and sizes that creep up from call to call (split's segments after a re-balance,
/// recursive doubling's merged lists) allocated on each (tests/mpi/test_steady_state.cpp).
template <typename Vector>
void reserve_growing(Vector &v, std::size_t size) {
  if (size > v.capacity()) v.reserve(std::max(size + size / 4, v.capacity() + v.capacity() / 2));
}
template <typename Vector>
void assign_growing(Vector &v, std::size_t size, const typename Vector::value_type &value) {
  reserve_growing(v, size);
  v.assign(size, value);
}
template <typename Vector, typename Iterator>
void assign_growing(Vector &v, Iterator first, Iterator last) {
  reserve_growing(v, static_cast<std::size_t>(last - first));
  v.assign(first, last);
}
/// `v.resize(size)` with the same room to spare (resize grows from the size, not the capacity:
/// a vector shrunk by one call and grown past its capacity by the next got exactly that).
template <typename Vector>
void resize_growing(Vector &v, std::size_t size) {
  reserve_growing(v, size);
  v.resize(size);
}

/// Sizes a message buffer to `units` units, never to zero bytes: some MPIs (SimGrid's SMPI)
/// mishandle a null buffer even with a zero count.
inline void size_buffer(std::vector<std::byte> &buffer, std::size_t units) {
  resize_growing(buffer, (units > 0 ? units : 1) * kUnitBytes);
}

/// Units as the int MPI's v-collectives take; throws DCT_ERR_COUNT past INT_MAX.
int mpi_units(std::size_t units);

}  // namespace wire
}  // namespace dct::detail
