#include "mp/error_bounded.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/cost_model.hpp"
#include "core/datatypes.hpp"
#include "core/engine_state.hpp"
#include "core/error.hpp"
#include "core/test_hooks.hpp"
#include "core/wire.hpp"
#include "mp/alltoallv_exchange.hpp"
#include "mp/alltoallv_validate.hpp"
#include "mp/error_bounded_codec.hpp"
#include "mp/forward_headers.hpp"

namespace dct::detail {
namespace {

using eb::Coder;

/// What the forward shares with its backward requests (which may outlive it).
struct PairState {
  std::vector<std::size_t> peer_columns;  ///< table columns each peer announced last forward
  MPI_Count forward_calls = 0;
  bool forward_active = false;
  bool restored = false;  ///< loaded from a checkpoint, no forward call since (no peer columns)
  std::shared_ptr<const ExchangePlan> plan;  ///< agreed at the forward's init
};

using namespace peer::error_bounded;  // the header words (kRows, ..., kWords)

std::size_t table_columns(const Config &config) {
  const std::int64_t columns = config.error_bound.table_columns;
  return static_cast<std::size_t>(columns > 0 ? columns : config.row_length);
}

/// The lossless coders' measured throughputs and each peer's ratios, from the last probe.
struct CoderModel {
  double compress_bps[eb::kCoders] = {};    // bytes of body per second
  double decompress_bps[eb::kCoders] = {};  // idem
  std::vector<Coder> chosen;                // per peer
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <typename T>
class ErrorBoundedEngine final : public RequestEngine, public StateWithoutFeedback {
 public:
  ErrorBoundedEngine(std::shared_ptr<CommContext> context, MPI_Count count, const Config &config,
                     AlltoallvLayout layout, std::shared_ptr<PairState> pair, bool backward)
      : RequestEngine(std::move(context), count, sizeof(T), config),
        layout_(std::move(layout)),
        pair_(std::move(pair)),
        backward_(backward),
        d_(static_cast<std::size_t>(config.row_length)) {
    const std::size_t tables = d_ / table_columns(config);
    const ErrorBoundConfig &eb = config.error_bound;
    bounds_.assign(tables, eb.bounds.size() == 1 ? eb.bounds[0] : 0.0);
    if (eb.bounds.size() == tables) bounds_ = eb.bounds;
    coders_.chosen.assign(std::size_t(ranks()), Coder::none);
    state_ = this;
  }

  void start(const void *send, void *recv) override {
    if (backward_)
      require_backward_ready(pair_->forward_active, pair_->forward_calls, pair_->restored);
    begin_call();
    send_ = static_cast<const T *>(send);
    recv_ = static_cast<T *>(recv);
    if (!backward_) pair_->forward_active = true;
    launch();
  }

  bool blocking() const override { return true; }
  double tau() const override { return 0.0; }
  const char *kind() const override { return backward_ ? "alltoallv_backward" : "alltoallv"; }

  // Checkpoints (format 5): the call counter (the lossless probes' schedule), and per rank its
  // count and (forward) the forward calls completed (the error-bound schedule's position) and
  // the tables' bounds (chosen by dct_error_bound=auto). The coders' measured speeds are not
  // saved: until the next probe every peer's message goes without a lossless stage, which
  // changes bytes, never values.
  bool counts_per_rank() const override { return true; }
  void restore(const void *, const void *, double, MPI_Count calls) override {
    totals_.calls = calls;
  }
  std::vector<double> extra() const override {
    std::vector<double> words{double(count_)};
    if (backward_) return words;
    words.push_back(double(pair_->forward_calls));
    words.insert(words.end(), bounds_.begin(), bounds_.end());
    return words;
  }
  void check_extra(const std::vector<double> &words) const override {
    check_mp_state(words, name(), count_, !backward_, bounds_.size());
  }
  void restore_extra(const std::vector<double> &words) override {
    if (backward_) return;
    pair_->forward_calls = static_cast<MPI_Count>(words[1]);
    std::copy(words.begin() + 2, words.end(), bounds_.begin());
    pair_->restored =
        true;  // the peer columns held are not the file's: no backward until a forward
  }

