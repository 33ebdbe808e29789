// Over 450 lines: every algorithm against the same table of data shapes.
// The sparse allreduce algorithms against each other and the reference, on the data shapes
// that break sparse collectives (empty, uneven, identical and disjoint contributions, fill-in),
// and nonblocking completion in any order. Registered at 1 to 8 ranks.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "common.hpp"
#include "core/comm_context.hpp"
#include "core/cost_model.hpp"
#include "dp/allreduce.hpp"

namespace dct::test {
namespace {

constexpr std::array<const char *, 5> kAlgorithms = {"allgather", "split", "hierarchical",
                                                     "recursive_doubling", "dense"};

/// The algorithm a call of `requested` runs here: hierarchical needs a group size in (1, P)
/// dividing P (4, 6 and 8 ranks in this suite), else it runs split.
std::string expected_algorithm(const std::string &requested) {
  if (requested != "hierarchical") return requested;
  return dct::detail::hierarchy_group_size(size(), 0, 0) > 0 ? "hierarchical" : "split";
}
constexpr std::size_t kCount = 4099;

/// Dyadic values (sums exact in any order) on the positions `where(i)` selects.
template <typename T, typename Where>
std::vector<T> shaped(int call, Where where) {
  std::vector<T> v = dyadic_gradient<T>(kCount, call);
  for (std::size_t i = 0; i < kCount; ++i)
    if (!where(i)) v[i] = T(0);
  return v;
}

struct Shape {
  const char *name;
  const char *density;
  std::function<bool(std::size_t)> where;
};

std::vector<Shape> shapes() {
  const std::size_t r = static_cast<std::size_t>(rank()), p = static_cast<std::size_t>(size());
  return {
      {"everywhere", "0.05", [](std::size_t) { return true; }},
      {"uneven, rank 0 empty", "0.05", [=](std::size_t i) { return i < r * kCount / p; }},
      {"one rank only", "0.05", [=](std::size_t) { return r + 1 == p; }},
      {"all-equal indices", "0.05", [](std::size_t i) { return i % 97 == 0; }},
      {"disjoint indices", "0.05", [=](std::size_t i) { return i % p == r; }},
      {"fill-in", "0.4", [](std::size_t) { return true; }},
      {"nothing anywhere", "0.05", [](std::size_t) { return false; }},
  };
}

/// Error feedback's invariant over all ranks: what was delivered plus what every rank's residual
/// still holds equals every input, exactly (dyadic data, sums in double).
template <typename T>
void expect_conservation(DCT_Request request, const std::vector<double> &delivered,
                         const std::vector<double> &inputs) {
  const std::vector<T> residual = residual_of<T>(request, kCount);
  std::vector<double> held(residual.begin(), residual.end()), all_held(kCount), all_inputs(kCount);
  MPI_Allreduce(held.data(), all_held.data(), int(kCount), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(inputs.data(), all_inputs.data(), int(kCount), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  for (std::size_t i = 0; i < kCount; ++i)
    ASSERT_EQ(delivered[i] + all_held[i], all_inputs[i]) << "element " << i;
}

template <typename T>
class Algorithms : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Algorithms, ElementTypes);

// With exact sums every algorithm must deliver exactly the reference's sum.
TYPED_TEST(Algorithms, EveryAlgorithmDeliversTheExactSumOnEveryShape) {
  using T = TypeParam;
  for (const Shape &shape : shapes()) {
    for (const char *algorithm : kAlgorithms) {
      SCOPED_TRACE(std::string(algorithm) + " on " + shape.name);
      MPI_Info info = make_info({{"dct_density", shape.density},
                                 {"dct_algorithm", algorithm},
                                 {"dct_interval", "2"},
                                 {"dct_tau_control", "fixed"}});
      std::vector<T> send(kCount), recv(kCount, T(-7));
      DCT_Request request;
      ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(),
                                             MPI_SUM, MPI_COMM_WORLD, info, &request),
                          DCT_SUCCESS);
      ReferenceDct<T> reference(kCount, std::atof(shape.density), 2);
      for (int call = 0; call < 3; ++call) {
        overwrite(send, shaped<T>(call, shape.where));
        const std::vector<T> sent = reference.step(send);
        DCT_Status status;
        ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
        ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
        EXPECT_EQ(DCT_Algorithm_name(status.algorithm), expected_algorithm(algorithm));
        EXPECT_TRUE(all_ranks(same_bits(recv, sum_in_rank_order(sent))))
            << "call " << call << ": not the exact sum on some rank";
        EXPECT_TRUE(same_bits(residual_of<T>(request, kCount), reference.residual));
        EXPECT_EQ(status.nnz_sent, MPI_Count(reference.nnz));
        expect_bytes_balance(status);
      }
      EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
      MPI_Info_free(&info);
    }
  }
}

// dct_values=fp16/bf16: every algorithm delivers the same sum on every rank, the rounding error
// stays in the sender's residual (conservation exact on dyadic data with more bits than 16-bit
// floats hold), and allgather's blocks carry 2-byte values.
TYPED_TEST(Algorithms, SixteenBitValuesConserveEveryInputExactly) {
  using T = TypeParam;
  for (const char *values : {"fp16", "bf16"}) {
    for (const char *algorithm : kAlgorithms) {
      SCOPED_TRACE(std::string(algorithm) + " with " + values);
      MPI_Info info = make_info({{"dct_density", "0.05"},
                                 {"dct_values", values},
                                 {"dct_algorithm", algorithm},
                                 {"dct_interval", "3"}});
      std::vector<T> send(kCount), recv(kCount);
      DCT_Request request;
      ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(),
                                             MPI_SUM, MPI_COMM_WORLD, info, &request),
                          DCT_SUCCESS);
      MPI_Info_free(&info);
      std::vector<double> delivered(kCount, 0.0), inputs(kCount, 0.0);
      for (int call = 0; call < 6; ++call) {
        overwrite(send, dyadic_gradient<T>(kCount, call));
        for (std::size_t i = 0; i < kCount; ++i) inputs[i] += double(send[i]);
        DCT_Status status;
        ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
        ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
        for (std::size_t i = 0; i < kCount; ++i) delivered[i] += double(recv[i]);
        std::vector<T> first(recv);
        MPI_Bcast(first.data(), int(kCount * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
        EXPECT_TRUE(all_ranks(same_bits(recv, first))) << "call " << call;
        if (status.algorithm == DCT_ALGORITHM_ALLGATHER && size() > 1) {
          const MPI_Count nnz = status.nnz_sent;
          const MPI_Count block = sparse_block_bytes(nnz, kCount, 2);
          EXPECT_EQ(status.bytes_sent, (size() - 1) * (kHeaderBytes + block));
        }
        expect_bytes_balance(status);
      }
      expect_conservation<T>(request, delivered, inputs);
      EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
    }
  }
}

// dct_values=sign: every algorithm delivers the same sum on every rank; each rank's kept
// entries travel as +-m, m the mean magnitude of its kept values, and acc - (+-m) stays in its
// residual, so conservation holds to one rounding per entry; allgather's blocks carry one
// magnitude and one bit per entry.
TYPED_TEST(Algorithms, SignValuesCarryOneMagnitudePerRankAndConserveTheRest) {
  using T = TypeParam;
  for (const char *algorithm : kAlgorithms) {
    SCOPED_TRACE(std::string(algorithm) + " with sign");
    MPI_Info info =
        make_info({{"dct_density", "0.05"}, {"dct_values", "sign"}, {"dct_algorithm", algorithm}});
    std::vector<T> send(kCount), recv(kCount);
    DCT_Request request;
    ASSERT_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(), MPI_SUM,
                                 MPI_COMM_WORLD, info, &request),
              DCT_SUCCESS);
    MPI_Info_free(&info);
    std::vector<double> delivered(kCount, 0.0), inputs(kCount, 0.0);
    double scale = 0;
    for (int call = 0; call < 6; ++call) {
      overwrite(send, dyadic_gradient<T>(kCount, call));
      for (std::size_t i = 0; i < kCount; ++i) {
        inputs[i] += double(send[i]);
        scale = std::max(scale, std::fabs(inputs[i]));
      }
      DCT_Status status;
      ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
      ASSERT_EQ(DCT_Wait(&request, &status), DCT_SUCCESS) << DCT_Get_last_error();
      for (std::size_t i = 0; i < kCount; ++i) delivered[i] += double(recv[i]);
      std::vector<T> first(recv);
      MPI_Bcast(first.data(), int(kCount * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
      EXPECT_TRUE(all_ranks(same_bits(recv, first))) << "call " << call;
      if (size() == 1) {  // the sum is this rank's block: one magnitude
        T magnitude = T(0);
        for (T v : recv)
          if (v != T(0)) {
            if (magnitude == T(0)) magnitude = std::fabs(v);
            EXPECT_EQ(std::fabs(v), magnitude) << "call " << call;
          }
        EXPECT_GT(magnitude, T(0));
      }
      if (status.algorithm == DCT_ALGORITHM_ALLGATHER && size() > 1 && status.nnz_sent > 0) {
        const MPI_Count nnz = status.nnz_sent;
        // [magnitude][one bit per entry][indices], padded to 8 bytes
        const MPI_Count exact =
            (MPI_Count(sizeof(T)) + (nnz + 7) / 8 + sparse_index_bytes(nnz, kCount) + 7) / 8 * 8;
        EXPECT_EQ(status.bytes_sent, (size() - 1) * (kHeaderBytes + exact));
      }
      expect_bytes_balance(status);
    }
    // Conservation to rounding: every input is delivered or held in some rank's residual.
    const std::vector<T> residual = residual_of<T>(request, kCount);
    std::vector<double> held(residual.begin(), residual.end()), all_held(kCount),
        all_inputs(kCount);
    MPI_Allreduce(held.data(), all_held.data(), int(kCount), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(inputs.data(), all_inputs.data(), int(kCount), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    const double tolerance = 64 * size() * std::numeric_limits<T>::epsilon() * (scale + 1);
    for (std::size_t i = 0; i < kCount; ++i)
      ASSERT_NEAR(delivered[i] + all_held[i], all_inputs[i], tolerance) << "element " << i;
    EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  }
}

// dct_threshold=sampled: tau from a sample of dct_sample_size entries; the achieved density
// stays within the documented band (4 standard deviations of a sample quantile).
TEST(SampledThreshold, AchievedDensityIsWithinTheDocumentedBand) {
  const std::size_t n = 1 << 18;
  const double density = 0.01, m = 4096;
  MPI_Info info = make_info({{"dct_density", "0.01"},
                             {"dct_threshold", "sampled"},
                             {"dct_sample_size", "4096"},
                             {"dct_interval", "1"},
                             {"dct_tau_control", "fixed"}});
  std::vector<float> send(n), recv(n);
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  const double band = 4 * std::sqrt((1 - density) / (density * m));
  bool estimated = false;  // the exact selection would keep exactly n / 100 on every call
  for (int call = 0; call < 5; ++call) {
    overwrite(send, gradient<float>(n, call));
    DCT_Status status;
    ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
    EXPECT_EQ(status.tau_reestimated, 1);
    EXPECT_NEAR(status.density / density, 1.0, band) << "call " << call;
    estimated |= status.density != double(std::size_t(density * n) + 1) / n;
  }
  EXPECT_TRUE(estimated) << "every tau was exact: the sample was not used";
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
}

// When every rank sends the same k indices, split moves about 2k entries per rank: within
// 1.5x of the 2k(P-1)/P lower bound (plus headers) once the segments are balanced.
TEST(AlgorithmTraffic, SplitIsNearTheVolumeBoundWhenIndicesCoincide) {
  const std::size_t n = 1 << 16;
  MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_algorithm", "split"}});
  std::vector<float> send(n), recv(n);
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  DCT_Status status;
  for (int call = 0; call < 2; ++call) {  // the second call reuses the balanced segments
    for (std::size_t i = 0; i < n; ++i)
      send[i] = i % 100 == 0 ? float(1 + rank() + call) : 1e-6f * float(i % 7);
    ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
  }
  const double p = size(), k = double(status.nnz_sent);
  const double bound = 2 * k * 8 * (p - 1) / p;
  const double headers = (p - 1) * (kHeaderBytes + 8 + 8 + 3 * 8);
  EXPECT_LE(double(status.bytes_received), 1.5 * bound + headers)
      << "k = " << k << ", received " << status.bytes_received;
  EXPECT_EQ(status.tau_reestimated, 0);
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  MPI_Info_free(&info);
}

// dct_result_density: split's owners keep only the largest sums and move the rest into their
// residuals. The result is bounded, identical on all ranks, and error feedback still conserves
// every input exactly (dyadic data).
TYPED_TEST(Algorithms, ResultDensityBoundsTheSumAndConservesEveryInput) {
  using T = TypeParam;
  for (const char *algorithm : {"split", "hierarchical", "auto"}) {
    SCOPED_TRACE(algorithm);
    MPI_Info info = make_info({{"dct_density", "0.05"},
                               {"dct_result_density", "0.02"},
                               {"dct_algorithm", algorithm},
                               {"dct_interval", "3"}});
    std::vector<T> send(kCount), recv(kCount);
    DCT_Request request;
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(), MPI_SUM,
                                           MPI_COMM_WORLD, info, &request),
                        DCT_SUCCESS);
    MPI_Info_free(&info);
    std::vector<double> delivered(kCount, 0.0), inputs(kCount, 0.0);
    const std::size_t budget = (kCount * 2 + 99) / 100;
    for (int call = 0; call < 10; ++call) {
      overwrite(send, dyadic_gradient<T>(kCount, call));
      for (std::size_t i = 0; i < kCount; ++i) inputs[i] += double(send[i]);
      DCT_Status status;
      ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
      // auto: hierarchical is a candidate from 16 ranks only.
      EXPECT_EQ(DCT_Algorithm_name(status.algorithm),
                expected_algorithm(std::string(algorithm) == "auto" ? "split" : algorithm));
      std::size_t nonzeros = 0;
      for (std::size_t i = 0; i < kCount; ++i) {
        delivered[i] += double(recv[i]);
        nonzeros += recv[i] != T(0);
      }
      // Each owner rounds its share up (hierarchical: each super-segment's too), and ties at
      // its threshold are all kept.
      EXPECT_LE(nonzeros, budget + budget / 2 + 2 * std::size_t(size())) << "call " << call;
      std::vector<T> first(recv);
      MPI_Bcast(first.data(), int(kCount * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
      EXPECT_TRUE(all_ranks(same_bits(recv, first)));
    }
    expect_conservation<T>(request, delivered, inputs);
    EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  }
  // Only split and hierarchical can bound the result.
  MPI_Info info = make_info({{"dct_result_density", "0.5"}, {"dct_algorithm", "allgather"}});
  std::vector<T> buffer(8);
  DCT_Request request = DCT_REQUEST_NULL;
  EXPECT_EQ(DCT_Allreduce_init(MPI_IN_PLACE, buffer.data(), 8, mpi_type<T>(), MPI_SUM,
                               MPI_COMM_WORLD, info, &request),
            DCT_ERR_INFO);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("dct_result_density"), std::string::npos);
  EXPECT_EQ(request, DCT_REQUEST_NULL);
  MPI_Info_free(&info);
}

// Tensors shorter than the ranks: most segments (and hierarchical's super-segments) are empty,
// and the sums must still be exact on every rank.
TEST(Hierarchical, TinyTensorsLeaveSegmentsEmpty) {
  for (const char *algorithm : {"split", "hierarchical"}) {
    for (std::size_t n : {1u, 2u, 3u, 5u}) {
      SCOPED_TRACE(std::string(algorithm) + ", n = " + std::to_string(n));
      std::vector<float> send(n), recv(n);
      MPI_Info info = make_info({{"dct_algorithm", algorithm}, {"dct_density", "0.01"}});
      DCT_Request request;
      ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                             MPI_COMM_WORLD, info, &request),
                          DCT_SUCCESS);
      MPI_Info_free(&info);
      ReferenceDct<float> reference(n, 0.01, 1);
      for (int call = 0; call < 3; ++call) {
        overwrite(send, dyadic_gradient<float>(n, call));
        const std::vector<float> sent = reference.step(send);
        DCT_Status status;
        ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
        ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
        EXPECT_EQ(DCT_Algorithm_name(status.algorithm), expected_algorithm(algorithm));
        EXPECT_TRUE(all_ranks(same_bits(recv, sum_in_rank_order(sent)))) << "call " << call;
      }
      EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
    }
  }
}

