#include "allreduce.hpp"

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "error.hpp"
#include "kernels.hpp"

namespace dct::detail {
namespace {

/// Per-rank volume of a bandwidth-optimal (ring) allreduce of `count` elements.
MPI_Count ring_bytes(MPI_Count count, int element_size, int ranks) {
  return ranks > 1 ? 2 * (ranks - 1) * count * element_size / ranks : 0;
}

/// MPI_Allreduce in pieces of at most INT_MAX elements (MPI-3 counts are int).
void allreduce_in_chunks(const void *send, void *recv, MPI_Count count, MPI_Datatype datatype,
                         int element_size, MPI_Op op, MPI_Comm comm) {
  for (MPI_Count offset = 0; offset < count; offset += INT_MAX) {
    const int chunk = static_cast<int>(count - offset < INT_MAX ? count - offset : INT_MAX);
    const std::size_t shift = static_cast<std::size_t>(offset) * element_size;
    const void *chunk_send =
        send == MPI_IN_PLACE ? MPI_IN_PLACE : static_cast<const char *>(send) + shift;
    check_mpi(
        MPI_Allreduce(chunk_send, static_cast<char *>(recv) + shift, chunk, datatype, op, comm),
        "MPI_Allreduce");
  }
}

int type_size(MPI_Datatype datatype) {
  int size = 0;
  const int rc = MPI_Type_size(datatype, &size);
  require(rc == MPI_SUCCESS, DCT_ERR_DATATYPE, "MPI_Type_size rejects the datatype");
  return size;
}

/// Everything that is not a float/double sum: MPI's allreduce, unchanged.
class PassthroughEngine final : public AllreduceEngine {
 public:
  PassthroughEngine(std::shared_ptr<CommContext> context, const AllreduceArgs &args)
      : AllreduceEngine(std::move(context), args.count, type_size(args.datatype), Config{}),
        datatype_(args.datatype),
        op_(args.op) {}

  void start(const void *send, void *recv) override {
    begin_call();
    send_ = send;
    recv_ = recv;
    active_ = true;
  }

  void wait(DCT_Status *status) override {
    require(active_, DCT_ERR_ACTIVE, "request was not started");
    active_ = false;
    check_mpi(MPI_Allreduce(send_, recv_, static_cast<int>(count_), datatype_, op_, comm()),
              "MPI_Allreduce");
    status_.algorithm = DCT_ALGORITHM_PASSTHROUGH;
    status_.nnz_sent = status_.nnz_received = count_;
    status_.density = 1.0;
    status_.bytes_sent = status_.bytes_received = status_.dense_bytes;
    finish_call(status);
  }

  const void *residual() const override { return nullptr; }
  double tau() const override { return 0.0; }
  bool checkpointed() const override { return false; }
  void restore(const void *, double, MPI_Count) override {}

 private:
  MPI_Datatype datatype_;
  MPI_Op op_;
  const void *send_ = nullptr;
  void *recv_ = nullptr;
};

/// DCT-DP for one float or double tensor.
template <typename T>
class CompressedEngine final : public AllreduceEngine {
 public:
  CompressedEngine(std::shared_ptr<CommContext> context, const AllreduceArgs &args,
                   const Config &config)
      : AllreduceEngine(std::move(context), args.count, sizeof(T), config),
        datatype_(args.datatype) {
    if (!exact()) residual_.assign(elements(), T(0));
  }

  void start(const void *send, void *recv) override {
    begin_call();
    MPI_Comm comm = this->comm();
    send_ = static_cast<const T *>(send == MPI_IN_PLACE ? recv : send);
    recv_ = static_cast<T *>(recv);
    if (!exact()) {
      try {
        compress();
        if (config_.algorithm != DCT_ALGORITHM_DENSE) post_header_exchange(comm);
      } catch (...) {
        undo_compress();
        throw;
      }
    }
    active_ = true;
  }

  void wait(DCT_Status *status) override {
    require(active_, DCT_ERR_ACTIVE, "request was not started");
    active_ = false;
    try {
      if (exact()) {
        exact_allreduce();
      } else {
        DCT_Algorithm algorithm = config_.algorithm;
        if (algorithm != DCT_ALGORITHM_DENSE) algorithm = complete_header_exchange();
        if (algorithm == DCT_ALGORITHM_ALLGATHER)
          sparse_allgather();
        else
          masked_dense_allreduce();
      }
    } catch (...) {
      if (!exact()) undo_compress();
      throw;
    }
    finish_call(status);
  }

