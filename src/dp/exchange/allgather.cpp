// allgather: every rank receives every rank's list and adds them up in rank order.
// Bytes received per rank: the other ranks' blocks, ~(K - k) (s + 4) (less with 16-bit values
// or bitmaps: see wire::BlockFormat).
#include <algorithm>
#include <numeric>

#include "core/error.hpp"
#include "dp/exchange/exchange.hpp"

namespace dct::detail {
namespace {

template <typename T>
class AllgatherExchange final : public SparseExchange<T> {
  using Base = SparseExchange<T>;
  using Base::in_;
  using Base::pending_;
  using Base::traffic_;

 private:
  bool run_stage(int stage) override {
    switch (stage) {
      case 0:
        post_gather();
        return true;
      case 1:
        decode();
        return true;
    }
    return false;
  }

  wire::BlockFormat format(int r) const {
    return wire::block_format<T>(static_cast<std::size_t>(in_.kept[r]), in_.count, in_.values);
  }

  void post_gather() {
    const std::size_t ranks = static_cast<std::size_t>(in_.ranks);
    units_.resize(ranks);
    offsets_.resize(ranks);
    std::size_t total = 0, entries = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      offsets_[r] = wire::mpi_units(total);
      units_[r] = wire::mpi_units(format(static_cast<int>(r)).units());
      total += static_cast<std::size_t>(units_[r]);
      entries += static_cast<std::size_t>(in_.kept[r]);
    }
    wire::mpi_units(total);
    wire::resize_growing(idx_, entries);
    wire::resize_growing(val_, entries);
    const MPI_Count others = static_cast<MPI_Count>(total) - units_[in_.rank];
    traffic_.bytes_sent = static_cast<MPI_Count>(in_.ranks - 1) * units_[in_.rank] *
                          static_cast<MPI_Count>(wire::kUnitBytes);
    traffic_.bytes_received = others * static_cast<MPI_Count>(wire::kUnitBytes);
    gathered_on_device_ = false;
    if (in_.transport != nullptr) return gather_on_device(total);
    if (in_.gathered != nullptr) return;  // came with the headers, my own block encoded
    if (this->messages_on_device()) return gather_on_device(total);
    wire::size_buffer(gathered_, total);
    // My block is encoded in its place in the gathered buffer (MPI_IN_PLACE: no copy), and
    // only where someone reads it: another rank, or my own decode (own_list_usable()).
    if (in_.device_idx != nullptr)
      encode_on_device(*in_.device, format(in_.rank), in_.device_idx, in_.device_val,
                       gathered_.data() + block_offset(in_.rank), device_.bytes, in_.stream);
    else if (in_.ranks > 1 || !own_list_usable())
      wire::encode_block(format(in_.rank), in_.idx, in_.val, 0,
                         gathered_.data() + block_offset(in_.rank));
    // MPI_UINT64_T units carry raw bytes: dct assumes ranks of one architecture, as MPI codes
    // sending float arrays in place do.
    if (in_.ranks > 1) {
      pending_.emplace_back();
      check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered_.data(), units_.data(),
                                offsets_.data(), MPI_UINT64_T, in_.comm, &pending_.back()),
                "MPI_Iallgatherv");
    }
  }

  // dct_transport=nccl, or a GPU-aware MPI: my block encoded in its place in the device
  // buffer and every block gathered there, device to device: nothing crosses to the host.
  void gather_on_device(std::size_t units) {
    device_.bytes.reserve_growing(*in_.device, units * wire::kUnitBytes);
    in_.device->encode_block(format(in_.rank), in_.device_idx, in_.device_val, 0,
                             device_.bytes.data() + block_offset(in_.rank), in_.stream);
    gathered_on_device_ = true;
    if (in_.ranks == 1) return;
    // NCCL queues the gather behind my encode on the backend's stream: no wait here, and the
    // decode's wait for its verdicts covers it. MPI needs the block on the device first.
    if (in_.transport != nullptr)
      return in_.transport->allgatherv(device_.bytes.data(), units_.data(), offsets_.data(),
                                       in_.device->queue_of(in_.stream));
    this->device_ready_for_mpi();
    pending_.emplace_back();
    check_mpi(
        MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, device_.bytes.data(), units_.data(),
                        offsets_.data(), MPI_UINT64_T, in_.comm, &pending_.back()),
        "MPI_Iallgatherv");
  }

  // My own entries go into the sum as they are where decoding them would give them back bit
  // for bit: values already rounded to the wire's (wire_value; not `sign`, whose magnitude is
  // the block's), in host memory where the sum reads them (no device).
  bool own_list_usable() const { return in_.device == nullptr && in_.values != ValueCoding::sign; }

  // Every other block is decoded and validated before the result is touched: every rank reads
  // the same bytes, so every rank accepts or rejects the call alike, and a rejected call leaves
  // the result as it was.
  void decode() {
    if (in_.device != nullptr) return decode_on_device();
    // A list that is not what a block may hold is decoded from its bytes, as the peers do, so
    // that every rank decides alike on it (only a test's tampering makes one).
    own_direct_ =
        own_list_usable() &&
        wire::indices_valid(in_.idx, static_cast<std::size_t>(in_.kept[in_.rank]), 0, in_.count);
    if (!own_direct_ && own_list_usable() && in_.ranks == 1 && in_.gathered == nullptr)
      wire::encode_block(format(in_.rank), in_.idx, in_.val, 0,  // not encoded by post_gather
                         gathered_.data() + block_offset(in_.rank));
    std::size_t first = 0;
    for (int r = 0; r < in_.ranks; ++r) {
      const std::size_t entries = static_cast<std::size_t>(in_.kept[r]);
      if (r == in_.rank && own_direct_) {
        first += entries;
        continue;
      }
      if (!wire::decode_block(format(r), block(r), block_bytes(r), 0, idx_.data() + first,
                              val_.data() + first))
        this->peer_error(r, "indices out of range or out of order");
      else if (r != in_.rank)
        traffic_.nnz_received += static_cast<MPI_Count>(entries);
      first += entries;
    }
    this->finish();
    sum(*in_.host, idx_.data(), val_.data());
  }

  // GPU requests: the gathered blocks go to the device as they came, compressed, and are
  // decoded and validated there (the host codec's verdict: backends/common/cuda_hip/
  // block_codec.hpp), every block before the result is touched.
  void decode_on_device() {
    Backend &device = *in_.device;
    const std::size_t entries = std::accumulate(in_.kept, in_.kept + in_.ranks, std::size_t{0});
    own_direct_ = false;
    // Gathered on the device (by the transport, a GPU-aware MPI, or with the headers), or in
    // one host range: gathered_, or the call's messages (in_.gathered). My own block crosses
    // back with the others: one copy, where leaving it out would take two.
    const std::byte *blocks =
        gathered_on_device_ ? device_.bytes.data()
        : in_.gathered_on_device
            ? in_.gathered
            : device_.from_host(device, block(0),
                                static_cast<std::size_t>(block(in_.ranks - 1) - block(0)) +
                                    block_bytes(in_.ranks - 1),
                                in_.stream);
    device_.reserve_entries(device, entries);
    batch_.clear();
    std::size_t first = 0;
    for (int r = 0; r < in_.ranks; ++r) {
      const std::byte *on_device =
          blocks + (gathered_on_device_ ? block_offset(r) : block(r) - block(0));
      batch_.add(r, format(r), on_device, block_bytes(r), 0, device_.idx.data() + first,
                 device_.val.data() + first);
      first += static_cast<std::size_t>(in_.kept[r]);
    }
    batch_.decode(device, in_.stream);
    for (std::size_t b = 0; b < batch_.size(); ++b) {
      const int r = batch_.peer(b);
      if (!batch_.valid(b))
        this->peer_error(r, "indices out of range or out of order");
      else if (r != in_.rank)
        traffic_.nnz_received += in_.kept[r];
    }
    this->finish();
    sum(device, device_.idx.data(), device_.val.data());
  }

  // Every rank's list (decoded into idx/val in `backend`'s memory, in rank order; my own as it
  // is where own_direct_), summed in rank order into the result in one pass over it.
  void sum(Backend &backend, const WireIndex *idx, const T *val) {
    lists_.resize(static_cast<std::size_t>(in_.ranks));
    std::size_t first = 0;
    for (int r = 0; r < in_.ranks; ++r) {
      const std::size_t entries = static_cast<std::size_t>(in_.kept[r]);
      lists_[static_cast<std::size_t>(r)] = r == in_.rank && own_direct_
                                                ? SparseList<T>{in_.idx, in_.val, entries}
                                                : SparseList<T>{idx + first, val + first, entries};
      first += entries;
    }
    backend.sum_lists(lists_.data(), lists_.size(), in_.result, 0, in_.count,
                      &backend == in_.device ? in_.stream : nullptr);
  }

  std::size_t block_bytes(int r) const { return std::size_t(units_[r]) * wire::kUnitBytes; }
  std::size_t block_offset(int r) const {
    return static_cast<std::size_t>(offsets_[r]) * wire::kUnitBytes;
  }
  const std::byte *block(int r) const {
    return in_.gathered != nullptr ? in_.gathered + std::size_t(r) * in_.gathered_stride
                                   : gathered_.data() + block_offset(r);
  }

  std::vector<int> units_, offsets_;
  std::vector<std::byte> gathered_;
  bool own_direct_ = false;     // this call sums my entries as they are, undecoded
  std::vector<WireIndex> idx_;  // every rank's entries, decoded
  std::vector<T> val_;
  // in_.device only: the gathered blocks (and my own, encoded) in its memory, decoded there.
  DeviceStaging<T> device_;
  bool gathered_on_device_ = false;   // this call's blocks came by in_.transport
  std::vector<SparseList<T>> lists_;  // every rank's decoded list, for sum_lists
  DecodeBatch<T> batch_;              // every rank's block, decoded on the device
};

}  // namespace

template <typename T>
std::unique_ptr<SparseExchange<T>> make_allgather_exchange() {
  return std::make_unique<AllgatherExchange<T>>();
}
template std::unique_ptr<SparseExchange<float>> make_allgather_exchange();
template std::unique_ptr<SparseExchange<double>> make_allgather_exchange();

}  // namespace dct::detail