// dct_group_size: groups of that many consecutive ranks (here the one that is not the default
// nearest sqrt(P)), exact sums with density 1 in the tensor's dyadic values; a size that does
// not divide the ranks is refused on every rank, naming the key.
TEST(Hierarchical, GroupSizeSetsTheGroupsAndMustDivideTheRanks) {
  const int p = size();
  DCT_Request request = DCT_REQUEST_NULL;
  std::vector<float> send(kCount), recv(kCount);
  MPI_Info refused = make_info(
      {{"dct_algorithm", "hierarchical"}, {"dct_group_size", std::to_string(p + 1).c_str()}});
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, refused, &request),
                      DCT_ERR_INFO);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("dct_group_size"), std::string::npos);
  MPI_Info_free(&refused);
  if (p != 8) GTEST_SKIP() << "groups of 4 need 8 ranks";
  MPI_Info info = make_info({{"dct_algorithm", "hierarchical"},
                             {"dct_group_size", "4"},
                             {"dct_density", "0.05"},
                             {"dct_interval", "2"},
                             {"dct_tau_control", "fixed"}});
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  ReferenceDct<float> reference(kCount, 0.05, 2);
  for (int call = 0; call < 3; ++call) {
    overwrite(send, dyadic_gradient<float>(kCount, call));
    const std::vector<float> sent = reference.step(send);
    DCT_Status status;
    ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
    EXPECT_EQ(status.algorithm, DCT_ALGORITHM_HIERARCHICAL);
    EXPECT_TRUE(all_ranks(same_bits(recv, sum_in_rank_order(sent)))) << "call " << call;
    EXPECT_TRUE(same_bits(residual_of<float>(request, kCount), reference.residual));
  }
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
}

