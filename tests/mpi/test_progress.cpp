// Progress: requests started in different orders on different ranks each get their own sum,
// compressed or density 1 or passed through, a rank may enter dct's blocking collectives while a
// peer waits for it, and DCT_Test never waits for other ranks (docs/reliability.md).
#include <chrono>

#include "common.hpp"

namespace dct::test {
namespace {

/// Compressed requests talk on their own communicators and progress without blocking, so
/// ranks may start them in different orders; the sums stay each request's own.
TEST(Progress, CompressedRequestsStartedInDifferentOrders) {
  constexpr std::size_t n = 512;
  std::vector<float> send_a(n, 1.0f), send_b(n, 2.0f), recv_a(n), recv_b(n);
  MPI_Info info = make_info({{"dct_density", "0.5"}});
  DCT_Request a, b;
  ASSERT_EQ(DCT_Allreduce_init(send_a.data(), recv_a.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               info, &a),
            DCT_SUCCESS);
  ASSERT_EQ(DCT_Allreduce_init(send_b.data(), recv_b.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               info, &b),
            DCT_SUCCESS);
  MPI_Info_free(&info);
  DCT_Request first = rank() == 0 ? b : a, second = rank() == 0 ? a : b;
  ASSERT_EQ(DCT_Start(&first), DCT_SUCCESS);
  ASSERT_EQ(DCT_Start(&second), DCT_SUCCESS);
  DCT_Request both[] = {a, b};
  ASSERT_EQ(DCT_Waitall(2, both, DCT_STATUSES_IGNORE), DCT_SUCCESS) << DCT_Get_last_error();
  // Density 0.5 of equal entries: the kept entries sum to p * value, the others are 0.
  const float p = static_cast<float>(size());
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(recv_a[i] == 0.0f || recv_a[i] == p) << i << ": " << recv_a[i];
    ASSERT_TRUE(recv_b[i] == 0.0f || recv_b[i] == 2 * p) << i << ": " << recv_b[i];
  }
  DCT_Request_free(&a);
  DCT_Request_free(&b);
}

TEST(Progress, CompressedAndDenseRequestsStartedInDifferentOrders) {
  constexpr std::size_t n = 1 << 16;
  for (const char *algorithm : {"allgather", "split", "recursive_doubling"})
    for (const char *dense_kind : {"density 1", "passthrough"}) {
      for (const bool waitall : {false, true}) {
        SCOPED_TRACE(std::string(algorithm) + ", " + dense_kind +
                     (waitall ? ", DCT_Waitall" : ", DCT_Wait"));
        const bool passthrough = std::string(dense_kind) == "passthrough";
        std::vector<float> send_a(n, 1.0f), recv_a(n);
        std::vector<int> send_i(n, 3), recv_i(n);
        std::vector<float> send_b(n, 2.0f), recv_b(n);
        MPI_Info sparse = make_info({{"dct_density", "0.5"}, {"dct_algorithm", algorithm}});
        MPI_Info exact = make_info({{"dct_density", "1"}});
        DCT_Request a, b;
        ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send_a.data(), recv_a.data(), n, MPI_FLOAT, MPI_SUM,
                                               MPI_COMM_WORLD, sparse, &a),
                            DCT_SUCCESS);
        if (passthrough) {
          ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send_i.data(), recv_i.data(), n, MPI_INT, MPI_SUM,
                                                 MPI_COMM_WORLD, MPI_INFO_NULL, &b),
                              DCT_SUCCESS);
        } else {
          ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send_b.data(), recv_b.data(), n, MPI_FLOAT,
                                                 MPI_SUM, MPI_COMM_WORLD, exact, &b),
                              DCT_SUCCESS);
        }
        MPI_Info_free(&sparse);
        MPI_Info_free(&exact);
        for (int call = 0; call < 3; ++call) {
          DCT_Request first = rank() % 2 == 0 ? b : a, second = rank() % 2 == 0 ? a : b;
          ASSERT_ALL_RANKS_EQ(DCT_Start(&first), DCT_SUCCESS);
          ASSERT_ALL_RANKS_EQ(DCT_Start(&second), DCT_SUCCESS);
          if (waitall) {
            DCT_Request both[] = {first, second};
            ASSERT_ALL_RANKS_EQ(DCT_Waitall(2, both, DCT_STATUSES_IGNORE), DCT_SUCCESS);
          } else {
            // Each rank waits first for the request it started first (no collective between
            // the two waits: the first may need a peer's second).
            const int first_code = DCT_Wait(&first, DCT_STATUS_IGNORE);
            const int second_code = DCT_Wait(&second, DCT_STATUS_IGNORE);
            ASSERT_ALL_RANKS_EQ(first_code, DCT_SUCCESS);
            ASSERT_ALL_RANKS_EQ(second_code, DCT_SUCCESS);
          }
          const int p = size();
          if (passthrough) {
            EXPECT_EQ(recv_i, std::vector<int>(n, 3 * p));
          } else {
            EXPECT_EQ(recv_b, std::vector<float>(n, 2.0f * static_cast<float>(p)));
          }
          for (float v : recv_a)
            ASSERT_TRUE(v == 0.0f || v == static_cast<float>(p) || v == 2.0f * p);
        }
        DCT_Request_free(&a);
        DCT_Request_free(&b);
      }
    }
}

