// hierarchical: split in two tiers, for many ranks (issue 20).
//
// The P ranks form H groups of G (a node's ranks, or G consecutive ranks:
// hierarchy_group_size). The index space is cut into G super-segments, balanced over every
// rank's entries; the rank at position g of each group owns super-segment g. Stages: split's
// reduce-scatter within the group (G - 1 peers: each rank sums its group's entries of its
// super-segment) -> the cross tier, a whole split over the super-segment among the H ranks at
// position g of every group (H - 1 peers: the group sums become the sum over all ranks) ->
// split's allgather within the group (G - 1 peers). A rank talks to G + H - 2 peers instead of
// P - 1 (62 instead of 1023 at 1024 ranks), and receives about
//   k (s+4) (G-1)/G + (u_G / G) (s+4) (H-1)/H + min(u (s+4), n s) (P-1)/P
// bytes, u_G the nonzeros of its group's sum and u the sum's: up to k (s+4) more than split
// when the ranks' indices are independent, nothing more when they coincide.
// dct_result_density is applied by the cross tier's owners: each super-segment keeps the share
// of the budget that all ranks' entries in it make of all entries.
//
// A GPU request's tiers all sum on the device (split_owner_on_device.cpp): the group's sums
// are compacted there and are the cross tier's device entries, whose result lands there too,
// so only compressed blocks and segments cross between host and device. With a device
// transport each tier moves them over a transport of its own (Hierarchy::group_transport,
// cross_transport), made with the hierarchy.
#include <string>
#include <utility>

#include "core/cost_model.hpp"
#include "dp/exchange/split.hpp"

namespace dct::detail {

void Hierarchy::free() {
  group_transport.reset();
  cross_transport.reset();
  if (group != MPI_COMM_NULL) MPI_Comm_free(&group);
  if (cross != MPI_COMM_NULL) MPI_Comm_free(&cross);
  group_size = 0;
}

Hierarchy make_hierarchy(MPI_Comm comm, int requested_group_size) {
  int rank = 0, ranks = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &ranks), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  int node_size = 1;
  check_mpi(MPI_Comm_size(node, &node_size), "MPI_Comm_size");
  int extremes[2] = {node_size, -node_size};  // largest and smallest node
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
  const bool uniform = extremes[0] == -extremes[1];
  Hierarchy hierarchy;
  hierarchy.group_size = hierarchy_group_size(ranks, uniform ? node_size : 0, requested_group_size);
  const bool by_node =
      hierarchy.group_size > 0 && requested_group_size <= 0 && hierarchy.group_size == node_size;
  int position = 0;
  if (by_node) {
    hierarchy.group = node;
    check_mpi(MPI_Comm_rank(node, &position), "MPI_Comm_rank");
  } else {
    check_mpi(MPI_Comm_free(&node), "MPI_Comm_free");
    if (hierarchy.group_size == 0) return hierarchy;
    position = rank % hierarchy.group_size;
    check_mpi(MPI_Comm_split(comm, rank / hierarchy.group_size, rank, &hierarchy.group),
              "MPI_Comm_split");
  }
  check_mpi(MPI_Comm_split(comm, position, rank, &hierarchy.cross), "MPI_Comm_split");
  return hierarchy;
}

bool connect_device_transports(Hierarchy &hierarchy, MPI_Comm comm) {
  std::string why;
  if (hierarchy.group_size > 0) {
    hierarchy.group_transport = backends::make_device_transport(hierarchy.group, why);
    hierarchy.cross_transport = backends::make_device_transport(hierarchy.cross, why);
  }
  int both = hierarchy.group_transport != nullptr && hierarchy.cross_transport != nullptr ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &both, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (both == 0) {
    hierarchy.group_transport.reset();
    hierarchy.cross_transport.reset();
  }
  return both != 0;
}

namespace {

template <typename T>
class HierarchicalExchange final : public SplitExchange<T> {
  using Split = SplitExchange<T>;
  using Split::in_;
  using Split::owned_;
  using Split::owner_;
  using Split::pending_;
  using Split::traffic_;