/// Two persistent requests on one communicator, with their own data and reference.
template <typename T>
struct InFlightPair {
  InFlightPair(const char *algorithm_a, const char *algorithm_b, const char *density_b = "0.02")
      : send{std::vector<T>(kCount), std::vector<T>(2 * kCount + 1)},
        recv{std::vector<T>(kCount), std::vector<T>(2 * kCount + 1)},
        // The adaptive default: for native values the top k of every call (interval 1).
        reference{ReferenceDct<T>(kCount, 0.05, 1),
                  ReferenceDct<T>(2 * kCount + 1, std::atof(density_b), 1)} {
    const char *algorithms[2] = {algorithm_a, algorithm_b};
    const char *densities[2] = {"0.05", density_b};
    for (int i = 0; i < 2; ++i) {
      MPI_Info info = make_info({{"dct_density", densities[i]}, {"dct_algorithm", algorithms[i]}});
      EXPECT_EQ(DCT_Allreduce_init(send[i].data(), recv[i].data(), send[i].size(), mpi_type<T>(),
                                   MPI_SUM, MPI_COMM_WORLD, info, &requests[i]),
                DCT_SUCCESS);
      MPI_Info_free(&info);
    }
  }
  ~InFlightPair() {
    for (DCT_Request &r : requests) EXPECT_EQ(DCT_Request_free(&r), DCT_SUCCESS);
  }
  void start_both(int call) {
    for (int i = 0; i < 2; ++i) {
      overwrite(send[i], dyadic_gradient<T>(send[i].size(), call + 10 * i));
      sent[i] = reference[i].step(send[i]);
      ASSERT_ALL_RANKS_EQ(DCT_Start(&requests[i]), DCT_SUCCESS);
    }
  }
  void check() {
    for (int i = 0; i < 2; ++i)
      EXPECT_TRUE(all_ranks(same_bits(recv[i], sum_in_rank_order(sent[i])))) << "request " << i;
  }

