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

#include "core/compute_backend.hpp"
#include "core/device_transport.hpp"
#include "core/wire.hpp"
#include "dct/dct.h"

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
  /// GPU requests: the request's stream (DCT_Request_set_stream), on which the exchange's
  /// device kernels and copies run (compute_backend.hpp: those that only write device memory
  /// are queued there, and the exchange waits for them before MPI touches device memory).
  Stream stream = nullptr;
  /// GPU requests (every algorithm but dense, unless MPI reads device memory): `result` is the
  /// user's device buffer and this its backend. What the sum is made of goes to the device as
  /// it came, compressed (allgather's blocks, split's reduced segments, recursive doubling's
  /// partial sums), is decoded and validated there and summed as on the host: the n-element
  /// result passes through host memory only where the sum itself travels dense.
  Backend *device = nullptr;
  /// The sparse exchanges, with `device`: this rank's entries in the device's memory (values
  /// as they travel), which the exchange cuts, encodes and merges there; `idx` and `val` are
  /// then not read (nullptr). Without them (a test's tampering with host copies) the entries
  /// are read from `idx` and `val`.
  const WireIndex *device_idx = nullptr;
  const T *device_val = nullptr;
  /// allgather and split, with device_idx: the blocks (and split's reduced segments) travel
  /// device to device over this transport (NCCL), queued on the request's stream, instead of
  /// through MPI. The call is then a blocking one (device_transport.hpp). It spans `comm`
  /// only: hierarchical's tiers, on communicators of their own, do not take it.
  DeviceTransport *transport = nullptr;
  ValueCoding values = ValueCoding::native;  ///< how this rank's own entries travel
  /// split only: entries the sum may keep over all owners (0: all). What an owner drops is
  /// added to its `residual` (n elements), so error feedback still conserves every input.
  std::size_t result_budget = 0;
  T *residual = nullptr;
  /// With `residual`: the backend whose memory holds it (a GPU request's residual lives on the
  /// device); nullptr: host memory.
  Backend *residual_device = nullptr;
  /// split only: recompute the segment boundaries first (decided by all ranks together).
  bool rebalance = false;
  /// allgather only: every rank's block, already gathered with the call's headers
  /// (call_message.hpp), rank r's at gathered + r * gathered_stride; null: the exchange
  /// gathers them itself.
  const std::byte *gathered = nullptr;
  std::size_t gathered_stride = 0;
  /// With `gathered`: the blocks lie in `device`'s memory (every rank's MPI reads it).
  bool gathered_on_device = false;
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
  /// A GPU request whose entries lie on the device and whose messages move device to device
  /// (a device transport, or an MPI that reads device memory: a GPU-aware MPI): its messages of
  /// compressed bytes are sent from and received into device buffers, so that nothing but
  /// counts and boundaries crosses between host and device. Each rank decides alone: its
  /// peers' MPI calls are the same whatever memory they pass, and the transport is every
  /// rank's or none's.
  bool messages_on_device() const {
    return in_.device_idx != nullptr &&
           (in_.transport != nullptr || in_.device->mpi_accepts_device_memory());
  }
  /// Before MPI reads or writes device memory: the kernels queued on the request's stream done
  /// (those that only write device memory return before they ran: compute_backend.hpp).
  void device_ready_for_mpi() const { in_.device->synchronize(in_.stream); }

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
  /// A device transport over each tier (connect_device_transports), or none.
  std::unique_ptr<DeviceTransport> group_transport, cross_transport;
  void free();
};

/// Splits `comm` (collective) into the groups of hierarchy_group_size (cost_model.hpp); no
/// communicator is made where that is 0.
Hierarchy make_hierarchy(MPI_Comm comm, int requested_group_size);

/// A device transport over each tier of `hierarchy` (a request's whose own communicator `comm`
/// has one: collective over `comm`), so that the hierarchical exchange moves its blocks as the
/// others do; every rank keeps both or none (NCCL may refuse a tier), and returns whether it
/// keeps them.
bool connect_device_transports(Hierarchy &hierarchy, MPI_Comm comm);

/// `layouts`: the segment boundaries of the group stage and of the cross stage, kept between
/// calls; `hierarchy` must have a group size.
template <typename T>
std::unique_ptr<SparseExchange<T>> make_hierarchical_exchange(const Hierarchy &hierarchy,
                                                              SplitLayout &group_layout,
                                                              SplitLayout &cross_layout);

