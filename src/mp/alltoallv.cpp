// DCT-MP's top-k engines: the forward (per-row selection, masks, encoded messages) and the
// backward that reuses its masks. Over 400 lines because the two engines share one message
// protocol (headers, validation of peers' messages, the staged receive) kept in one place.
#include "mp/alltoallv.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/compute_backend.hpp"
#include "core/datatypes.hpp"
#include "core/error.hpp"
#include "core/tau_control.hpp"
#include "core/test_hooks.hpp"
#include "core/wire.hpp"
#include "mp/alltoallv_exchange.hpp"
#include "mp/alltoallv_validate.hpp"
#include "mp/error_bounded.hpp"
#include "mp/forward_headers.hpp"
#include "mp/row_codec.hpp"

namespace dct::detail {

MessageUnits::MessageUnits(const std::vector<std::size_t> &units)
    : counts(units), displs(units.size()) {
  for (std::size_t j = 0; j < units.size(); ++j) {
    displs[j] = total;
    total += units[j];
  }
}

std::size_t MessageUnits::of(std::size_t bytes) {
  return (bytes + wire::kUnitBytes - 1) / wire::kUnitBytes;
}

namespace {

using mp::MessageShape;
using mp::RowFormat;
using mp::RowMasks;

using Layout = AlltoallvLayout;
using Units = MessageUnits;

/// The masks of the last completed forward call, shared by the forward request and every
/// backward request paired with it (which may outlive it).
struct MaskState {
  std::vector<RowMasks> sent;      ///< per destination rank, rows of its send block
  std::vector<RowMasks> received;  ///< per source rank, rows of its receive block
  MPI_Count forward_calls = 0;     ///< completed forward calls
  bool forward_active = false;     ///< a forward call is started and not completed
  bool restored = false;           ///< loaded from a checkpoint, no forward call since (no masks)
};

using peer::ForwardAnnouncement;

/// What forward and backward requests have in common: shape, layout, engine plumbing.
class MpEngine : public RequestEngine {
 public:
  MpEngine(std::shared_ptr<CommContext> context, MPI_Count count, int element_size,
           const Config &config, Layout layout, std::shared_ptr<MaskState> state,
           std::shared_ptr<const ExchangePlan> plan)
      : RequestEngine(std::move(context), count, element_size, config),
        layout_(std::move(layout)),
        state_(std::move(state)),
        plan_(std::move(plan)) {
    format_.d = static_cast<std::size_t>(config.row_length);
    format_.value_bytes = value_bytes(config.values, static_cast<std::size_t>(element_size));
  }

  // One blocking exchange per call, run in start order (see progress.hpp).
  bool blocking() const override { return true; }
  const void *residual() const override { return nullptr; }

  // Checkpoints (format 5): the call counter (dct_interval's schedule of the threshold
  // selections), the forward's threshold, and per rank its count and (forward) the forward
  // calls completed. The masks are not saved: a backward needs its forward's call first.
  bool checkpointed() const override { return true; }
  bool counts_per_rank() const override { return true; }
  void restore(const void *, const void *, double tau, MPI_Count calls) override {
    totals_.calls = calls;
    restore_tau(tau);
  }
  std::vector<double> extra_state() const override {
    std::vector<double> words{double(count_)};
    if (is_forward()) words.push_back(double(state_->forward_calls));
    return words;
  }
  void check_extra_state(const std::vector<double> &words) const override {
    check_mp_state(words, name(), count_, is_forward());
  }
  void restore_extra_state(const std::vector<double> &words) override {
    if (!is_forward()) return;
    state_->forward_calls = static_cast<MPI_Count>(words[1]);
    state_->restored = true;  // the masks held are not the file's: no backward until a forward
  }

  virtual bool is_forward() const = 0;
  virtual void restore_tau(double tau) { static_cast<void>(tau); }

  const Layout &layout() const { return layout_; }
  const std::shared_ptr<MaskState> &state() const { return state_; }
  const std::shared_ptr<const ExchangePlan> &plan() const { return plan_; }
  const std::shared_ptr<CommContext> &shared_context() const { return context_; }

 protected:
  int ranks() const { return context_->size(); }
  int rank() const { return context_->rank(); }
  std::size_t rows(MPI_Count count) const { return static_cast<std::size_t>(count) / format_.d; }

  /// Elements this rank's dense blocks to other ranks hold, in bytes (what MPI_Alltoallv
  /// would send).
  MPI_Count dense_bytes(const std::vector<MPI_Count> &counts) const {
    MPI_Count bytes = 0;
    for (int j = 0; j < ranks(); ++j)
      if (j != rank()) bytes += counts[j] * element_size_;
    return bytes;
  }