  std::vector<T> send[2], recv[2], sent[2];
  ReferenceDct<T> reference[2];
  DCT_Request requests[2] = {DCT_REQUEST_NULL, DCT_REQUEST_NULL};
};

// Even ranks complete A then B, odd ranks B then A: each needs the other to progress the
// request it is not waiting for, which a per-request wait would deadlock on.
TEST(Nonblocking, TwoRequestsInFlightCompletedInEitherOrder) {
  for (const char *a : kAlgorithms) {
    for (const char *b : {"split", "recursive_doubling", "allgather"}) {
      SCOPED_TRACE(std::string(a) + " then " + b);
      InFlightPair<float> pair(a, b);
      for (int call = 0; call < 3; ++call) {
        pair.start_both(call);
        const int first = rank() % 2;
        // No rank may stop between the two waits (a rank done with its first request can be
        // needed for the other's); a failed wait completes its call, so go on to the second.
        EXPECT_EQ(DCT_Wait(&pair.requests[first], DCT_STATUS_IGNORE), DCT_SUCCESS)
            << DCT_Get_last_error();
        ASSERT_ALL_RANKS_EQ(DCT_Wait(&pair.requests[1 - first], DCT_STATUS_IGNORE), DCT_SUCCESS);
        pair.check();
      }
    }
  }
}