  const AlltoallvLayout &layout() const { return layout_; }
  const std::shared_ptr<PairState> &pair() const { return pair_; }
  bool backward() const { return backward_; }
  const std::shared_ptr<CommContext> &shared_context() const { return context_; }

 private:
  int ranks() const { return context_->size(); }
  int rank() const { return context_->rank(); }
  std::size_t rows(MPI_Count count) const { return static_cast<std::size_t>(count) / d_; }

  bool advance(bool) override {
    status_.dense_bytes = 0;
    for (int j = 0; j < ranks(); ++j)
      if (j != rank()) status_.dense_bytes += layout_.sendcounts[j] * MPI_Count(sizeof(T));
    if (backward_ && config_.error_bound.backward_bound < 0) {
      plain_exchange();
    } else {
      int code = DCT_SUCCESS;
      std::string why;
      try {
        transfer();
        validate(code, why);
      } catch (const Error &e) {  // reported through the agreement: no rank is left waiting
        code = e.code();
        why = e.what();
      }
      int worst = code;
      check_mpi(MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, comm()), "MPI_Allreduce");
      status_.bytes_sent += wire::ring_bytes(sizeof(int), ranks());
      status_.bytes_received += wire::ring_bytes(sizeof(int), ranks());
      if (worst != DCT_SUCCESS)
        fail(worst, code != DCT_SUCCESS ? why : "another rank rejected a message of this call");
      for (int j = 0; j < ranks(); ++j)
        std::copy_n(staging_.data() + staged_[std::size_t(j)], layout_.recvcounts[j],
                    recv_ + layout_.rdispls[j]);
      if (!backward_) pair_->peer_columns = peer_columns_;
    }
    status_.nnz_sent = status_.nnz_received = 0;
    for (int j = 0; j < ranks(); ++j) {
      status_.nnz_sent += layout_.sendcounts[j];
      status_.nnz_received += layout_.recvcounts[j];
    }
    status_.density = 1.0;
    if (!backward_) {
      pair_->forward_calls += 1;
      pair_->forward_active = false;
      pair_->restored = false;
    }
    return true;
  }

  void abandon() override {
    if (!backward_) pair_->forward_active = false;
  }

  /// The uncompressed backward: the dense blocks, at the user's displacements, which only
  /// this request knows: its first call agrees on the path (alltoallv_exchange.hpp).
  void plain_exchange() {
    status_.bytes_sent = status_.dense_bytes;
    if (!plain_plan_) {
      plain_plan_ = std::make_unique<ExchangePlan>(agree_exchange_plan(
          comm(), pair_->plan->point_to_point || dense_passes_int_counts(layout_)));
      status_.bytes_sent += wire::ring_bytes(2 * sizeof(std::int64_t), ranks());
      status_.bytes_received += wire::ring_bytes(2 * sizeof(std::int64_t), ranks());
    }
    exchange_blocks(*plain_plan_, send_blocks(layout_, send_), receive_blocks(layout_, recv_),
                    sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE, sizeof(T), comm());
    for (int j = 0; j < ranks(); ++j)
      if (j != rank()) status_.bytes_received += layout_.recvcounts[j] * MPI_Count(sizeof(T));
  }

  /// The factor of the iteration-wise schedule for this call.
  double schedule_factor() const {
    const ErrorBoundConfig &eb = config_.error_bound;
    if (backward_ || eb.schedule_calls <= 0) return 1.0;
    const double done = double(std::min<MPI_Count>(pair_->forward_calls, eb.schedule_calls));
    return eb.schedule_start - (eb.schedule_start - 1.0) * done / double(eb.schedule_calls);
  }

  bool probe_due() const { return totals_.calls % config_.interval == 0; }

