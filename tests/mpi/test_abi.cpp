// The ABI contract of dct.h: the versioned DCT_Status (old, new and damaged layouts, arrays in
// DCT_Waitall) and the configuration read back (DCT_Request_get_info, DCT_Comm_get_info).
#include <cstdlib>
#include <map>

#include "common.hpp"
#include "dct/dct.hpp"

namespace dct::test {
namespace {

constexpr double kSentinel = -12345.5;

/// A status of a newer dct.h: this library's fields, then one it does not know.
struct FutureStatus {
  DCT_Status known;
  double unknown_field = kSentinel;
  FutureStatus() { known.size = sizeof(FutureStatus); }
};

/// dct 0.3's DCT_Status: no header (what an old binary passes).
struct StatusOf03 {
  MPI_Count count, nnz_sent, nnz_received, bytes_sent, bytes_received, dense_bytes;
  double tau, density;
  int tau_reestimated, algorithm;
  MPI_Count calls, total_bytes_sent, total_dense_bytes;
};

/// Compressed requests of different counts, so that each status names its own request.
struct Requests {
  static constexpr int kCount = 3;
  std::vector<std::vector<float>> send, recv;
  DCT_Request handles[kCount] = {};

  Requests() {
    for (int i = 0; i < kCount; ++i) {
      send.push_back(gradient<float>(count(i), i));
      recv.emplace_back(count(i));
      MPI_Info info = make_info({{"dct_density", "0.1"}});
      EXPECT_EQ(DCT_Allreduce_init(send[i].data(), recv[i].data(), count(i), MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD, info, &handles[i]),
                DCT_SUCCESS);
      MPI_Info_free(&info);
    }
  }
  ~Requests() {
    for (DCT_Request &r : handles) DCT_Request_free(&r);
  }
  static MPI_Count count(int i) { return 1000 + 100 * i; }
  void start() {
    for (DCT_Request &r : handles) EXPECT_EQ(DCT_Start(&r), DCT_SUCCESS);
  }
};

TEST(StatusLayout, CAndCxxStatusesCarryTheHeader) {
  DCT_Status cxx;  // default-initialised: only the header has a value
  EXPECT_EQ(cxx.size, sizeof(DCT_Status));
  EXPECT_EQ(cxx.magic, DCT_STATUS_MAGIC);
  EXPECT_EQ(cxx.version, unsigned(DCT_VERSION_CODE));
  const DCT_Status c = DCT_STATUS_INITIALIZER;
  EXPECT_EQ(c.size, sizeof(DCT_Status));
  EXPECT_EQ(c.magic, DCT_STATUS_MAGIC);
  EXPECT_EQ(c.version, unsigned(DCT_VERSION_CODE));
  EXPECT_EQ(c.count, 0);
  EXPECT_EQ(c.max_abs_error, 0.0);
  EXPECT_EQ(c.nonfinite, 0);
}

TEST(StatusLayout, StatusWithoutAValidHeaderIsRefusedBeforeAnythingHappens) {
  Requests r;
  r.start();
  StatusOf03 old{};  // zeros: the bytes where 0.4's magic lies are 0
  old.count = 77;
  DCT_Status garbage;
  garbage.magic = 0;
  DCT_Status small;
  small.size = 64;
  DCT_Status odd;
  odd.size = sizeof(DCT_Status) + 4;
  EXPECT_EQ(DCT_Wait(&r.handles[0], reinterpret_cast<DCT_Status *>(&old)), DCT_ERR_ARG);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("DCT_STATUS_INITIALIZER"), std::string::npos)
      << DCT_Get_last_error();
  for (DCT_Status *bad : {reinterpret_cast<DCT_Status *>(&old), &garbage, &small, &odd}) {
    EXPECT_EQ(DCT_Wait(&r.handles[0], bad), DCT_ERR_ARG);
    int flag = -1;
    EXPECT_EQ(DCT_Test(&r.handles[0], &flag, bad), DCT_ERR_ARG);
    EXPECT_EQ(DCT_Allreduce_status(r.recv[0].data(), 10, MPI_FLOAT, MPI_COMM_WORLD, bad),
              DCT_ERR_ARG);
  }
  EXPECT_NE(std::string(DCT_Get_last_error()).find("is not a DCT_Status layout"), std::string::npos)
      << DCT_Get_last_error();
  EXPECT_EQ(old.count, 77);  // nothing was written
  // Nothing happened: every request is still started, and completes with a valid status.
  DCT_Status fine;
  ASSERT_ALL_RANKS_EQ(DCT_Wait(&r.handles[0], &fine), DCT_SUCCESS);
  EXPECT_EQ(fine.count, Requests::count(0));
  ASSERT_ALL_RANKS_EQ(DCT_Waitall(2, &r.handles[1], DCT_STATUSES_IGNORE), DCT_SUCCESS);
}

TEST(StatusLayout, NewerLayoutGetsTheKnownFieldsAndKeepsTheRest) {
  Requests r;
  r.start();
  FutureStatus future;
  ASSERT_ALL_RANKS_EQ(DCT_Wait(&r.handles[0], &future.known), DCT_SUCCESS);
  EXPECT_EQ(future.known.count, Requests::count(0));
  EXPECT_EQ(future.known.calls, 1);
  EXPECT_GT(future.known.nnz_sent, 0);
  EXPECT_EQ(future.known.size, sizeof(FutureStatus));  // the header is the caller's
  EXPECT_EQ(future.unknown_field, kSentinel);
  ASSERT_ALL_RANKS_EQ(DCT_Waitall(2, &r.handles[1], DCT_STATUSES_IGNORE), DCT_SUCCESS);
}

TEST(StatusLayout, WaitallFillsArraysOfEitherLayoutAtTheirStride) {
  Requests r;
  DCT_Status statuses[Requests::kCount];
  r.start();
  ASSERT_ALL_RANKS_EQ(DCT_Waitall(Requests::kCount, r.handles, statuses), DCT_SUCCESS);
  for (int i = 0; i < Requests::kCount; ++i) {
    EXPECT_EQ(statuses[i].count, Requests::count(i)) << i;
    EXPECT_EQ(statuses[i].calls, 1) << i;
    EXPECT_EQ(statuses[i].size, sizeof(DCT_Status)) << i;
  }

  FutureStatus futures[Requests::kCount];
  r.start();
  ASSERT_ALL_RANKS_EQ(DCT_Waitall(Requests::kCount, r.handles, &futures[0].known), DCT_SUCCESS);
  for (int i = 0; i < Requests::kCount; ++i) {
    EXPECT_EQ(futures[i].known.count, Requests::count(i)) << i;
    EXPECT_EQ(futures[i].known.calls, 2) << i;
    EXPECT_EQ(futures[i].unknown_field, kSentinel) << i;
  }

  // One bad element refuses the whole call before any request is waited for.
  DCT_Status mixed[Requests::kCount] = {};
  mixed[1].magic = 0;
  r.start();
  EXPECT_EQ(DCT_Waitall(Requests::kCount, r.handles, mixed), DCT_ERR_ARG);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("statuses[1]"), std::string::npos)
      << DCT_Get_last_error();
  EXPECT_EQ(mixed[0].count, 0);
  ASSERT_ALL_RANKS_EQ(DCT_Waitall(Requests::kCount, r.handles, statuses), DCT_SUCCESS);
  EXPECT_EQ(statuses[2].calls, 3);
}

