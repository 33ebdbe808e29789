#include "allreduce.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "cost_model.hpp"
#include "error.hpp"
#include "exchange/exchange.hpp"
#include "kernels.hpp"
#include "peer_headers.hpp"
#include "progress.hpp"
#include "request_engine.hpp"
#include "tau_control.hpp"
#include "test_hooks.hpp"
#include "threshold.hpp"

namespace dct::detail {

namespace {

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
class PassthroughEngine final : public RequestEngine {
 public:
  PassthroughEngine(std::shared_ptr<CommContext> context, const AllreduceArgs &args)
      : RequestEngine(std::move(context), args.count, type_size(args.datatype), Config{}),
        datatype_(args.datatype),
        op_(args.op) {}

  void start(const void *send, void *recv) override {
    begin_call();
    send_ = send;
    recv_ = recv;
    launch();
  }

  bool blocking() const override { return true; }
  const void *residual() const override { return nullptr; }
  double tau() const override { return 0.0; }
  const char *kind() const override { return "allreduce"; }
  bool checkpointed() const override { return false; }
  void restore(const void *, double, MPI_Count) override {}

 private:
  bool advance(bool) override {
    check_mpi(MPI_Allreduce(send_, recv_, static_cast<int>(count_), datatype_, op_, comm()),
              "MPI_Allreduce");
    status_.algorithm = DCT_ALGORITHM_PASSTHROUGH;
    status_.nnz_sent = status_.nnz_received = count_;
    status_.density = 1.0;
    status_.bytes_sent = status_.bytes_received = status_.dense_bytes;
    return true;
  }
  void abandon() override {}

  MPI_Datatype datatype_;
  MPI_Op op_;
  const void *send_ = nullptr;
  void *recv_ = nullptr;
};

/// DCT-DP for one float or double tensor.
template <typename T>
class CompressedEngine final : public RequestEngine {
 public:
  CompressedEngine(std::shared_ptr<CommContext> context, const AllreduceArgs &args,
                   const Config &config)
      : RequestEngine(std::move(context), args.count, sizeof(T), config),
        datatype_(args.datatype),
        backend_(&kernels::backend_for(args.recvbuf, config.backend)),
        staged_(backend_->kind() != DCT_BACKEND_KOKKOS) {
    if (args.sendbuf != MPI_IN_PLACE && args.count > 0)
      require(&kernels::backend_for(args.sendbuf, config.backend) == backend_, DCT_ERR_BUFFER,
              "sendbuf and recvbuf are in different memory spaces");
    if (momentum() && elements() > 0) {
      velocity_ = BackendArray<T>(*backend_, elements());
      velocity_next_ = BackendArray<T>(*backend_, elements());
      backend_->fill_zero(velocity_.data(), elements(), stream_);
    }
    if (exact()) return;
    require(!staged_ || config.result_density >= 1.0, DCT_ERR_INFO,
            "dct_result_density < 1 is not supported with device buffers yet");
    residual_ = BackendArray<T>(*backend_, elements());
    backend_->fill_zero(residual_.data(), elements(), stream_);
  }

  ~CompressedEngine() override {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized && owns_comm_) MPI_Comm_free(&own_comm_);
  }

  void connect(bool own) override {
    if (exact()) return;
    if (!own) {
      own_comm_ = context_->shared_comm();
      return;
    }
    // Calls in flight progress independently, so each request talks on its own communicator.
    check_mpi(MPI_Comm_dup(RequestEngine::comm(), &own_comm_), "MPI_Comm_dup");
    owns_comm_ = true;
  }

  void start(const void *send, void *recv) override {
    begin_call();
    send_ = static_cast<const T *>(send == MPI_IN_PLACE ? recv : send);
    recv_ = static_cast<T *>(recv);
    if (momentum() && elements() > 0) {
      // Into a second buffer, committed when the call succeeds: a failed call leaves the
      // velocity as it was.
      backend_->momentum_update(send_, velocity_.data(), static_cast<T>(config_.momentum),
                                velocity_next_.data(), elements(), stream_);
      send_ = velocity_next_.data();
    }
    if (!exact()) {
      MPI_Comm comm = this->comm();
      try {
        compress();
        post_header_exchange(comm);
      } catch (...) {
        undo_compress();
        throw;
      }
    }
    launch();
  }

