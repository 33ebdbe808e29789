// The compressed allreduce request's lifecycle (allreduce.hpp): per call, the compression
// (gradient_compressor.cpp), the header allgather that lets every rank take the same
// algorithm, the exchange (exchange/exchange_set.hpp), momentum (momentum.hpp) and the status;
// MPI's own allreduce for density 1 (the dense path), and the datatypes dct does not compress
// (passthrough.cpp). Its state between calls is an EngineState (core/engine_state.hpp).
#include "dp/allreduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/compute_backend.hpp"
#include "core/cost_model.hpp"
#include "core/datatypes.hpp"
#include "core/device_transport.hpp"
#include "core/engine_state.hpp"
#include "core/error.hpp"
#include "core/peer_headers.hpp"
#include "core/progress.hpp"
#include "core/request_engine.hpp"
#include "core/tau_control.hpp"
#include "core/test_hooks.hpp"
#include "dp/call_message.hpp"
#include "dp/connect_agreement.hpp"
#include "dp/exchange/exchange.hpp"
#include "dp/exchange/exchange_set.hpp"
#include "dp/gradient_compressor.hpp"
#include "dp/momentum.hpp"
#include "dp/passthrough.hpp"

namespace dct::detail {

namespace {

/// DCT-DP for one float or double tensor.
template <typename T>
class CompressedEngine final : public RequestEngine, public EngineState {
 public:
  CompressedEngine(std::shared_ptr<CommContext> context, const AllreduceArgs &args,
                   const Config &config)
      : RequestEngine(std::move(context), args.count, sizeof(T), config),
        datatype_(args.datatype),
        backend_(&backends::backend_for(args.recvbuf, config.backend)),
        staged_(backend_->kind() != DCT_BACKEND_KOKKOS),
        compressor_(*backend_, config_, config.density >= 1.0 ? 0 : args.count, staged_, stream_),
        momentum_(*backend_, config_, config.density >= 1.0, staged_, elements(), stream_) {
    if (args.sendbuf != MPI_IN_PLACE && args.count > 0)
      require(&backends::backend_for(args.sendbuf, config.backend) == backend_, DCT_ERR_BUFFER,
              "sendbuf and recvbuf are in different memory spaces");
    placement_.staged = staged_;
    placement_.mpi_reads_device = staged_ && backend_->mpi_accepts_device_memory();
    state_ = this;
    if (config.transport == Transport::nccl && !dense_path()) {
      require(backends::device_transport_compiled(), DCT_ERR_NOT_COMPILED,
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
    if (dense_path()) return;
    if (!own) {  // a drop-in state: its calls agree on the buffers' memory (c_api.cpp)
      own_comm_ = context_->shared_comm();
      // MPI's GPU-awareness is not agreed: charged as staging.
      placement_.any_staged = placement_.any_mpi_stages = staged_;
      return;
    }
    // Calls in flight progress independently, so each request talks on its own communicator.
    check_mpi(MPI_Comm_dup(RequestEngine::comm(), &own_comm_), "MPI_Comm_dup");
    owns_comm_ = true;
    mark_private(own_comm_);
    // One message per call (call_message.hpp) needs slots of one size on every rank: count,
    // type and configuration were agreed on at init (c_api.cpp), the densities may differ.
    // Drop-in states, made by each rank alone, never take it. Every rank's cost model must
    // charge the staging alike (decide_algorithm) where ranks mix host and device buffers or
    // MPIs: the same agreement (connect_agreement.hpp) tells.
    const ConnectAgreement agreed = ConnectAgreement::reach(
        ConnectOffer{predicted_kept(), staged_, placement_.mpi_reads_device}, own_comm_);
    agreed_kept_ = agreed.predicted_kept;
    placement_.any_staged = agreed.any_staged;
    placement_.any_mpi_stages = agreed.any_mpi_stages;
    all_blocks_on_device_ = agreed.all_blocks_on_device;
    // The device transport, where every rank's request wants it (device_transport.hpp); its
    // blocks travel on their own, not with the headers.
    if (config_.transport != Transport::mpi && backends::device_transport_compiled())
      transport_ =
          context_->device_transport(own_comm_, staged_ && backend_->kind() == DCT_BACKEND_CUDA,
                                     config_.transport == Transport::nccl);
    placement_.transport = transport_ != nullptr;
    if (transport_ != nullptr) agreed_kept_ = 0;
    // And on its own hierarchy, made now: the algorithm is chosen per call, in progress, where
    // a blocking MPI_Comm_split could deadlock against another request's progress.
    const int ranks = context_->size();
    if ((config_.algorithm == DCT_ALGORITHM_HIERARCHICAL && ranks >= 4) ||
        (config_.algorithm == DCT_ALGORITHM_AUTO && ranks >= kHierarchyMinRanks))
      hierarchy_ = make_hierarchy(own_comm_, config_.group_size);
    if (transport_ != nullptr && hierarchy_.group_size > 0)
      placement_.hierarchical_on_transport = connect_device_transports(hierarchy_, own_comm_);
  }

  void start(const void *send, void *recv) override {
    begin_call();
    send_ = static_cast<const T *>(send == MPI_IN_PLACE ? recv : send);
    recv_ = static_cast<T *>(recv);
    if (dense_path()) send_ = momentum_.update(send_, stream_);
    if (!dense_path()) {
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
  bool blocking() const override { return dense_path() || transport_ != nullptr; }

  // EngineState.
  const char *kind() const override { return "allreduce"; }
  bool counts_per_rank() const override { return false; }
  const void *residual() const override {
    return dense_path() ? nullptr : compressor_.residual_on_host(stream_);
  }
  double tau() const override { return compressor_.tau(); }
  const void *velocity() const override { return momentum_.velocity_on_host(stream_); }
  const void *last_update() const override { return momentum_.last_update_on_host(stream_); }
  bool keeps_velocity() const override { return momentum_.keeps_velocity(); }
  bool keeps_last_update() const override { return momentum_.keeps_last_update(); }
  std::int64_t result_nonzeros() const override { return result_nonzeros_; }
  std::vector<double> extra() const override { return {}; }
  void *loadable_residual() override {
    return dense_path() || staged_ || elements() == 0 ? nullptr : compressor_.residual(stream_);
  }
  void *loadable_velocity() override { return momentum_.loadable_velocity(); }
  void check_extra(const std::vector<double> &words) const override {
    require(words.empty(), DCT_ERR_CKPT_FORMAT,
            "request '" + name() + "' keeps no state beyond its residual, the checkpoint has some");
  }
  void restore(const void *residual, const void *velocity, double tau, MPI_Count calls) override {
    compressor_.restore(residual, tau, stream_);
    momentum_.restore_velocity(velocity, stream_);
    totals_.calls = calls;
    exchanges_.forget_layouts();
  }
  void restore_last_update(const void *update) override {
    momentum_.restore_last_update(update, stream_);
  }
  void restore_result_nonzeros(std::int64_t nonzeros) override { result_nonzeros_ = nonzeros; }
  void restore_extra(const std::vector<double> &) override {}

 private:
  // Density 1: every call is MPI_Allreduce, nothing is compressed.
  bool dense_path() const { return config_.density >= 1.0; }
  std::size_t elements() const { return static_cast<std::size_t>(count_); }
  MPI_Comm comm() const {
    RequestEngine::comm();  // throws once the user's communicator or MPI is gone
    return own_comm_;
  }

  bool advance(bool block) override {
    if (dense_path()) {
      dense_allreduce();
      momentum_.commit();
      return true;
    }
    if (!exchange_) {
      if (!message_.complete(block)) return false;
      exchange_ = begin_exchange(read_headers());
    }
    const bool done = exchange_->advance(block);
    if (done) {
      account(*exchange_);
      if (staged_ && !placement_.sums_on_device(status_.algorithm) && elements() > 0)
        backend_->copy(recv_, result_host_.data(), elements() * sizeof(T), stream_);
      compressor_.commit();
      momentum_.commit_masking(compressor_.kept_indices(), compressor_.kept(), stream_);
      momentum_.unroll(recv_, stream_);
      backend_->synchronize(stream_);  // recvbuf written when the completion call returns
    }
    return done;
  }

  void abandon() override {
    if (dense_path()) return;
    exchanges_.abandon(exchange_);
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
    const auto selection =
        compressor_.compress(send_, momentum_.velocity_update(), totals_.calls, stream_);
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

  // The dense path: MPI_Allreduce itself, on the user's buffers when MPI can read them, else
  // through host staging buffers.
  void dense_allreduce() {
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
                         double(result_nonzeros_), placement_.staging(),
                         hierarchy_.group_size) != DCT_ALGORITHM_ALLGATHER)
      fused_kept_ = 0;
    const wire::BlockFormat format = wire::block_format<T>(fused_kept_, elements(), config_.values);
    // Every rank's MPI reads device memory: the blocks are gathered there, beside the headers.
    const bool on_device =
        all_blocks_on_device_ && placement_.encodes_on_device(DCT_ALGORITHM_ALLGATHER);
    std::byte *block = message_.prepare(ranks, context_->rank(), kWords,
                                        fused_kept_ > 0 ? format.units() * wire::kUnitBytes : 0,
                                        on_device ? backend_ : nullptr);
    if (fused_kept_ > 0 && kept == fused_kept_) {
      if (on_device)
        backend_->encode_block(format, device_indices(), compressor_.wire_values(), 0, block,
                               stream_);
      else if (placement_.encodes_on_device(DCT_ALGORITHM_ALLGATHER))
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
                            double(result_nonzeros_), placement_.staging(), hierarchy_.group_size);
  }

  // Starts this call's exchange on the request's (reused) exchange object for `algorithm`.
  SparseExchange<T> *begin_exchange(DCT_Algorithm algorithm) {
    status_.algorithm = algorithm;
    const bool sums_on_device = placement_.sums_on_device(algorithm);
    const bool device_entries = sums_on_device && placement_.encodes_on_device(algorithm);
    SparseInput<T> input{comm(),
                         context_->rank(),
                         context_->size(),
                         elements(),
                         kept_per_rank_.data(),
                         device_entries ? nullptr : outgoing_idx(),
                         device_entries ? nullptr : compressor_.outgoing_values(),
                         nullptr};
    input.host = backends::kokkos_backend();
    input.stream = stream_;
    input.result = sums_on_device ? recv_ : host_result();
    if (sums_on_device) input.device = backend_;
    if (device_entries) {
      input.device_idx = device_indices();
      input.device_val = compressor_.wire_values();
    }
    // Every rank's or none's, and only where every rank's buffers are device memory (staged_);
    // hierarchical's tiers use the hierarchy's own (Placement::hierarchical_on_transport).
    if (algorithm != DCT_ALGORITHM_HIERARCHICAL || placement_.hierarchical_on_transport)
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
    SparseExchange<T> &exchange = exchanges_.get(algorithm, datatype_, hierarchy_);
    exchange.begin(std::move(input));
    return &exchange;
  }

  void account(const SparseExchange<T> &exchange) {
    const ExchangeTraffic &traffic = exchange.traffic();
    status_.bytes_sent += traffic.bytes_sent;
    status_.bytes_received += traffic.bytes_received;
    status_.nnz_received = traffic.nnz_received;
    // Every rank learns the same nonzero count, so auto's next decision stays collective.
    if (traffic.result_nnz >= 0) result_nonzeros_ = std::int64_t(traffic.result_nnz);
    exchange_ = nullptr;
  }

  MPI_Datatype datatype_;
  MPI_Comm own_comm_ = MPI_COMM_NULL;  // set by connect()
  bool owns_comm_ = false;
  Backend *backend_;
  bool staged_;                        // a GPU backend: the exchanges work on host copies
  Placement placement_;                // staged_ and what the ranks agreed on it (connect)
  bool all_blocks_on_device_ = false;  // every rank staged_, its MPI GPU-aware (agreed in connect)
  GradientCompressor<T> compressor_;   // residual, threshold and kept entries
  Momentum<T> momentum_;               // dct_momentum's velocity and last update
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
  Hierarchy hierarchy_;               // hierarchical's communicators (made by connect)
  std::int64_t result_nonzeros_ = 0;  // EngineState::result_nonzeros
  ExchangeSet<T> exchanges_;
  SparseExchange<T> *exchange_ = nullptr;  // this call's, while in flight
};

}  // namespace

std::unique_ptr<RequestEngine> make_allreduce_engine(const AllreduceArgs &args,
                                                     const Config &config) {
  std::shared_ptr<CommContext> context = comm_context(args.comm);
  if (!args.compressed()) return make_passthrough_engine(context, args);
  if (args.compressed_element_size() == 4)
    return std::make_unique<CompressedEngine<float>>(context, args, config);
  return std::make_unique<CompressedEngine<double>>(context, args, config);
}

}  // namespace dct::detail
