// DCT-DP allreduce against MPI_Allreduce and against the reference, at any rank count.
#include <algorithm>
#include <climits>

#include "common.hpp"

namespace dct::test {
namespace {

template <typename T>
class Allreduce : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Allreduce, ElementTypes);

constexpr std::size_t kCount = 10007;  // prime: no accidental alignment with anything

TYPED_TEST(Allreduce, DensityOneIsBitwiseMpiAllreduce) {
  using T = TypeParam;
  for (const char *algorithm : {"auto", "allgather", "dense", "split", "recursive_doubling"}) {
    MPI_Info info = make_info({{"dct_density", "1"}, {"dct_algorithm", algorithm}});
    std::vector<T> send(kCount), recv(kCount), inplace(kCount);
    DCT_Request request = DCT_REQUEST_NULL, inplace_request = DCT_REQUEST_NULL;
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(), MPI_SUM,
                                           MPI_COMM_WORLD, info, &request),
                        DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(MPI_IN_PLACE, inplace.data(), kCount, mpi_type<T>(),
                                           MPI_SUM, MPI_COMM_WORLD, info, &inplace_request),
                        DCT_SUCCESS);
    for (int call = 0; call < 3; ++call) {
      overwrite(send, gradient<T>(kCount, call));
      inplace = send;
      DCT_Status status;
      ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Start(&inplace_request), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Wait(&inplace_request, DCT_STATUS_IGNORE), DCT_SUCCESS);
      const std::vector<T> expected = mpi_sum(send);
      EXPECT_TRUE(same_bits(recv, expected)) << algorithm << " call " << call;

      EXPECT_TRUE(same_bits(inplace, expected)) << algorithm << " in place, call " << call;
      EXPECT_EQ(status.nnz_sent, MPI_Count(kCount));
      EXPECT_EQ(status.density, 1.0);
      EXPECT_EQ(status.bytes_sent, status.dense_bytes);
      EXPECT_EQ(status.calls, call + 1);
    }
    EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
    EXPECT_EQ(DCT_Request_free(&inplace_request), DCT_SUCCESS);
    EXPECT_EQ(request, DCT_REQUEST_NULL);
    MPI_Info_free(&info);
  }
}

TYPED_TEST(Allreduce, DropInAtDensityOneIsBitwiseMpiAllreduce) {
  using T = TypeParam;
  setenv("DCT_DENSITY", "1", 1);
  std::vector<T> recv(kCount);
  for (int call = 0; call < 2; ++call) {
    const std::vector<T> send = gradient<T>(kCount, call);
    ASSERT_EQ(
        DCT_Allreduce(send.data(), recv.data(), kCount, mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD),
        DCT_SUCCESS);
    EXPECT_TRUE(same_bits(recv, mpi_sum(send)));
  }
  unsetenv("DCT_DENSITY");
}