  bool blocking() const override { return exact(); }
  const void *residual() const override {
    if (exact()) return nullptr;
    if (!staged_) return residual_.data();
    residual_host_.resize(elements());
    backend_->copy(residual_host_.data(), residual_.data(), elements() * sizeof(T), stream_);
    return residual_host_.data();
  }
  double tau() const override { return static_cast<double>(tau_); }
  const char *kind() const override { return "allreduce"; }
  bool checkpointed() const override { return true; }
  void restore(const void *residual, double tau, MPI_Count calls) override {
    if (!exact() && elements() > 0)
      backend_->copy(residual_.data(), residual, elements() * sizeof(T), stream_);
    tau_ = static_cast<T>(tau);
    totals_.calls = calls;
    layout_.boundaries.clear();  // re-balanced, on every rank, by the next split call
  }

 private:
  bool exact() const { return config_.density >= 1.0; }
  std::size_t elements() const { return static_cast<std::size_t>(count_); }
  MPI_Comm comm() const {
    RequestEngine::comm();  // throws once the user's communicator or MPI is gone
    return own_comm_;
  }

  bool advance(bool block) override {
    if (exact()) {
      exact_allreduce();
      commit_velocity();
      return true;
    }
    if (!exchange_) {
      if (!header_complete(block)) return false;
      exchange_ = begin_exchange(read_headers());
    }
    const bool done = exchange_->advance(block);
    if (done) {
      account(*exchange_);
      if (staged_ && !sums_on_device(status_.algorithm) && elements() > 0)
        backend_->copy(recv_, result_host_.data(), elements() * sizeof(T), stream_);
      // The adaptive floor moves only with a completed call, and lives in tau_ so that a
      // checkpoint saves what the next call uses.
      if (adaptive()) tau_ = next_floor_;
      commit_velocity();
    }
    return done;
  }

  bool momentum() const { return config_.momentum > 0.0; }

  // Momentum correction: this call's velocity (momentum * velocity + send) becomes the
  // request's once the call succeeded, zeroed where an entry was sent (DGC's momentum factor
  // masking: the sent update already carries that velocity; measured on the MLP demo at 39x,
  // +0.36 points of test accuracy with masking, -0.46 without).
  void commit_velocity() {
    if (!momentum() || elements() == 0) return;
    std::swap(velocity_, velocity_next_);
    if (!exact()) backend_->scatter_zero(idx_.data(), kept_, velocity_.data(), stream_);
  }

  void abandon() override {
    if (exact()) return;
    // After an MPI failure operations may still be pending on the exchange's buffers: leak
    // them rather than let MPI write into freed memory, and never reuse that exchange.
    if (exchange_ && !exchange_->idle()) {
      for (auto &slot : exchanges_)
        if (slot.get() == exchange_) static_cast<void>(slot.release());
    }
    exchange_ = nullptr;
    undo_compress();
  }

  // acc = send + residual; the kept entries into idx_/val_ (dct_tau_control: fixed re-selects
  // tau every `interval` calls; adaptive keeps the exact top k of every call through a floor,
  // see tau_control.hpp). At every point where it can throw, kept_ counts exactly the entries
  // taken out of the residual.
  void compress() {
    const std::size_t n = elements();
    kept_ = 0;
    previous_tau_ = tau_;
    if (n > 0) {
      const std::size_t k = tau_control::target(config_.density, n);
      if (adaptive())
        take_top_k(k);
      else {
        const T *send = send_;
        if (totals_.calls % config_.interval == 0) send = reestimate(send_, k);
        if (idx_.size() == 0) reserve_entries(k, 0);
        take_entries(send, tau_);
        copy_entries_to_host();
      }
    }
    quantise_signs();
    status_.tau = adaptive() ? call_tau_ : static_cast<double>(tau_);
    status_.nnz_sent = static_cast<MPI_Count>(kept_);
    status_.density = n > 0 ? double(kept_) / double(n) : 0.0;
  }

  bool adaptive() const { return config_.tau_control == TauControl::adaptive; }

