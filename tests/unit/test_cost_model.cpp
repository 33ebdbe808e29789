// dct_algorithm's per-call decision (src/cost_model.hpp, decide_algorithm).
#include <gtest/gtest.h>

#include <climits>

#include "config.hpp"
#include "cost_model.hpp"

namespace {

using dct::detail::Config;
using dct::detail::decide_algorithm;

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

// GPU buffers staged through the host: every algorithm but allgather writes the n-element sum
// in host memory and copies it to the device, which the model charges (measured on an H100
// node: at 1 rank, 256 MiB, dense 229 ms against the kernels' 2 ms).
TEST(DecideAlgorithm, StagedGpuRequestsChargeTheHostResult) {
  Config config;
  const double count = 64e6, kept = 0.01 * count;
  EXPECT_EQ(decide_algorithm(config, 1, count, 4, kept, 0), DCT_ALGORITHM_DENSE);  // ties: dense
  EXPECT_EQ(decide_algorithm(config, 1, count, 4, kept, 0, true), DCT_ALGORITHM_ALLGATHER);
  EXPECT_EQ(decide_algorithm(config, 4, count, 4, 4 * kept, 0, true), DCT_ALGORITHM_ALLGATHER);
  for (int ranks : {2, 64, 1024}) {
    dct::detail::ExchangeSize size;
    size.ranks = ranks;
    size.count = count;
    size.total_kept = kept * ranks;
    const double network =
        dct::detail::predicted_seconds(DCT_ALGORITHM_SPLIT, size, config.network);
    size.host_result_seconds = count * 4 / dct::detail::kHostResultBytesPerSecond;
    EXPECT_DOUBLE_EQ(dct::detail::predicted_seconds(DCT_ALGORITHM_SPLIT, size, config.network),
                     network + size.host_result_seconds);
    const double allgather =
        dct::detail::predicted_seconds(DCT_ALGORITHM_ALLGATHER, size, config.network);
    size.host_result_seconds = 0;
    EXPECT_DOUBLE_EQ(dct::detail::predicted_seconds(DCT_ALGORITHM_ALLGATHER, size, config.network),
                     allgather);
  }
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
