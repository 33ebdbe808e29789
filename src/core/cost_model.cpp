#include "core/cost_model.hpp"

#include <algorithm>
#include <climits>
#include <cmath>

#include "core/error.hpp"
#include "core/float16.hpp"
#include "core/wire.hpp"

namespace dct::detail {
namespace {

/// Index bytes per entry of a block of `entries` of `count` (the wire's smallest coding).
double index_bytes_per_entry(double count, double entries) {
  if (entries < 1 || count < 1) return sizeof(WireIndex);
  const auto n = static_cast<std::size_t>(std::min(entries, count));
  const auto range = static_cast<std::size_t>(count);
  const wire::BlockFormat format = wire::block_format<float>(n, range, ValueCoding::native);
  return double(format.index_bytes()) / double(n);
}

int ceil_log2(int ranks) {
  int rounds = 0;
  while ((1 << rounds) < ranks) ++rounds;
  return rounds;
}

}  // namespace

int hierarchy_group_size(int ranks, int node_size, int requested) {
  if (requested > 0) {
    require(ranks % requested == 0, DCT_ERR_INFO, [&] {
      return "dct_group_size=" + std::to_string(requested) + " does not divide the " +
             std::to_string(ranks) + " ranks of the communicator";
    });
    return requested > 1 && requested < ranks ? requested : 0;
  }
  if (node_size > 1 && node_size < ranks && ranks % node_size == 0) return node_size;
  const double root = std::sqrt(double(ranks));
  int best = 0;
  for (int size = 2; size < ranks; ++size)
    if (ranks % size == 0 && (best == 0 || std::fabs(size - root) < std::fabs(best - root)))
      best = size;
  return best;
}

double expected_union(double count, double kept_per_rank, int ranks) {
  if (count <= 0) return 0;
  const double density = std::min(1.0, kept_per_rank / count);
  return count * (1.0 - std::pow(1.0 - density, ranks));
}

double lossless_speedup(double ratio, double compress_bytes_per_s, double decompress_bytes_per_s,
                        const NetworkModel &network) {
  if (!(ratio > 0) || !(compress_bytes_per_s > 0) || !(decompress_bytes_per_s > 0)) return 0;
  const double bandwidth = network.beta_gbps * 1e9;
  return 1.0 /
         (1.0 / ratio + bandwidth * (1.0 / compress_bytes_per_s + 1.0 / decompress_bytes_per_s));
}

double predicted_seconds(DCT_Algorithm algorithm, const ExchangeSize &size,
                         const NetworkModel &network) {
  const int p = size.ranks;
  const double alpha = network.alpha_us * 1e-6;
  const double per_byte = 1.0 / (network.beta_gbps * 1e9);
  const double rounds = ceil_log2(p);
  const double share = double(p - 1) / p;
  const double dense = size.count * size.value_bytes;
  const double kept = size.total_kept / p;
  // Charged at one rank's list density for every algorithm: merged lists are denser and code
  // a little shorter per entry, which the model leaves out. A rank's own entries travel as
  // dct_values says (allgather, split's first stage); sums in the tensor's type.
  const double index = index_bytes_per_entry(size.count, kept);
  const double own_entry =
      (size.own_value_bytes > 0 ? size.own_value_bytes : size.value_bytes) + index;
  const double entry = size.value_bytes + index;  // partial sums
  const double merged =
      size.result_nonzeros > 0 ? size.result_nonzeros : expected_union(size.count, kept, p);
  // GPU requests: the sum crosses to the device as it travelled (sparse_result bytes against
  // the n-element sum's `dense`), dense's in full, where size.staging says it crosses at all;
  // allgather's blocks cross compressed and are charged nothing.
  const bool crosses =
      size.staging == Staging::all ||
      (size.staging == Staging::transport && algorithm == DCT_ALGORITHM_HIERARCHICAL) ||
      (size.staging == Staging::dense && algorithm == DCT_ALGORITHM_DENSE);
  const auto host_result = [&](double sparse_result) {
    if (!crosses) return 0.0;
    return size.host_result_seconds * std::min(1.0, sparse_result / std::max(dense, 1.0));
  };
  const double kept_sums = size.result_budget > 0 ? std::min(merged, size.result_budget) : merged;
  const double gathered = std::min(kept_sums * entry, dense);  // split's reduced segments
  if (p <= 1)
    return algorithm == DCT_ALGORITHM_ALLGATHER ? 0
           : algorithm == DCT_ALGORITHM_DENSE   ? host_result(dense)
                                                : host_result(std::min(kept * entry, dense));

  switch (algorithm) {
    case DCT_ALGORITHM_DENSE:  // reduce-scatter + allgather (Rabenseifner / ring)
      return host_result(dense) + 2 * rounds * alpha + 2 * share * dense * per_byte;
    case DCT_ALGORITHM_ALLGATHER:  // every rank receives every other rank's list
      return rounds * alpha + share * size.total_kept * own_entry * per_byte;
    case DCT_ALGORITHM_SPLIT: {
      // counts (alltoall, log P), entries to their owners (alltoallv, P-1 messages), owned
      // nonzero counts (allgather) and owned segments (allgatherv, sparse or dense).
      return host_result(gathered) + (3 * rounds + (p - 1)) * alpha +
             share * (kept * own_entry + gathered) * per_byte;
    }
    case DCT_ALGORITHM_HIERARCHICAL: {
      if (size.group_size <= 1 || p % size.group_size != 0) return HUGE_VAL;
      // split's stages within the group (G ranks) and, between its reduce-scatter and its
      // allgather, a whole split over the super-segment across the H = P/G groups (plus an
      // allgather of the group sums' counts). The group sums are charged as if the group's
      // ranks chose their entries independently (u_G = expected_union over G ranks): with
      // overlapping indices they are fewer, and the cost lower.
      const int g = size.group_size, h = p / g;
      const double group_rounds = ceil_log2(g), cross_rounds = ceil_log2(h);
      const double group_sums = expected_union(size.count, kept, g) / g;
      const double messages = 3 * group_rounds + (g - 1) + 4 * cross_rounds + (h - 1);
      return host_result(gathered) + messages * alpha +
             (kept * own_entry * (g - 1) / g + group_sums * entry * (h - 1) / h +
              gathered * share) *
                 per_byte;
    }
    case DCT_ALGORITHM_RECURSIVE_DOUBLING: {
      // Round r exchanges the merge of 2^r ranks' entries, or the dense vector once that is
      // smaller; two messages (size, payload) per round; non-powers of two add two steps.
      const int power = 1 << (ceil_log2(p + 1) - 1);
      double seconds = host_result(std::min(merged * entry, dense));
      if (power < p) seconds += 2 * (2 * alpha + std::min(kept * entry, dense) * per_byte);
      for (int group = 1; group < power; group *= 2) {
        const double held = expected_union(size.count, kept, group);
        seconds += 2 * alpha + std::min(held * entry, dense) * per_byte;
      }
      return seconds;
    }
    default:
      return HUGE_VAL;
  }
}

DCT_Algorithm cheapest_algorithm(const ExchangeSize &size, const NetworkModel &network) {
  const bool bounded = size.result_budget > 0;
  // One rank sends nothing; what is left is local work, least with allgather (its own list
  // into the result once; dense copies the tensor twice more through MPI).
  if (size.ranks <= 1 && !bounded) return DCT_ALGORITHM_ALLGATHER;
  DCT_Algorithm best = bounded ? DCT_ALGORITHM_SPLIT : DCT_ALGORITHM_DENSE;
  double best_seconds = predicted_seconds(best, size, network);
  for (DCT_Algorithm candidate : {DCT_ALGORITHM_ALLGATHER, DCT_ALGORITHM_SPLIT,
                                  DCT_ALGORITHM_RECURSIVE_DOUBLING, DCT_ALGORITHM_HIERARCHICAL}) {
    if (bounded && candidate != DCT_ALGORITHM_HIERARCHICAL) continue;
    if (candidate == DCT_ALGORITHM_HIERARCHICAL && size.group_size <= 0) continue;
    const double seconds = predicted_seconds(candidate, size, network);
    if (seconds < best_seconds) {
      best = candidate;
      best_seconds = seconds;
    }
  }
  return best;
}

DCT_Algorithm decide_algorithm(const Config &config, int ranks, double count, int value_bytes,
                               double total_kept, double result_nonzeros, Staging staging,
                               int group_size) {
  DCT_Algorithm algorithm = config.algorithm;
  if (algorithm == DCT_ALGORITHM_AUTO) {
    ExchangeSize size;
    size.ranks = ranks;
    size.count = count;
    size.value_bytes = value_bytes;
    size.own_value_bytes =
        value_bytes_per_entry(config.values, static_cast<std::size_t>(value_bytes));
    size.total_kept = total_kept;
    size.result_nonzeros = result_nonzeros;
    if (config.result_density < 1.0)
      size.result_budget = std::max(1.0, std::ceil(config.result_density * count));
    size.group_size = ranks >= kHierarchyMinRanks ? group_size : 0;
    if (staging != Staging::none)
      size.host_result_seconds = count * value_bytes / kHostResultBytesPerSecond;
    size.staging = staging;
    algorithm = cheapest_algorithm(size, config.network);
  }
  if (algorithm == DCT_ALGORITHM_HIERARCHICAL && group_size <= 0) algorithm = DCT_ALGORITHM_SPLIT;
  // Sparse messages are described by int counts of 8-byte units; beyond, only dense works.
  const double limit = double(INT_MAX) * wire::kUnitBytes;
  const double dense_bytes = count * value_bytes + 8.0 * ranks;
  const double gathered_bytes = total_kept * (value_bytes + sizeof(WireIndex)) + 8.0 * ranks;
  if (algorithm == DCT_ALGORITHM_ALLGATHER && gathered_bytes > limit)
    algorithm = DCT_ALGORITHM_DENSE;
  if (algorithm != DCT_ALGORITHM_ALLGATHER && dense_bytes > limit) algorithm = DCT_ALGORITHM_DENSE;
  return algorithm;
}

}  // namespace dct::detail
