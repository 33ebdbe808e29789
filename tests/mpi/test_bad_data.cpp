// Data that misbehaves: a peer's malformed message leaves the receive buffer and the residual
// as they were, non-finite entries are sent and never poison the threshold, and gradients whose
// scale jumps keep error feedback's conservation with 16-bit values (docs/reliability.md).
#include <algorithm>
#include <cmath>
#include <limits>

#include "common.hpp"
#include "core/test_hooks.hpp"

namespace dct::test {
namespace {

constexpr float kSentinel = 42.0f;

/// Rank 0 sends its first index twice: not strictly increasing, so every receiver rejects it.
void repeat_first_index(detail::WireIndex *idx, std::size_t entries) {
  if (rank() == 0 && entries >= 2) idx[1] = idx[0];
}

TEST(BadData, PeerErrorLeavesReceiveBufferAndResidual) {
  if (size() < 2) GTEST_SKIP() << "needs a peer";
  constexpr std::size_t n = 4096;
  // With a result budget, split's and hierarchical's owners drop sums for their residuals:
  // those must not enter them when another owner rejected a block.
  const std::pair<const char *, const char *> cases[] = {
      {"allgather", "1"},        {"split", "1"},
      {"split", "0.004"},        {"hierarchical", "1"},
      {"hierarchical", "0.004"}, {"recursive_doubling", "1"}};
  for (const auto &[algorithm, result_density] : cases) {
    SCOPED_TRACE(std::string(algorithm) + ", dct_result_density " + result_density);
    std::vector<float> send = gradient<float>(n, 0), recv(n);
    MPI_Info info = make_info({{"dct_density", "0.01"},
                               {"dct_algorithm", algorithm},
                               {"dct_result_density", result_density}});
    DCT_Request request;
    ASSERT_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                 info, &request),
              DCT_SUCCESS);
    MPI_Info_free(&info);
    ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);

    const std::vector<float> before = residual_of<float>(request, n);
    overwrite(send, gradient<float>(n, 1));
    std::fill(recv.begin(), recv.end(), kSentinel);
    detail::testing::tamper_allreduce_indices = repeat_first_index;
    ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
    const int code = DCT_Wait(&request, DCT_STATUS_IGNORE);
    const std::string message = DCT_Get_last_error();
    detail::testing::tamper_allreduce_indices = nullptr;

    // allgather, split and hierarchical: every rank reads (or learns of) the bad block and
    // fails alike.
    // recursive_doubling: only the ranks that received it know (docs/reliability.md).
    if (std::string(algorithm) != "recursive_doubling") {
      EXPECT_EQ(code, DCT_ERR_PEER) << message;
    }
    int failed = code == DCT_ERR_PEER ? 1 : 0, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(any, 1);
    if (code == DCT_ERR_PEER) {
      EXPECT_NE(message.find("rank"), std::string::npos) << message;
      EXPECT_TRUE(std::all_of(recv.begin(), recv.end(), [](float v) { return v == kSentinel; }));
      // This call's contribution is back in the residual: exactly acc = send + residual.
      std::vector<float> acc(n);
      for (std::size_t i = 0; i < n; ++i) acc[i] = send[i] + before[i];
      EXPECT_TRUE(same_bits(residual_of<float>(request, n), acc));
    } else {
      EXPECT_EQ(code, DCT_SUCCESS) << message;
    }
    // Intact messages work again, on every rank.
    ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
    EXPECT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS) << DCT_Get_last_error();
    DCT_Request_free(&request);
  }
}

/// Gradient with `bad` non-finite entries on rank 0 (NaN, +Inf, -Inf in turn, spread out).
std::vector<float> with_non_finite(std::size_t n, int call, std::size_t bad) {
  std::vector<float> v = gradient<float>(n, call);
  if (rank() != 0) return v;
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (std::size_t j = 0; j < bad; ++j) v[(j * 37) % n] = specials[j % 3];
  return v;
}

bool all_finite(const std::vector<float> &v) {
  return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
}

