// allgather: every rank receives every rank's list and adds them up in rank order.
// Bytes received per rank: the other ranks' entries, (K - k) (s + 4).
#include <numeric>

#include "error.hpp"
#include "exchange.hpp"

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

  void post_gather() {
    const std::size_t ranks = static_cast<std::size_t>(in_.ranks);
    units_.resize(ranks);
    offsets_.resize(ranks);
    std::size_t total = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      offsets_[r] = wire::mpi_units(total);
      units_[r] = wire::mpi_units(wire::sparse_units<T>(static_cast<std::size_t>(in_.kept[r])));
      total += static_cast<std::size_t>(units_[r]);
    }
    wire::mpi_units(total);
    const std::size_t mine = static_cast<std::size_t>(in_.kept[in_.rank]);
    wire::size_buffer(message_, static_cast<std::size_t>(units_[in_.rank]));
    wire::pack_sparse(in_.idx, in_.val, mine, message_.data());
    wire::size_buffer(gathered_, total);
    // MPI_UINT64_T units carry raw bytes: dct assumes ranks of one architecture, as MPI codes
    // sending float arrays in place do.
    pending_.emplace_back();
    check_mpi(
        MPI_Iallgatherv(message_.data(), units_[in_.rank], MPI_UINT64_T, gathered_.data(),
                        units_.data(), offsets_.data(), MPI_UINT64_T, in_.comm, &pending_.back()),
        "MPI_Iallgatherv");
    const MPI_Count others = static_cast<MPI_Count>(total) - units_[in_.rank];
    traffic_.bytes_sent = static_cast<MPI_Count>(in_.ranks - 1) * units_[in_.rank] *
                          static_cast<MPI_Count>(wire::kUnitBytes);
    traffic_.bytes_received = others * static_cast<MPI_Count>(wire::kUnitBytes);
  }

  void decode() {
    std::vector<bool> valid(static_cast<std::size_t>(in_.ranks), true);
    for (int r = 0; r < in_.ranks; ++r) {
      if (r == in_.rank) continue;
      const std::size_t entries = static_cast<std::size_t>(in_.kept[r]);
      if (!wire::indices_within(wire::block_indices<T>(block(r), entries), entries, 0, in_.count)) {
        this->peer_error(r, "indices out of range or out of order");
        valid[r] = false;
        continue;
      }
      traffic_.nnz_received += static_cast<MPI_Count>(entries);
    }
    kernels::fill_zero(in_.result, in_.count);
    for (int r = 0; r < in_.ranks; ++r) {
      if (!valid[r]) continue;
      const std::size_t entries = static_cast<std::size_t>(in_.kept[r]);
      kernels::scatter_add(wire::block_indices<T>(block(r), entries),
                           wire::block_values<T>(block(r)), entries, in_.result);
    }
    this->finish();
  }

  const std::byte *block(int r) const {
    return gathered_.data() + static_cast<std::size_t>(offsets_[r]) * wire::kUnitBytes;
  }

  std::vector<int> units_, offsets_;
  std::vector<std::byte> message_, gathered_;
};

}  // namespace

template <typename T>
std::unique_ptr<SparseExchange<T>> make_allgather_exchange() {
  return std::make_unique<AllgatherExchange<T>>();
}
template std::unique_ptr<SparseExchange<float>> make_allgather_exchange();
template std::unique_ptr<SparseExchange<double>> make_allgather_exchange();

}  // namespace dct::detail
