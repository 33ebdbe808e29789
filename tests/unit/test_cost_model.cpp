// dct_algorithm's per-call decision (src/core/cost_model.hpp, decide_algorithm).
#include <gtest/gtest.h>

#include <climits>
#include <map>

#include "core/config.hpp"
#include "core/cost_model.hpp"
#include "core/error.hpp"

namespace {

using dct::detail::Config;
using dct::detail::decide_algorithm;
using dct::detail::Staging;

TEST(DecideAlgorithm, AutoIsTheModelsCheapest) {
  Config config;
  for (int ranks : {2, 16, 1024}) {
    for (double count : {1e3, 1e6, 1e8}) {
      dct::detail::ExchangeSize size;
      size.ranks = ranks;
      size.count = count;
      size.total_kept = 0.01 * count * ranks;
      size.own_value_bytes = 4;
      EXPECT_EQ(decide_algorithm(config, ranks, count, 4, size.total_kept, 0),
                dct::detail::cheapest_algorithm(size, config.network))
          << ranks << " ranks, " << count;
    }
  }
}

TEST(DecideAlgorithm, ABoundedResultMakesAutoSplit) {
  Config config;
  config.result_density = 0.5;
  EXPECT_EQ(decide_algorithm(config, 4, 1e3, 4, 40, 0), DCT_ALGORITHM_SPLIT);
  config.algorithm = DCT_ALGORITHM_ALLGATHER;  // asked for: kept
  EXPECT_EQ(decide_algorithm(config, 4, 1e3, 4, 40, 0), DCT_ALGORITHM_ALLGATHER);
}

// Groups: a node's ranks when nodes are alike, else the divisor nearest sqrt(P); none where P
// is prime or below 4; a requested size must divide P.
TEST(Hierarchy, GroupSizes) {
  using dct::detail::hierarchy_group_size;
  EXPECT_EQ(hierarchy_group_size(1024, 0, 0), 32);
  EXPECT_EQ(hierarchy_group_size(1024, 1, 0), 32);  // one rank per node
  EXPECT_EQ(hierarchy_group_size(1024, 4, 0), 4);   // 4 GPUs per node
  EXPECT_EQ(hierarchy_group_size(8, 0, 0), 2);
  EXPECT_EQ(hierarchy_group_size(6, 0, 0), 2);
  EXPECT_EQ(hierarchy_group_size(9, 0, 0), 3);
  EXPECT_EQ(hierarchy_group_size(4, 4, 0), 2);  // one node: groups within it
  for (int prime : {1, 2, 3, 5, 7, 13}) EXPECT_EQ(hierarchy_group_size(prime, 0, 0), 0) << prime;
  EXPECT_EQ(hierarchy_group_size(64, 4, 8), 8);  // asked for: kept
  EXPECT_EQ(hierarchy_group_size(64, 0, 64), 0);
  try {
    hierarchy_group_size(64, 0, 6);
    ADD_FAILURE() << "6 does not divide 64";
  } catch (const dct::detail::Error &e) {
    EXPECT_EQ(e.code(), DCT_ERR_INFO);
    EXPECT_NE(std::string(e.what()).find("dct_group_size=6"), std::string::npos) << e.what();
  }
}

// At 1024 ranks split's 1023 messages per rank cost ~2 ms at 2 us each: with a bounded result
// (100 MB of fp32, density 0.01, 25 Gb/s) the hierarchy's 62 peers win although it moves one k
// more; at 64 ranks they do not. Without a hierarchy, hierarchical means split.
TEST(DecideAlgorithm, HierarchicalWinsAtScaleWithABoundedResult) {
  Config config;
  config.result_density = 0.01;
  config.network.alpha_us = 2;
  config.network.beta_gbps = 25.0 / 8;
  const double count = 25e6, kept = 0.01 * count;
  EXPECT_EQ(decide_algorithm(config, 1024, count, 4, 1024 * kept, 0, Staging::none, 32),
            DCT_ALGORITHM_HIERARCHICAL);
  EXPECT_EQ(decide_algorithm(config, 1024, count, 4, 1024 * kept, 0, Staging::none, 0),
            DCT_ALGORITHM_SPLIT);
  EXPECT_EQ(decide_algorithm(config, 64, count, 4, 64 * kept, 0, Staging::none, 8),
            DCT_ALGORITHM_SPLIT);
  dct::detail::ExchangeSize size;
  size.ranks = 1024;
  size.count = count;
  size.total_kept = 1024 * kept;
  size.result_budget = kept;
  size.group_size = 32;
  const double split = dct::detail::predicted_seconds(DCT_ALGORITHM_SPLIT, size, config.network);
  const double hierarchical =
      dct::detail::predicted_seconds(DCT_ALGORITHM_HIERARCHICAL, size, config.network);
  EXPECT_LT(hierarchical, 0.6 * split) << hierarchical << " s against " << split;
  config.algorithm = DCT_ALGORITHM_HIERARCHICAL;
  EXPECT_EQ(decide_algorithm(config, 7, count, 4, 7 * kept, 0, Staging::none, 0),
            DCT_ALGORITHM_SPLIT);
  EXPECT_EQ(decide_algorithm(config, 8, count, 4, 8 * kept, 0, Staging::none, 2),
            DCT_ALGORITHM_HIERARCHICAL);
}

// GPU buffers staged through the host: dense writes the n-element sum in host memory and
// copies it to the device, which the model charges (measured on an H100 node: at 1 rank,
// 256 MiB, dense 229 ms against the kernels' 2 ms); the sparse exchanges sum on the device from
// what crossed, compressed, and are charged that share of it only.
TEST(DecideAlgorithm, StagedGpuRequestsChargeTheHostResult) {
  Config config;
  const double count = 64e6, kept = 0.01 * count;
  // One rank sends nothing: allgather, whose local work is the least (its list into the result
  // once; dense copied the tensor twice more through MPI: 8x slower at 64 MiB on one core).
  EXPECT_EQ(decide_algorithm(config, 1, count, 4, kept, 0), DCT_ALGORITHM_ALLGATHER);
  EXPECT_EQ(decide_algorithm(config, 1, count, 4, kept, 0, Staging::all), DCT_ALGORITHM_ALLGATHER);
  EXPECT_EQ(decide_algorithm(config, 4, count, 4, 4 * kept, 0, Staging::all),
            DCT_ALGORITHM_ALLGATHER);
  for (int ranks : {2, 64, 1024}) {
    SCOPED_TRACE(ranks);
    dct::detail::ExchangeSize size;
    size.ranks = ranks;
    size.count = count;
    size.total_kept = kept * ranks;
    std::map<DCT_Algorithm, double> network;
    for (DCT_Algorithm algorithm : {DCT_ALGORITHM_DENSE, DCT_ALGORITHM_ALLGATHER,
                                    DCT_ALGORITHM_SPLIT, DCT_ALGORITHM_RECURSIVE_DOUBLING})
      network[algorithm] = dct::detail::predicted_seconds(algorithm, size, config.network);
    const double full = count * 4 / dct::detail::kHostResultBytesPerSecond;
    size.host_result_seconds = full;
    const auto charged = [&](DCT_Algorithm algorithm) {
      return dct::detail::predicted_seconds(algorithm, size, config.network) - network[algorithm];
    };
    EXPECT_DOUBLE_EQ(charged(DCT_ALGORITHM_DENSE), full);
    EXPECT_DOUBLE_EQ(charged(DCT_ALGORITHM_ALLGATHER), 0.0);
    // The sums of k = n/100 entries per rank: at most the n-element result, and far less
    // while the sum is sparse (its union grows with the ranks: all of n at 1024 ranks).
    for (DCT_Algorithm algorithm : {DCT_ALGORITHM_SPLIT, DCT_ALGORITHM_RECURSIVE_DOUBLING}) {
      EXPECT_GT(charged(algorithm), 0.0);
      EXPECT_LE(charged(algorithm), full * (1 + 1e-12));
      if (ranks == 2) {
        EXPECT_LT(charged(algorithm), 0.1 * full);
      }
    }
    // Over a device transport no sum crosses but hierarchical's (its tiers stay on MPI).
    size.group_size = ranks == 2 ? 0 : 8;
    network[DCT_ALGORITHM_HIERARCHICAL] = 0;
    if (size.group_size > 0) {
      size.host_result_seconds = 0;
      network[DCT_ALGORITHM_HIERARCHICAL] =
          dct::detail::predicted_seconds(DCT_ALGORITHM_HIERARCHICAL, size, config.network);
      size.host_result_seconds = full;
      EXPECT_GT(charged(DCT_ALGORITHM_HIERARCHICAL), 0.0);
    }
    const double hierarchical = charged(DCT_ALGORITHM_HIERARCHICAL);
    size.staging = Staging::transport;
    EXPECT_DOUBLE_EQ(charged(DCT_ALGORITHM_HIERARCHICAL), hierarchical);
    for (DCT_Algorithm algorithm : {DCT_ALGORITHM_DENSE, DCT_ALGORITHM_ALLGATHER,
                                    DCT_ALGORITHM_SPLIT, DCT_ALGORITHM_RECURSIVE_DOUBLING}) {
      EXPECT_DOUBLE_EQ(charged(algorithm), 0.0);
    }
    // A GPU-aware MPI on every rank: the sparse exchanges work in place, dense is charged
    // (MPI libraries often reduce device memory through the host).
    size.staging = Staging::dense;
    EXPECT_DOUBLE_EQ(charged(DCT_ALGORITHM_DENSE), full);
    for (DCT_Algorithm algorithm :
         {DCT_ALGORITHM_ALLGATHER, DCT_ALGORITHM_SPLIT, DCT_ALGORITHM_RECURSIVE_DOUBLING}) {
      EXPECT_DOUBLE_EQ(charged(algorithm), 0.0);
    }
    if (size.group_size > 0) {
      EXPECT_DOUBLE_EQ(charged(DCT_ALGORITHM_HIERARCHICAL), 0.0);
    }
    size.staging = Staging::none;
    EXPECT_DOUBLE_EQ(charged(DCT_ALGORITHM_DENSE), 0.0);
  }
}

// The charge follows what every rank agreed on (allreduce.cpp: staging()): dense's only where
// every rank's MPI reads device memory, hierarchical's only where NCCL carries the others. Where
// staging tips the balance, the decision moves with it.
TEST(DecideAlgorithm, TheStagingChargeMovesTheDecision) {
  Config config;
  // 16 ranks, 64 Mi floats at density 0.05: split, unless every sum crossed from the host.
  const double count = 64e6, kept = 0.05 * count;
  EXPECT_EQ(decide_algorithm(config, 16, count, 4, 16 * kept, 0, Staging::none),
            DCT_ALGORITHM_SPLIT);
  EXPECT_EQ(decide_algorithm(config, 16, count, 4, 16 * kept, 0, Staging::all),
            DCT_ALGORITHM_ALLGATHER);
  for (Staging staging : {Staging::transport, Staging::dense}) {
    EXPECT_EQ(decide_algorithm(config, 16, count, 4, 16 * kept, 0, staging), DCT_ALGORITHM_SPLIT);
  }
  // 64 ranks, 100000 floats at 0.05: dense, unless dense alone stages its sum.
  for (Staging staging : {Staging::none, Staging::all, Staging::transport}) {
    EXPECT_EQ(decide_algorithm(config, 64, 1e5, 4, 64 * 5e3, 0, staging), DCT_ALGORITHM_DENSE);
  }
  EXPECT_EQ(decide_algorithm(config, 64, 1e5, 4, 64 * 5e3, 0, Staging::dense),
            DCT_ALGORITHM_RECURSIVE_DOUBLING);
}

// Sparse messages are counted in int units of 8 bytes: past 16 GiB, dense.
TEST(DecideAlgorithm, MessagesPastMpisCountsGoDense) {
  Config config;
  const double limit_elements = double(INT_MAX) * 8 / 4;
  config.algorithm = DCT_ALGORITHM_ALLGATHER;
  EXPECT_EQ(decide_algorithm(config, 2, 1e6, 4, 1e5, 0), DCT_ALGORITHM_ALLGATHER);
  EXPECT_EQ(decide_algorithm(config, 2, 4e9, 4, limit_elements, 0), DCT_ALGORITHM_DENSE);
  config.algorithm = DCT_ALGORITHM_SPLIT;
  EXPECT_EQ(decide_algorithm(config, 2, limit_elements / 2, 4, 10, 0), DCT_ALGORITHM_SPLIT);
  EXPECT_EQ(decide_algorithm(config, 2, limit_elements + 1, 4, 10, 0), DCT_ALGORITHM_DENSE);
}

}  // namespace