 public:
  HierarchicalExchange(const Hierarchy &hierarchy, SplitLayout &group_layout,
                       SplitLayout &cross_layout)
      : Split(group_layout), hierarchy_(hierarchy), cross_split_(cross_layout) {
    cross_split_.defer_dropped_sums();
    check_mpi(MPI_Comm_rank(hierarchy_.group, &position_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_rank(hierarchy_.cross, &cross_rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(hierarchy_.cross, &cross_ranks_), "MPI_Comm_size");
  }

 private:
  // The engine hands the call over every rank; the group tier is split's machinery on the
  // group's communicator, with this rank's position in it.
  void prepare() override {
    all_ = in_;
    group_kept_.assign(static_cast<std::size_t>(hierarchy_.group_size), 0);
    group_kept_[static_cast<std::size_t>(position_)] = all_.kept[all_.rank];
    in_.comm = hierarchy_.group;
    in_.rank = position_;
    in_.ranks = hierarchy_.group_size;
    in_.kept = group_kept_.data();
    in_.result_budget = 0;  // applied by the cross tier
    in_.residual = nullptr;
    in_.residual_device = nullptr;
    // The request's transport spans the whole communicator; each tier has its own.
    in_.transport = all_.transport != nullptr ? hierarchy_.group_transport.get() : nullptr;
    step_ = 0;
    cross_summed_ = false;
    Split::prepare();
  }

  MPI_Comm balance_comm() const override { return all_.comm; }
  // After the cross tier, my super-segment holds the sum over all ranks: as many nonzeros as
  // the cross tier's owners announced (the result budget's drops already zeroed).
  std::size_t owned_nonzeros_at_most() const override {
    return cross_summed_ ? static_cast<std::size_t>(cross_split_.traffic().result_nnz)
                         : Split::owned_nonzeros_at_most();
  }

  bool combine_owned() override {
    switch (step_++) {
      case 0:
        announce_group_sums();
        return false;
      case 1:
        return !start_cross_tier();
      default:
        finish_cross_tier();
        return true;
    }
  }

  // The group's sum of my super-segment, as entries for the cross tier, and how many entries
  // of all ranks in my group it holds (for the result budget's shares).
  // A GPU request's are compacted on the device (owner_.idx, owner_.val), where the cross tier
  // reads them.
  void announce_group_sums() {
    std::size_t sums = 0;
    if (this->owner_on_device()) {
      sums = this->compact_owned_sums_on_device();
    } else {
      partial_idx_.clear();
      partial_val_.clear();
      for (std::size_t i = 0; i < owned_.size(); ++i) {
        if (owned_[i] == T(0)) continue;
        partial_idx_.push_back(static_cast<WireIndex>(i));
        partial_val_.push_back(owned_[i]);
      }
      sums = partial_idx_.size();
    }
    announcement_[0] = this->failed() ? Split::kRejected : std::int64_t(sums);
    announcement_[1] = this->received_entries_;
    announced_.assign(2 * static_cast<std::size_t>(cross_ranks_), 0);
    pending_.emplace_back();
    check_mpi(MPI_Iallgather(announcement_, 2, MPI_INT64_T, announced_.data(), 2, MPI_INT64_T,
                             hierarchy_.cross, &pending_.back()),
              "MPI_Iallgather");
    const MPI_Count bytes = 16 * MPI_Count(cross_ranks_ - 1);
    traffic_.bytes_sent += bytes;
    traffic_.bytes_received += bytes;
  }

  // Every rank of the cross tier reads the same announcements, so all of them run it or all
  // skip it (a rejection, which each then announces to its group). Returns whether it runs.
  bool start_cross_tier() {
    const std::size_t length = this->length(in_.rank);
    cross_kept_.assign(static_cast<std::size_t>(cross_ranks_), 0);
    std::int64_t entries_in_segment = 0;
    for (int h = 0; h < cross_ranks_; ++h) {
      const std::int64_t sums = announced_[2 * std::size_t(h)];
      const std::int64_t entries = announced_[2 * std::size_t(h) + 1];
      if (sums < 0 || std::uint64_t(sums) > length || entries < 0 ||
          std::uint64_t(entries) > all_.count * std::uint64_t(all_.ranks)) {
        this->peer_error(h, "in the cross tier a rejection or an impossible count of group sums");
        return false;
      }
      cross_kept_[std::size_t(h)] = sums;
      entries_in_segment += entries;
    }
    SparseInput<T> cross{hierarchy_.cross,   cross_rank_, cross_ranks_, length,
                         cross_kept_.data(), nullptr,     nullptr,      nullptr};
    cross.host = all_.host;
    cross.stream = all_.stream;
    if (this->owner_on_device()) {
      cross.device = all_.device;
      cross.transport = all_.transport != nullptr ? hierarchy_.cross_transport.get() : nullptr;
      cross.device_idx = owner_.idx.data();
      cross.device_val = owner_.val.data();
      cross_device_result_.reserve_growing(*all_.device, length);
      cross.result = cross_device_result_.data();
    } else {
      cross.idx = partial_idx_.data();
      cross.val = partial_val_.data();
      wire::resize_growing(cross_result_, length);
      cross.result = cross_result_.data();
    }
    cross.rebalance = this->rebalancing();
    if (all_.result_budget > 0) {
      std::int64_t total = 0;
      for (int r = 0; r < all_.ranks; ++r) total += all_.kept[r];
      cross.result_budget =
          total > 0 ? static_cast<std::size_t>(std::ceil(
                          double(all_.result_budget) * double(entries_in_segment) / double(total)))
                    : 0;
      cross.residual = all_.residual + this->begin(in_.rank);
      cross.residual_device = all_.residual_device;
    }
    // (split's begin(int) is a segment's first index: SparseExchange's begin starts a call)
    static_cast<SparseExchange<T> &>(cross_split_).begin(std::move(cross));
    this->run_nested(&cross_split_);
    return true;
  }

  void finish_cross_tier() {
    const ExchangeTraffic &cross = cross_split_.traffic();
    traffic_.bytes_sent += cross.bytes_sent;
    traffic_.bytes_received += cross.bytes_received;
    traffic_.nnz_received += cross.nnz_received;
    if (std::exception_ptr error = this->take_nested_error()) {
      try {
        std::rethrow_exception(error);
      } catch (const Error &e) {
        if (e.code() != DCT_ERR_PEER) throw;
        this->peer_error(in_.rank, std::string("(in the cross tier) ") + e.what());
      }
      return;
    }
    if (this->owner_on_device())
      std::swap(owner_.sum, cross_device_result_);
    else
      owned_.swap(cross_result_);
    cross_summed_ = true;
  }

  // The cross tier's owners dropped sums for the result budget; they enter the residual only
  // once the whole call succeeded.
  void succeeded() override { cross_split_.commit_dropped_sums(); }

  const Hierarchy &hierarchy_;
  SplitExchange<T> cross_split_;
  SparseInput<T> all_;  // the call over every rank
  int position_ = 0;    // in the group
  int cross_rank_ = 0, cross_ranks_ = 1;
  int step_ = 0;
  bool cross_summed_ = false;  // this call's cross tier ran: my super-segment holds the sum
  std::vector<std::int64_t> group_kept_, cross_kept_;
  std::int64_t announcement_[2] = {};  // group sums (or kRejected), entries they hold
  std::vector<std::int64_t> announced_;
  std::vector<WireIndex> partial_idx_;  // the group's sums, relative to the super-segment
  std::vector<T> partial_val_;
  std::vector<T> cross_result_;
  BackendArray<T> cross_device_result_;  // owner_on_device(): the cross tier's result
};

}  // namespace

template <typename T>
std::unique_ptr<SparseExchange<T>> make_hierarchical_exchange(const Hierarchy &hierarchy,
                                                              SplitLayout &group_layout,
                                                              SplitLayout &cross_layout) {
  return std::make_unique<HierarchicalExchange<T>>(hierarchy, group_layout, cross_layout);
}
template std::unique_ptr<SparseExchange<float>> make_hierarchical_exchange(const Hierarchy &,
                                                                           SplitLayout &,
                                                                           SplitLayout &);
template std::unique_ptr<SparseExchange<double>> make_hierarchical_exchange(const Hierarchy &,
                                                                            SplitLayout &,
                                                                            SplitLayout &);

}  // namespace dct::detail