  // Adaptive control: candidates above the floor tau_, trimmed to the top k; the floor is
  // selected exactly on the first call and whenever fewer than k finite candidates come (NaN
  // and Inf are sent but do not count toward k).
  void take_top_k(std::size_t k) {
    const std::size_t n = elements();
    const std::size_t aim = tau_control::candidates(k, n);
    const T *send = send_;
    if (totals_.calls == 0) send = reestimate(send_, aim);
    if (idx_.size() == 0) reserve_entries(aim, 0);
    take_entries(send, tau_);
    copy_entries_to_host();
    std::size_t finite = tau_control::count_finite(host_val(), kept_);
    if (tau_ > T(0) && finite < k) {
      // Put them back (the residual holds acc again, exactly) and select the floor anew.
      backend_->scatter_add(idx_.data(), val_.data(), kept_, residual_.data(), stream_);
      kept_ = 0;
      reestimate(nullptr, aim);
      take_entries(nullptr, tau_);
      copy_entries_to_host();
      finite = tau_control::count_finite(host_val(), kept_);
    }
    const tau_control::Trim trim = trim_to(k, aim, finite);
    call_tau_ = trim.tau;
    next_floor_ = static_cast<T>(trim.next_floor);
  }

  // Keeps the top k of the kept_ candidates (tau_control::trim) and puts the others back into
  // the residual. Host work on the entries only (GPU backends: trim_on_device). The host
  // copies are up to date.
  // `finite`: how many of the candidates are finite.
  tau_control::Trim trim_to(std::size_t k, std::size_t aim, std::size_t finite) {
    if (staged_ && !rounds_values()) return trim_on_device(k, aim, finite);
    const std::size_t m = kept_;
    dropped_idx_.resize(m > k ? m - k : 0);
    dropped_val_.resize(dropped_idx_.size());
    WireIndex *idx = staged_ ? idx_host_.data() : idx_.data();
    T *val = staged_ ? val_host_.data() : val_.data();
    const tau_control::Trim trim =
        tau_control::trim(idx, val, m, k, aim, static_cast<double>(tau_), magnitudes_,
                          dropped_idx_.data(), dropped_val_.data());
    const std::size_t dropped = m - trim.kept;
    if (dropped == 0) return trim;
    const WireIndex *back_idx = dropped_idx_.data();
    const T *back_val = dropped_val_.data();
    if (staged_) {  // fp16/bf16 on a GPU backend: the trimmed lists go back to the device
      if (dropped_device_idx_.size() < dropped) {
        dropped_device_idx_ = BackendArray<WireIndex>(*backend_, dropped + dropped / 4);
        dropped_device_val_ = BackendArray<T>(*backend_, dropped_device_idx_.size());
      }
      backend_->copy(dropped_device_idx_.data(), back_idx, dropped * sizeof(WireIndex), stream_);
      backend_->copy(dropped_device_val_.data(), back_val, dropped * sizeof(T), stream_);
      backend_->copy(idx_.data(), idx, trim.kept * sizeof(WireIndex), stream_);
      backend_->copy(val_.data(), val, trim.kept * sizeof(T), stream_);
      back_idx = dropped_device_idx_.data();
      back_val = dropped_device_val_.data();
    }
    backend_->scatter_add(back_idx, back_val, dropped, residual_.data(), stream_);
    kept_ = trim.kept;
    return trim;
  }

  // fp16/bf16: the candidates hold acc rounded, and the trim compares those rounded values.
  bool rounds_values() const {
    return config_.values == ValueCoding::fp16 || config_.values == ValueCoding::bf16;
  }