/// Every key of `info` and its value; frees `info`.
std::map<std::string, std::string> entries(MPI_Info info) {
  std::map<std::string, std::string> all;
  int nkeys = 0;
  MPI_Info_get_nkeys(info, &nkeys);
  for (int i = 0; i < nkeys; ++i) {
    char key[MPI_MAX_INFO_KEY + 1] = {}, value[MPI_MAX_INFO_VAL + 1] = {};
    int found = 0;
    MPI_Info_get_nthkey(info, i, key);
    MPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &found);
    all[key] = value;
  }
  MPI_Info_free(&info);
  return all;
}

std::map<std::string, std::string> request_info(DCT_Request request) {
  MPI_Info info = MPI_INFO_NULL;
  EXPECT_EQ(DCT_Request_get_info(request, &info), DCT_SUCCESS) << DCT_Get_last_error();
  return info == MPI_INFO_NULL ? std::map<std::string, std::string>{} : entries(info);
}

/// The C++ layer's dct::Info hands its keys to a request, which reads them back.
TEST(GetInfo, CxxInfoConfiguresARequest) {
  std::vector<float> send(300), recv(300);
  dct::Info info;
  info.set("dct_density", "0.02").set("dct_algorithm", "allgather");
  dct::AllreduceRequest request(send.data(), recv.data(), send.size(), MPI_COMM_WORLD, info.get());
  std::map<std::string, std::string> used = request_info(request.handle());
  EXPECT_EQ(used["dct_density"], "0.02");
  EXPECT_EQ(used["dct_algorithm"], "allgather");
}