  const void *residual() const override { return exact() ? nullptr : residual_.data(); }
  double tau() const override { return static_cast<double>(tau_); }
  bool checkpointed() const override { return true; }
  void restore(const void *residual, double tau, MPI_Count calls) override {
    if (!exact() && elements() > 0) std::memcpy(residual_.data(), residual, elements() * sizeof(T));
    tau_ = static_cast<T>(tau);
    totals_.calls = calls;
  }

 private:
  // What each rank announces before the payload: kept entries, tensor length, element size.
  static constexpr int kHeaderWords = 3;
  static constexpr std::size_t kEntryBytes = sizeof(T) + sizeof(WireIndex);
  // Payload blocks are padded to 8 bytes so that every rank's values stay aligned.
  static constexpr std::size_t kUnitBytes = 8;

  bool exact() const { return config_.density >= 1.0; }
  std::size_t elements() const { return static_cast<std::size_t>(count_); }
  static std::size_t block_units(std::int64_t entries) {
    return (static_cast<std::size_t>(entries) * kEntryBytes + kUnitBytes - 1) / kUnitBytes;
  }
  MPI_Count header_bytes() const {
    return static_cast<MPI_Count>(context_->size() - 1) * kHeaderWords * sizeof(std::int64_t);
  }

  // acc = send + residual; tau re-estimated when due; kept entries into idx_/val_. At every
  // point where it can throw, kept_ counts exactly the entries taken out of the residual.
  void compress() {
    const std::size_t n = elements();
    kept_ = 0;
    previous_tau_ = tau_;
    const bool due = totals_.calls % config_.interval == 0;
    if (due && n > 0) {
      std::size_t k = static_cast<std::size_t>(std::ceil(config_.density * double(n)));
      k = k < 1 ? 1 : (k > n ? n : k);
      tau_ = kernels::kth_largest_abs(send_, residual_.data(), n, k);
      status_.tau_reestimated = 1;
    }
    if (idx_.empty()) reserve_entries(static_cast<std::size_t>(config_.density * double(n)));
    const std::size_t capacity = idx_.size();
    const std::size_t found =
        kernels::filter(send_, residual_.data(), n, tau_, idx_.data(), val_.data(), capacity);
    kept_ = found < capacity ? found : capacity;
    if (found > capacity) {
      // The entries past the capacity were left in the residual; collect them in a second pass.
      reserve_entries(found);
      kept_ += kernels::filter<T>(nullptr, residual_.data(), n, tau_, idx_.data() + capacity,
                                  val_.data() + capacity, found - capacity);
      require(kept_ == found, DCT_ERR_INTERNAL, "filter overflow pass lost entries");
    }
    status_.tau = static_cast<double>(tau_);
    status_.nnz_sent = static_cast<MPI_Count>(kept_);
    status_.density = n > 0 ? double(kept_) / double(n) : 0.0;
  }

  // Puts this call's sent entries back into the residual (residual was 0 there, val = acc).
  void undo_compress() {
    for (std::size_t j = 0; j < kept_; ++j) residual_[idx_[j]] += val_[j];
    kept_ = 0;
    tau_ = previous_tau_;
  }

  void reserve_entries(std::size_t entries) {
    const std::size_t capacity = entries + entries / 4 + 16;
    idx_.resize(capacity);
    val_.resize(capacity);
  }

  void exact_allreduce() {
    const void *send = send_ == recv_ ? MPI_IN_PLACE : static_cast<const void *>(send_);
    allreduce_in_chunks(send, recv_, count_, datatype_, sizeof(T), MPI_SUM, comm());
    status_.algorithm = DCT_ALGORITHM_DENSE;
    status_.nnz_sent = status_.nnz_received = count_;
    status_.density = 1.0;
    status_.bytes_sent = status_.bytes_received = status_.dense_bytes;
  }

  void post_header_exchange(MPI_Comm comm) {
    header_[0] = static_cast<std::int64_t>(kept_);
    header_[1] = static_cast<std::int64_t>(count_);
    header_[2] = static_cast<std::int64_t>(sizeof(T));
    headers_.resize(static_cast<std::size_t>(context_->size()) * kHeaderWords);
    check_mpi(MPI_Iallgather(header_, kHeaderWords, MPI_INT64_T, headers_.data(), kHeaderWords,
                             MPI_INT64_T, comm, &header_request_),
              "MPI_Iallgather");
  }

