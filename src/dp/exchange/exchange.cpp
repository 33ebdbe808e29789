#include "dp/exchange/exchange.hpp"

#include "core/error.hpp"

namespace dct::detail {

bool Schedule::advance(bool block) {
  while (!done_) {
    if (nested_ != nullptr) {
      bool finished = true;
      try {
        finished = nested_->advance(block);
      } catch (...) {
        nested_error_ = std::current_exception();
      }
      if (!finished) return false;
      nested_ = nullptr;
    }
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

}  // namespace dct::detail