// Every compressed path against the reference: bitwise results and residuals.
TYPED_TEST(Allreduce, MatchesReferenceForEveryAlgorithm) {
  using T = TypeParam;
  struct Case {
    const char *algorithm;
    const char *density;
  };
  const Case cases[] = {{"allgather", "0.01"},
                        {"auto", "0.01"},
                        {"dense", "0.01"},
                        {"split", "0.01"},
                        {"auto", "0.6"},
                        {"allgather", "0.6"},
                        {"recursive_doubling", "0.01"},
                        {"split", "0.6"},
                        {"recursive_doubling", "0.6"}};
  // fixed: the paper's schedule (tau every 3 calls); adaptive (the default): for native
  // values, the exact top k of every call, which the reference gives with interval 1.
  for (const Case &c : cases)
    for (const bool fixed : {true, false}) {
      SCOPED_TRACE(std::string(c.algorithm) + " density " + c.density +
                   (fixed ? " fixed" : " adaptive"));
      MPI_Info info = make_info({{"dct_density", c.density},
                                 {"dct_algorithm", c.algorithm},
                                 {"dct_interval", "3"},
                                 {"dct_tau_control", fixed ? "fixed" : "adaptive"}});
      std::vector<T> send(kCount), recv(kCount, T(-1));
      DCT_Request request;
      ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(),
                                             MPI_SUM, MPI_COMM_WORLD, info, &request),
                          DCT_SUCCESS);
      ReferenceDct<T> reference(kCount, std::atof(c.density), fixed ? 3 : 1);
      for (int call = 0; call < 7; ++call) {
        overwrite(send, gradient<T>(kCount, call));
        const std::vector<T> sent = reference.step(send);
        DCT_Status status;
        ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
        ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
        const auto algorithm = static_cast<DCT_Algorithm>(status.algorithm);
        if (std::string(c.algorithm) != "auto") {
          EXPECT_STREQ(DCT_Algorithm_name(algorithm), c.algorithm);
        }
        // Whatever auto picked, every rank picked the same.
        EXPECT_TRUE(all_ranks(algorithm == agreed(algorithm)));
        expect_sum_of(recv, sent, algorithm, "call " + std::to_string(call));
        EXPECT_TRUE(same_bits(residual_of<T>(request, kCount), reference.residual));
        EXPECT_EQ(status.nnz_sent, MPI_Count(reference.nnz));
        EXPECT_EQ(status.tau, double(reference.tau));
        if (fixed) {
          EXPECT_EQ(status.tau_reestimated, reference.reestimated ? 1 : 0);
        }
        EXPECT_EQ(status.density, double(reference.nnz) / kCount);
        const MPI_Count peers = size() - 1;
        const MPI_Count dense = 2 * peers * MPI_Count(kCount * sizeof(T)) / size();
        EXPECT_EQ(status.dense_bytes, dense);
        const MPI_Count header = peers * kHeaderBytes;
        if (algorithm == DCT_ALGORITHM_ALLGATHER) {
          // Header and this rank's 8-byte-padded block, to P-1 peers.
          const MPI_Count nnz = MPI_Count(reference.nnz);
          const MPI_Count block = sparse_block_bytes(nnz, kCount, MPI_Count(sizeof(T)));
          EXPECT_EQ(status.bytes_sent, header + peers * block);
        } else if (algorithm == DCT_ALGORITHM_DENSE) {
          EXPECT_EQ(status.bytes_sent, header + dense);
        }
        expect_bytes_balance(status);
      }
      EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
      MPI_Info_free(&info);
    }
}

// Runs 50 compressed allreduces of `input(call)` and measures error feedback's law: what was
// delivered plus what the ranks still hold equals what was put in. Sets `worst` to the
// largest |delivered + held - inputs| over the tensor (sums in double over calls and ranks).
template <typename T, typename Input>
void conservation_gap(std::size_t n, const char *density, const char *interval, Input input,
                      double *worst) {
  MPI_Info info = make_info({{"dct_density", density}, {"dct_interval", interval}});
  std::vector<T> send(n), recv(n);
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, mpi_type<T>(), MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  std::vector<double> delivered(n, 0.0), inputs(n, 0.0);
  for (int call = 0; call < 50; ++call) {
    overwrite(send, input(call));
    for (std::size_t i = 0; i < n; ++i) inputs[i] += send[i];
    ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
    for (std::size_t i = 0; i < n; ++i) delivered[i] += recv[i];
  }
  const std::vector<T> residual = residual_of<T>(request, n);
  const std::vector<double> all_inputs = mpi_sum(inputs),
                            all_held =
                                mpi_sum(std::vector<double>(residual.begin(), residual.end()));
  *worst = 0;
  for (std::size_t i = 0; i < n; ++i)
    *worst = std::max(*worst, std::abs(delivered[i] + all_held[i] - all_inputs[i]));
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
}

