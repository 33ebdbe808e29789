#include "dp/exchange/split.hpp"

namespace dct::detail {

template <typename T>
void SplitExchange<T>::commit_dropped_sums() {
  if (owner_.dropped > 0) {  // dropped by an owner on the device: indices relative to its segment
    in_.residual_device->scatter_add(owner_.dropped_idx.data(), owner_.dropped_val.data(),
                                     owner_.dropped, in_.residual + begin(in_.rank), in_.stream);
    owner_.dropped = 0;
  } else if (in_.residual_device != nullptr && !dropped_idx_.empty()) {
    const SparseList<T> dropped = device_.from_host(
        *in_.residual_device, {dropped_idx_.data(), dropped_val_.data(), dropped_idx_.size()},
        in_.stream);
    in_.residual_device->scatter_add(dropped.idx, dropped.val, dropped.size, in_.residual,
                                     in_.stream);
  } else {
    for (std::size_t j = 0; j < dropped_idx_.size(); ++j)
      in_.residual[dropped_idx_[j]] += dropped_val_[j];
  }
  dropped_idx_.clear();
  dropped_val_.clear();
}

template <typename T>
bool SplitExchange<T>::run_stage(int stage) {
  switch (stage) {
    case 0:
      if (rebalance_) post_histogram();
      return true;
    case 1:
      if (rebalance_) balance_boundaries();
      post_counts();
      return true;
    case 2:
      post_entries();
      return true;
    case 3:
      if (owner_on_device())
        reduce_owned_segment_on_device();
      else
        reduce_owned_segment();
      return true;
    case 4:
      if (!combine_owned()) this->repeat_stage();
      return true;
    case 5:
      announce_owned_segment();
      return true;
    case 6:
      post_segments();
      return true;
    case 7:
      decode_segments();
      return true;
  }
  return false;
}

template <typename T>
void SplitExchange<T>::post_histogram() {
  const std::size_t n = in_.count;
  int balance_ranks = 0;
  check_mpi(MPI_Comm_size(balance_comm(), &balance_ranks), "MPI_Comm_size");
  // 32 buckets per segment: boundaries land within ~3% of a segment's share of the entries,
  // and the histogram costs 256 bytes per rank, not per element.
  buckets_ = std::min<std::size_t>(
      std::max<std::size_t>(n, 1),
      std::min<std::size_t>(1 << 20, std::max<std::size_t>(256, 32 * ranks())));
  // Bucket b holds the indices from ceil(b n / buckets) on: its count is the difference of
  // two lower bounds in the sorted entries, found where they lie (on the device for a GPU
  // request, whose entries then never cross to the host as pairs).
  bucket_starts_.resize(buckets_ + 1);
  for (std::size_t b = 0; b <= buckets_; ++b)
    bucket_starts_[b] = (static_cast<std::uint64_t>(b) * n + buckets_ - 1) / buckets_;
  const std::vector<std::uint64_t> &bounds = entries_below(bucket_starts_);
  histogram_.resize(buckets_);
  for (std::size_t b = 0; b < buckets_; ++b)
    histogram_[b] = static_cast<std::int64_t>(bounds[b + 1] - bounds[b]);
  pending_.emplace_back();
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, histogram_.data(), wire::mpi_units(buckets_), MPI_INT64_T,
                           MPI_SUM, balance_comm(), &pending_.back()),
            "MPI_Iallreduce");
  const MPI_Count ring = wire::ring_bytes(static_cast<MPI_Count>(buckets_ * 8), balance_ranks);
  count_traffic(ring, ring);
}

template <typename T>
void SplitExchange<T>::balance_boundaries() {
  const std::uint64_t n = in_.count;
  std::vector<std::uint64_t> &b = layout_.boundaries;
  b.assign(ranks() + 1, n);
  b[0] = 0;
  std::int64_t total = 0;
  for (std::int64_t h : histogram_) total += h;
  if (total == 0) {  // nothing sent anywhere: even segments
    for (std::size_t r = 1; r < ranks(); ++r) b[r] = n * r / ranks();
    return;
  }
  // Boundary r sits at the first bucket edge with at least r/P of the entries before it.
  std::int64_t before = 0;
  std::size_t bucket = 0;
  for (std::size_t r = 1; r < ranks(); ++r) {
    const std::int64_t target = total * static_cast<std::int64_t>(r) / in_.ranks;
    while (bucket < buckets_ && before < target) before += histogram_[bucket++];
    b[r] = (static_cast<std::uint64_t>(bucket) * n + buckets_ - 1) / buckets_;
  }
}