  // The same trim on a GPU backend, for native and sign values (the candidates hold acc
  // itself), without taking the candidates through host memory (on an H100 the host trim of
  // ~3k candidates took 137 of the 146 ms of a 256 MiB call): every candidate goes back into
  // the residual, which then holds acc exactly; the k-th largest finite |acc| of the tensor is
  // tau (every entry at or above the floor is a candidate, so it is the k-th largest candidate,
  // and the aim-th likewise), and the filter at tau takes the entries the host trim keeps, in
  // index order: the same bits as a host request (mpi.device_buffers).
  tau_control::Trim trim_on_device(std::size_t k, std::size_t aim, std::size_t finite) {
    const std::size_t m = kept_;
    tau_control::Trim trim = tau_control::untrimmed(m, static_cast<double>(tau_));
    if (finite <= k) return trim;
    const std::size_t non_finite = m - finite, n = elements();
    backend_->scatter_add(idx_.data(), val_.data(), m, residual_.data(), stream_);
    kept_ = 0;
    const T tau = backend_->kth_largest_abs(nullptr, residual_.data(), n, k + non_finite, stream_);
    trim.next_floor = tau_control::next_floor(trim.tau, finite, k, aim, [&] {
      return static_cast<double>(
          backend_->kth_largest_abs(nullptr, residual_.data(), n, aim + non_finite, stream_));
    });
    take_entries(nullptr, tau);
    copy_entries_to_host();
    trim.kept = kept_;
    trim.tau = static_cast<double>(tau);
    return trim;
  }

  // On a GPU backend, the kept entries into their pinned host copies (the exchanges' input).
  void copy_entries_to_host() {
    if (!staged_ || kept_ == 0) return;
    backend_->copy(idx_host_.data(), idx_.data(), kept_ * sizeof(WireIndex), stream_);
    backend_->copy(val_host_.data(), val_.data(), kept_ * sizeof(T), stream_);
  }

  // tau_ = the k-th largest finite |send + residual| (send nullptr: the residual alone).
  // NaN and Inf rank above every number in the selection; when k or more of them make it
  // infinite, one filter pass at tau = Inf counts them (folding `send` into the residual) and
  // the selection is taken again with their number added to k. Returns what the next filter
  // reads: `send`, or nullptr once it is in the residual.
  const T *reestimate(const T *send, std::size_t k) {
    const std::uint64_t seed = 0x5eed0000ull + static_cast<std::uint64_t>(totals_.calls);
    tau_ = estimate_threshold(
        *backend_, send, residual_.data(), elements(), k, config_.sampled_threshold,
        static_cast<std::size_t>(config_.sample_size), seed, sample_, stream_);
    status_.tau_reestimated = 1;
    if (tau_control::finite(tau_)) return send;
    tau_ = std::numeric_limits<T>::infinity();
    take_entries(send, tau_);
    const std::size_t non_finite = kept_;
    backend_->scatter_add(idx_.data(), val_.data(), kept_, residual_.data(), stream_);
    kept_ = 0;
    tau_ = backend_->kth_largest_abs(nullptr, residual_.data(), elements(),
                                     std::min(elements(), k + non_finite), stream_);
    if (!tau_control::finite(tau_)) tau_ = T(0);  // nothing finite: keep every nonzero
    return nullptr;
  }

  // The fused filter of acc = send + residual (send nullptr: the residual alone) with
  // `threshold` into idx_/val_, growing them when more entries pass than they hold.
  void take_entries(const T *send, T threshold) {
    const std::size_t n = elements();
    const std::size_t capacity = idx_.size();
    const std::size_t found = backend_->filter(send, residual_.data(), n, threshold, config_.values,
                                               idx_.data(), val_.data(), capacity, stream_);
    kept_ = found < capacity ? found : capacity;
    if (found > capacity) {
      // The entries past the capacity were left in the residual; collect them in a second pass.
      reserve_entries(found, capacity);
      kept_ += backend_->filter(static_cast<const T *>(nullptr), residual_.data(), n, threshold,
                                config_.values, idx_.data() + capacity, val_.data() + capacity,
                                found - capacity, stream_);
      require(kept_ == found, DCT_ERR_INTERNAL, "filter overflow pass lost entries");
    }
  }