  /// Exchanges the messages (sizes in units known on both sides) and accounts their bytes;
  /// the block to or from this rank itself is copied by MPI and not counted as traffic.
  void exchange(std::vector<std::uint64_t> &out, const Units &out_units,
                std::vector<std::uint64_t> &in, const Units &in_units) {
    out.resize(std::max<std::size_t>(out_units.total, 1));
    in.resize(std::max<std::size_t>(in_units.total, 1));
    exchange_blocks(*plan_, Blocks{out.data(), out_units.counts, out_units.displs},
                    Blocks{in.data(), in_units.counts, in_units.displs}, MPI_UINT64_T,
                    wire::kUnitBytes, comm());
    for (int j = 0; j < ranks(); ++j) {
      if (j == rank()) continue;
      status_.bytes_sent += MPI_Count(out_units.counts[j]) * MPI_Count(wire::kUnitBytes);
      status_.bytes_received += MPI_Count(in_units.counts[j]) * MPI_Count(wire::kUnitBytes);
    }
  }

  Layout layout_;
  std::shared_ptr<MaskState> state_;
  std::shared_ptr<const ExchangePlan> plan_;  // agreed at the forward's init
  RowFormat format_;
  std::vector<std::uint64_t> out_, in_;  // message buffers, reused by every call
};

/// The forward call: per-row selection, (mask, values) messages, validation, dense blocks.
template <typename T>
class ForwardEngine final : public MpEngine {
 public:
  ForwardEngine(std::shared_ptr<CommContext> context, const AlltoallvArgs &args,
                const Config &config, MPI_Count count, std::shared_ptr<const ExchangePlan> plan)
      : MpEngine(std::move(context), count, sizeof(T), config, Layout(args, context_size(args)),
                 std::make_shared<MaskState>(), std::move(plan)) {}

  const char *kind() const override { return "alltoallv"; }

  void start(const void *send, void *recv) override {
    begin_call();
    send_ = static_cast<const T *>(send);
    recv_ = static_cast<T *>(recv);
    state_->forward_active = true;
    launch();
  }

  double tau() const override { return tau_; }
  bool is_forward() const override { return true; }
  void restore_tau(double tau) override { tau_ = previous_tau_ = tau; }

 private:
  static int context_size(const AlltoallvArgs &args) {
    int size = 0;
    MPI_Comm_size(args.comm, &size);
    return size;
  }

  bool advance(bool) override {
    previous_tau_ = tau_;
    // Masks and messages are built in buffers kept from call to call (no page faults).
    std::vector<RowMasks> &sent = next_sent_, &received = next_received_;
    select(sent);
    received.resize(static_cast<std::size_t>(ranks()));
    std::vector<std::uint64_t> &in = in_;
    std::vector<ForwardAnnouncement> shapes;
    int code = DCT_SUCCESS;
    std::string why;
    transfer_or_record(sent, in, shapes, code, why);
    // Validate every peer's message, then agree: either every rank writes its blocks and
    // keeps the new masks, or none does (a backward then still pairs consistent masks).
    if (code == DCT_SUCCESS) validate(in, shapes, received, code, why);
    int worst = code;
    check_mpi(MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, comm()), "MPI_Allreduce");
    status_.bytes_sent += wire::ring_bytes(sizeof(int), ranks());
    status_.bytes_received += wire::ring_bytes(sizeof(int), ranks());
    if (worst != DCT_SUCCESS)
      fail(worst, code != DCT_SUCCESS ? why : "another rank rejected a message of this call");
    for (int j = 0; j < ranks(); ++j)
      mp::scatter_values(in_units_->at(in, static_cast<std::size_t>(j)), received[j], format_,
                         config_.values, recv_ + layout_.rdispls[j]);
    MPI_Count kept = 0, arrived = 0;
    for (int j = 0; j < ranks(); ++j) {
      kept += MPI_Count(sent[j].kept());
      arrived += MPI_Count(received[j].kept());
    }
    std::swap(state_->sent, sent);
    std::swap(state_->received, received);
    state_->forward_calls += 1;
    state_->forward_active = false;
    state_->restored = false;
    status_.nnz_sent = kept;
    status_.nnz_received = arrived;
    status_.density = count_ > 0 ? double(kept) / double(count_) : 0.0;
    status_.dense_bytes = dense_bytes(layout_.sendcounts);
    status_.tau = tau_;
    if (config_.mp_select == MpSelect::threshold && config_.tau_control == TauControl::adaptive)
      tau_ = tau_control::next(
          tau_, std::size_t(kept),
          tau_control::target(config_.keep, std::size_t(count_ > 0 ? count_ : 1)));
    return true;
  }