// An uncompressed (density 1) request is one blocking MPI_Allreduce: it must still not
// deadlock against a compressed one waited for in the opposite order.
TEST(Nonblocking, BlockingDensityOneRequestAmongCompressedOnes) {
  std::vector<double> send(kCount), recv(kCount);
  MPI_Info info = make_info({{"dct_density", "1"}});
  DCT_Request exact;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, MPI_DOUBLE, MPI_SUM,
                                         MPI_COMM_WORLD, info, &exact),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  InFlightPair<double> pair("split", "recursive_doubling");
  for (int call = 0; call < 3; ++call) {
    overwrite(send, gradient<double>(kCount, call));
    // Start order (the same on every rank): compressed, exact, compressed.
    ASSERT_ALL_RANKS_EQ(DCT_Start(&pair.requests[0]), DCT_SUCCESS);
    overwrite(pair.send[0], dyadic_gradient<double>(kCount, call));
    ASSERT_ALL_RANKS_EQ(DCT_Start(&exact), DCT_SUCCESS);
    pair.send[1].assign(pair.send[1].size(), 0.0);
    ASSERT_ALL_RANKS_EQ(DCT_Start(&pair.requests[1]), DCT_SUCCESS);
    // Opposite orders: no rank may stop (or agree) before every wait is done.
    int failed = 0;
    if (rank() % 2 == 0) {
      failed |= DCT_Wait(&exact, DCT_STATUS_IGNORE);
      DCT_Request both[2] = {pair.requests[1], pair.requests[0]};
      failed |= DCT_Waitall(2, both, DCT_STATUSES_IGNORE);
    } else {
      failed |= DCT_Waitall(2, pair.requests, DCT_STATUSES_IGNORE);
      failed |= DCT_Wait(&exact, DCT_STATUS_IGNORE);
    }
    ASSERT_ALL_RANKS_EQ(failed, DCT_SUCCESS);
    EXPECT_TRUE(same_bits(recv, mpi_sum(send)));
  }
  EXPECT_EQ(DCT_Request_free(&exact), DCT_SUCCESS);
}

