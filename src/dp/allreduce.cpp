// The compressed allreduce request's lifecycle (allreduce.hpp): per call, the compression
// (gradient_compressor.cpp), the header allgather that lets every rank take the same
// algorithm, the exchange (src/dp/exchange/), momentum and the status; and MPI's own allreduce
// for density 1 and the datatypes dct does not compress. Over 400 lines because one class
// holds one call's state machine (start, advance, abandon) and the buffers it reuses.
#include "dp/allreduce.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/compute_backend.hpp"
#include "core/cost_model.hpp"
#include "core/datatypes.hpp"
#include "core/device_transport.hpp"
#include "core/error.hpp"
#include "core/peer_headers.hpp"
#include "core/progress.hpp"
#include "core/request_engine.hpp"
#include "core/tau_control.hpp"
#include "core/test_hooks.hpp"
#include "dp/call_message.hpp"
#include "dp/exchange/exchange.hpp"
#include "dp/gradient_compressor.hpp"

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
  void restore(const void *, const void *, double, MPI_Count) override {}

 private:
  bool advance(bool) override {
    // sendbuf == recvbuf reduces in place, as the compressed path does (MPI itself calls the
    // aliasing erroneous, and Open MPI's check aborted through the communicator's handler).
    const void *send = send_ == recv_ && count_ > 0 ? MPI_IN_PLACE : send_;
    check_mpi(MPI_Allreduce(send, recv_, static_cast<int>(count_), datatype_, op_, comm()),
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
        staged_(backend_->kind() != DCT_BACKEND_KOKKOS),
        compressor_(*backend_, config_, config.density >= 1.0 ? 0 : args.count, staged_, stream_) {
    if (args.sendbuf != MPI_IN_PLACE && args.count > 0)
      require(&kernels::backend_for(args.sendbuf, config.backend) == backend_, DCT_ERR_BUFFER,
              "sendbuf and recvbuf are in different memory spaces");
    if (momentum() && elements() > 0) {
      velocity_ = BackendArray<T>(*backend_, elements());
      velocity_next_ = BackendArray<T>(*backend_, elements());
      backend_->fill_zero(velocity_.data(), elements(), stream_);
    }
    if (keeps_last_update()) {
      previous_ = BackendArray<T>(*backend_, elements());
      backend_->fill_zero(previous_.data(), elements(), stream_);
    }
    if (config.transport == Transport::nccl && !exact()) {
      require(kernels::device_transport_compiled(), DCT_ERR_NOT_COMPILED,
              "dct_transport=nccl: this build of dct does not include NCCL");
      require(backend_->kind() == DCT_BACKEND_CUDA, DCT_ERR_BUFFER,
              "dct_transport=nccl needs CUDA device buffers");
    }
    if (config.group_size > 0) hierarchy_group_size(context_->size(), 0, config.group_size);
  }

  ~CompressedEngine() override {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized && owns_comm_) MPI_Comm_free(&own_comm_);
    if (!finalized) hierarchy_.free();
  }

  void connect(bool own) override {
    if (exact()) return;
    if (!own) {  // a drop-in state: its calls agree on the buffers' memory (c_api.cpp)
      own_comm_ = context_->shared_comm();
      any_staged_ = mpi_stages_ = staged_;  // MPI's GPU-awareness is not agreed: charged as staging
      return;
    }
    // Calls in flight progress independently, so each request talks on its own communicator.
    check_mpi(MPI_Comm_dup(RequestEngine::comm(), &own_comm_), "MPI_Comm_dup");
    owns_comm_ = true;
    mark_private(own_comm_);
    // One message per call (call_message.hpp) needs slots of one size on every rank: count,
    // type and configuration were agreed on at init (c_api.cpp), the densities may differ.
    // Drop-in states, made by each rank alone, never take it. The same message tells whether
    // any rank's buffers are device memory and whether any rank's MPI stages them through the
    // host, which every rank's cost model must charge alike (decide_algorithm) where ranks mix
    // host and device buffers or MPIs, and whether every rank's blocks can be gathered in
    // device memory (a GPU-aware MPI on every rank).
    const bool aware = staged_ && backend_->mpi_accepts_device_memory();
    std::int64_t agreed[5] = {std::int64_t(predicted_kept()), -std::int64_t(predicted_kept()),
                              staged_ ? 1 : 0, staged_ && !aware ? 1 : 0, aware ? 0 : 1};
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, agreed, 5, MPI_INT64_T, MPI_MAX, own_comm_),
              "MPI_Allreduce");
    agreed_kept_ = agreed[0] == -agreed[1] ? predicted_kept() : 0;
    any_staged_ = agreed[2] != 0;
    mpi_stages_ = agreed[3] != 0;
    all_blocks_on_device_ = agreed[4] == 0;
    // The device transport, where every rank's request wants it (device_transport.hpp); its
    // blocks travel on their own, not with the headers.
    if (config_.transport != Transport::mpi && kernels::device_transport_compiled())
      transport_ =
          context_->device_transport(own_comm_, staged_ && backend_->kind() == DCT_BACKEND_CUDA,
                                     config_.transport == Transport::nccl);
    if (transport_ != nullptr) agreed_kept_ = 0;
    // And on its own hierarchy, made now: the algorithm is chosen per call, in progress, where
    // a blocking MPI_Comm_split could deadlock against another request's progress.
    const int ranks = context_->size();
    if ((config_.algorithm == DCT_ALGORITHM_HIERARCHICAL && ranks >= 4) ||
        (config_.algorithm == DCT_ALGORITHM_AUTO && ranks >= kHierarchyMinRanks))
      hierarchy_ = make_hierarchy(own_comm_, config_.group_size);
    if (transport_ != nullptr && hierarchy_.group_size > 0)
      hierarchical_on_transport_ = connect_device_transports(hierarchy_, own_comm_);
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
        compressor_.undo(stream_);
        settle();
        throw;
      }
    }
    // DCT_Start's promise (dct.h): the application's work on the stream and dct's kernels done.
    backend_->synchronize(stream_);
    launch();
  }

  // Density 1 is one MPI call; a device transport's calls run in start order (progress.hpp).
  bool blocking() const override { return exact() || transport_ != nullptr; }
  const void *residual() const override {
    return exact() ? nullptr : compressor_.residual_on_host(stream_);
  }
  double tau() const override { return compressor_.tau(); }
  const char *kind() const override { return "allreduce"; }
  bool checkpointed() const override { return true; }
  const void *velocity() const override {
    return keeps_velocity() ? on_host(velocity_, velocity_host_) : nullptr;
  }
  const void *last_update() const override {
    return keeps_last_update() ? on_host(previous_, previous_host_) : nullptr;
  }
  bool keeps_velocity() const override { return momentum() && elements() > 0; }
  bool keeps_last_update() const override { return unrolls() && elements() > 0; }
  void restore_last_update(const void *update) override {
    if (keeps_last_update())
      backend_->copy(previous_.data(), update, elements() * sizeof(T), stream_);
  }
  void *loadable_residual() override {
    return exact() || staged_ || elements() == 0 ? nullptr : compressor_.residual(stream_);
  }
  void *loadable_velocity() override {
    return !momentum() || staged_ || elements() == 0 ? nullptr : velocity_.data();
  }
  std::int64_t algorithm_hint() const override { return static_cast<std::int64_t>(union_hint_); }
  void restore_algorithm_hint(std::int64_t hint) override { union_hint_ = double(hint); }
  void restore(const void *residual, const void *velocity, double tau, MPI_Count calls) override {
    compressor_.restore(residual, tau, stream_);
    // (A load that read straight into the velocity passes it back.)
    if (momentum() && elements() > 0 && velocity != velocity_.data())
      backend_->copy(velocity_.data(), velocity, elements() * sizeof(T), stream_);
    totals_.calls = calls;
    // Re-balanced, on every rank, by the next split or hierarchical call.
    for (SplitLayout *layout : {&layout_, &group_layout_, &cross_layout_})
      layout->boundaries.clear();
  }

 private:
  bool exact() const { return config_.density >= 1.0; }
  // `state` where checkpoints can read it: itself, or (staged requests) a copy in `host`.
  const T *on_host(const BackendArray<T> &state, std::vector<T> &host) const {
    if (!staged_) return state.data();
    host.resize(elements());
    backend_->copy(host.data(), state.data(), elements() * sizeof(T), stream_);
    return host.data();
  }
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
      if (!message_.complete(block)) return false;
      exchange_ = begin_exchange(read_headers());
    }
    const bool done = exchange_->advance(block);
    if (done) {
      account(*exchange_);
      if (staged_ && !sums_on_device(status_.algorithm) && elements() > 0)
        backend_->copy(recv_, result_host_.data(), elements() * sizeof(T), stream_);
      compressor_.commit();
      commit_velocity();
      if (keeps_last_update())
        backend_->momentum_unroll(recv_, previous_.data(), static_cast<T>(config_.momentum),
                                  elements(), stream_);
      backend_->synchronize(stream_);  // recvbuf written when the completion call returns
    }
    return done;
  }

  // dct_momentum_result=gradient at density 1 leaves the momentum to the application: the call
  // is MPI_Allreduce of the gradients, bit for bit.
  bool momentum() const {
    return config_.momentum > 0.0 &&
           !(exact() && config_.momentum_result == MomentumResult::gradient);
  }
  // dct_momentum_result=gradient: the result r = update - m * last update, whose heavy-ball
  // momentum (b = m b + r, from b = 0) is the update itself; previous_ holds the last update.
  bool unrolls() const { return momentum() && config_.momentum_result == MomentumResult::gradient; }

  // Momentum correction: this call's velocity (momentum * velocity + send) becomes the
  // request's once the call succeeded, zeroed where an entry was sent (DGC's momentum factor
  // masking: the sent update already carries that velocity; measured on the MLP demo at 39x,
  // +0.36 points of test accuracy with masking, -0.46 without).
  void commit_velocity() {
    if (!momentum() || elements() == 0) return;
    std::swap(velocity_, velocity_next_);
    if (!exact())
      backend_->scatter_zero(compressor_.kept_indices(), compressor_.kept(), velocity_.data(),
                             stream_);
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
    compressor_.undo(stream_);
    settle();
  }

  // After an error, before it is reported: the residual put back on the device (undo only
  // queues it). A failure here (a device already broken) must not hide the call's own error.
  void settle() noexcept {
    try {
      backend_->synchronize(stream_);
    } catch (...) {
    }
  }

  // This call's entries (gradient_compressor.hpp), for its status.
  void compress() {
    const auto selection = compressor_.compress(send_, totals_.calls, stream_);
    const std::size_t kept = compressor_.kept();
    status_.tau = selection.tau;
    if (selection.reestimated) status_.tau_reestimated = 1;
    status_.nnz_sent = static_cast<MPI_Count>(kept);
    status_.nonfinite = static_cast<MPI_Count>(compressor_.nonfinite());
    status_.density = elements() > 0 ? double(kept) / double(elements()) : 0.0;
  }

  // The entries as the exchanges read them: in host memory.
  const WireIndex *outgoing_idx() {
#ifdef DCT_TESTING
    if (testing::tamper_allreduce_indices != nullptr) {
      tampered_idx_.assign(compressor_.host_indices(),
                           compressor_.host_indices() + compressor_.kept());
      testing::tamper_allreduce_indices(tampered_idx_.data(), compressor_.kept());
      return tampered_idx_.data();
    }
#endif
    return compressor_.host_indices();
  }
  // ... and in the device's memory, where the exchanges encode them (encodes_on_device): a
  // test's damage reaches them there too, so that the device's encoders and decoders meet it.
  const WireIndex *device_indices() {
#ifdef DCT_TESTING
    if (testing::tamper_allreduce_indices != nullptr) {
      const std::size_t kept = compressor_.kept();
      tampered_device_idx_.reserve_growing(*backend_, kept);
      backend_->copy(tampered_device_idx_.data(), outgoing_idx(), kept * sizeof(WireIndex),
                     stream_);
      return tampered_device_idx_.data();
    }
#endif
    return compressor_.kept_indices();
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
    }  // else MPI reads the device, where start() waited for the momentum's send_
    allreduce_in_chunks(send, recv, count_, datatype_, sizeof(T), MPI_SUM, RequestEngine::comm());
    if (!direct) backend_->copy(recv_, recv, bytes, stream_);
    status_.algorithm = DCT_ALGORITHM_DENSE;
    status_.nnz_sent = status_.nnz_received = count_;
    status_.density = 1.0;
    status_.bytes_sent = status_.bytes_received = status_.dense_bytes;
  }

  // The entries this rank keeps when the adaptive control holds the target (ties broken by
  // index: exactly k) after any warm-up, or 0 when it cannot tell (the fixed control, an
  // empty tensor).
  std::size_t predicted_kept() const {
    if (config_.tau_control != TauControl::adaptive || elements() == 0) return 0;
    return tau_control::target(config_.density, elements());
  }

  // The header (and, where the blocks' sizes are known in advance, this rank's block: see
  // call_message.hpp) to every rank.
  void post_header_exchange(MPI_Comm comm) {
    using namespace peer::allreduce;
    const std::size_t kept = compressor_.kept();
    header_[kKept] = static_cast<std::int64_t>(kept);
    header_[kCount] = static_cast<std::int64_t>(count_);
    header_[kValueBytes] = static_cast<std::int64_t>(sizeof(T));
    // An exchange whose layout is empty re-balances anyway (every rank's is alike).
    header_[kRebalance] = status_.tau_reestimated ? 1 : 0;
    const int ranks = context_->size();
    // A warm-up's calls keep more than the steady state's prediction (its call count is
    // agreed at init, so every rank skips the fused blocks on the same calls).
    fused_kept_ = config_.density_warmup.active(totals_.calls) ? 0 : agreed_kept_;
    if (fused_kept_ > 0 &&
        decide_algorithm(config_, ranks, double(count_), sizeof(T), double(ranks) * fused_kept_,
                         union_hint_, staging(), hierarchy_.group_size) != DCT_ALGORITHM_ALLGATHER)
      fused_kept_ = 0;
    const wire::BlockFormat format = wire::block_format<T>(fused_kept_, elements(), config_.values);
    // Every rank's MPI reads device memory: the blocks are gathered there, beside the headers.
    const bool on_device = all_blocks_on_device_ && encodes_on_device(DCT_ALGORITHM_ALLGATHER);
    std::byte *block = message_.prepare(ranks, context_->rank(), kWords,
                                        fused_kept_ > 0 ? format.units() * wire::kUnitBytes : 0,
                                        on_device ? backend_ : nullptr);
    if (fused_kept_ > 0 && kept == fused_kept_) {
      if (on_device)
        backend_->encode_block(format, device_indices(), compressor_.wire_values(), 0, block,
                               stream_);
      else if (encodes_on_device(DCT_ALGORITHM_ALLGATHER))
        encode_on_device(*backend_, format, device_indices(), compressor_.wire_values(), block,
                         device_block_, stream_);
      else
        wire::encode_block(format, outgoing_idx(), compressor_.outgoing_values(), 0, block);
    }
    if (on_device) backend_->synchronize(stream_);  // MPI reads the block where it was encoded
    message_.post(header_, comm);
  }

  // Validates every rank's header (peer_headers.hpp) and decides the algorithm from what every
  // rank announced, so that every rank takes the same decision.
  DCT_Algorithm read_headers() {
    const int ranks = context_->size();
    kept_per_rank_.assign(static_cast<std::size_t>(ranks), 0);
    const peer::AllreduceAnnouncements announced =
        peer::read_allreduce_headers(message_.headers(), ranks, context_->rank(), count_,
                                     std::int64_t(sizeof(T)), kept_per_rank_.data());
    rebalance_ = announced.rebalance;
    status_.bytes_sent = status_.bytes_received =
        static_cast<MPI_Count>(ranks - 1) * peer::allreduce::kWords * sizeof(std::int64_t);
    return decide_algorithm(config_, ranks, double(count_), sizeof(T), announced.total_kept,
                            union_hint_, staging(), hierarchy_.group_size);
  }

  // What auto charges for the sums' way to the device (cost_model.hpp), alike on every rank:
  // the transport is every rank's or none's.
  Staging staging() const {
    if (!any_staged_) return Staging::none;
    if (transport_ != nullptr)  // dense's sum too; hierarchical's tiers where they have one
      return hierarchical_on_transport_ || !mpi_stages_ ? Staging::none : Staging::transport;
    return mpi_stages_ ? Staging::all : Staging::dense;
  }

  // Staged GPU requests: the sparse exchanges sum on the device, into the user's buffer, from
  // what they received (exchange.hpp: SparseInput::device); dense too where MPI reads device
  // memory or the transport sums it, else it writes the sum in host memory (result_host_),
  // copied over at the end.
  bool sums_on_device(int algorithm) const {
    return staged_ && (algorithm != DCT_ALGORITHM_DENSE || transport_ != nullptr ||
                       backend_->mpi_accepts_device_memory());
  }
  // ... and every sparse exchange encodes this rank's blocks there too (recursive doubling
  // also merges there), every value coding: then only compressed bytes cross between host and
  // device, and none where MPI reads device memory. Dense, where it sums on the device, scatters
  // this rank's entries there from where they were kept.
  bool encodes_on_device(int algorithm) const {
    if (algorithm == DCT_ALGORITHM_DENSE) return sums_on_device(algorithm);
    if (algorithm != DCT_ALGORITHM_ALLGATHER && algorithm != DCT_ALGORITHM_SPLIT &&
        algorithm != DCT_ALGORITHM_HIERARCHICAL && algorithm != DCT_ALGORITHM_RECURSIVE_DOUBLING)
      return false;
    return staged_;
  }

  // Starts this call's exchange on the request's (reused) exchange object for `algorithm`.
  SparseExchange<T> *begin_exchange(DCT_Algorithm algorithm) {
    status_.algorithm = algorithm;
    const bool device_entries = sums_on_device(algorithm) && encodes_on_device(algorithm);
    SparseInput<T> input{comm(),
                         context_->rank(),
                         context_->size(),
                         elements(),
                         kept_per_rank_.data(),
                         device_entries ? nullptr : outgoing_idx(),
                         device_entries ? nullptr : compressor_.outgoing_values(),
                         nullptr};
    input.host = kernels::kokkos_backend();
    input.stream = stream_;
    input.result = sums_on_device(algorithm) ? recv_ : host_result();
    if (sums_on_device(algorithm)) input.device = backend_;
    if (device_entries) {
      input.device_idx = device_indices();
      input.device_val = compressor_.wire_values();
    }
    // Every rank's or none's, and only where every rank's buffers are device memory (staged_);
    // hierarchical's tiers use the hierarchy's own (hierarchical_on_transport_).
    if (algorithm != DCT_ALGORITHM_HIERARCHICAL || hierarchical_on_transport_)
      input.transport = transport_;
    input.values = config_.values;
    input.rebalance = rebalance_;
    // Every block already came with the headers when every rank kept the predicted count.
    if (algorithm == DCT_ALGORITHM_ALLGATHER && fused_kept_ > 0 &&
        std::all_of(kept_per_rank_.begin(), kept_per_rank_.end(),
                    [&](std::int64_t kept) { return std::size_t(kept) == fused_kept_; })) {
      input.gathered = message_.block(0);
      input.gathered_stride = message_.stride_bytes();
      input.gathered_on_device = message_.blocks_on_device();
    }
    const bool splits = algorithm == DCT_ALGORITHM_SPLIT || algorithm == DCT_ALGORITHM_HIERARCHICAL;
    if (splits && config_.result_density < 1.0) {
      input.result_budget = static_cast<std::size_t>(
          std::max(1.0, std::ceil(config_.result_density * double(elements()))));
      input.residual = compressor_.residual(stream_);
      if (staged_) input.residual_device = backend_;
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
        case DCT_ALGORITHM_HIERARCHICAL:
          slot = make_hierarchical_exchange<T>(hierarchy_, group_layout_, cross_layout_);
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
  bool staged_;                             // a GPU backend: the exchanges work on host copies
  bool any_staged_ = false;                 // staged_ on some rank (agreed in connect)
  bool mpi_stages_ = false;                 // staged_ and MPI not GPU-aware on some rank (connect)
  bool hierarchical_on_transport_ = false;  // hierarchy_'s tiers have transports (connect)
  bool all_blocks_on_device_ = false;  // every rank staged_, its MPI GPU-aware (agreed in connect)
  BackendArray<T> velocity_, velocity_next_;  // dct_momentum: committed and this call's
  mutable std::vector<T> velocity_host_;      // velocity() of a staged request
  BackendArray<T> previous_;                  // dct_momentum_result=gradient: the last update
  mutable std::vector<T> previous_host_;      // last_update() of a staged request
  GradientCompressor<T> compressor_;          // residual, threshold and kept entries
#ifdef DCT_TESTING
  std::vector<WireIndex> tampered_idx_;          // testing::tamper_allreduce_indices only
  BackendArray<WireIndex> tampered_device_idx_;  // the same, on the device (staged_ only)
#endif
  BackendArray<T> result_host_;           // the exchange's result (staged_ only)
  BackendArray<std::byte> device_block_;  // encodes_on_device(): the fused block, on the device
  DeviceTransport *transport_ = nullptr;  // the context's, where this request's blocks use it
  const T *send_ = nullptr;
  T *recv_ = nullptr;
  std::int64_t header_[peer::allreduce::kWords] = {};
  CallMessage message_;          // this call's headers (and blocks, see call_message.hpp)
  std::size_t fused_kept_ = 0;   // the kept count the blocks in message_ were sized for; 0: none
  std::size_t agreed_kept_ = 0;  // every rank's predicted_kept(), when all alike (else 0)
  std::vector<std::int64_t> kept_per_rank_;
  bool rebalance_ = false;
  SplitLayout layout_;
  Hierarchy hierarchy_;  // hierarchical's communicators (made by connect) and layouts
  SplitLayout group_layout_, cross_layout_;
  double union_hint_ = 0;
  // One per algorithm (indexed by DCT_Algorithm), reused across calls.
  std::unique_ptr<SparseExchange<T>> exchanges_[DCT_ALGORITHM_HIERARCHICAL + 1];
  SparseExchange<T> *exchange_ = nullptr;  // this call's, while in flight
};

}  // namespace

