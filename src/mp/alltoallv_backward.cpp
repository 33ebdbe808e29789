// DCT-MP's top-k backward request: the gradients of the entries its forward kept, sent back
// along the forward's masks (topk_engine.hpp), in the reverse direction.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "mp/alltoallv.hpp"
#include "mp/alltoallv_validate.hpp"
#include "mp/error_bounded.hpp"
#include "mp/row_codec.hpp"
#include "mp/topk_engine.hpp"

namespace dct::detail {
namespace {

using mp::RowMasks;
using Layout = AlltoallvLayout;
using Units = MessageUnits;

/// The backward call: the gradients of the kept entries only, in the reverse direction.
template <typename T>
class BackwardEngine final : public MpEngine {
 public:
  BackwardEngine(const MpEngine &forward, Layout layout, MPI_Count count)
      : MpEngine(forward.shared_context(), count, sizeof(T), forward.config(), std::move(layout),
                 forward.masks(), forward.plan()) {}

  const char *kind() const override { return "alltoallv_backward"; }

  void start(const void *send, void *recv) override {
    require_backward_ready(masks_->forward_active, masks_->forward_calls, masks_->restored);
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
    const std::vector<RowMasks> &out_masks = masks_->received;
    const std::vector<RowMasks> &in_masks = masks_->sent;
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

std::unique_ptr<RequestEngine> make_alltoallv_backward(const RequestEngine &forward,
                                                       const AlltoallvArgs &args) {
  if (auto backward = make_error_bounded_backward(forward, args)) return backward;
  const auto *mp = dynamic_cast<const MpEngine *>(&forward);
  require(mp != nullptr && mp->is_forward(), DCT_ERR_REQUEST,
          "forward is not a request of DCT_Alltoallv_init");
  const int ranks = mp->shared_context()->size();
  const MPI_Count count =
      check_backward_args(args, mp->layout(), ranks, mp->config().row_length, mp->element_size());
  Layout layout(args, ranks);
  if (mp->element_size() == 4)
    return std::make_unique<BackwardEngine<float>>(*mp, std::move(layout), count);
  return std::make_unique<BackwardEngine<double>>(*mp, std::move(layout), count);
}

}  // namespace dct::detail