/// A rank that enters one of dct's blocking collectives (an init's agreement, a new
/// communicator's duplicates, a drop-in call, a density-1 call) while a peer still waits for
/// it to progress a compressed call started before: valid under MPI's rules for nonblocking
/// collectives, and every call completes.
TEST(Progress, BlockingCollectivesWhileAPeerWaits) {
  if (size() < 2) GTEST_SKIP() << "needs a peer";
  constexpr std::size_t n = 1 << 16;
  std::vector<float> send = gradient<float>(n, 0), recv(n), dense_send(64, 1.0f), dense_recv(64);
  MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_algorithm", "split"}});
  MPI_Info exact = make_info({{"dct_density", "1"}});
  DCT_Request compressed, dense;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, info, &compressed),
                      DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(dense_send.data(), dense_recv.data(), 64, MPI_FLOAT,
                                         MPI_SUM, MPI_COMM_WORLD, exact, &dense),
                      DCT_SUCCESS);
  const bool early = rank() == 0;  // enters the blocking collective before its wait
  const std::string steps[] = {"init", "new communicator", "drop-in", "density 1"};
  for (const std::string &step : steps) {
    SCOPED_TRACE(step);
    MPI_Comm fresh = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
    DCT_Request made = DCT_REQUEST_NULL;
    int step_code = DCT_SUCCESS, wait_code = DCT_SUCCESS;
    const auto blocking_step = [&] {
      if (step == "init" || step == "new communicator")
        step_code = DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                       step == "init" ? MPI_COMM_WORLD : fresh, info, &made);
      else if (step == "drop-in")
        step_code = DCT_Allreduce(dense_send.data(), dense_recv.data(), 64, MPI_FLOAT, MPI_SUM,
                                  MPI_COMM_WORLD);
      else
        step_code = DCT_Start(&dense) == DCT_SUCCESS ? DCT_Wait(&dense, DCT_STATUS_IGNORE)
                                                     : DCT_ERR_INTERNAL;
    };
    if (step == "density 1" && early) {
      // The density-1 call is started by every rank before the compressed one (start order
      // is the same on all ranks), and waited for first by rank 0 only.
      ASSERT_EQ(DCT_Start(&dense), DCT_SUCCESS);
      ASSERT_EQ(DCT_Start(&compressed), DCT_SUCCESS);
      step_code = DCT_Wait(&dense, DCT_STATUS_IGNORE);
      wait_code = DCT_Wait(&compressed, DCT_STATUS_IGNORE);
    } else if (step == "density 1") {
      ASSERT_EQ(DCT_Start(&dense), DCT_SUCCESS);
      step_code = DCT_Wait(&dense, DCT_STATUS_IGNORE);
      ASSERT_EQ(DCT_Start(&compressed), DCT_SUCCESS);
      wait_code = DCT_Wait(&compressed, DCT_STATUS_IGNORE);
    } else {
      ASSERT_EQ(DCT_Start(&compressed), DCT_SUCCESS);
      if (early) blocking_step();
      wait_code = DCT_Wait(&compressed, DCT_STATUS_IGNORE);
      if (!early) blocking_step();
    }
    EXPECT_EQ(step_code, DCT_SUCCESS) << DCT_Get_last_error();
    EXPECT_EQ(wait_code, DCT_SUCCESS) << DCT_Get_last_error();
    if (made != DCT_REQUEST_NULL) DCT_Request_free(&made);
    MPI_Comm_free(&fresh);
  }
  EXPECT_EQ(dense_recv, std::vector<float>(64, static_cast<float>(size())));
  MPI_Info_free(&info);
  MPI_Info_free(&exact);
  DCT_Request_free(&compressed);
  DCT_Request_free(&dense);
}

// DCT_Test never waits for other ranks on a compressed call, nor on a density-1 call queued
// behind one (dct.h, DCT_Test).
TEST(Progress, TestDoesNotWaitForPeers) {
  std::vector<float> send(1000, 1.0f), recv(1000), dense_send(10, 1.0f), dense_recv(10);
  MPI_Info exact = make_info({{"dct_density", "1"}});
  DCT_Request compressed, dense;
  ASSERT_EQ(DCT_Allreduce_init(send.data(), recv.data(), 1000, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               MPI_INFO_NULL, &compressed),
            DCT_SUCCESS);
  ASSERT_EQ(DCT_Allreduce_init(dense_send.data(), dense_recv.data(), 10, MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD, exact, &dense),
            DCT_SUCCESS);
  MPI_Info_free(&exact);
  if (rank() == 0) {
    // The peers start only after rank 0's tests returned (they wait in the barrier below).
    ASSERT_EQ(DCT_Start(&compressed), DCT_SUCCESS);
    ASSERT_EQ(DCT_Start(&dense), DCT_SUCCESS);
    for (DCT_Request *request : {&compressed, &dense}) {
      int flag = 1;
      const auto begin = std::chrono::steady_clock::now();
      EXPECT_EQ(DCT_Test(request, &flag, DCT_STATUS_IGNORE), DCT_SUCCESS);
      EXPECT_EQ(flag, 0);
      EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(2));
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    ASSERT_EQ(DCT_Start(&compressed), DCT_SUCCESS);
    ASSERT_EQ(DCT_Start(&dense), DCT_SUCCESS);
  }
  DCT_Request both[] = {compressed, dense};
  EXPECT_EQ(DCT_Waitall(2, both, DCT_STATUSES_IGNORE), DCT_SUCCESS);
  EXPECT_EQ(dense_recv, std::vector<float>(10, static_cast<float>(size())));
  DCT_Request_free(&compressed);
  DCT_Request_free(&dense);
}

}  // namespace
}  // namespace dct::test