/// This rank's block of `format` for the entries idx/val in `device`'s memory, written into
/// host memory `out` (format.units() units): encoded on the device, so that only the block's
/// bytes cross to the host. `scratch` is the device buffer it is encoded in (grown as needed).
template <typename T>
void encode_on_device(Backend &device, const wire::BlockFormat &format, const WireIndex *idx,
                      const T *val, std::byte *out, BackendArray<std::byte> &scratch,
                      Stream stream) {
  const std::size_t bytes = format.units() * wire::kUnitBytes;
  if (bytes == 0) return;
  scratch.reserve_growing(device, bytes);
  device.encode_block(format, idx, val, 0, scratch.data(), stream);
  device.copy(out, scratch.data(), bytes, stream);
}

/// A dense block in `device`'s memory: the n values of `sum` into `out` (`bytes`, a whole
/// number of units), the last unit's padding zeroed, as the host's dense blocks are.
template <typename T>
void copy_dense_block(Backend &device, const T *sum, std::size_t n, std::byte *out,
                      std::size_t bytes, Stream stream) {
  T *dense = reinterpret_cast<T *>(out);
  if (n > 0) device.copy(dense, sum, n * sizeof(T), stream);
  if (bytes > n * sizeof(T))
    device.fill_zero(dense + n, (bytes - n * sizeof(T)) / sizeof(T), stream);
}

/// Blocks of peers decoded together (Backend::decode_blocks: on a GPU one wait for all the
/// verdicts), in the order added. Kept from call to call: no allocation per call.
template <typename T>
class DecodeBatch {
 public:
  void clear() {
    formats_.clear();
    blocks_.clear();
    peers_.clear();
  }
  void add(int peer, const wire::BlockFormat &format, const std::byte *in, std::size_t in_bytes,
           std::uint64_t begin, WireIndex *idx, T *val) {
    formats_.push_back(format);
    blocks_.push_back({nullptr, in, in_bytes, begin, idx, val});
    peers_.push_back(peer);
  }
  void decode(Backend &backend, Stream stream) {
    for (std::size_t b = 0; b < blocks_.size(); ++b) blocks_[b].format = &formats_[b];
    backend.decode_blocks(blocks_.data(), blocks_.size(), stream);
  }
  std::size_t size() const { return blocks_.size(); }
  bool valid(std::size_t b) const { return blocks_[b].valid; }
  int peer(std::size_t b) const { return peers_[b]; }

 private:
  std::vector<wire::BlockFormat> formats_;
  std::vector<BlockToDecode<T>> blocks_;
  std::vector<int> peers_;
};

/// A GPU request's device buffers for what its sum is made of (SparseInput::device): blocks
/// that came to the host, and the entries decoded from them. Grown as needed, kept from call
/// to call like the exchanges' host buffers.
template <typename T>
struct DeviceStaging {
  BackendArray<std::byte> bytes;
  BackendArray<WireIndex> idx;
  BackendArray<T> val;

  /// Copies `size` bytes of host memory into `bytes`; returns where they lie on the device.
  const std::byte *from_host(Backend &device, const std::byte *host, std::size_t size,
                             Stream stream) {
    bytes.reserve_growing(device, size);
    if (size > 0) device.copy(bytes.data(), host, size, stream);
    return bytes.data();
  }
  /// Room for `entries` decoded entries in idx and val.
  void reserve_entries(Backend &device, std::size_t entries) {
    idx.reserve_growing(device, entries);
    val.reserve_growing(device, entries);
  }
  /// Copies `list` (host memory) into idx and val; returns it there.
  SparseList<T> from_host(Backend &device, const SparseList<T> &list, Stream stream) {
    reserve_entries(device, list.size);
    if (list.size > 0) {
      device.copy(idx.data(), list.idx, list.size * sizeof(WireIndex), stream);
      device.copy(val.data(), list.val, list.size * sizeof(T), stream);
    }
    return {idx.data(), val.data(), list.size};
  }
  /// result[begin, end) = the sum of `list` (host memory), on the device: the list crosses,
  /// not the range.
  void sum_host_list(Backend &device, const SparseList<T> &list, T *result, std::size_t begin,
                     std::size_t end, Stream stream) {
    const SparseList<T> on_device = from_host(device, list, stream);
    device.sum_lists(&on_device, 1, result, begin, end, stream);
  }
};

}  // namespace dct::detail