template <typename T>
void SplitExchange<T>::post_counts() {
  const std::size_t mine = static_cast<std::size_t>(in_.kept[in_.rank]);
  send_counts_.resize(ranks());
  recv_counts_.assign(ranks(), 0);
  const std::vector<std::uint64_t> &bounds = entries_below(layout_.boundaries);
  first_.assign(bounds.begin(), bounds.end());
  // Every entry goes to some owner, even one whose index is not below n (only a test's
  // tampering makes one): the last owner then rejects it, as every rank learns.
  first_[ranks()] = mine;
  for (std::size_t r = 0; r < ranks(); ++r)
    send_counts_[r] = static_cast<std::int64_t>(first_[r + 1] - first_[r]);
  pending_.emplace_back();
  check_mpi(MPI_Ialltoall(send_counts_.data(), 1, MPI_INT64_T, recv_counts_.data(), 1, MPI_INT64_T,
                          in_.comm, &pending_.back()),
            "MPI_Ialltoall");
  count_traffic(others(8), others(8));
}

template <typename T>
void SplitExchange<T>::post_entries() {
  send_units_.resize(ranks());
  send_offsets_.resize(ranks());
  recv_units_.resize(ranks());
  recv_offsets_.resize(ranks());
  std::size_t send_total = 0, recv_total = 0;
  for (std::size_t r = 0; r < ranks(); ++r) {
    // A count we cannot bound would make us allocate or receive blindly: give up now.
    peer::announced_entries(recv_counts_[r], in_.count, int(r), "entries for a tensor of");
    send_offsets_[r] = wire::mpi_units(send_total);
    send_units_[r] = wire::mpi_units(entry_format(send_counts_[r], r).units());
    send_total += static_cast<std::size_t>(send_units_[r]);
    recv_offsets_[r] = wire::mpi_units(recv_total);
    recv_units_[r] = wire::mpi_units(entry_format(recv_counts_[r], in_.rank).units());
    recv_total += static_cast<std::size_t>(recv_units_[r]);
  }
  wire::mpi_units(send_total);
  wire::mpi_units(recv_total);
  std::byte *outgoing = encode_entries(send_total);
  std::byte *incoming = nullptr;
  const std::size_t me = static_cast<std::size_t>(in_.rank);
  count_traffic(static_cast<MPI_Count>((send_total - std::size_t(send_units_[me])) * 8),
                static_cast<MPI_Count>((recv_total - std::size_t(recv_units_[me])) * 8));
  if (this->messages_on_device()) {  // into the device, where my segment's owner decodes them
    device_messages_.reserve_growing(*in_.device, recv_total * wire::kUnitBytes);
    incoming = device_messages_.data();
    // NCCL queues the exchange behind my encode; the owner's decode waits for it.
    if (in_.transport != nullptr)
      return in_.transport->alltoallv(outgoing, send_units_.data(), send_offsets_.data(), incoming,
                                      recv_units_.data(), recv_offsets_.data(),
                                      in_.device->queue_of(in_.stream));
    this->device_ready_for_mpi();  // my blocks encoded
  } else {
    wire::size_buffer(incoming_, recv_total);
    incoming = incoming_.data();
  }
  pending_.emplace_back();
  check_mpi(MPI_Ialltoallv(outgoing, send_units_.data(), send_offsets_.data(), MPI_UINT64_T,
                           incoming, recv_units_.data(), recv_offsets_.data(), MPI_UINT64_T,
                           in_.comm, &pending_.back()),
            "MPI_Ialltoallv");
}