// The overlap pattern of a training step: start, compute while testing, then use the result.
TEST(Nonblocking, TestProgressesUntilCompletionWhileTheRankComputes) {
  InFlightPair<float> pair("split", "recursive_doubling");
  for (int call = 0; call < 3; ++call) {
    pair.start_both(call);
    int done[2] = {0, 0};
    DCT_Status status[2];
    long polls = 0;
    volatile double work = 0;
    while (!(done[0] && done[1])) {
      for (int i = 0; i < 1000; ++i) work = work + 1e-3 * i;  // "the next layer"
      for (int i = 0; i < 2; ++i)
        if (!done[i]) {
          ASSERT_EQ(DCT_Test(&pair.requests[i], &done[i], &status[i]), DCT_SUCCESS)
              << DCT_Get_last_error();
        }
      ASSERT_LT(++polls, 10000000) << "never completed";
    }
    pair.check();
    EXPECT_EQ(status[0].algorithm, DCT_ALGORITHM_SPLIT);
    EXPECT_EQ(status[1].algorithm, DCT_ALGORITHM_RECURSIVE_DOUBLING);
    int flag = 7;
    EXPECT_EQ(DCT_Test(&pair.requests[0], &flag, DCT_STATUS_IGNORE), DCT_ERR_ACTIVE);
    EXPECT_EQ(flag, 0);
  }
}