  void abandon() override {
    tau_ = previous_tau_;
    state_->forward_active = false;
  }

  /// The masks of every send block, by the configured selection.
  void select(std::vector<RowMasks> &sent) {
    if (config_.mp_select != MpSelect::exact) estimate_tau(false);
    select_with_tau(sent);
    if (config_.mp_select != MpSelect::threshold || config_.tau_control != TauControl::adaptive ||
        status_.tau_reestimated)
      return;
    // Adaptive control of the reused tau (tau_control.hpp): select exactly when the kept
    // count left its band, and correct tau for the next call from this one's count.
    const std::size_t n = static_cast<std::size_t>(count_);
    if (n == 0) return;
    const std::size_t k = tau_control::target(config_.keep, n);
    if (tau_control::out_of_band(kept_count(sent), k, tau_ == 0.0)) {
      estimate_tau(true);
      select_with_tau(sent);
    }
  }

  void select_with_tau(std::vector<RowMasks> &sent) {
    const std::size_t d = format_.d;
    sent.resize(static_cast<std::size_t>(ranks()));
    for (RowMasks &masks : sent) masks.clear();
    const std::size_t k = mp::kept_per_row(config_.keep, d);
    for (int j = 0; j < ranks(); ++j) {
      const T *block = send_ + layout_.sdispls[j];
      const std::size_t nrows = rows(layout_.sendcounts[j]);
      if (config_.mp_select == MpSelect::exact)
        mp::select_top_k(block, nrows, d, k, sent[j]);
      else
        mp::select_above(block, nrows, d, tau_, sent[j]);
    }
  }

  static std::size_t kept_count(const std::vector<RowMasks> &sent) {
    std::size_t kept = 0;
    for (const RowMasks &masks : sent) kept += masks.kept();
    return kept;
  }

  /// laplace: every call, tau = b ln(1/keep) with b the mean |x| of all rows sent (the
  /// maximum-likelihood scale of a zero-mean Laplace fit, whose tail P(|x| >= tau) is keep).
  /// threshold: tau = the k-th largest |x| over all rows sent, k = ceil(keep * elements),
  /// every dct_interval calls and (`now`) when the adaptive control asks; reused in between.
  void estimate_tau(bool now) {
    const bool laplace = config_.mp_select == MpSelect::laplace;
    if (!laplace && !now && totals_.calls % config_.interval != 0) return;
    std::vector<double> magnitudes;
    double sum = 0;
    std::size_t n = 0;
    for (int j = 0; j < ranks(); ++j) {
      const T *block = send_ + layout_.sdispls[j];
      const std::size_t elements = static_cast<std::size_t>(layout_.sendcounts[j]);
      for (std::size_t i = 0; i < elements; ++i) {
        const double m = std::fabs(static_cast<double>(block[i]));
        if (laplace) {
          if (std::isfinite(m)) sum += m, ++n;  // one NaN or Inf must not blind the fit
        } else {
          magnitudes.push_back(m != m ? HUGE_VAL : m);
        }
      }
    }
    status_.tau_reestimated = 1;
    if (laplace) {
      tau_ = n > 0 ? sum / double(n) * std::log(1.0 / config_.keep) : 0.0;
      return;
    }
    if (magnitudes.empty()) return;
    std::size_t k = static_cast<std::size_t>(std::ceil(config_.keep * double(magnitudes.size())));
    k = std::min(std::max<std::size_t>(k, 1), magnitudes.size());
    std::nth_element(magnitudes.begin(), magnitudes.begin() + (k - 1), magnitudes.end(),
                     [](double a, double b) { return a > b; });
    tau_ = magnitudes[k - 1];
  }

