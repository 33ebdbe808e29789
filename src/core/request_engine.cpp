#include "core/request_engine.hpp"

#include <utility>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/wire.hpp"

namespace dct::detail {

MPI_Comm RequestEngine::comm() const {
  require(context_->comm() != MPI_COMM_NULL, DCT_ERR_NOT_INITIALIZED,
          "MPI was finalized; this request can only be freed");
  return context_->comm();
}

void RequestEngine::begin_call() {
  require(!active_, DCT_ERR_ACTIVE, "request already started: complete it with DCT_Wait");
  status_ = DCT_Status{};
  status_.count = count_;
  status_.nonfinite = -1;  // not looked at, unless a compressed call counts them
  status_.dense_bytes = wire::ring_bytes(count_ * element_size_, context_->size());
}

void RequestEngine::set_stream(Stream stream) {
  require(!active_, DCT_ERR_ACTIVE, "cannot change the stream of a started request");
  stream_ = stream;
}

RequestEngine::~RequestEngine() {
  remove_in_flight(this);
}

void RequestEngine::launch() {
  if (blocking()) {
    static_cast<void>(RequestEngine::comm());  // throws once MPI_Finalize released it
    check_mpi(MPI_Ibarrier(context_->order_comm(), &everyone_started_), "MPI_Ibarrier");
  }
  active_ = true;
  complete_ = false;
  error_ = nullptr;
  add_in_flight(this);
}

bool RequestEngine::progress(bool block) noexcept {
  if (complete_) return true;
  // A blocking call waits for its peers inside MPI: it holds no kernels meanwhile.
  const KernelTurn kernels(!blocking());
  try {
    if (everyone_started_ != MPI_REQUEST_NULL) {
      int done = 0;
      check_mpi(block ? MPI_Wait(&everyone_started_, MPI_STATUS_IGNORE)
                      : MPI_Test(&everyone_started_, &done, MPI_STATUS_IGNORE),
                "MPI_Ibarrier");
      if (everyone_started_ != MPI_REQUEST_NULL) return false;
    }
    complete_ = advance(block);
  } catch (...) {
    error_ = std::current_exception();
    complete_ = true;
    try {
      abandon();
    } catch (...) {
    }
  }
  return complete_;
}

void RequestEngine::wait(DCT_Status *status) {
  require(active_, DCT_ERR_ACTIVE, "request was not started");
  progress_in_flight(this, true);
  active_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  finish_call(status);
}

bool RequestEngine::test(DCT_Status *status) {
  require(active_, DCT_ERR_ACTIVE, "request was not started");
  if (!progress_in_flight(this, false)) return false;
  active_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  finish_call(status);
  return true;
}

void RequestEngine::finish_call(DCT_Status *status) {
  totals_.calls += 1;
  totals_.total_bytes_sent += status_.bytes_sent;
  totals_.total_dense_bytes += status_.dense_bytes;
  status_.calls = totals_.calls;
  status_.total_bytes_sent = totals_.total_bytes_sent;
  status_.total_dense_bytes = totals_.total_dense_bytes;
  status_.compression_ratio =
      status_.bytes_sent > 0 ? double(status_.dense_bytes) / double(status_.bytes_sent) : 0.0;
  if (status) *status = status_;
}

}  // namespace dct::detail
