// Reliability round 2 (issue 35): data, peers, threads and settings that misbehave end in a
// documented code on every rank, never a hang and never a wrong result. Each test names the
// defect of the red-team round it reproduced (docs/reliability.md has the table). Just over
// 400 lines: one file for the round, its tests in the table's order.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <thread>

#include "common.hpp"

namespace dct::test {
namespace {

constexpr float kUntouched = 42.0f;

/// Sum over ranks of `mine` in double (the conservation checks' reference).
double global_sum(double mine) {
  double all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

// --- 1: 16-bit values and a gradient whose scale jumps ------------------------------------

/// Gradients whose scale jumps between calls (on every rank, or on rank 0 alone): every call
/// succeeds on every rank, and error feedback conserves the input (what was sent plus what
/// stays equals what came in, to float rounding).
TEST(Misbehaviour, ScaleJumpsWithSixteenBitValues) {
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

// --- 3: compressed and density-1 requests started in different orders ----------------------

TEST(Misbehaviour, CompressedAndDenseRequestsStartedInDifferentOrders) {
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
TEST(Misbehaviour, BlockingCollectivesWhileAPeerWaits) {
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

// --- 4: the drop-in call with datatypes of the same size that differ ------------------------

TEST(Misbehaviour, DropInDatatypesThatDifferFailAlike) {
  if (size() < 2) GTEST_SKIP() << "needs a peer";
  constexpr std::size_t n = 1000;
  std::vector<float> send(n, 1.0f), recv(n, kUntouched);
  const MPI_Datatype type = rank() == 0 ? MPI_FLOAT : MPI_INT;
  const int code = DCT_Allreduce(send.data(), recv.data(), n, type, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(code, DCT_ERR_MISMATCH) << DCT_Get_last_error();
  EXPECT_TRUE(std::all_of(recv.begin(), recv.end(), [](float v) { return v == kUntouched; }));
  // The communicator works afterwards.
  EXPECT_EQ(DCT_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            DCT_SUCCESS);
}

/// sendbuf == recvbuf (erroneous in MPI, which aborted in its argument check) reduces in place
/// on every path, as compressed requests always did.
TEST(Misbehaviour, AliasedPassthroughIsInPlace) {
  std::vector<int> values(100, rank() + 1);
  const int p = size();
  ASSERT_ALL_RANKS_EQ(
      DCT_Allreduce(values.data(), values.data(), 100, MPI_INT, MPI_MAX, MPI_COMM_WORLD),
      DCT_SUCCESS);
  EXPECT_EQ(values, std::vector<int>(100, p));
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(values.data(), values.data(), 100, MPI_INT, MPI_SUM,
                                         MPI_COMM_WORLD, MPI_INFO_NULL, &request),
                      DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
  EXPECT_EQ(values, std::vector<int>(100, p * p));
  DCT_Request_free(&request);
}

// --- 9, 10: configuration values ----------------------------------------------------------

/// A DCT_* variable is only the default of an absent MPI_Info key, and only of the collectives
/// it acts on.
TEST(Misbehaviour, VariablesAreDefaultsOfAbsentKeysOnly) {
  constexpr std::size_t n = 256;
  std::vector<float> send(n, 1.0f), recv(n);
  const auto init = [&](MPI_Info info) {
    DCT_Request request = DCT_REQUEST_NULL;
    const int code = DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                        MPI_COMM_WORLD, info, &request);
    if (request != DCT_REQUEST_NULL) DCT_Request_free(&request);
    return code;
  };
  setenv("DCT_DENSITY", "bogus", 1);
  MPI_Info info = make_info({{"dct_density", "0.5"}});
  EXPECT_EQ(init(info), DCT_SUCCESS) << DCT_Get_last_error();
  MPI_Info_free(&info);
  EXPECT_EQ(init(MPI_INFO_NULL), DCT_ERR_INFO);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("DCT_DENSITY"), std::string::npos);
  unsetenv("DCT_DENSITY");
  // Variables of DCT-MP, of the interposer and of the drop-in call: not DCT_Allreduce_init's.
  for (const char *name : {"DCT_KEEP", "DCT_ROW_LENGTH", "DCT_PMPI", "DCT_PMPI_MIN_COUNT",
                           "DCT_PMPI_REPORT", "DCT_DROP_IN_LIMIT", "DCT_ERROR_BOUND"}) {
    setenv(name, "bogus", 1);
    EXPECT_EQ(init(MPI_INFO_NULL), DCT_SUCCESS) << name << ": " << DCT_Get_last_error();
    unsetenv(name);
  }
  // DCT-MP reads its own: a bad DCT_KEEP fails DCT_Alltoallv_init, naming it.
  setenv("DCT_KEEP", "bogus", 1);
  const int p = size();
  std::vector<int> counts(p, 8), displs(p);
  for (int r = 0; r < p; ++r) displs[r] = 8 * r;
  std::vector<float> mp_send(8 * p, 1.0f), mp_recv(8 * p);
  DCT_Request mp = DCT_REQUEST_NULL;
  EXPECT_EQ(DCT_Alltoallv_init(mp_send.data(), counts.data(), displs.data(), mp_recv.data(),
                               counts.data(), displs.data(), MPI_FLOAT, MPI_COMM_WORLD,
                               MPI_INFO_NULL, &mp),
            DCT_ERR_INFO);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("DCT_KEEP"), std::string::npos);
  unsetenv("DCT_KEEP");
}

/// Numbers are read one way: out of range or with white space on either side, refused.
TEST(Misbehaviour, NumbersAreReadOneWay) {
  constexpr std::size_t n = 256;
  std::vector<float> send(n, 1.0f), recv(n);
  const std::pair<const char *, const char *> refused[] = {
      {"dct_group_size", "4294967298"}, {"dct_group_size", "2147483648"},
      {"dct_density", " 0.5"},          {"dct_density", "0.5 "},
      {"dct_density", "\t0.5"},         {"dct_interval", " 3"},
      {"dct_momentum", " 0.9"},         {"dct_alpha_us", " 2"},
      {"dct_sample_size", "+ 5"}};
  for (const auto &[key, value] : refused) {
    SCOPED_TRACE(std::string(key) + "='" + value + "'");
    MPI_Info info = make_info({{key, value}});
    DCT_Request request = DCT_REQUEST_NULL;
    EXPECT_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                 info, &request),
              DCT_ERR_INFO);
    EXPECT_EQ(request, DCT_REQUEST_NULL);
    MPI_Info_free(&info);
  }
}

// --- 11, 12: threads ----------------------------------------------------------------------

/// The functions dct.h allows at any time answer while another thread waits inside dct.
TEST(Misbehaviour, AnyTimeFunctionsAnswerWhileAThreadWaits) {
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
TEST(Misbehaviour, ThreadsOnDifferentCommunicators) {
  if (!thread_multiple()) GTEST_SKIP() << "MPI without MPI_THREAD_MULTIPLE";
  constexpr int kThreads = 3, kCalls = 30;
  constexpr std::size_t n = 4096;
  const char *algorithms[kThreads] = {"allgather", "split", "recursive_doubling"};
  std::vector<std::vector<std::vector<float>>> expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    ReferenceDct<float> reference(n, 0.01, 1);
    for (int call = 0; call < kCalls; ++call)
      expected[t].push_back(
          sum_in_rank_order(reference.step(gradient<float>(n, call, 100 * (t + 1)))));
  }
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
