// Threads (MPI_THREAD_MULTIPLE): calls on one communicator from two threads are refused with
// DCT_ERR_THREAD, never crash, and change nothing; the functions dct.h allows at any time answer
// while a thread waits inside dct; threads on different communicators all run.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "common.hpp"

namespace dct::test {
namespace {

/// Calls `call` until another thread is no longer inside dct; counts the refusals. The entry
/// is a try-lock, not a fair one: a refused caller backs off, as dct.h asks.
template <typename Call>
int retried(Call &&call, int &refused) {
  for (;;) {
    const int code = call();
    if (code != DCT_ERR_THREAD) return code;
    ++refused;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

/// The sums of `calls` calls of `threads` requests of `n` floats at density 0.01, thread t's
/// gradients seeded 100 * (t + 1), from the plain reference: expected[t][call].
std::vector<std::vector<std::vector<float>>> expected_sums(int threads, int calls, std::size_t n) {
  std::vector<std::vector<std::vector<float>>> expected(threads);
  for (int t = 0; t < threads; ++t) {
    ReferenceDct<float> reference(n, 0.01, 1);
    for (int call = 0; call < calls; ++call)
      expected[t].push_back(
          sum_in_rank_order(reference.step(gradient<float>(n, call, 100 * (t + 1)))));
  }
  return expected;
}

// Two threads, each driving its own request. Used to crash 10 runs in 12 (the in-flight list
// was shared and unlocked); now one thread's call is refused while the other is inside, the
// refused call changes nothing, and every sum is exact.
TEST(Threads, ConcurrentCallsAreRefusedNotCrashed) {
  if (!thread_multiple()) GTEST_SKIP() << "MPI without MPI_THREAD_MULTIPLE";
  constexpr int kThreads = 2, kCalls = 40;
  constexpr std::size_t n = 2048;
  // The expected sums, from the plain reference, before any thread runs.
  const auto expected = expected_sums(kThreads, kCalls, n);
  std::vector<std::vector<float>> send(kThreads, std::vector<float>(n)),
      recv(kThreads, std::vector<float>(n));
  DCT_Request requests[kThreads];
  MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_algorithm", "allgather"}});
  for (int t = 0; t < kThreads; ++t)
    ASSERT_EQ(DCT_Allreduce_init(send[t].data(), recv[t].data(), n, MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD, info, &requests[t]),
              DCT_SUCCESS);
  MPI_Info_free(&info);

  std::atomic<int> refusals{0};
  auto drive = [&](int t) {
    int refused = 0;
    for (int call = 0; call < kCalls; ++call) {
      overwrite(send[t], gradient<float>(n, call, 100 * (t + 1)));
      ASSERT_EQ(retried([&] { return DCT_Start(&requests[t]); }, refused), DCT_SUCCESS);
      int flag = 0;
      while (!flag) {
        ASSERT_EQ(
            retried([&] { return DCT_Test(&requests[t], &flag, DCT_STATUS_IGNORE); }, refused),
            DCT_SUCCESS);
        // Polling without a pause would starve the other thread (under TSan's scheduling a
        // rank's poller held the communicator while its peer's start waited: 2 million
        // refusals, no progress).
        if (!flag) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
      ASSERT_TRUE(same_bits(recv[t], expected[t][static_cast<std::size_t>(call)]))
          << "thread " << t << ", call " << call;
    }
    refusals += refused;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(drive, t);
  for (std::thread &thread : threads) thread.join();
  for (DCT_Request &request : requests) EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  // The refusal is real: a second thread entering while one is inside gets the code.
  std::printf("[rank %d] %d calls refused with DCT_ERR_THREAD\n", rank(), refusals.load());
}

TEST(Threads, ConcurrentEntryIsRefusedWithThreadError) {
  if (!thread_multiple()) GTEST_SKIP() << "MPI without MPI_THREAD_MULTIPLE";
  // A thread blocked in DCT_Wait (its peers have not started) holds dct; another thread's
  // calls are refused at once, and after the wait they work.
  std::vector<float> send(100, 1.0f), recv(100);
  DCT_Request request;
  ASSERT_EQ(DCT_Allreduce_init(send.data(), recv.data(), 100, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               MPI_INFO_NULL, &request),
            DCT_SUCCESS);
  // Rank 0 refused while waiting; then its call completes.
  while_rank0_waits(request, [&] {
    int flag = 0;
    EXPECT_EQ(DCT_Test(&request, &flag, DCT_STATUS_IGNORE), DCT_ERR_THREAD);
    EXPECT_EQ(flag, 0);
    EXPECT_NE(std::string(DCT_Get_last_error()).find("another thread"), std::string::npos);
    DCT_Request other = DCT_REQUEST_NULL;
    EXPECT_EQ(DCT_Allreduce_init(send.data(), recv.data(), 100, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                 MPI_INFO_NULL, &other),
              DCT_ERR_THREAD);
    EXPECT_EQ(other, DCT_REQUEST_NULL);
  });
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
}

/// The functions dct.h allows at any time answer while another thread waits inside dct.
TEST(Threads, AnyTimeFunctionsAnswerWhileAThreadWaits) {
  if (!thread_multiple()) GTEST_SKIP() << "MPI without MPI_THREAD_MULTIPLE";
  std::vector<float> send(100, 1.0f), recv(100);
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), 100, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, MPI_INFO_NULL, &request),
                      DCT_SUCCESS);
  while_rank0_waits(request, [] {
    for (int backend : {DCT_BACKEND_AUTO, DCT_BACKEND_KOKKOS, DCT_BACKEND_CUDA, DCT_BACKEND_HIP}) {
      int compiled = -1;
      EXPECT_EQ(DCT_Backend_compiled(backend, &compiled), DCT_SUCCESS) << DCT_Get_last_error();
      EXPECT_TRUE(compiled == 0 || compiled == 1);
    }
    int major = -1, minor = -1, patch = -1;
    EXPECT_EQ(DCT_Get_version(&major, &minor, &patch), DCT_SUCCESS);
    char text[DCT_MAX_ERROR_STRING];
    int length = 0;
    EXPECT_EQ(DCT_Error_string(DCT_ERR_THREAD, text, &length), DCT_SUCCESS);
  });
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
}

/// MPI_THREAD_MULTIPLE: threads drive requests on different communicators at once, each
/// waiting inside dct while the others run; every call succeeds (none is refused: only calls
/// on one communicator exclude each other) and every sum is the reference's.
TEST(Threads, ThreadsOnDifferentCommunicators) {
  if (!thread_multiple()) GTEST_SKIP() << "MPI without MPI_THREAD_MULTIPLE";
  constexpr int kThreads = 3, kCalls = 30;
  constexpr std::size_t n = 4096;
  const char *algorithms[kThreads] = {"allgather", "split", "recursive_doubling"};
  const auto expected = expected_sums(kThreads, kCalls, n);
  std::vector<MPI_Comm> comms(kThreads);
  std::vector<std::vector<float>> send(kThreads, std::vector<float>(n)),
      recv(kThreads, std::vector<float>(n)), dense_recv(kThreads, std::vector<float>(16));
  std::vector<float> dense_send(16, 1.0f);
  DCT_Request requests[kThreads], dense[kThreads];
  MPI_Info exact = make_info({{"dct_density", "1"}});
  for (int t = 0; t < kThreads; ++t) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_algorithm", algorithms[t]}});
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send[t].data(), recv[t].data(), n, MPI_FLOAT, MPI_SUM,
                                           comms[t], info, &requests[t]),
                        DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(dense_send.data(), dense_recv[t].data(), 16, MPI_FLOAT,
                                           MPI_SUM, comms[t], exact, &dense[t]),
                        DCT_SUCCESS);
    MPI_Info_free(&info);
  }
  MPI_Info_free(&exact);
  std::atomic<int> failures{0};
  auto drive = [&](int t) {
    for (int call = 0; call < kCalls; ++call) {
      overwrite(send[t], gradient<float>(n, call, 100 * (t + 1)));
      // Ranks take the threads' calls in different orders: each thread sleeps a little,
      // differently on every rank.
      std::this_thread::sleep_for(std::chrono::microseconds(50 * ((rank() + t + call) % 3)));
      bool ok = DCT_Start(&requests[t]) == DCT_SUCCESS && DCT_Start(&dense[t]) == DCT_SUCCESS;
      ok = ok && DCT_Wait(&requests[t], DCT_STATUS_IGNORE) == DCT_SUCCESS;
      ok = ok && DCT_Wait(&dense[t], DCT_STATUS_IGNORE) == DCT_SUCCESS;
      ok = ok && same_bits(recv[t], expected[t][static_cast<std::size_t>(call)]);
      ok = ok && dense_recv[t] == std::vector<float>(16, static_cast<float>(size()));
      if (!ok) {
        ++failures;
        std::printf("[rank %d] thread %d, call %d: %s\n", rank(), t, call, DCT_Get_last_error());
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(drive, t);
  for (std::thread &thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(DCT_Request_free(&requests[t]), DCT_SUCCESS);
    EXPECT_EQ(DCT_Request_free(&dense[t]), DCT_SUCCESS);
    MPI_Comm_free(&comms[t]);
  }
}

}  // namespace
}  // namespace dct::test