  /// Sends the headers and the messages; `in` receives every peer's message and `shapes`
  /// what each peer announced.
  void transfer(const std::vector<RowMasks> &sent, std::vector<std::uint64_t> &in,
                std::vector<ForwardAnnouncement> &shapes) {
    using namespace peer::forward;
    const std::size_t p = static_cast<std::size_t>(ranks());
    const std::int64_t format = peer::forward_format_word(sizeof(T), config_.values);
    std::vector<std::int64_t> header_out(p * kWords), header_in(p * kWords);
    std::vector<MessageShape> out_shapes(p);
    std::vector<std::size_t> out_units(p), in_units(p);
    for (std::size_t j = 0; j < p; ++j) {
      out_shapes[j] = mp::forward_shape(sent[j], format_);
      std::int64_t *h = &header_out[j * kWords];
      h[kRows] = static_cast<std::int64_t>(out_shapes[j].rows);
      h[kRowLength] = static_cast<std::int64_t>(format_.d);
      h[kFormat] = format;
      h[kNnz] = static_cast<std::int64_t>(out_shapes[j].nnz);
      h[kUniform] = out_shapes[j].uniform;
      h[kBytes] = static_cast<std::int64_t>(out_shapes[j].bytes);
      out_units[j] = Units::of(out_shapes[j].bytes);
    }
    const Units out_layout(out_units);
    std::vector<std::uint64_t> &out = out_;
    out.resize(std::max<std::size_t>(out_layout.total, 1));
    for (std::size_t j = 0; j < p; ++j)
      mp::encode_forward(send_ + layout_.sdispls[j], sent[j], format_, out_shapes[j],
                         config_.values, out_layout.at(out, j));
#ifdef DCT_TESTING
    if (testing::tamper_forward_message != nullptr)
      for (std::size_t j = 0; j < p; ++j)
        testing::tamper_forward_message(int(j), out_layout.at(out, j), out_shapes[j].bytes);
#endif
    shapes.resize(p);
    if (plan_->uniform_kept > 0) {
      // Every rank keeps uniform_kept per row and the counts match (agreed at init): each
      // message's size follows from the layout, and no header goes before it.
      for (std::size_t j = 0; j < p; ++j) {
        shapes[j].shape =
            mp::uniform_shape(rows(layout_.recvcounts[j]), plan_->uniform_kept, format_);
        shapes[j].same_format = true;
        shapes[j].receive = shapes[j].shape.bytes;
        in_units[j] = Units::of(shapes[j].receive);
      }
      in_units_ = std::make_unique<Units>(in_units);
      exchange(out, out_layout, in, *in_units_);
      return;
    }

    check_mpi(MPI_Alltoall(header_out.data(), kWords, MPI_INT64_T, header_in.data(), kWords,
                           MPI_INT64_T, comm()),
              "MPI_Alltoall");
    status_.bytes_sent = status_.bytes_received =
        MPI_Count(p - 1) * kWords * MPI_Count(sizeof(std::int64_t));
    for (std::size_t j = 0; j < p; ++j) {
      // Receive what the peer announced (so that no rank is left waiting), but never more
      // than the rows this rank expects could take; a liar is rejected by validate().
      shapes[j] = peer::read_forward_header(&header_in[j * kWords], format_.d, format,
                                            format_.max_message_bytes(rows(layout_.recvcounts[j])));
      in_units[j] = Units::of(shapes[j].receive);
    }
    in_units_ = std::make_unique<Units>(in_units);
    exchange(out, out_layout, in, *in_units_);
  }

  /// transfer(), with its failure reported in `code` rather than thrown: a rank that gave
  /// up here would leave the others waiting in the agreement that follows.
  void transfer_or_record(const std::vector<RowMasks> &sent, std::vector<std::uint64_t> &in,
                          std::vector<ForwardAnnouncement> &shapes, int &code, std::string &why) {
    try {
      transfer(sent, in, shapes);
    } catch (const Error &e) {
      code = e.code();
      why = e.what();
    }
  }

  void validate(std::vector<std::uint64_t> &in, const std::vector<ForwardAnnouncement> &shapes,
                std::vector<RowMasks> &received, int &code, std::string &why) {
    for (int j = 0; j < ranks() && code == DCT_SUCCESS; ++j) {
      std::string error;
      code =
          peer::check_forward_header(shapes[j], rows(layout_.recvcounts[j]),
                                     std::size_t(in_units_->counts[j]) * wire::kUnitBytes, error);
      if (code == DCT_SUCCESS) {
        error = mp::decode_masks(in_units_->at(in, std::size_t(j)), shapes[j].shape, format_,
                                 received[j]);
        if (!error.empty()) code = DCT_ERR_PEER;
      }
      if (code != DCT_SUCCESS) why = "rank " + std::to_string(j) + ": " + error;
    }
  }

  const T *send_ = nullptr;
  T *recv_ = nullptr;
  double tau_ = 0.0;
  double previous_tau_ = 0.0;
  std::unique_ptr<Units> in_units_;
  std::vector<RowMasks> next_sent_, next_received_;  // this call's masks until committed
};

/// The backward call: the gradients of the kept entries only, in the reverse direction.
template <typename T>
class BackwardEngine final : public MpEngine {
 public:
  BackwardEngine(const MpEngine &forward, Layout layout, MPI_Count count)
      : MpEngine(forward.shared_context(), count, sizeof(T), forward.config(), std::move(layout),
                 forward.state(), forward.plan()) {}