template <typename T>
const std::vector<std::uint64_t> &SplitExchange<T>::entries_below(
    const std::vector<std::uint64_t> &keys) {
  const std::size_t mine = static_cast<std::size_t>(in_.kept[in_.rank]);
  bounds_.resize(keys.size());
  if (in_.device_idx != nullptr)
    in_.device->lower_bounds(in_.device_idx, mine, keys.data(), keys.size(), bounds_.data(),
                             in_.stream);
  else
    in_.host->lower_bounds(in_.idx, mine, keys.data(), keys.size(), bounds_.data(), nullptr);
  return bounds_;
}

template <typename T>
std::byte *SplitExchange<T>::encode_entries(std::size_t units) {
  const auto offset = [&](int r) { return std::size_t(send_offsets_[r]) * wire::kUnitBytes; };
  const std::size_t bytes = units * wire::kUnitBytes;
  if (in_.device_idx == nullptr) {
    wire::size_buffer(outgoing_, units);
    for (int r = 0; r < in_.ranks; ++r)
      wire::encode_block(entry_format(send_counts_[r], r), in_.idx + first_[r], in_.val + first_[r],
                         begin(r), outgoing_.data() + offset(r));
    return outgoing_.data();
  }
  // Every owner's block is encoded on the device side by side, then all cross in one copy
  // (none where MPI reads them there).
  device_.bytes.reserve_growing(*in_.device, bytes);
  for (int r = 0; r < in_.ranks; ++r)
    in_.device->encode_block(entry_format(send_counts_[r], r), in_.device_idx + first_[r],
                             in_.device_val + first_[r], begin(r), device_.bytes.data() + offset(r),
                             in_.stream);
  if (this->messages_on_device()) return device_.bytes.data();
  wire::size_buffer(outgoing_, units);
  in_.device->copy(outgoing_.data(), device_.bytes.data(), bytes, in_.stream);
  return outgoing_.data();
}

template <typename T>
void SplitExchange<T>::reduce_owned_segment() {
  const std::uint64_t first = begin(in_.rank);
  wire::assign_growing(owned_, length(in_.rank), T(0));
  received_entries_ = 0;
  for (int r = 0; r < in_.ranks; ++r) {
    const std::size_t entries = static_cast<std::size_t>(recv_counts_[r]);
    const std::byte *block = incoming_.data() + std::size_t(recv_offsets_[r]) * wire::kUnitBytes;
    wire::resize_growing(decoded_idx_, entries);
    wire::resize_growing(decoded_val_, entries);
    if (!wire::decode_block(entry_format(recv_counts_[r], in_.rank), block,
                            std::size_t(recv_units_[r]) * wire::kUnitBytes, first,
                            decoded_idx_.data(), decoded_val_.data())) {
      this->peer_error(r, kBadEntries);
      continue;
    }
    for (std::size_t j = 0; j < entries; ++j) owned_[decoded_idx_[j] - first] += decoded_val_[j];
    received_entries_ += recv_counts_[r];
    if (r != in_.rank) traffic_.nnz_received += static_cast<MPI_Count>(entries);
  }
}

template <typename T>
void SplitExchange<T>::announce_owned_segment() {
  const std::uint64_t first = begin(in_.rank);
  dropped_idx_.clear();
  dropped_val_.clear();
  owner_.dropped = 0;
  if (this->failed()) {
    // A rejected block: announce kRejected instead of a count, so that every rank stops at
    // post_segments together and none writes its result or moves sums into a residual.
    owned_nnz_ = kRejected;
    wire::size_buffer(segment_, 0);
  } else if (owner_on_device()) {
    owned_nnz_ = static_cast<std::int64_t>(encode_owned_segment_on_device());
  } else {
    std::size_t nonzeros = 0;
    for (T v : owned_) nonzeros += v != T(0);
    nonzeros = drop_small_sums(first, nonzeros);
    owned_nnz_ = static_cast<std::int64_t>(nonzeros);
    encode_owned_segment(first, nonzeros);
  }
  owned_nnz_all_.assign(ranks(), 0);
  pending_.emplace_back();
  check_mpi(MPI_Iallgather(&owned_nnz_, 1, MPI_INT64_T, owned_nnz_all_.data(), 1, MPI_INT64_T,
                           in_.comm, &pending_.back()),
            "MPI_Iallgather");
  count_traffic(others(8), others(8));
}