  /// Automatic table-wise bounds: per table, the loosest class keeping its rows distinct.
  void choose_table_bounds() {
    const std::size_t columns = table_columns(config_);
    for (std::size_t t = 0; t < bounds_.size(); ++t) {
      const std::vector<double> &classes = config_.error_bound.classes;
      bounds_[t] = classes.back();
      for (double bound : classes) {
        std::size_t distinct = 0, surviving = 0;
        for (int j = 0; j < ranks(); ++j)
          eb::count_distinct(send_ + layout_.sdispls[j], rows(layout_.sendcounts[j]), d_,
                             t * columns, columns, bound, distinct, surviving);
        if (double(surviving) >= kSurvivingRows * double(distinct)) {
          bounds_[t] = bound;
          break;
        }
      }
    }
  }

  /// The coder of peer j's message: forced, or by the modelled speed-up (probing both
  /// coders on this body when a probe is due).
  Coder choose_coder(int j, bool probe) {
    const LosslessChoice choice = config_.error_bound.lossless;
    if (choice != LosslessChoice::automatic)
      return choice == LosslessChoice::lz4    ? Coder::lz4
             : choice == LosslessChoice::zstd ? Coder::zstd
                                              : Coder::none;
    if (!probe || ws_.body.empty()) return coders_.chosen[std::size_t(j)];
    double best = 1.0;  // sending the body as it is
    Coder chosen = Coder::none;
    scratch_.resize(ws_.body.size());
    roundtrip_.resize(ws_.body.size());
    for (Coder coder : {Coder::lz4, Coder::zstd}) {
      const auto start = std::chrono::steady_clock::now();
      const std::size_t n =
          ws_.compress(coder, ws_.body.data(), ws_.body.size(), scratch_.data(), scratch_.size());
      const double compress_s = seconds_since(start);
      if (n == 0) continue;
      const auto middle = std::chrono::steady_clock::now();
      const bool ok = ws_.decompress(coder, scratch_.data(), n, roundtrip_.data(), ws_.body.size());
      const double decompress_s = seconds_since(middle);
      require(ok, DCT_ERR_INTERNAL, std::string(eb::coder_name(coder)) + " round trip failed");
      const auto c = static_cast<std::size_t>(coder);
      const double bytes = double(ws_.body.size());
      // Throughputs of this probe (a tiny block timed alone is noisy: floor the times).
      coders_.compress_bps[c] = bytes / std::max(compress_s, 1e-7);
      coders_.decompress_bps[c] = bytes / std::max(decompress_s, 1e-7);
      const double speedup = lossless_speedup(bytes / double(n), coders_.compress_bps[c],
                                              coders_.decompress_bps[c], config_.network);
      if (speedup > best) {
        best = speedup;
        chosen = coder;
      }
    }
    coders_.chosen[std::size_t(j)] = chosen;
    return chosen;
  }