TEST(GetInfo, RequestShowsEveryValueInForceAndCreatesItsTwin) {
  setenv("DCT_INTERVAL", "7", 1);  // a value from the environment shows too
  std::vector<double> send(500), recv(500);
  MPI_Info info =
      make_info({{"dct_density", "0.05"}, {"dct_algorithm", "split"}, {"dct_error_bound", "0.2"}});
  DCT_Request request, twin;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), 500, MPI_DOUBLE, MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  unsetenv("DCT_INTERVAL");
  std::map<std::string, std::string> used = request_info(request);
  EXPECT_EQ(used["dct_density"], "0.05");
  EXPECT_EQ(used["dct_algorithm"], "split");
  EXPECT_EQ(used["dct_interval"], "7");
  EXPECT_EQ(used["dct_tau_control"], "adaptive");
  EXPECT_EQ(used["dct_values"], "native");
  EXPECT_EQ(used["dct_restart"], "strict");
  EXPECT_EQ(used["dct_beta_gbps"], "12.5");
  EXPECT_EQ(used["dct_group_size"], "0");
  EXPECT_EQ(used["dct_name"].rfind("allreduce.", 0), 0u) << used["dct_name"];  // its default
  EXPECT_EQ(used.count("dct_keep"), 0u);  // DCT-MP's keys do not act on an allreduce
  EXPECT_EQ(used.count("dct_error_bound"), 0u);
  EXPECT_EQ(used["dct_density_warmup"], "1,0");  // off
  EXPECT_EQ(used["dct_momentum_result"], "update");
  EXPECT_EQ(used["dct_transport"], "auto");
  EXPECT_EQ(used.size(), 18u);

  // The info read back creates a request whose configuration reads back the same.
  MPI_Info again = MPI_INFO_NULL;
  ASSERT_EQ(DCT_Request_get_info(request, &again), DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), 500, MPI_DOUBLE, MPI_SUM,
                                         MPI_COMM_WORLD, again, &twin),
                      DCT_SUCCESS);
  MPI_Info_free(&again);
  EXPECT_EQ(request_info(twin), used);

  MPI_Info none = MPI_INFO_NULL;
  EXPECT_EQ(DCT_Request_get_info(request, nullptr), DCT_ERR_ARG);
  DCT_Request freed = twin;
  DCT_Request_free(&twin);
  EXPECT_EQ(DCT_Request_get_info(freed, &none), DCT_ERR_REQUEST);
  EXPECT_EQ(none, MPI_INFO_NULL);
  DCT_Request_free(&request);
}

TEST(GetInfo, AlltoallvRequestsShowDctMpKeys) {
  const int p = size(), d = 10;
  std::vector<int> counts(p, 2 * d), displs(p);
  for (int j = 0; j < p; ++j) displs[j] = 2 * d * j;
  std::vector<float> x(2 * d * p, 1.0f), y(x.size()), gx(x.size()), gy(x.size());
  MPI_Info info = make_info({{"dct_row_length", "10"}, {"dct_keep", "0.3"}});
  DCT_Request forward, backward;
  ASSERT_ALL_RANKS_EQ(
      DCT_Alltoallv_init(x.data(), counts.data(), displs.data(), y.data(), counts.data(),
                         displs.data(), MPI_FLOAT, MPI_COMM_WORLD, info, &forward),
      DCT_SUCCESS);
  MPI_Info_free(&info);
  ASSERT_EQ(DCT_Alltoallv_backward_init(forward, gy.data(), counts.data(), displs.data(), gx.data(),
                                        counts.data(), displs.data(), &backward),
            DCT_SUCCESS);
  std::map<std::string, std::string> used = request_info(forward);
  EXPECT_EQ(used["dct_row_length"], "10");
  EXPECT_EQ(used["dct_keep"], "0.3");
  EXPECT_EQ(used["dct_mp_compressor"], "topk");
  EXPECT_EQ(used["dct_error_bound"], "0.01");
  EXPECT_EQ(used["dct_backward_error_bound"], "none");
  EXPECT_EQ(used.count("dct_density"), 0u);
  EXPECT_EQ(used.count("dct_restart"), 0u);  // DCT-MP never restarts on other rank counts
  EXPECT_EQ(used["dct_name"].rfind("alltoallv.", 0), 0u) << used["dct_name"];  // its default
  // The forward's configuration, under the backward's own name.
  std::map<std::string, std::string> expected = used;
  expected["dct_name"] = used["dct_name"] + ".backward";
  EXPECT_EQ(request_info(backward), expected);
  DCT_Request_free(&backward);
  DCT_Request_free(&forward);
}