  // dct_values=sign: the kept entries travel as +-m, m the mean magnitude of the finite kept
  // values (EF-SignSGD's scaled sign, the m that minimises the block's squared error), and
  // acc - (+-m) goes back into the residual for error feedback to send later. val_ keeps acc
  // (undo_compress restores it); the exchange reads sign_values_. A non-finite kept value
  // makes m non-finite (NaN before Inf), so the sum is non-finite on every rank as with the
  // other codings, and that entry leaves the residual as sent.
  void quantise_signs() {
    if (config_.values != ValueCoding::sign || kept_ == 0) return;
    const T *val = host_val();
    double sum = 0;
    std::size_t finite = 0;
    bool nan = false, inf = false;
    for (std::size_t i = 0; i < kept_; ++i) {
      if (std::isfinite(val[i])) {
        sum += std::fabs(double(val[i]));
        ++finite;
      } else {
        nan = nan || std::isnan(val[i]);
        inf = inf || std::isinf(val[i]);
      }
    }
    const T mean = finite > 0 ? static_cast<T>(sum / double(finite)) : T(0);
    const T wire = nan   ? std::numeric_limits<T>::quiet_NaN()
                   : inf ? std::numeric_limits<T>::infinity()
                         : mean;
    sign_values_.resize(kept_);
    sign_error_.resize(kept_);
    for (std::size_t i = 0; i < kept_; ++i) {
      sign_values_[i] = std::signbit(val[i]) ? -wire : wire;
      const T sent = std::signbit(val[i]) ? -mean : mean;
      sign_error_[i] = std::isfinite(val[i]) ? val[i] - sent : T(0);
    }
    const T *error = sign_error_.data();
    if (staged_) {
      if (sign_error_device_.size() < kept_) sign_error_device_ = BackendArray<T>(*backend_, kept_);
      backend_->copy(sign_error_device_.data(), error, kept_ * sizeof(T), stream_);
      error = sign_error_device_.data();
    }
    backend_->scatter_add(idx_.data(), error, kept_, residual_.data(), stream_);
  }

  // Puts this call's sent entries back into the residual (there: acc - sent, exactly; with
  // dct_values=sign the residual there is set to acc, which val_ still holds).
  void undo_compress() {
    if (kept_ > 0 && config_.values == ValueCoding::sign)
      backend_->scatter_zero(idx_.data(), kept_, residual_.data(), stream_);
    if (kept_ > 0)
      backend_->scatter_add(idx_.data(), val_.data(), kept_, residual_.data(), stream_);
    kept_ = 0;
    tau_ = previous_tau_;
  }

  // Room for `entries` kept entries (and a margin), keeping the first `keep` already written.
  void reserve_entries(std::size_t entries, std::size_t keep) {
    const std::size_t capacity = entries + entries / 4 + 16;
    if (idx_.size() == 0) {
      idx_ = BackendArray<WireIndex>(*backend_, capacity);
      val_ = BackendArray<T>(*backend_, capacity);
    }
    idx_.grow(capacity, keep);
    val_.grow(capacity, keep);
    if (!staged_) return;
    idx_host_ = BackendArray<WireIndex>(*backend_, idx_.size(), true);
    val_host_ = BackendArray<T>(*backend_, val_.size(), true);
  }

  // The entries as the exchanges read them: in host memory.
  const WireIndex *host_idx() const { return staged_ ? idx_host_.data() : idx_.data(); }
  const WireIndex *outgoing_idx() {
#ifdef DCT_TESTING
    if (testing::tamper_allreduce_indices != nullptr) {
      tampered_idx_.assign(host_idx(), host_idx() + kept_);
      testing::tamper_allreduce_indices(tampered_idx_.data(), kept_);
      return tampered_idx_.data();
    }
#endif
    return host_idx();
  }
  const T *host_val() const {
    return staged_ ? val_host_.data() : val_.data();
  }
  const T *outgoing_val() const {
    return config_.values == ValueCoding::sign ? sign_values_.data() : host_val();
  }
  T *host_result() {
    if (!staged_) return recv_;
    if (result_host_.size() < elements())
      result_host_ = BackendArray<T>(*backend_, elements(), true);
    return result_host_.data();
  }

  // density 1: MPI_Allreduce itself, on the user's buffers when MPI can read them, else
  // through host staging buffers.
  void exact_allreduce() {
    const bool direct = !staged_ || backend_->mpi_accepts_device_memory();
    const std::size_t bytes = elements() * sizeof(T);
    T *recv = recv_;
    const void *send = send_ == recv_ ? MPI_IN_PLACE : static_cast<const void *>(send_);
    if (!direct) {
      recv = host_result();
      backend_->copy(recv, send_, bytes, stream_);
      send = MPI_IN_PLACE;
    }
    allreduce_in_chunks(send, recv, count_, datatype_, sizeof(T), MPI_SUM, RequestEngine::comm());
    if (!direct) backend_->copy(recv_, recv, bytes, stream_);
    status_.algorithm = DCT_ALGORITHM_DENSE;
    status_.nnz_sent = status_.nnz_received = count_;
    status_.density = 1.0;
    status_.bytes_sent = status_.bytes_received = status_.dense_bytes;
  }