  /// Encodes every block, exchanges the headers and the messages.
  void transfer() {
    const std::size_t p = std::size_t(ranks());
    const bool probe = probe_due();
    if (!backward_ && config_.error_bound.automatic && probe) choose_table_bounds();
    const double factor = schedule_factor();
    std::vector<std::int64_t> header_out(p * kWords), header_in(p * kWords);
    std::vector<std::size_t> out_units(p), in_units(p), bytes(p), offsets(p);
    std::size_t total_units = 0;
    out_.clear();
    double max_error = 0;
    for (std::size_t j = 0; j < p; ++j) {
      const std::size_t nrows = rows(layout_.sendcounts[j]);
      // Forward: this rank's tables; backward: the peer's, as it announced them.
      const std::size_t columns = backward_ ? pair_->peer_columns[j] : table_columns(config_);
      const eb::Tables tables{d_, columns};
      scaled_.resize(tables.count());
      for (std::size_t t = 0; t < tables.count(); ++t)
        scaled_[t] =
            backward_ ? config_.error_bound.backward_bound : std::min(1.0, bounds_[t] * factor);
      offsets[j] = total_units;
      if (nrows > 0) {
        const eb::QuantizeReport report =
            eb::quantize(send_ + layout_.sdispls[j], nrows, tables, scaled_.data(), ws_);
        max_error = std::max(max_error, report.max_error);
        Coder coder = choose_coder(int(j), probe);
        out_.resize(total_units +
                    MessageUnits::of(eb::max_message_bytes(nrows, d_, tables.count(), sizeof(T))));
        bytes[j] = eb::pack(coder, ws_, reinterpret_cast<std::byte *>(out_.data() + total_units));
        out_units[j] = MessageUnits::of(bytes[j]);
        out_.resize(total_units + out_units[j]);
#ifdef DCT_TESTING
        if (!backward_ && testing::tamper_forward_message != nullptr)
          testing::tamper_forward_message(
              int(j), reinterpret_cast<std::byte *>(out_.data() + total_units), bytes[j]);
#endif
      }
      total_units += out_units[j];
      std::int64_t *h = &header_out[j * kWords];
      h[kRows] = std::int64_t(nrows);
      h[kRowLength] = std::int64_t(d_);
      h[kValueBytes] = std::int64_t(sizeof(T));
      h[kTableColumns] = std::int64_t(columns);
      h[kBytes] = std::int64_t(bytes[j]);
    }
    status_.max_abs_error = max_error;
    check_mpi(MPI_Alltoall(header_out.data(), kWords, MPI_INT64_T, header_in.data(), kWords,
                           MPI_INT64_T, comm()),
              "MPI_Alltoall");
    status_.bytes_sent = status_.bytes_received =
        MPI_Count(p - 1) * kWords * MPI_Count(sizeof(std::int64_t));
    announced_.assign(header_in.begin(), header_in.end());
    for (std::size_t j = 0; j < p; ++j) {
      // Receive what the peer announced (no rank is left waiting), but never more than the
      // rows this rank expects could take; a liar is rejected by validate().
      const std::size_t cap = eb::max_message_bytes(rows(layout_.recvcounts[j]), d_, d_, sizeof(T));
      in_units[j] = MessageUnits::of(peer::receive_bytes(header_in[j * kWords + kBytes], cap));
    }
    const MessageUnits out_layout(out_units);
    in_layout_ = std::make_unique<MessageUnits>(in_units);
    out_.resize(std::max<std::size_t>(out_layout.total, 1));
    in_.resize(std::max<std::size_t>(in_layout_->total, 1));
    exchange_blocks(*pair_->plan, Blocks{out_.data(), out_layout.counts, out_layout.displs},
                    Blocks{in_.data(), in_layout_->counts, in_layout_->displs}, MPI_UINT64_T,
                    wire::kUnitBytes, comm());
    for (std::size_t j = 0; j < p; ++j) {
      if (int(j) == rank()) continue;
      status_.bytes_sent += MPI_Count(out_layout.counts[j]) * MPI_Count(wire::kUnitBytes);
      status_.bytes_received += MPI_Count(in_layout_->counts[j]) * MPI_Count(wire::kUnitBytes);
    }
  }

  /// Decodes every peer's message into the staging buffer; the first problem goes to `code`.
  void validate(int &code, std::string &why) {
    const std::size_t p = std::size_t(ranks());
    staged_.assign(p, 0);
    std::size_t total = 0;
    for (std::size_t j = 0; j < p; ++j) {
      staged_[j] = total;
      total += std::size_t(layout_.recvcounts[j]);
    }
    staging_.resize(total);
    peer_columns_.assign(p, d_);
    for (std::size_t j = 0; j < p && code == DCT_SUCCESS; ++j) {
      const std::int64_t *h = &announced_[j * kWords];
      const std::size_t expected = rows(layout_.recvcounts[j]);
      const std::size_t received = std::size_t(in_layout_->counts[j]) * wire::kUnitBytes;
      std::string error;
      code = peer::check_error_bounded_header(h, d_, sizeof(T), expected, received, error);
      if (code == DCT_SUCCESS) {
        const eb::Tables tables{d_, std::size_t(h[kTableColumns])};
        error = eb::decode(in_layout_->at(in_, j), std::size_t(h[kBytes]), expected, tables,
                           staging_.data() + staged_[j], ws_);
        peer_columns_[j] = tables.columns;
        if (!error.empty()) code = DCT_ERR_PEER;
      }
      if (code != DCT_SUCCESS) why = "rank " + std::to_string(j) + ": " + error;
    }
  }