  const char *kind() const override { return "alltoallv_backward"; }

  void start(const void *send, void *recv) override {
    require_backward_ready(state_->forward_active, state_->forward_calls, state_->restored);
    begin_call();
    send_ = static_cast<const T *>(send);
    recv_ = static_cast<T *>(recv);
    launch();
  }

  double tau() const override { return 0.0; }
  bool is_forward() const override { return false; }

 private:
  bool advance(bool) override {
    const std::size_t p = static_cast<std::size_t>(ranks());
    // This call's send blocks have the rows of the forward's receive blocks: their masks.
    const std::vector<RowMasks> &out_masks = state_->received;
    const std::vector<RowMasks> &in_masks = state_->sent;
    std::vector<std::size_t> out_units(p), in_units(p);
    MPI_Count kept = 0, arrived = 0;
    for (std::size_t j = 0; j < p; ++j) {
      out_units[j] = Units::of(out_masks[j].kept() * format_.value_bytes);
      in_units[j] = Units::of(in_masks[j].kept() * format_.value_bytes);
      kept += MPI_Count(out_masks[j].kept());
      arrived += MPI_Count(in_masks[j].kept());
    }
    const Units out_layout(out_units), in_layout(in_units);
    std::vector<std::uint64_t> &out = out_, &in = in_;
    out.resize(std::max<std::size_t>(out_layout.total, 1));
    for (std::size_t j = 0; j < p; ++j)
      mp::gather_values(send_ + layout_.sdispls[j], out_masks[j], format_, config_.values,
                        out_layout.at(out, j));
    exchange(out, out_layout, in, in_layout);
    for (std::size_t j = 0; j < p; ++j)
      mp::scatter_values(in_layout.at(in, j), in_masks[j], format_, config_.values,
                         recv_ + layout_.rdispls[j]);
    status_.nnz_sent = kept;
    status_.nnz_received = arrived;
    status_.density = count_ > 0 ? double(kept) / double(count_) : 0.0;
    status_.dense_bytes = dense_bytes(layout_.sendcounts);
    return true;
  }

  void abandon() override {}

  const T *send_ = nullptr;
  T *recv_ = nullptr;
};

}  // namespace

std::unique_ptr<RequestEngine> make_alltoallv_engine(const AlltoallvArgs &args,
                                                     const Config &config,
                                                     std::shared_ptr<const ExchangePlan> plan) {
  std::shared_ptr<CommContext> context = comm_context(args.comm);
  MPI_Count count = 0;
  for (int j = 0; j < context->size(); ++j) count += args.sendcounts[j];
  if (config.mp_compressor == MpCompressor::error_bounded)
    return make_error_bounded_engine(std::move(context), args, config, count, std::move(plan));
  if (floating_element_size(args.datatype) == 4)
    return std::make_unique<ForwardEngine<float>>(context, args, config, count, std::move(plan));
  return std::make_unique<ForwardEngine<double>>(context, args, config, count, std::move(plan));
}

std::unique_ptr<RequestEngine> make_alltoallv_backward(const RequestEngine &forward,
                                                       const AlltoallvArgs &args) {
  if (auto backward = make_error_bounded_backward(forward, args)) return backward;
  const auto *mp = dynamic_cast<const MpEngine *>(&forward);
  const bool is_forward = dynamic_cast<const ForwardEngine<float> *>(&forward) != nullptr ||
                          dynamic_cast<const ForwardEngine<double> *>(&forward) != nullptr;
  require(mp != nullptr && is_forward, DCT_ERR_REQUEST,
          "forward is not a request of DCT_Alltoallv_init");
  const int ranks = mp->shared_context()->size();
  const MPI_Count count =
      check_backward_args(args, mp->layout(), ranks, mp->config().row_length, mp->element_size());
  Layout layout(args, ranks);
  if (mp->element_size() == 4)
    return std::make_unique<BackwardEngine<float>>(*mp, std::move(layout), count);
  return std::make_unique<BackwardEngine<double>>(*mp, std::move(layout), count);
}

bool is_alltoallv(const RequestEngine &engine) {
  return dynamic_cast<const MpEngine *>(&engine) != nullptr || is_error_bounded(engine);
}

}  // namespace dct::detail