TEST(GetInfo, CommShowsTheDropInConfigurationAgreedAtItsFirstCall) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  setenv("DCT_DENSITY", "0.02", 1);
  MPI_Info info = MPI_INFO_NULL;
  ASSERT_EQ(DCT_Comm_get_info(comm, &info), DCT_SUCCESS) << DCT_Get_last_error();
  std::map<std::string, std::string> before = entries(info);
  EXPECT_EQ(before["dct_density"], "0.02");  // what the first call would read now
  EXPECT_EQ(before.count("dct_name"), 0u);
  EXPECT_EQ(before.count("dct_restart"), 0u);  // drop-in states are not checkpointed

  std::vector<float> send = gradient<float>(300, 0), recv(300);
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce(send.data(), recv.data(), 300, MPI_FLOAT, MPI_SUM, comm),
                      DCT_SUCCESS);
  setenv("DCT_DENSITY", "0.5", 1);  // later changes do not reach the communicator
  ASSERT_EQ(DCT_Comm_get_info(comm, &info), DCT_SUCCESS);
  EXPECT_EQ(entries(info), before);
  unsetenv("DCT_DENSITY");

  EXPECT_EQ(DCT_Comm_get_info(MPI_COMM_NULL, &info), DCT_ERR_COMM);
  EXPECT_EQ(DCT_Comm_get_info(comm, nullptr), DCT_ERR_ARG);
  MPI_Comm_free(&comm);
}

/// The C++ layer covers the C API: residual, info, waitall, the op, the names, and a request
/// destroyed while started is completed, not leaked.
TEST(CxxLayer, CoversTheCApi) {
  const std::size_t n = 1000;
  std::vector<float> send = gradient<float>(n, 3), recv(n), recv2(n), residual(n);
  dct::Info info;
  info.set("dct_density", "0.05");
  dct::AllreduceRequest a(send.data(), recv.data(), n, MPI_COMM_WORLD, info.get());
  dct::AllreduceRequest b(send.data(), recv2.data(), n, MPI_COMM_WORLD, info.get(), MPI_SUM);
  EXPECT_EQ(a.info().value("dct_density"), "0.05");
  a.start();
  b.start();
  const std::vector<DCT_Status> statuses = dct::Request::waitall({&a, &b});
  ASSERT_EQ(statuses.size(), 2u);
  EXPECT_EQ(statuses[0].nnz_sent, 50);
  EXPECT_EQ(recv, recv2);  // the same inputs and settings: the same sum
  a.get_residual(residual.data());
  for (std::size_t i = 0; i < n; ++i)  // each entry is either sent (0 left) or kept whole
    EXPECT_TRUE(residual[i] == 0.0f || residual[i] == send[i]) << i;
  {
    dct::AllreduceRequest started(send.data(), recv.data(), n, MPI_COMM_WORLD, info.get());
    started.start();
  }  // destroyed while started: completed (on every rank) and freed
  EXPECT_EQ(dct::algorithm_name(DCT_ALGORITHM_SPLIT), "split");
  EXPECT_EQ(dct::backend_name(DCT_BACKEND_KOKKOS), "kokkos");
  EXPECT_TRUE(dct::backend_compiled(DCT_BACKEND_KOKKOS));
  EXPECT_NE(dct::error_string(DCT_ERR_COUNT).find("ount"), std::string::npos);
  EXPECT_GE(dct::version()[1], 1);
  // Another op goes to MPI unchanged.
  std::vector<double> x(10, rank() + 1.0), y(10);
  dct::allreduce(x.data(), y.data(), x.size(), MPI_COMM_WORLD, MPI_MAX);
  EXPECT_EQ(y[0], double(size()));
}

}  // namespace
}  // namespace dct::test