  AlltoallvLayout layout_;
  std::shared_ptr<PairState> pair_;
  bool backward_;
  std::size_t d_;
  std::vector<double> bounds_, scaled_;  // per table: relative bounds, and this call's
  CoderModel coders_;
  eb::Workspace ws_;
  std::vector<std::byte> scratch_, roundtrip_;  // probes of the coders
  std::vector<std::uint64_t> out_, in_;
  std::unique_ptr<MessageUnits> in_layout_;
  std::vector<std::int64_t> announced_;
  std::vector<T> staging_;
  std::vector<std::size_t> staged_, peer_columns_;
  std::unique_ptr<ExchangePlan> plain_plan_;  // the uncompressed backward's, once agreed
  const T *send_ = nullptr;
  T *recv_ = nullptr;
};

template <typename T>
const ErrorBoundedEngine<T> *as(const RequestEngine &engine) {
  return dynamic_cast<const ErrorBoundedEngine<T> *>(&engine);
}

template <typename T>
std::unique_ptr<RequestEngine> backward_of(const ErrorBoundedEngine<T> &forward,
                                           const AlltoallvArgs &args) {
  require(!forward.backward(), DCT_ERR_REQUEST,
          "forward is a backward request, not a request of DCT_Alltoallv_init");
  const int ranks = forward.shared_context()->size();
  const MPI_Count count = check_backward_args(args, forward.layout(), ranks,
                                              forward.config().row_length, int(sizeof(T)));
  return std::make_unique<ErrorBoundedEngine<T>>(forward.shared_context(), count, forward.config(),
                                                 AlltoallvLayout(args, ranks), forward.pair(),
                                                 true);
}

}  // namespace

void validate_error_bounded(const Config &config) {
  const ErrorBoundConfig &eb = config.error_bound;
  const std::int64_t d = config.row_length;
  require(eb.table_columns <= d && (eb.table_columns == 0 || d % eb.table_columns == 0),
          DCT_ERR_INFO,
          "dct_table_columns=" + std::to_string(eb.table_columns) +
              " does not divide dct_row_length " + std::to_string(d));
  const std::size_t tables = std::size_t(d) / table_columns(config);
  require(eb.automatic || eb.bounds.size() == 1 || eb.bounds.size() == tables, DCT_ERR_INFO,
          "dct_error_bound lists " + std::to_string(eb.bounds.size()) + " bounds; the rows hold " +
              std::to_string(tables) + " tables (give 1 or " + std::to_string(tables) + ")");
}

std::unique_ptr<RequestEngine> make_error_bounded_engine(std::shared_ptr<CommContext> context,
                                                         const AlltoallvArgs &args,
                                                         const Config &config, MPI_Count count,
                                                         std::shared_ptr<const ExchangePlan> plan) {
  AlltoallvLayout layout(args, context->size());
  auto pair = std::make_shared<PairState>();
  pair->plan = std::move(plan);
  if (floating_element_size(args.datatype) == 4)
    return std::make_unique<ErrorBoundedEngine<float>>(std::move(context), count, config,
                                                       std::move(layout), pair, false);
  return std::make_unique<ErrorBoundedEngine<double>>(std::move(context), count, config,
                                                      std::move(layout), pair, false);
}

std::unique_ptr<RequestEngine> make_error_bounded_backward(const RequestEngine &forward,
                                                           const AlltoallvArgs &args) {
  if (!is_error_bounded(forward)) return nullptr;
  if (const auto *f = as<float>(forward)) return backward_of(*f, args);
  return backward_of(*as<double>(forward), args);
}

bool is_error_bounded(const RequestEngine &engine) {
  return as<float>(engine) != nullptr || as<double>(engine) != nullptr;
}

}  // namespace dct::detail
