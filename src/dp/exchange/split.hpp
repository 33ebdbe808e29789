// split: a sparse reduce-scatter followed by an allgather of the reduced segments.
//
// The index space is cut into P segments, one per rank, whose boundaries balance the kept
// entries (from a global histogram of the indices, recomputed whenever tau is re-estimated).
// Stages: [histogram allreduce] -> entry counts per owner (alltoall) -> entries to their
// owners (alltoallv) -> each owner sums its segment in rank order [-> combine_owned: the
// hierarchical exchange sums it further across groups] -> owners announce their nonzeros
// (allgather) -> owned segments, sparse or dense whichever is smaller (allgatherv).
// Bytes received per rank: ~k (s+4) (P-1)/P + min(u (s+4), n s) (P-1)/P for u nonzeros in
// the sum, against a lower bound of 2k (s+4) (P-1)/P when the ranks' indices coincide (less
// with 16-bit values or bitmaps: see wire::BlockFormat).
//
// A GPU request's owner sums its segment on the device (split_owner_on_device.cpp): the blocks
// MPI delivered cross to the device compressed, are decoded, validated and summed there, and
// only the encoded segment comes back to be gathered.
//
// Private header of src/dp/exchange/: the class, which hierarchical.cpp derives from; its
// stages are defined in split.cpp and split_owner_on_device.cpp (instantiated there for float
// and double).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.hpp"
#include "core/peer_headers.hpp"
#include "dp/exchange/exchange.hpp"

namespace dct::detail {

template <typename T>
class SplitExchange : public SparseExchange<T> {
 protected:
  using Base = SparseExchange<T>;
  using Base::in_;
  using Base::pending_;
  using Base::traffic_;

 public:
  explicit SplitExchange(SplitLayout &layout) : layout_(layout) {}

 protected:
  /// Runs after the owner summed its segment into owned_ and before it announces it; called
  /// again (after the requests it posted, or the schedule it ran with run_nested, completed)
  /// until it returns true. A rejected message is recorded with peer_error(), never thrown
  /// before every rank can learn of it.
  virtual bool combine_owned() { return true; }
  /// The communicator whose ranks' entries balance the segments (the exchange's own by
  /// default; the hierarchical exchange's groups need one layout across all groups).
  virtual MPI_Comm balance_comm() const { return in_.comm; }
  /// Whether the owner sums its segment on the device (split_owner_on_device.cpp): GPU
  /// requests, the hierarchical exchange's group and cross tiers included.
  bool owner_on_device() const { return in_.device != nullptr; }

  std::uint64_t begin(int r) const { return layout_.boundaries[static_cast<std::size_t>(r)]; }
  std::size_t length(int r) const { return static_cast<std::size_t>(end(r) - begin(r)); }
  bool rebalancing() const { return rebalance_; }
  /// Runs once the call succeeded on every rank (the result is written): a failed call must
  /// leave the residual as it was, so the sums dropped for the result budget enter it only now.
  virtual void succeeded() {
    if (commit_on_success_) commit_dropped_sums();
  }

 public:
  /// The sums dropped for the result budget wait for commit_dropped_sums() instead of entering
  /// the residual when this exchange succeeds (it runs inside a larger call).
  void defer_dropped_sums() { commit_on_success_ = false; }
  /// Adds the sums this call dropped (dct_result_density) to the residual.
  void commit_dropped_sums();

 protected:
  static constexpr std::int64_t kRejected = -1;  // announced by an owner that rejected a block
  static constexpr const char *kBadEntries =
      "entries outside the segment it owes this rank, or out of order";
  /// This rank's segment, summed (dense), and the entries of all ranks it received.
  std::vector<T> owned_;
  std::int64_t received_entries_ = 0;

  // owner_on_device(): my segment summed; its nonzero sums, those kept under the budget and
  // those dropped (until commit_dropped_sums); a dense scratch copy; the encoded segment.
  struct DeviceOwner {
    BackendArray<T> sum, scratch;
    BackendArray<WireIndex> idx, kept_idx, dropped_idx;
    BackendArray<T> val, kept_val, dropped_val;
    BackendArray<std::byte> segment;
    std::size_t dropped = 0;
  } owner_;

  /// owner_on_device(): owner_.sum's nonzeros compacted into owner_.idx and owner_.val, in
  /// index order, relative to my segment (the host's `v != 0`, NaN included); returns how many.
  std::size_t compact_owned_sums_on_device();
  /// At least the nonzeros owner_.sum can hold (room for compact_owned_sums_on_device): one per
  /// entry summed into it. The hierarchical exchange's cross tier replaces the sum.
  virtual std::size_t owned_nonzeros_at_most() const {
    return static_cast<std::size_t>(received_entries_);
  }

  void prepare() override {
    // Every rank has the same layout, so every rank takes the same decision here.
    rebalance_ =
        in_.rebalance || layout_.boundaries.size() != static_cast<std::size_t>(in_.ranks) + 1;
  }

  bool run_stage(int stage) override;