template <typename T>
void SplitExchange<T>::encode_owned_segment(std::uint64_t first, std::size_t nonzeros) {
  if (wire::sparse_is_smaller<T>(nonzeros, owned_.size())) {
    sparse_idx_.clear();
    sparse_val_.clear();
    for (std::size_t i = 0; i < owned_.size(); ++i) {
      if (owned_[i] == T(0)) continue;
      sparse_idx_.push_back(static_cast<WireIndex>(first + i));
      sparse_val_.push_back(owned_[i]);
    }
    const wire::BlockFormat format = segment_format(in_.rank, nonzeros);
    wire::size_buffer(segment_, format.units());
    wire::encode_block(format, sparse_idx_.data(), sparse_val_.data(), first, segment_.data());
  } else {
    wire::size_buffer(segment_, wire::dense_units<T>(owned_.size()));
    std::fill(segment_.begin(), segment_.end(), std::byte{0});
    if (!owned_.empty()) std::memcpy(segment_.data(), owned_.data(), owned_.size() * sizeof(T));
  }
}

template <typename T>
std::size_t SplitExchange<T>::owner_budget() const {
  std::int64_t total = 0;
  for (int r = 0; r < in_.ranks; ++r) total += in_.kept[r];
  if (in_.result_budget == 0 || total == 0) return std::numeric_limits<std::size_t>::max();
  const double share = double(in_.result_budget) * double(received_entries_) / double(total);
  return static_cast<std::size_t>(std::ceil(share));
}

template <typename T>
std::size_t SplitExchange<T>::drop_small_sums(std::uint64_t first, std::size_t nonzeros) {
  const std::size_t budget = owner_budget();
  if (nonzeros <= budget) return nonzeros;
  const T tau = budget == 0
                    ? std::numeric_limits<T>::infinity()
                    : in_.host->kth_largest_abs(static_cast<const T *>(nullptr), owned_.data(),
                                                owned_.size(), budget, nullptr);
  for (std::size_t i = 0; i < owned_.size(); ++i) {
    if (owned_[i] == T(0) || keep_entry(owned_[i], tau)) continue;
    dropped_idx_.push_back(static_cast<WireIndex>(first + i));
    dropped_val_.push_back(owned_[i]);
    owned_[i] = T(0);
    --nonzeros;
  }
  return nonzeros;
}

template <typename T>
void SplitExchange<T>::post_segments() {
  gather_units_.resize(ranks());
  gather_offsets_.resize(ranks());
  std::size_t total = 0;
  traffic_.result_nnz = 0;
  for (int r = 0; r < in_.ranks; ++r) {
    // Every rank sees the same announcements, so every rank stops here together.
    require(owned_nnz_all_[r] != kRejected, DCT_ERR_PEER, [&] {
      return "rank " + std::to_string(r) + " rejected a message sent to it in this call";
    });
    const std::size_t nnz =
        peer::announced_entries(owned_nnz_all_[r], length(r), r, "nonzeros in a segment of");
    gather_offsets_[r] = wire::mpi_units(total);
    gather_units_[r] = wire::mpi_units(segment_sparse(r) ? segment_format(r, nnz).units()
                                                         : wire::dense_units<T>(length(r)));
    total += static_cast<std::size_t>(gather_units_[r]);
    traffic_.result_nnz += owned_nnz_all_[r];
  }
  wire::mpi_units(total);
  const MPI_Count mine = gather_units_[in_.rank];
  count_traffic(others(mine * 8), (static_cast<MPI_Count>(total) - mine) * 8);
  // Where messages move device to device my segment is sent from there and every segment
  // gathered there, in the buffer my owner's blocks came in (summed by now).
  const bool on_device = this->messages_on_device();
  std::byte *gathered = nullptr;
  if (on_device) {
    device_messages_.reserve_growing(*in_.device, total * wire::kUnitBytes);
    gathered = device_messages_.data();
    if (in_.transport != nullptr) {  // in place: my segment in its place, queued like the rest
      if (mine > 0)
        in_.device->copy(gathered + segment_offset(in_.rank), owner_.segment.data(),
                         std::size_t(mine) * wire::kUnitBytes, in_.stream);
      return in_.transport->allgatherv(gathered, gather_units_.data(), gather_offsets_.data(),
                                       in_.device->queue_of(in_.stream));
    }
    this->device_ready_for_mpi();  // my segment encoded, the owners' blocks decoded and summed
  } else {
    wire::size_buffer(gathered_, total);
    gathered = gathered_.data();
  }
  pending_.emplace_back();
  check_mpi(MPI_Iallgatherv(on_device ? owner_.segment.data() : segment_.data(),
                            gather_units_[in_.rank], MPI_UINT64_T, gathered, gather_units_.data(),
                            gather_offsets_.data(), MPI_UINT64_T, in_.comm, &pending_.back()),
            "MPI_Iallgatherv");
}

