// dense: the kept entries scattered into a zero vector, then summed as a reduce-scatter
// (each rank reduces one block) followed by an allgather of the blocks: the bandwidth-optimal
// allreduce (2 (P-1)/P n s bytes per rank), and identical result bits on every rank by
// construction, which MPI_Iallreduce does not promise (SimGrid's does not deliver it).
// A GPU request whose MPI reads device memory (SparseInput::device) runs it on the device:
// this rank's list is scattered there, then MPI works on the user's buffer and a device
// block. Over a device transport the transport sums the user's buffer in place, cut into the
// same blocks (DeviceTransport::sum_blocks), queued behind the scatter of my list.
#include <algorithm>
#include <climits>

#include "core/error.hpp"
#include "dp/exchange/exchange.hpp"

namespace dct::detail {
namespace {

template <typename T>
class DenseExchange final : public SparseExchange<T> {
  using Base = SparseExchange<T>;
  using Base::in_;
  using Base::pending_;
  using Base::traffic_;

 public:
  explicit DenseExchange(MPI_Datatype datatype) : datatype_(datatype) {}

 private:
  // MPI-3 counts and displacements are ints: the tensor goes in chunks of INT_MAX elements,
  // each cut into P blocks.
  struct Chunk {
    std::size_t offset;
    std::vector<int> counts, displacements;
    std::size_t mine;  // offset of this rank's block in block_
  };

  bool run_stage(int stage) override {
    switch (stage) {
      case 0:
        post_reduce_scatter();
        return true;
      case 1:
        post_allgather();
        return true;
    }
    return false;
  }

  void post_reduce_scatter() {
    const std::size_t ranks = static_cast<std::size_t>(in_.ranks);
    // A GPU request's entries are scattered where they were kept, on the device.
    const bool device = in_.device != nullptr;
    const SparseList<T> mine{device ? in_.device_idx : in_.idx, device ? in_.device_val : in_.val,
                             static_cast<std::size_t>(in_.kept[in_.rank])};
    if (device)
      in_.device->sum_lists(&mine, 1, in_.result, 0, in_.count, in_.stream);
    else
      in_.host->sum_lists(&mine, 1, in_.result, 0, in_.count, nullptr);
    const MPI_Count ring =
        wire::ring_bytes(static_cast<MPI_Count>(in_.count * sizeof(T)), in_.ranks);
    traffic_.bytes_sent = traffic_.bytes_received = ring;
    traffic_.nnz_received = in_.ranks > 1 ? static_cast<MPI_Count>(in_.count) : 0;
    if (in_.transport != nullptr) {
      if (in_.ranks > 1)
        in_.transport->sum_blocks(in_.result, in_.count, sizeof(T),
                                  in_.device->queue_of(in_.stream));
      return;  // no chunks: post_allgather has nothing to post
    }
    if (chunks_.empty()) {  // the same for every call of the request: built once
      std::size_t block_total = 0;
      for (std::size_t offset = 0; offset < in_.count; offset += INT_MAX) {
        const std::size_t length = std::min<std::size_t>(in_.count - offset, INT_MAX);
        Chunk chunk{offset, std::vector<int>(ranks), std::vector<int>(ranks), block_total};
        for (std::size_t r = 0, start = 0; r < ranks; ++r) {
          const std::size_t size = dense_block(length, ranks, r);
          chunk.counts[r] = static_cast<int>(size);
          chunk.displacements[r] = static_cast<int>(start);
          start += size;
        }
        block_total += static_cast<std::size_t>(chunk.counts[static_cast<std::size_t>(in_.rank)]);
        chunks_.push_back(std::move(chunk));
      }
      block_total_ = std::max<std::size_t>(block_total, 1);  // never null: wire::size_buffer
    }
    T *block = nullptr;
    if (in_.device != nullptr) {
      device_block_.reserve_growing(*in_.device, block_total_);
      block = device_block_.data();
      this->device_ready_for_mpi();  // the entries scattered into the result
    } else {
      block_.resize(block_total_);
      block = block_.data();
    }
    for (const Chunk &chunk : chunks_) {
      pending_.emplace_back();
      check_mpi(
          MPI_Ireduce_scatter(in_.result + chunk.offset, block + chunk.mine, chunk.counts.data(),
                              datatype_, MPI_SUM, in_.comm, &pending_.back()),
          "MPI_Ireduce_scatter");
    }
  }

  void post_allgather() {
    const std::size_t me = static_cast<std::size_t>(in_.rank);
    const T *block = in_.device != nullptr ? device_block_.data() : block_.data();
    for (const Chunk &chunk : chunks_) {
      pending_.emplace_back();
      check_mpi(MPI_Iallgatherv(block + chunk.mine, chunk.counts[me], datatype_,
                                in_.result + chunk.offset, chunk.counts.data(),
                                chunk.displacements.data(), datatype_, in_.comm, &pending_.back()),
                "MPI_Iallgatherv");
    }
  }

  MPI_Datatype datatype_;
  std::vector<Chunk> chunks_;
  std::size_t block_total_ = 0;
  std::vector<T> block_;
  BackendArray<T> device_block_;  // in_.device: this rank's reduced blocks, on the device
};

}  // namespace

template <typename T>
std::unique_ptr<SparseExchange<T>> make_dense_exchange(MPI_Datatype datatype) {
  return std::make_unique<DenseExchange<T>>(datatype);
}
template std::unique_ptr<SparseExchange<float>> make_dense_exchange(MPI_Datatype);
template std::unique_ptr<SparseExchange<double>> make_dense_exchange(MPI_Datatype);

}  // namespace dct::detail