  // Validates every rank's header and decides the algorithm from the global kept count, so
  // that every rank takes the same decision.
  DCT_Algorithm complete_header_exchange() {
    check_mpi(MPI_Wait(&header_request_, MPI_STATUS_IGNORE), "MPI_Wait");
    std::size_t total_units = 0;
    std::int64_t total_entries = 0;
    for (int rank = 0; rank < context_->size(); ++rank) {
      const std::int64_t *h = &headers_[static_cast<std::size_t>(rank) * kHeaderWords];
      require(h[1] == count_ && h[2] == std::int64_t(sizeof(T)), DCT_ERR_MISMATCH,
              "rank " + std::to_string(rank) + " reduces " + std::to_string(h[1]) +
                  " elements of " + std::to_string(h[2]) + " bytes, rank " +
                  std::to_string(context_->rank()) + " reduces " + std::to_string(count_) + " of " +
                  std::to_string(sizeof(T)));
      require(h[0] >= 0 && h[0] <= count_, DCT_ERR_PEER,
              "rank " + std::to_string(rank) + " announced " + std::to_string(h[0]) +
                  " entries for a tensor of " + std::to_string(count_));
      total_units += block_units(h[0]);
      total_entries += h[0];
    }
    status_.bytes_sent = status_.bytes_received = header_bytes();
    // The allgather's displacements are ints counted in 8-byte units.
    const bool fits = total_units <= static_cast<std::size_t>(INT_MAX);
    if (config_.algorithm == DCT_ALGORITHM_ALLGATHER && fits) return DCT_ALGORITHM_ALLGATHER;
    const double sparse = double(total_entries) * kEntryBytes;
    const double dense = 2.0 * double(count_) * sizeof(T);
    return fits && sparse < dense ? DCT_ALGORITHM_ALLGATHER : DCT_ALGORITHM_DENSE;
  }

  void sparse_allgather() {
    const int ranks = context_->size();
    std::vector<int> units(static_cast<std::size_t>(ranks)), offsets(units.size());
    std::size_t total_units = 0;
    for (int rank = 0; rank < ranks; ++rank) {
      units[rank] = static_cast<int>(block_units(headers_[rank * kHeaderWords]));
      offsets[rank] = static_cast<int>(total_units);
      total_units += static_cast<std::size_t>(units[rank]);
    }
    const int me = context_->rank();
    message_.assign(static_cast<std::size_t>(units[me]) * kUnitBytes, std::byte{0});
    if (kept_ > 0) {
      std::memcpy(message_.data(), val_.data(), kept_ * sizeof(T));
      std::memcpy(message_.data() + kept_ * sizeof(T), idx_.data(), kept_ * sizeof(WireIndex));
    }
    gathered_.resize(total_units * kUnitBytes);
    // MPI_UINT64_T units carry raw bytes: dct assumes ranks of one architecture, as MPI codes
    // sending float arrays in place do.
    check_mpi(MPI_Allgatherv(message_.data(), units[me], MPI_UINT64_T, gathered_.data(),
                             units.data(), offsets.data(), MPI_UINT64_T, comm()),
              "MPI_Allgatherv");

    // Never trust a peer: validate every block before writing anything into recvbuf.
    std::int64_t received = 0;
    for (int rank = 0; rank < ranks; ++rank) {
      if (rank == me) continue;
      const std::int64_t entries = headers_[rank * kHeaderWords];
      require(kernels::indices_valid(block_indices(offsets[rank], entries),
                                     static_cast<std::size_t>(entries), elements()),
              DCT_ERR_PEER,
              "rank " + std::to_string(rank) + " sent indices out of range or out of order");
      received += entries;
    }
    kernels::fill_zero(recv_, elements());
    for (int rank = 0; rank < ranks; ++rank) {
      const std::int64_t entries = headers_[rank * kHeaderWords];
      kernels::scatter_add(block_indices(offsets[rank], entries), block_values(offsets[rank]),
                           static_cast<std::size_t>(entries), recv_);
    }
    status_.algorithm = DCT_ALGORITHM_ALLGATHER;
    status_.nnz_received = received;
    status_.bytes_sent += static_cast<MPI_Count>(ranks - 1) * units[me] * kUnitBytes;
    status_.bytes_received +=
        static_cast<MPI_Count>(total_units - static_cast<std::size_t>(units[me])) * kUnitBytes;
  }

  const T *block_values(int offset_units) const {
    return reinterpret_cast<const T *>(gathered_.data() + std::size_t(offset_units) * kUnitBytes);
  }
  const WireIndex *block_indices(int offset_units, std::int64_t entries) const {
    return reinterpret_cast<const WireIndex *>(gathered_.data() +
                                               std::size_t(offset_units) * kUnitBytes +
                                               static_cast<std::size_t>(entries) * sizeof(T));
  }