  void post_header_exchange(MPI_Comm comm) {
    using namespace peer::allreduce;
    header_[kKept] = static_cast<std::int64_t>(kept_);
    header_[kCount] = static_cast<std::int64_t>(count_);
    header_[kValueBytes] = static_cast<std::int64_t>(sizeof(T));
    header_[kRebalance] = status_.tau_reestimated || layout_.boundaries.empty() ? 1 : 0;
    headers_.resize(static_cast<std::size_t>(context_->size()) * kWords);
    check_mpi(MPI_Iallgather(header_, kWords, MPI_INT64_T, headers_.data(), kWords, MPI_INT64_T,
                             comm, &header_request_),
              "MPI_Iallgather");
  }

  bool header_complete(bool block) {
    if (block) {
      check_mpi(MPI_Wait(&header_request_, MPI_STATUS_IGNORE), "MPI_Wait");
      return true;
    }
    int complete = 0;
    check_mpi(MPI_Test(&header_request_, &complete, MPI_STATUS_IGNORE), "MPI_Test");
    return complete != 0;
  }

  // Validates every rank's header (peer_headers.hpp) and decides the algorithm from what every
  // rank announced, so that every rank takes the same decision.
  DCT_Algorithm read_headers() {
    const int ranks = context_->size();
    kept_per_rank_.assign(static_cast<std::size_t>(ranks), 0);
    const peer::AllreduceAnnouncements announced =
        peer::read_allreduce_headers(headers_.data(), ranks, context_->rank(), count_,
                                     std::int64_t(sizeof(T)), kept_per_rank_.data());
    rebalance_ = announced.rebalance;
    status_.bytes_sent = status_.bytes_received =
        static_cast<MPI_Count>(ranks - 1) * peer::allreduce::kWords * sizeof(std::int64_t);
    return decide_algorithm(config_, ranks, double(count_), sizeof(T), announced.total_kept,
                            union_hint_, staged_);
  }

  // Staged GPU requests: allgather sums on the device, into the user's buffer; the other
  // algorithms write the sum in host memory (result_host_), copied over when they complete.
  bool sums_on_device(int algorithm) const {
    return staged_ && algorithm == DCT_ALGORITHM_ALLGATHER;
  }

  // Starts this call's exchange on the request's (reused) exchange object for `algorithm`.
  SparseExchange<T> *begin_exchange(DCT_Algorithm algorithm) {
    status_.algorithm = algorithm;
    SparseInput<T> input{
        comm(),         context_->rank(), context_->size(), elements(), kept_per_rank_.data(),
        outgoing_idx(), outgoing_val(),   nullptr};
    input.host = kernels::kokkos_backend();
    input.result = sums_on_device(algorithm) ? recv_ : host_result();
    if (sums_on_device(algorithm)) input.device = backend_;
    input.values = config_.values;
    input.rebalance = rebalance_;
    if (algorithm == DCT_ALGORITHM_SPLIT && config_.result_density < 1.0) {
      input.result_budget = static_cast<std::size_t>(
          std::max(1.0, std::ceil(config_.result_density * double(elements()))));
      input.residual = residual_.data();
    }
    std::unique_ptr<SparseExchange<T>> &slot = exchanges_[algorithm];
    if (!slot) {
      switch (algorithm) {
        case DCT_ALGORITHM_ALLGATHER:
          slot = make_allgather_exchange<T>();
          break;
        case DCT_ALGORITHM_SPLIT:
          slot = make_split_exchange<T>(layout_);
          break;
        case DCT_ALGORITHM_RECURSIVE_DOUBLING:
          slot = make_recursive_doubling_exchange<T>();
          break;
        default:
          slot = make_dense_exchange<T>(datatype_);
      }
    }
    slot->begin(std::move(input));
    return slot.get();
  }