// Dyadic data make every sum exact, so the law holds with equality.
TYPED_TEST(Allreduce, ErrorFeedbackConservesEveryInputOver50Calls) {
  using T = TypeParam;
  const std::size_t n = 4099;
  double worst = -1;
  conservation_gap<T>(
      n, "0.01", "10", [&](int call) { return dyadic_gradient<T>(n, call); }, &worst);
  EXPECT_EQ(worst, 0.0);
}

// On ordinary data it holds to rounding.
TYPED_TEST(Allreduce, ErrorFeedbackConservesToRoundingOnGaussianData) {
  using T = TypeParam;
  const std::size_t n = 5000;
  double worst = -1;
  conservation_gap<T>(
      n, "0.02", "7", [&](int call) { return gradient<T>(n, call, 77); }, &worst);
  EXPECT_GE(worst, 0.0);
  EXPECT_LE(worst, (sizeof(T) == 4 ? 1e-4 : 1e-12) * 50 * size());
}

// With tau fixed and inputs growing 10x per call, the kept count jumps far past the entry
// buffers' capacity: the engine grows them mid-call and collects the rest in a second pass.
TYPED_TEST(Allreduce, KeptCountFarAboveCapacityMatchesReference) {
  using T = TypeParam;
  // The fixed schedule: the tau of the first call lets most of the later, larger inputs pass.
  MPI_Info info = make_info(
      {{"dct_density", "0.001"}, {"dct_algorithm", "allgather"}, {"dct_tau_control", "fixed"}});
  std::vector<T> send(kCount), recv(kCount);
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(), MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  ReferenceDct<T> reference(kCount, 0.001, 1000);
  T scale = 1;
  for (int call = 0; call < 4; ++call, scale *= 10) {
    std::vector<T> input = gradient<T>(kCount, call);
    for (T &x : input) x *= scale;
    overwrite(send, input);
    const std::vector<T> expected = sum_in_rank_order(reference.step(send));
    DCT_Status status;
    ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
    EXPECT_EQ(status.nnz_sent, MPI_Count(reference.nnz));
    EXPECT_TRUE(same_bits(recv, expected)) << "call " << call;
    EXPECT_TRUE(same_bits(residual_of<T>(request, kCount), reference.residual));
  }
  EXPECT_GT(reference.nnz, kCount / 2);  // the last call sent most entries
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  MPI_Info_free(&info);
}

TYPED_TEST(Allreduce, PublicResidualGetterMatchesTheEngine) {
  using T = TypeParam;
  MPI_Info info = make_info({{"dct_density", "0.05"}});
  std::vector<T> send = gradient<T>(kCount, 3), recv(kCount), residual(kCount, T(7));
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(), MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  ASSERT_EQ(DCT_Request_get_residual(request, residual.data()), DCT_SUCCESS);
  EXPECT_EQ(residual, std::vector<T>(kCount, T(0)));
  ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
  EXPECT_EQ(DCT_Request_get_residual(request, residual.data()), DCT_ERR_ACTIVE);
  ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
  ASSERT_EQ(DCT_Request_get_residual(request, residual.data()), DCT_SUCCESS);
  EXPECT_TRUE(same_bits(residual, residual_of<T>(request, kCount)));
  EXPECT_EQ(DCT_Request_get_residual(request, nullptr), DCT_ERR_ARG);
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  EXPECT_EQ(DCT_Request_get_residual(request, residual.data()), DCT_ERR_REQUEST);
  MPI_Info_free(&info);
}