  void masked_dense_allreduce() {
    kernels::fill_zero(recv_, elements());
    kernels::scatter_add(idx_.data(), val_.data(), kept_, recv_);
    allreduce_in_chunks(MPI_IN_PLACE, recv_, count_, datatype_, sizeof(T), MPI_SUM, comm());
    status_.algorithm = DCT_ALGORITHM_DENSE;
    status_.nnz_received = context_->size() > 1 ? count_ : 0;
    status_.bytes_sent += status_.dense_bytes;
    status_.bytes_received += status_.dense_bytes;
  }

  MPI_Datatype datatype_;
  std::vector<T> residual_;
  T tau_ = T(0);
  T previous_tau_ = T(0);
  std::vector<WireIndex> idx_;
  std::vector<T> val_;
  std::size_t kept_ = 0;
  const T *send_ = nullptr;
  T *recv_ = nullptr;
  std::int64_t header_[kHeaderWords] = {};
  std::vector<std::int64_t> headers_;
  MPI_Request header_request_ = MPI_REQUEST_NULL;
  std::vector<std::byte> message_;
  std::vector<std::byte> gathered_;
};

}  // namespace

int AllreduceArgs::compressed_element_size() const {
  if (op != MPI_SUM || datatype == MPI_DATATYPE_NULL) return 0;
  // Fortran's REAL and DOUBLE PRECISION are IEEE binary32/binary64 wherever dct runs.
  if (datatype == MPI_FLOAT || datatype == MPI_REAL || datatype == MPI_REAL4) return 4;
  if (datatype == MPI_DOUBLE || datatype == MPI_DOUBLE_PRECISION || datatype == MPI_REAL8) return 8;
  return 0;
}

bool AllreduceArgs::compressed() const {
  return compressed_element_size() != 0;
}

void AllreduceArgs::validate() const {
  require(comm != MPI_COMM_NULL, DCT_ERR_COMM, "communicator is MPI_COMM_NULL");
  require(datatype != MPI_DATATYPE_NULL, DCT_ERR_DATATYPE, "datatype is MPI_DATATYPE_NULL");
  require(op != MPI_OP_NULL, DCT_ERR_OP, "op is MPI_OP_NULL");
  require(count >= 0, DCT_ERR_COUNT, "count is negative: " + std::to_string(count));
  if (compressed()) {
    require(count <= DCT_MAX_COUNT, DCT_ERR_COUNT,
            "count " + std::to_string(count) + " exceeds DCT_MAX_COUNT (32-bit wire indices)");
  } else {
    require(count <= INT_MAX, DCT_ERR_COUNT,
            "count " + std::to_string(count) + " exceeds INT_MAX for a call passed to MPI");
  }
  if (count > 0) {
    require(recvbuf != nullptr, DCT_ERR_BUFFER, "recvbuf is NULL with count > 0");
    require(sendbuf != nullptr, DCT_ERR_BUFFER, "sendbuf is NULL with count > 0");
  }
}

MPI_Comm AllreduceEngine::comm() const {
  require(context_->comm() != MPI_COMM_NULL, DCT_ERR_NOT_INITIALIZED,
          "MPI was finalized; this request can only be freed");
  return context_->comm();
}

void AllreduceEngine::begin_call() {
  require(!active_, DCT_ERR_ACTIVE, "request already started: complete it with DCT_Wait");
  status_ = DCT_Status{};
  status_.count = count_;
  status_.dense_bytes = ring_bytes(count_, element_size_, context_->size());
}

void AllreduceEngine::finish_call(DCT_Status *status) {
  totals_.calls += 1;
  totals_.total_bytes_sent += status_.bytes_sent;
  totals_.total_dense_bytes += status_.dense_bytes;
  status_.calls = totals_.calls;
  status_.total_bytes_sent = totals_.total_bytes_sent;
  status_.total_dense_bytes = totals_.total_dense_bytes;
  if (status) *status = status_;
}

std::unique_ptr<AllreduceEngine> make_allreduce_engine(const AllreduceArgs &args,
                                                       const Config &config) {
  std::shared_ptr<CommContext> context = comm_context(args.comm);
  if (!args.compressed()) return std::make_unique<PassthroughEngine>(context, args);
  if (args.compressed_element_size() == 4)
    return std::make_unique<CompressedEngine<float>>(context, args, config);
  return std::make_unique<CompressedEngine<double>>(context, args, config);
}

}  // namespace dct::detail