TEST(BadData, NonFiniteEntriesAreSentAndDoNotPoisonTau) {
  constexpr std::size_t n = 1000, k = 10;  // density 0.01
  for (const char *control : {"adaptive", "fixed"}) {
    for (std::size_t bad : {std::size_t(20), std::size_t(50), std::size_t(400)}) {
      SCOPED_TRACE(std::string(control) + ", " + std::to_string(bad) + " non-finite entries");
      std::vector<float> send = with_non_finite(n, 0, bad), recv(n);
      MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_tau_control", control}});
      DCT_Request request;
      ASSERT_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                   info, &request),
                DCT_SUCCESS);
      MPI_Info_free(&info);
      DCT_Status status;
      ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
      ASSERT_EQ(DCT_Wait(&request, &status), DCT_SUCCESS) << DCT_Get_last_error();
      const std::size_t mine = rank() == 0 ? bad : 0;
      // Every non-finite entry is sent, and the k largest finite ones with them.
      EXPECT_EQ(status.nnz_sent, MPI_Count(k + mine));
      EXPECT_TRUE(std::isfinite(status.tau) && status.tau > 0) << status.tau;
      // They reach the sum (as through MPI_Allreduce) and none stays in the residual.
      EXPECT_FALSE(std::isfinite(recv[0]));  // rank 0 sent a NaN there
      EXPECT_TRUE(all_finite(residual_of<float>(request, n)));
      // The next calls, finite again, send their top k at once (not 1000 calls later).
      for (int call = 1; call <= 3; ++call) {
        overwrite(send, gradient<float>(n, call));
        ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
        ASSERT_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
        EXPECT_TRUE(std::isfinite(status.tau) && status.tau > 0) << call << ": " << status.tau;
        if (std::string(control) == "adaptive") {
          EXPECT_EQ(status.nnz_sent, MPI_Count(k)) << call;
        } else {
          EXPECT_GE(status.nnz_sent, MPI_Count(k)) << call;  // the reused tau keeps sending
        }
        EXPECT_TRUE(all_finite(recv)) << call;
      }
      DCT_Request_free(&request);
    }
  }
}

/// Sum over ranks of `mine` in double (the conservation checks' reference).
double global_sum(double mine) {
  double all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

/// Gradients whose scale jumps between calls (on every rank, or on rank 0 alone): every call
/// succeeds on every rank, and error feedback conserves the input (what was sent plus what
/// stays equals what came in, to float rounding).
TEST(BadData, ScaleJumpsWithSixteenBitValues) {
  constexpr std::size_t n = 5000;
  const double scales[] = {1.0, 1024.0, 1e-6, 1.0, 65536.0, 3e5, 1.0, 1e-3};
  for (const char *values : {"fp16", "bf16"}) {
    for (const char *control : {"adaptive", "fixed", "sampled"}) {
      for (const bool alone : {false, true}) {
        SCOPED_TRACE(std::string(values) + ", " + control + (alone ? ", rank 0 alone" : ""));
        std::vector<float> send(n), recv(n);
        const bool sampled = std::string(control) == "sampled";
        MPI_Info info = make_info({{"dct_density", "0.01"},
                                   {"dct_values", values},
                                   {"dct_tau_control", sampled ? "fixed" : control},
                                   {"dct_interval", "3"},
                                   {"dct_threshold", sampled ? "sampled" : "exact"},
                                   {"dct_sample_size", "64"}});
        DCT_Request request;
        ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                               MPI_COMM_WORLD, info, &request),
                            DCT_SUCCESS);
        MPI_Info_free(&info);
        double in = 0, out = 0;
        for (int call = 0; call < 8; ++call) {
          const double scale = alone && rank() != 0 ? 1.0 : scales[call];
          const std::vector<float> g = gradient<float>(n, call);
          for (std::size_t i = 0; i < n; ++i) send[i] = static_cast<float>(g[i] * scale);
          for (float v : send) in += v;
          ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
          ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
          for (float v : recv) out += v;
          ASSERT_TRUE(
              std::all_of(recv.begin(), recv.end(), [](float v) { return std::isfinite(v); }));
        }
        const std::vector<float> residual = residual_of<float>(request, n);
        const double kept = std::accumulate(residual.begin(), residual.end(), 0.0);
        const double total_in = global_sum(in);
        // Every rank's result is the sum of all ranks' sent entries: out is the same on each.
        EXPECT_NEAR(out, total_in - global_sum(kept), 1e-4 * 3e5 * std::sqrt(double(n)));
        DCT_Request_free(&request);
      }
    }
  }
}

}  // namespace
}  // namespace dct::test