template <typename T>
void SplitExchange<T>::decode_segments() {
  // A GPU request's segments go to the device as they came (compressed, or dense where the
  // segment's sum is) and are decoded and validated there, so that the n-element result
  // never passes through host memory unless the whole sum travelled dense.
  const bool on_device = in_.device != nullptr;
  Backend &backend = on_device ? *in_.device : *in_.host;
  const Stream stream = on_device ? in_.stream : nullptr;
  const std::byte *segments =
      this->messages_on_device() ? device_messages_.data()
      : on_device ? device_.from_host(backend, gathered_.data(), gathered_.size(), stream)
                  : gathered_.data();
  std::size_t total = 0;
  for (int r = 0; r < in_.ranks; ++r)
    if (segment_sparse(r)) total += static_cast<std::size_t>(owned_nnz_all_[r]);
  WireIndex *idx = nullptr;
  T *val = nullptr;
  if (on_device) {
    device_.reserve_entries(backend, total);
    idx = device_.idx.data();
    val = device_.val.data();
  } else {
    wire::resize_growing(decoded_idx_, total);
    wire::resize_growing(decoded_val_, total);
    idx = decoded_idx_.data();
    val = decoded_val_.data();
  }
  std::size_t first = 0;
  batch_.clear();
  for (int r = 0; r < in_.ranks; ++r) {
    if (!segment_sparse(r)) continue;
    const std::size_t nnz = static_cast<std::size_t>(owned_nnz_all_[r]);  // checked when posted
    batch_.add(r, segment_format(r, nnz), segments + segment_offset(r), segment_bytes(r), begin(r),
               idx + first, val + first);
    first += nnz;
  }
  batch_.decode(backend, stream);
  for (std::size_t b = 0; b < batch_.size(); ++b)
    if (!batch_.valid(b))
      this->peer_error(batch_.peer(b),
                       "a reduced segment with indices outside it, or out of order");
  this->finish();
  first = 0;
  for (int r = 0; r < in_.ranks; ++r) {
    if (!segment_sparse(r)) {
      if (length(r) > 0)
        backend.copy(in_.result + begin(r), segments + segment_offset(r), length(r) * sizeof(T),
                     stream);
      if (r != in_.rank) traffic_.nnz_received += static_cast<MPI_Count>(length(r));
      continue;
    }
    const std::size_t nnz = static_cast<std::size_t>(owned_nnz_all_[r]);
    const SparseList<T> sum{idx + first, val + first, nnz};
    backend.sum_lists(&sum, 1, in_.result, begin(r), begin(r) + length(r), stream);
    if (r != in_.rank) traffic_.nnz_received += static_cast<MPI_Count>(nnz);
    first += nnz;
  }
  succeeded();
}

template class SplitExchange<float>;
template class SplitExchange<double>;

template <typename T>
std::unique_ptr<SparseExchange<T>> make_split_exchange(SplitLayout &layout) {
  return std::make_unique<SplitExchange<T>>(layout);
}
template std::unique_ptr<SparseExchange<float>> make_split_exchange(SplitLayout &);
template std::unique_ptr<SparseExchange<double>> make_split_exchange(SplitLayout &);

}  // namespace dct::detail
