// What DCT-MP's top-k forward (alltoallv.cpp) and backward (alltoallv_backward.cpp) requests
// share: the masks of the last forward call, the request's shape and layout, the message
// exchange and the state checkpoints save.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/engine_state.hpp"
#include "core/float16.hpp"
#include "core/request_engine.hpp"
#include "core/wire.hpp"
#include "mp/alltoallv.hpp"
#include "mp/alltoallv_exchange.hpp"
#include "mp/alltoallv_validate.hpp"
#include "mp/row_codec.hpp"

namespace dct::detail {

/// The masks of the last completed forward call, shared by the forward request and every
/// backward request paired with it (which may outlive it).
struct MaskState {
  std::vector<mp::RowMasks> sent;      ///< per destination rank, rows of its send block
  std::vector<mp::RowMasks> received;  ///< per source rank, rows of its receive block
  MPI_Count forward_calls = 0;         ///< completed forward calls
  bool forward_active = false;         ///< a forward call is started and not completed
  bool restored = false;  ///< loaded from a checkpoint, no forward call since (no masks)
};

/// What forward and backward requests have in common: shape, layout, engine plumbing.
class MpEngine : public RequestEngine, public StateWithoutFeedback {
 public:
  MpEngine(std::shared_ptr<CommContext> context, MPI_Count count, int element_size,
           const Config &config, AlltoallvLayout layout, std::shared_ptr<MaskState> masks,
           std::shared_ptr<const ExchangePlan> plan)
      : RequestEngine(std::move(context), count, element_size, config),
        layout_(std::move(layout)),
        masks_(std::move(masks)),
        plan_(std::move(plan)) {
    format_.d = static_cast<std::size_t>(config.row_length);
    format_.value_bytes = value_bytes(config.values, static_cast<std::size_t>(element_size));
    state_ = this;
  }

  // One blocking exchange per call, run in start order (see progress.hpp).
  bool blocking() const override { return true; }

  // Checkpoints (format 5): the call counter (dct_interval's schedule of the threshold
  // selections), the forward's threshold, and per rank its count and (forward) the forward
  // calls completed. The masks are not saved: a backward needs its forward's call first.
  bool counts_per_rank() const override { return true; }
  void restore(const void *, const void *, double tau, MPI_Count calls) override {
    totals_.calls = calls;
    restore_tau(tau);
  }
  std::vector<double> extra() const override {
    std::vector<double> words{double(count_)};
    if (is_forward()) words.push_back(double(masks_->forward_calls));
    return words;
  }
  void check_extra(const std::vector<double> &words) const override {
    check_mp_state(words, name(), count_, is_forward());
  }
  void restore_extra(const std::vector<double> &words) override {
    if (!is_forward()) return;
    masks_->forward_calls = static_cast<MPI_Count>(words[1]);
    masks_->restored = true;  // the masks held are not the file's: no backward until a forward
  }

  virtual bool is_forward() const = 0;
  virtual void restore_tau(double tau) { static_cast<void>(tau); }

  const AlltoallvLayout &layout() const { return layout_; }
  const std::shared_ptr<MaskState> &masks() const { return masks_; }
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
  void exchange(std::vector<std::uint64_t> &out, const MessageUnits &out_units,
                std::vector<std::uint64_t> &in, const MessageUnits &in_units) {
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

  AlltoallvLayout layout_;
  std::shared_ptr<MaskState> masks_;
  std::shared_ptr<const ExchangePlan> plan_;  // agreed at the forward's init
  mp::RowFormat format_;
  std::vector<std::uint64_t> out_, in_;  // message buffers, reused by every call
};

}  // namespace dct::detail