TEST(Nonblocking, WaitallFillsEveryStatusAndSkipsNullRequests) {
  InFlightPair<float> pair("allgather", "split");
  pair.start_both(0);
  DCT_Request requests[3] = {pair.requests[0], DCT_REQUEST_NULL, pair.requests[1]};
  DCT_Status statuses[3] = {};
  ASSERT_ALL_RANKS_EQ(DCT_Waitall(3, requests, statuses), DCT_SUCCESS);
  pair.check();
  EXPECT_EQ(statuses[0].algorithm, DCT_ALGORITHM_ALLGATHER);
  EXPECT_EQ(statuses[2].algorithm, DCT_ALGORITHM_SPLIT);
  EXPECT_EQ(statuses[2].calls, 1);
  EXPECT_EQ(DCT_Waitall(-1, requests, statuses), DCT_ERR_ARG);
  EXPECT_EQ(DCT_Waitall(1, nullptr, statuses), DCT_ERR_ARG);
  int flag = 0;
  EXPECT_EQ(DCT_Test(&pair.requests[0], nullptr, DCT_STATUS_IGNORE), DCT_ERR_ARG);
  // Not started (already completed): skipped with an empty status, as MPI_Waitall does;
  // DCT_Test and DCT_Wait on it are errors. A freed handle is reported with its index.
  statuses[0].calls = 99;
  EXPECT_EQ(DCT_Waitall(1, requests, statuses), DCT_SUCCESS);
  EXPECT_EQ(statuses[0].calls, 0);
  EXPECT_EQ(DCT_Test(&pair.requests[0], &flag, DCT_STATUS_IGNORE), DCT_ERR_ACTIVE);
  DCT_Request freed = DCT_REQUEST_NULL;
  std::vector<float> buffer(4);
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(MPI_IN_PLACE, buffer.data(), 4, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, MPI_INFO_NULL, &freed),
                      DCT_SUCCESS);
  DCT_Request stale[2] = {DCT_REQUEST_NULL, freed};
  ASSERT_EQ(DCT_Request_free(&freed), DCT_SUCCESS);
  EXPECT_EQ(DCT_Waitall(2, stale, DCT_STATUSES_IGNORE), DCT_ERR_REQUEST);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("request 1"), std::string::npos);
}

// A count mismatch found in the header must fail on every rank and hang none, whatever the
// algorithm, and leave the input in the residual.
TEST(AlgorithmErrors, CountMismatchFailsOnEveryRankForEveryAlgorithm) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  for (const char *algorithm : kAlgorithms) {
    SCOPED_TRACE(algorithm);
    const std::size_t n = rank() == 0 ? 100 : 101;
    std::vector<float> send(n, 1.0f), recv(n, -3.0f);
    // Persistent requests agree on the count at init, drop-in calls at every call, before
    // anything is compressed (the configuration is agreed on at a communicator's first call,
    // of equal counts here).
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    setenv("DCT_DENSITY", "0.1", 1);
    setenv("DCT_ALGORITHM", algorithm, 1);
    std::vector<float> first(100, 1.0f);
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce(MPI_IN_PLACE, first.data(), 100, MPI_FLOAT, MPI_SUM, comm),
                        DCT_SUCCESS);
    unsetenv("DCT_DENSITY");
    unsetenv("DCT_ALGORITHM");
    EXPECT_EQ(DCT_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, comm),
              DCT_ERR_MISMATCH);
    EXPECT_EQ(recv, std::vector<float>(n, -3.0f));
    // Refused before any state was made for it: nothing of the call entered a residual.
    const auto context = detail::find_comm_context(comm);
    const detail::DropInKey key{recv.data(), MPI_Count(n), MPI_FLOAT};
    EXPECT_EQ(context->drop_in.find(key), nullptr);
    MPI_Comm_free(&comm);
  }
}

}  // namespace
}  // namespace dct::test