TYPED_TEST(Allreduce, TauIsReusedBetweenReestimationsAndReestimatedOnSchedule) {
  using T = TypeParam;
  MPI_Info info =
      make_info({{"dct_density", "0.05"}, {"dct_interval", "4"}, {"dct_tau_control", "fixed"}});
  std::vector<T> send(kCount), recv(kCount);
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(), MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  double tau = -1;
  for (int call = 0; call < 13; ++call) {
    overwrite(send, gradient<T>(kCount, call, call % 4 == 0 ? 1000 * call : 5));
    DCT_Status status;
    ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
    const bool due = call % 4 == 0;
    EXPECT_EQ(status.tau_reestimated, due ? 1 : 0) << "call " << call;
    if (due) {
      EXPECT_NE(status.tau, tau) << "call " << call;
    } else {
      EXPECT_EQ(status.tau, tau) << "call " << call;
    }
    tau = status.tau;
  }
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  MPI_Info_free(&info);
}

TYPED_TEST(Allreduce, InPlaceEqualsOutOfPlace) {
  using T = TypeParam;
  MPI_Info info = make_info({{"dct_density", "0.03"}, {"dct_interval", "2"}});
  std::vector<T> send(kCount), recv(kCount), inplace(kCount);
  DCT_Request out_of_place, in_place;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kCount, mpi_type<T>(), MPI_SUM,
                                         MPI_COMM_WORLD, info, &out_of_place),
                      DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(MPI_IN_PLACE, inplace.data(), kCount, mpi_type<T>(),
                                         MPI_SUM, MPI_COMM_WORLD, info, &in_place),
                      DCT_SUCCESS);
  for (int call = 0; call < 5; ++call) {
    overwrite(send, gradient<T>(kCount, call));
    inplace = send;
    ASSERT_ALL_RANKS_EQ(DCT_Start(&out_of_place), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&out_of_place, DCT_STATUS_IGNORE), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Start(&in_place), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&in_place, DCT_STATUS_IGNORE), DCT_SUCCESS);
    EXPECT_TRUE(same_bits(recv, inplace)) << "call " << call;
  }
  EXPECT_EQ(DCT_Request_free(&out_of_place), DCT_SUCCESS);
  EXPECT_EQ(DCT_Request_free(&in_place), DCT_SUCCESS);
  MPI_Info_free(&info);
}

TYPED_TEST(Allreduce, ZeroCountAndTinyTensors) {
  using T = TypeParam;
  EXPECT_EQ(DCT_Allreduce(nullptr, nullptr, 0, mpi_type<T>(), MPI_SUM, MPI_COMM_WORLD),
            DCT_SUCCESS);
  for (std::size_t n : {1u, 2u, 3u}) {
    std::vector<T> send(n), recv(n);
    DCT_Request request;
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, mpi_type<T>(), MPI_SUM,
                                           MPI_COMM_WORLD, MPI_INFO_NULL, &request),
                        DCT_SUCCESS);
    ReferenceDct<T> reference(n, 0.01, 1);  // the adaptive default: the top k of every call
    for (int call = 0; call < 4; ++call) {
      overwrite(send, gradient<T>(n, call));
      const std::vector<T> sent = reference.step(send);
      DCT_Status status;
      ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
      if (call == 0) {
        EXPECT_EQ(status.nnz_sent, 1);  // k = ceil(0.01 n) = 1
      }
      EXPECT_EQ(status.nnz_sent, MPI_Count(reference.nnz));
      const std::vector<T> expected =
          status.algorithm == DCT_ALGORITHM_ALLGATHER ? sum_in_rank_order(sent) : mpi_sum(sent);
      EXPECT_TRUE(same_bits(recv, expected)) << "n=" << n << " call " << call;
    }
    EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  }
}

