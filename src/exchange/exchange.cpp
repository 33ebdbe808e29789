#include "exchange.hpp"

#include <climits>
#include <cstring>

#include "error.hpp"

namespace dct::detail {

bool Schedule::advance(bool block) {
  while (!done_) {
    if (!pending_.empty()) {
      const int n = static_cast<int>(pending_.size());
      if (block) {
        check_mpi(MPI_Waitall(n, pending_.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
      } else {
        int complete = 0;
        check_mpi(MPI_Testall(n, pending_.data(), &complete, MPI_STATUSES_IGNORE), "MPI_Testall");
        if (!complete) return false;
      }
      pending_.clear();
    }
    if (!run_stage(next_stage_++)) done_ = true;
  }
  return true;
}

template <typename T>
void SparseExchange<T>::peer_error(int peer, const std::string &what) {
  if (peer_error_.empty()) peer_error_ = "rank " + std::to_string(peer) + " sent " + what;
}

template <typename T>
void SparseExchange<T>::finish() const {
  require(peer_error_.empty(), DCT_ERR_PEER, peer_error_);
}

template class SparseExchange<float>;
template class SparseExchange<double>;

namespace wire {

template <typename T>
void pack_sparse(const WireIndex *idx, const T *val, std::size_t entries, std::byte *out) {
  if (entries == 0) return;
  std::memcpy(out, val, entries * sizeof(T));
  std::memcpy(out + entries * sizeof(T), idx, entries * sizeof(WireIndex));
  const std::size_t used = entries * (sizeof(T) + sizeof(WireIndex));
  std::memset(out + used, 0, sparse_units<T>(entries) * kUnitBytes - used);
}
template void pack_sparse<float>(const WireIndex *, const float *, std::size_t, std::byte *);
template void pack_sparse<double>(const WireIndex *, const double *, std::size_t, std::byte *);

bool indices_within(const WireIndex *idx, std::size_t entries, std::uint64_t begin,
                    std::uint64_t end) {
  if (entries == 0) return true;
  // Strictly increasing indices that start at or after `begin` all do.
  return idx[0] >= begin && kernels::indices_valid(idx, entries, static_cast<std::size_t>(end));
}

int mpi_units(std::size_t units) {
  require(units <= static_cast<std::size_t>(INT_MAX), DCT_ERR_COUNT,
          "a message of " + std::to_string(units * kUnitBytes) +
              " bytes exceeds what one MPI call can describe");
  return static_cast<int>(units);
}

}  // namespace wire
}  // namespace dct::detail