int AllreduceArgs::compressed_element_size() const {
  return op == MPI_SUM ? floating_element_size(datatype) : 0;
}

bool AllreduceArgs::compressed() const {
  return compressed_element_size() != 0;
}

namespace {

/// MPI has no query for whether a datatype is committed, but checks it wherever a communication
/// names the type (Open MPI and MPICH 4.0 also for MPI_PROC_NULL, where nothing is read; MPICH
/// not for count 0), so a send of one element to no one on `probe_comm`, whose errors return,
/// tells: an uncommitted type passed through to MPI would otherwise fail in MPI_Allreduce,
/// through the user communicator's handler.
void require_committed(MPI_Datatype datatype, MPI_Comm probe_comm) {
  int integers = 0, addresses = 0, datatypes = 0, combiner = MPI_COMBINER_NAMED;
  check_mpi(MPI_Type_get_envelope(datatype, &integers, &addresses, &datatypes, &combiner),
            "MPI_Type_get_envelope");
  if (combiner == MPI_COMBINER_NAMED) return;  // predefined: always committed
  const char nothing = 0;
  require(MPI_Send(&nothing, 1, datatype, MPI_PROC_NULL, 0, probe_comm) == MPI_SUCCESS,
          DCT_ERR_DATATYPE, "datatype is not committed (MPI_Type_commit) or not valid");
}

}  // namespace

void AllreduceArgs::validate(MPI_Comm probe_comm) const {
  require(comm != MPI_COMM_NULL, DCT_ERR_COMM, "communicator is MPI_COMM_NULL");
  require(datatype != MPI_DATATYPE_NULL, DCT_ERR_DATATYPE, "datatype is MPI_DATATYPE_NULL");
  require_committed(datatype, probe_comm);
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
