// split's owner on the device, for GPU requests (SplitExchange::owner_on_device): the same
// stages as the host's reduce_owned_segment, drop_small_sums and encode_owned_segment, made of
// Backend primitives, so that the owned segment (n / P elements) is never summed, scanned or
// encoded in host memory. The blocks MPI delivered cross to the device as they came and the
// encoded segment comes back: compressed bytes each way. The bits are the host's: the blocks
// summed in rank order from +0, the nonzeros in index order, the same budget and threshold.
#include "dp/exchange/split.hpp"

namespace dct::detail {

template <typename T>
void SplitExchange<T>::reduce_owned_segment_on_device() {
  Backend &device = *in_.device;
  const std::byte *blocks =
      this->messages_on_device()
          ? device_messages_.data()
          : device_.from_host(device, incoming_.data(), incoming_.size(), in_.stream);
  std::size_t total = 0;
  for (int r = 0; r < in_.ranks; ++r) total += static_cast<std::size_t>(recv_counts_[r]);
  device_.reserve_entries(device, total);
  lists_.clear();
  received_entries_ = 0;
  batch_.clear();
  std::size_t first = 0;
  for (int r = 0; r < in_.ranks; ++r) {
    // Decoded from base 0: indices relative to my segment, as the sum's.
    batch_.add(r, entry_format(recv_counts_[r], in_.rank),
               blocks + std::size_t(recv_offsets_[r]) * wire::kUnitBytes,
               std::size_t(recv_units_[r]) * wire::kUnitBytes, 0, device_.idx.data() + first,
               device_.val.data() + first);
    first += static_cast<std::size_t>(recv_counts_[r]);
  }
  batch_.decode(device, in_.stream);
  first = 0;
  for (std::size_t b = 0; b < batch_.size(); ++b) {
    const int r = batch_.peer(b);
    const std::size_t entries = static_cast<std::size_t>(recv_counts_[r]);
    if (!batch_.valid(b)) {
      this->peer_error(r, kBadEntries);
    } else {
      lists_.push_back({device_.idx.data() + first, device_.val.data() + first, entries});
      received_entries_ += recv_counts_[r];
      if (r != in_.rank) traffic_.nnz_received += static_cast<MPI_Count>(entries);
    }
    first += entries;
  }
  owner_.sum.reserve_growing(device, length(in_.rank));
  device.sum_lists(lists_.data(), lists_.size(), owner_.sum.data(), 0, length(in_.rank),
                   in_.stream);
}

template <typename T>
std::size_t SplitExchange<T>::compact_owned_sums_on_device() {
  Backend &device = *in_.device;
  const std::size_t length = this->length(in_.rank);
  // At threshold 0 the keep rule selects exactly the nonzeros, NaN included, as the host's
  // count does.
  const std::size_t capacity = owned_nonzeros_at_most();
  owner_.idx.reserve_growing(device, capacity);
  owner_.val.reserve_growing(device, capacity);
  if (length == 0) return 0;
  return device
      .select(nullptr, owner_.sum.data(), length, T(0), kEveryTie, owner_.idx.data(),
              owner_.val.data(), capacity, SparseList<T>{}, in_.stream)
      .count;
}

template <typename T>
std::size_t SplitExchange<T>::encode_owned_segment_on_device() {
  Backend &device = *in_.device;
  const std::size_t length = this->length(in_.rank);
  std::size_t nonzeros = compact_owned_sums_on_device();
  const WireIndex *idx = owner_.idx.data();
  const T *val = owner_.val.data();
  drop_small_sums_on_device(nonzeros, idx, val);
  // The segment as it travels, made in owner_.segment: MPI sends it from there, or it crosses
  // to the host once.
  const bool sparse = wire::sparse_is_smaller<T>(nonzeros, length);
  const std::size_t units =
      sparse ? segment_format(in_.rank, nonzeros).units() : wire::dense_units<T>(length);
  const std::size_t bytes = units * wire::kUnitBytes;
  owner_.segment.reserve_growing(device, bytes);
  if (!sparse)
    copy_dense_block(device, owner_.sum.data(), length, owner_.segment.data(), bytes, in_.stream);
  else if (bytes > 0)
    device.encode_block(segment_format(in_.rank, nonzeros), idx, val, 0, owner_.segment.data(),
                        in_.stream);
  if (!this->messages_on_device()) {
    wire::size_buffer(segment_, units);
    device.copy(segment_.data(), owner_.segment.data(), bytes, in_.stream);
  }
  return nonzeros;
}

template <typename T>
void SplitExchange<T>::drop_small_sums_on_device(std::size_t &nonzeros, const WireIndex *&idx,
                                                 const T *&val) {
  const std::size_t budget = owner_budget();
  if (nonzeros <= budget) return;
  Backend &device = *in_.device;
  const std::size_t length = this->length(in_.rank);
  T *sum = owner_.sum.data();
  const T tau = budget == 0 ? std::numeric_limits<T>::infinity()
                            : device.kth_largest_abs(nullptr, sum, length, budget, in_.stream);
  owner_.kept_idx.reserve_growing(device, nonzeros);
  owner_.kept_val.reserve_growing(device, nonzeros);
  const std::size_t kept =
      device.keep_top(idx, val, nonzeros, tau, kEveryTie, ValueCoding::native,
                      owner_.kept_idx.data(), owner_.kept_val.data(), nullptr, in_.stream);
  // The dropped sums are the nonzeros of the segment without the kept ones: compacted from a
  // scratch copy, then zeroed in the sum itself (which travels dense if it is still dense).
  const std::size_t dropped = nonzeros - kept;
  owner_.scratch.reserve_growing(device, length);
  owner_.dropped_idx.reserve_growing(device, dropped);
  owner_.dropped_val.reserve_growing(device, dropped);
  device.copy(owner_.scratch.data(), sum, length * sizeof(T), in_.stream);
  device.scatter_zero(owner_.kept_idx.data(), kept, owner_.scratch.data(), in_.stream);
  owner_.dropped = device
                       .select(nullptr, owner_.scratch.data(), length, T(0), kEveryTie,
                               owner_.dropped_idx.data(), owner_.dropped_val.data(), dropped,
                               SparseList<T>{}, in_.stream)
                       .count;
  device.scatter_zero(owner_.dropped_idx.data(), owner_.dropped, sum, in_.stream);
  idx = owner_.kept_idx.data();
  val = owner_.kept_val.data();
  nonzeros = kept;
}

template std::size_t SplitExchange<float>::compact_owned_sums_on_device();
template std::size_t SplitExchange<double>::compact_owned_sums_on_device();
template void SplitExchange<float>::reduce_owned_segment_on_device();
template void SplitExchange<double>::reduce_owned_segment_on_device();
template std::size_t SplitExchange<float>::encode_owned_segment_on_device();
template std::size_t SplitExchange<double>::encode_owned_segment_on_device();
template void SplitExchange<float>::drop_small_sums_on_device(std::size_t &, const WireIndex *&,
                                                              const float *&);
template void SplitExchange<double>::drop_small_sums_on_device(std::size_t &, const WireIndex *&,
                                                               const double *&);

}  // namespace dct::detail