  void account(const SparseExchange<T> &exchange) {
    const ExchangeTraffic &traffic = exchange.traffic();
    status_.bytes_sent += traffic.bytes_sent;
    status_.bytes_received += traffic.bytes_received;
    status_.nnz_received = traffic.nnz_received;
    // Every rank learns the same nonzero count, so auto's next decision stays collective.
    if (traffic.result_nnz >= 0) union_hint_ = double(traffic.result_nnz);
    exchange_ = nullptr;
  }

  MPI_Datatype datatype_;
  MPI_Comm own_comm_ = MPI_COMM_NULL;  // set by connect()
  bool owns_comm_ = false;
  Backend *backend_;
  bool staged_;  // a GPU backend: the exchanges work on host copies
  BackendArray<T> residual_;
  BackendArray<T> velocity_, velocity_next_;  // dct_momentum: committed and this call's
  mutable std::vector<T> residual_host_;      // residual(), read back from the device
  std::vector<T> sample_;
  T tau_ = T(0);  // fixed: the threshold; adaptive: the candidates' floor
  T previous_tau_ = T(0);
  T next_floor_ = T(0);        // adaptive: the floor for the next call, once this one completes
  double call_tau_ = 0;        // adaptive: this call's threshold (the k-th largest |acc|)
  std::vector<T> magnitudes_;  // adaptive: scratch of the trim, and its dropped entries
  std::vector<WireIndex> dropped_idx_;
  std::vector<T> dropped_val_;
  BackendArray<WireIndex> dropped_device_idx_;  // the dropped entries on the device (staged_)
  BackendArray<T> dropped_device_val_;
#ifdef DCT_TESTING
  std::vector<WireIndex> tampered_idx_;  // testing::tamper_allreduce_indices only
#endif
  std::vector<T> sign_values_, sign_error_;  // dct_values=sign: what travels, what stays
  BackendArray<T> sign_error_device_;        // sign_error_ on the device (staged_)
  BackendArray<WireIndex> idx_;              // kept entries, in the backend's memory
  BackendArray<T> val_;
  BackendArray<WireIndex> idx_host_;  // their pinned host copies (staged_ only)
  BackendArray<T> val_host_;
  BackendArray<T> result_host_;  // the exchange's result (staged_ only)
  std::size_t kept_ = 0;
  const T *send_ = nullptr;
  T *recv_ = nullptr;
  std::int64_t header_[peer::allreduce::kWords] = {};
  std::vector<std::int64_t> headers_;
  MPI_Request header_request_ = MPI_REQUEST_NULL;
  std::vector<std::int64_t> kept_per_rank_;
  bool rebalance_ = false;
  SplitLayout layout_;
  double union_hint_ = 0;
  // One per algorithm (indexed by DCT_Algorithm), reused across calls.
  std::unique_ptr<SparseExchange<T>> exchanges_[DCT_ALGORITHM_RECURSIVE_DOUBLING + 1];
  SparseExchange<T> *exchange_ = nullptr;  // this call's, while in flight
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
  // MPI defines MPI_IN_PLACE for the send buffer only; as recvbuf it is no address to write.
  require(recvbuf != MPI_IN_PLACE, DCT_ERR_BUFFER,
          "recvbuf is MPI_IN_PLACE: pass MPI_IN_PLACE as sendbuf, the data in recvbuf");
  if (count > 0) {
    require(recvbuf != nullptr, DCT_ERR_BUFFER, "recvbuf is NULL with count > 0");
    require(sendbuf != nullptr, DCT_ERR_BUFFER, "sendbuf is NULL with count > 0");
  }
}

std::unique_ptr<RequestEngine> make_allreduce_engine(const AllreduceArgs &args,
                                                     const Config &config) {
  std::shared_ptr<CommContext> context = comm_context(args.comm);
  if (!args.compressed()) return std::make_unique<PassthroughEngine>(context, args);
  if (args.compressed_element_size() == 4)
    return std::make_unique<CompressedEngine<float>>(context, args, config);
  return std::make_unique<CompressedEngine<double>>(context, args, config);
}

}  // namespace dct::detail
