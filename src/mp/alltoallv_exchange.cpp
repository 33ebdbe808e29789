#include "mp/alltoallv_exchange.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "core/test_hooks.hpp"
#include "mp/alltoallv_validate.hpp"

namespace dct::detail {
namespace {

/// The tag of the point-to-point pieces. DCT-MP's exchanges run alone on the private
/// communicator (blocking, in start order), but an allreduce's recursive doubling may have
/// receives posted there (tags 1 and 2): a tag of their own keeps them apart.
constexpr int kBlockTag = 16;

/// Whether any of `values` passes `limit`.
template <typename T>
bool passes(const std::vector<T> &values, std::size_t limit) {
  return std::any_of(values.begin(), values.end(),
                     [&](T v) { return static_cast<std::size_t>(v) > limit; });
}

/// Whether a packed message buffer of blocks of at most `units[j]` units passes `limit`.
bool packed_passes(const std::vector<std::size_t> &units, std::size_t limit) {
  std::size_t total = 0;
  for (std::size_t u : units) {
    if (u > limit || total > limit - u) return true;
    total += u;
  }
  return false;
}

void point_to_point(const ExchangePlan &plan, const Blocks &out, const Blocks &in,
                    MPI_Datatype type, std::size_t item_bytes, MPI_Comm comm) {
#ifdef DCT_TESTING
  ++testing::point_to_point_exchanges;
#endif
  int rank = 0;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  const std::size_t piece = std::max<std::size_t>(plan.limit, 1);
  std::vector<MPI_Request> requests;
  // Pieces of one pair go in order (MPI does not let messages of one tag overtake).
  auto post = [&](const Blocks &side, int j, bool receive) {
    const std::size_t count = side.counts[std::size_t(j)];
    auto *base = static_cast<std::byte *>(const_cast<void *>(side.base)) +
                 side.displs[std::size_t(j)] * item_bytes;
    for (std::size_t done = 0; done < count; done += piece) {
      const int n = static_cast<int>(std::min(piece, count - done));
      requests.emplace_back();
      if (receive)
        check_mpi(
            MPI_Irecv(base + done * item_bytes, n, type, j, kBlockTag, comm, &requests.back()),
            "MPI_Irecv");
      else
        check_mpi(
            MPI_Isend(base + done * item_bytes, n, type, j, kBlockTag, comm, &requests.back()),
            "MPI_Isend");
    }
  };
  const int ranks = static_cast<int>(out.counts.size());
  for (int j = 0; j < ranks; ++j)
    if (j != rank) post(in, j, true);
  for (int j = 0; j < ranks; ++j)
    if (j != rank) post(out, j, false);
  const std::size_t self = std::size_t(rank);
  require(out.counts[self] == in.counts[self], DCT_ERR_INTERNAL,
          "the block to this rank itself has two sizes");
  if (out.counts[self] > 0)
    std::memcpy(
        static_cast<std::byte *>(const_cast<void *>(in.base)) + in.displs[self] * item_bytes,
        static_cast<const std::byte *>(out.base) + out.displs[self] * item_bytes,
        out.counts[self] * item_bytes);
  check_mpi(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
}

/// `values` as the ints MPI_Alltoallv takes; the plan guarantees they fit.
std::vector<int> as_ints(const std::vector<std::size_t> &values) {
  std::vector<int> ints(values.size());
  for (std::size_t j = 0; j < values.size(); ++j) {
    require(values[j] <= static_cast<std::size_t>(INT_MAX), DCT_ERR_INTERNAL,
            "a size of " + std::to_string(values[j]) +
                " items passes MPI's int counts on a request agreed not to");
    ints[j] = static_cast<int>(values[j]);
  }
  return ints;
}

template <typename Counts, typename Displs>
Blocks blocks(const Counts &counts, const Displs &displs, const void *base) {
  Blocks b{base, {}, {}};
  b.counts.assign(counts.begin(), counts.end());
  b.displs.assign(displs.begin(), displs.end());
  return b;
}

}  // namespace

std::size_t max_mpi_count() {
#ifdef DCT_TESTING
  if (testing::max_mpi_count > 0) return testing::max_mpi_count;
#endif
  return INT_MAX;
}

bool may_pass_int_counts(const AlltoallvLayout &layout, const Config &config, int element_size) {
  const std::size_t limit = max_mpi_count();
  for (const std::vector<MPI_Count> *counts : {&layout.sendcounts, &layout.recvcounts}) {
    std::vector<std::size_t> units(counts->size());
    for (std::size_t j = 0; j < units.size(); ++j)
      units[j] = longest_message_units(static_cast<std::size_t>((*counts)[j] / config.row_length),
                                       config, element_size);
    if (packed_passes(units, limit)) return true;
  }
  return false;
}

bool dense_passes_int_counts(const AlltoallvLayout &layout) {
  const std::size_t limit = max_mpi_count();
  return passes(layout.sendcounts, limit) || passes(layout.recvcounts, limit) ||
         passes(layout.sdispls, limit) || passes(layout.rdispls, limit);
}

ExchangePlan agree_exchange_plan(MPI_Comm comm, bool needs) {
  // MPI_MAX over [needs, -limit]: whether any rank needs it, and the smallest limit.
  std::int64_t words[2] = {needs ? 1 : 0, -static_cast<std::int64_t>(max_mpi_count())};
  std::int64_t agreed[2] = {0, 0};
  check_mpi(MPI_Allreduce(words, agreed, 2, MPI_INT64_T, MPI_MAX, comm), "MPI_Allreduce");
  ExchangePlan plan;
  plan.point_to_point = agreed[0] != 0;
  plan.limit = static_cast<std::size_t>(-agreed[1]);
  return plan;
}

std::size_t agree_uniform_kept(MPI_Comm comm, const AlltoallvLayout &layout, std::size_t kept) {
  const std::size_t ranks = layout.sendcounts.size();
  std::vector<std::int64_t> sent(ranks), announced(ranks);
  for (std::size_t j = 0; j < ranks; ++j) sent[j] = static_cast<std::int64_t>(layout.sendcounts[j]);
  check_mpi(MPI_Alltoall(sent.data(), 1, MPI_INT64_T, announced.data(), 1, MPI_INT64_T, comm),
            "MPI_Alltoall");
  bool counts_match = true;
  for (std::size_t j = 0; j < ranks; ++j)
    counts_match = counts_match && announced[j] == std::int64_t(layout.recvcounts[j]);
  // MPI_MAX over [kept, -kept, mismatch]: whether every rank keeps the same and all match.
  std::int64_t words[3] = {std::int64_t(kept), -std::int64_t(kept), counts_match ? 0 : 1};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, words, 3, MPI_INT64_T, MPI_MAX, comm), "MPI_Allreduce");
  return words[0] == -words[1] && words[2] == 0 ? kept : 0;
}

void exchange_blocks(const ExchangePlan &plan, const Blocks &out, const Blocks &in,
                     MPI_Datatype type, std::size_t item_bytes, MPI_Comm comm) {
  if (plan.point_to_point) return point_to_point(plan, out, in, type, item_bytes, comm);
  const std::vector<int> out_counts = as_ints(out.counts), out_displs = as_ints(out.displs),
                         in_counts = as_ints(in.counts), in_displs = as_ints(in.displs);
  check_mpi(
      MPI_Alltoallv(out.base, out_counts.data(), out_displs.data(), type,
                    const_cast<void *>(in.base), in_counts.data(), in_displs.data(), type, comm),
      "MPI_Alltoallv");
}

Blocks send_blocks(const AlltoallvLayout &layout, const void *base) {
  return blocks(layout.sendcounts, layout.sdispls, base);
}

Blocks receive_blocks(const AlltoallvLayout &layout, void *base) {
  return blocks(layout.recvcounts, layout.rdispls, base);
}

}  // namespace dct::detail
