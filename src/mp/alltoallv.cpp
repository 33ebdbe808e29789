// DCT-MP's top-k forward request (per-row selection, masks, encoded messages, validation of
// peers' messages), whose masks its backward (alltoallv_backward.cpp) reuses.
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
#include "mp/topk_engine.hpp"

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

using peer::ForwardAnnouncement;

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
    masks_->forward_active = true;
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
    std::swap(masks_->sent, sent);
    std::swap(masks_->received, received);
    masks_->forward_calls += 1;
    masks_->forward_active = false;
    masks_->restored = false;
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
    masks_->forward_active = false;
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

bool is_alltoallv(const RequestEngine &engine) {
  return dynamic_cast<const MpEngine *>(&engine) != nullptr || is_error_bounded(engine);
}

}  // namespace dct::detail