TEST(AllreducePassthrough, OtherTypesAndOpsGoToMpiUnchanged) {
  const std::size_t n = 1001;
  std::vector<int> ints(n), int_result(n), int_expected(n);
  for (std::size_t i = 0; i < n; ++i) ints[i] = static_cast<int>(i) * (rank() + 1);
  MPI_Allreduce(ints.data(), int_expected.data(), n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(DCT_Allreduce(ints.data(), int_result.data(), n, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
            DCT_SUCCESS);
  EXPECT_EQ(int_result, int_expected);

  const std::vector<float> floats = gradient<float>(n, 3);
  std::vector<float> max_result(n), max_expected(n);
  MPI_Allreduce(floats.data(), max_expected.data(), n, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(floats.data(), max_result.data(), n, MPI_FLOAT, MPI_MAX,
                                         MPI_COMM_WORLD, MPI_INFO_NULL, &request),
                      DCT_SUCCESS);
  DCT_Status status;
  ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
  EXPECT_TRUE(same_bits(max_result, max_expected));
  EXPECT_EQ(status.algorithm, DCT_ALGORITHM_PASSTHROUGH);
  EXPECT_EQ(status.nnz_sent, MPI_Count(n));
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
}

TEST(AllreduceDropIn, StateIsKeptPerBufferAndReleasedWithTheCommunicator) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const std::size_t n = 3000;
  std::vector<float> a(n), b(n);
  const std::vector<float> send = gradient<float>(n, 0);
  for (int call = 0; call < 3; ++call)
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce(send.data(), a.data(), n, MPI_FLOAT, MPI_SUM, comm),
                        DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce(send.data(), b.data(), n, MPI_FLOAT, MPI_SUM, comm),
                      DCT_SUCCESS);
  DCT_Status status_a, status_b, status_c;
  ASSERT_EQ(DCT_Allreduce_status(a.data(), n, MPI_FLOAT, comm, &status_a), DCT_SUCCESS);
  ASSERT_EQ(DCT_Allreduce_status(b.data(), n, MPI_FLOAT, comm, &status_b), DCT_SUCCESS);
  EXPECT_EQ(status_a.calls, 3);
  EXPECT_EQ(status_b.calls, 1);
  EXPECT_EQ(status_a.total_dense_bytes, 3 * status_a.dense_bytes);
  EXPECT_EQ(DCT_Allreduce_status(a.data(), n + 1, MPI_FLOAT, comm, &status_c), DCT_ERR_ARG);

  // Freeing the communicator releases its states: a new one starts from scratch.
  MPI_Comm_free(&comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce(send.data(), a.data(), n, MPI_FLOAT, MPI_SUM, comm),
                      DCT_SUCCESS);
  ASSERT_EQ(DCT_Allreduce_status(a.data(), n, MPI_FLOAT, comm, &status_a), DCT_SUCCESS);
  EXPECT_EQ(status_a.calls, 1);
  MPI_Comm_free(&comm);
}

TEST(AllreducePersistent, RequestOutlivesItsCommunicator) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const std::size_t n = 500;
  std::vector<double> send = gradient<double>(n, 1), recv(n);
  MPI_Info info = make_info({{"dct_density", "1"}});
  DCT_Request request;
  ASSERT_EQ(
      DCT_Allreduce_init(send.data(), recv.data(), n, MPI_DOUBLE, MPI_SUM, comm, info, &request),
      DCT_SUCCESS);
  MPI_Comm_free(&comm);  // dct holds its own duplicate
  ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
  EXPECT_TRUE(same_bits(recv, mpi_sum(send)));
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  MPI_Info_free(&info);
}

TEST(AllreduceSubcommunicator, WorksOnSplitCommunicators) {
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, rank() % 2, rank(), &half);
  const std::size_t n = 2048;
  const std::vector<float> send = gradient<float>(n, 9);
  std::vector<float> recv(n);
  MPI_Info info = make_info({{"dct_density", "0.1"}, {"dct_algorithm", "allgather"}});
  DCT_Request request;
  ASSERT_EQ(
      DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, half, info, &request),
      DCT_SUCCESS);
  ReferenceDct<float> reference(n, 0.1, 1000);
  ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
  EXPECT_TRUE(same_bits(recv, sum_in_rank_order(reference.step(send), half)));
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  MPI_Info_free(&info);
  MPI_Comm_free(&half);
}

}  // namespace
}  // namespace dct::test