 private:
  std::size_t ranks() const { return static_cast<std::size_t>(in_.ranks); }
  std::uint64_t end(int r) const { return layout_.boundaries[static_cast<std::size_t>(r) + 1]; }
  MPI_Count others(MPI_Count per_peer) const { return per_peer * (in_.ranks - 1); }
  void count_traffic(MPI_Count sent, MPI_Count received) {
    traffic_.bytes_sent += sent;
    traffic_.bytes_received += received;
  }

  // Bucket b holds the indices i with i * buckets / n == b.
  void post_histogram();

  void balance_boundaries();

  void post_counts();

  void post_entries();

  /// For each key, how many of my entries lie below it (on the device when they are there).
  const std::vector<std::uint64_t> &entries_below(const std::vector<std::uint64_t> &keys);

  /// My entries for every owner (`units` units), encoded where they lie: only the blocks of a
  /// GPU request cross to the host, into outgoing_, and none where MPI reads them on the device
  /// (messages_on_device()). Returns where they are.
  std::byte *encode_entries(std::size_t units);

  // Sums the entries of my segment in rank order, so the result bits do not depend on timing.
  void reduce_owned_segment();
  void reduce_owned_segment_on_device();

  void announce_owned_segment();

  void encode_owned_segment(std::uint64_t first, std::size_t nonzeros);
  // The device's twin of the host's count, drop_small_sums and encode_owned_segment: my
  // segment's nonzero sums compacted (indices relative to the segment), the budget applied,
  // the segment encoded into owner_.segment (and segment_, unless MPI sends it from the
  // device). Returns the nonzeros announced.
  std::size_t encode_owned_segment_on_device();
  void drop_small_sums_on_device(std::size_t &nonzeros, const WireIndex *&idx, const T *&val);

  /// My share of the result budget (dct_result_density), in proportion to the entries I
  /// received; no limit without a budget.
  std::size_t owner_budget() const;

  // Ok-Topk's second selection: the owner keeps its share of the result budget, in proportion
  // to the entries it received, and moves the smaller sums into its own residual once the call
  // succeeded (commit_dropped_sums). The sum over ranks of the residuals still holds every
  // input not delivered. Returns the nonzeros left.
  std::size_t drop_small_sums(std::uint64_t first, std::size_t nonzeros);

  // My entries for owner r travel as the request says (values rounded by the sender, who kept
  // the rounding error); the owners' sums travel in full precision.
  wire::BlockFormat entry_format(std::int64_t entries, int owner) const {
    return wire::block_format<T>(static_cast<std::size_t>(entries), length(owner), in_.values);
  }
  wire::BlockFormat segment_format(int owner, std::size_t nonzeros) const {
    return wire::block_format<T>(nonzeros, length(owner), ValueCoding::native);
  }

  bool segment_sparse(int r) const {
    return wire::sparse_is_smaller<T>(static_cast<std::size_t>(owned_nnz_all_[r]), length(r));
  }

  void post_segments();

  // Every sparse segment is decoded and validated before the result is touched, so that a
  // rejected call leaves it as it was (every rank reads the same bytes and fails alike).
  void decode_segments();

  std::size_t segment_offset(int r) const {
    return std::size_t(gather_offsets_[r]) * wire::kUnitBytes;
  }
  std::size_t segment_bytes(int r) const {
    return std::size_t(gather_units_[r]) * wire::kUnitBytes;
  }

  SplitLayout &layout_;
  bool rebalance_ = false;
  bool commit_on_success_ = true;
  std::size_t buckets_ = 0;
  std::vector<std::int64_t> histogram_;
  std::vector<std::uint64_t> bucket_starts_, bounds_;
  std::vector<std::size_t> first_;  // my entries for rank r: [first_[r], first_[r+1])
  std::vector<std::int64_t> send_counts_, recv_counts_;
  std::vector<int> send_units_, send_offsets_, recv_units_, recv_offsets_;
  std::vector<std::byte> outgoing_, incoming_;
  std::vector<WireIndex> dropped_idx_;  // sums dropped for the result budget (residual indices)
  std::vector<T> dropped_val_;
  std::vector<WireIndex> sparse_idx_;  // the owned segment's nonzeros, when sent sparse
  std::vector<T> sparse_val_;
  std::vector<WireIndex> decoded_idx_;  // one peer's block, decoded and validated
  std::vector<T> decoded_val_;
  // in_.device only: my blocks for the owners as they are encoded; the blocks I received as
  // owner (owner_on_device()), then the reduced segments that came back, and the entries
  // decoded from them
  DeviceStaging<T> device_;
  std::vector<SparseList<T>> lists_;  // the received blocks, decoded on the device
  DecodeBatch<T> batch_;              // the blocks (or the reduced segments) decoded together
  // messages_on_device(): the blocks I receive as owner, then every reduced segment
  BackendArray<std::byte> device_messages_;
  std::int64_t owned_nnz_ = 0;
  std::vector<std::int64_t> owned_nnz_all_;
  std::vector<std::byte> segment_, gathered_;
  std::vector<int> gather_units_, gather_offsets_;
};

}  // namespace dct::detail
