// Hardening (issue 14): what a user or a peer does never crashes, hangs or silently corrupts a
// call. Each test names the guarantee of docs/reliability.md it checks.
#include <sys/stat.h>

#include <limits>

#include "allreduce.hpp"
#include "common.hpp"

namespace dct::test {
namespace {

// --- recvbuf = MPI_IN_PLACE ---------------------------------------------------------------

TEST(Hardening, ReceiveBufferInPlaceIsRefused) {
  const std::vector<float> pattern = gradient<float>(100, 0);
  std::vector<float> send = pattern;
  for (MPI_Datatype datatype : {MPI_FLOAT, MPI_INT}) {
    for (const void *sendbuf :
         {static_cast<const void *>(send.data()), static_cast<const void *>(MPI_IN_PLACE)}) {
      for (MPI_Count count : {MPI_Count(100), MPI_Count(0)}) {
        DCT_Request request = DCT_REQUEST_NULL;
        EXPECT_EQ(DCT_Allreduce_init(sendbuf, MPI_IN_PLACE, count, datatype, MPI_SUM,
                                     MPI_COMM_WORLD, MPI_INFO_NULL, &request),
                  DCT_ERR_BUFFER);
        EXPECT_EQ(request, DCT_REQUEST_NULL);
        EXPECT_NE(std::string(DCT_Get_last_error()).find("MPI_IN_PLACE"), std::string::npos);
        EXPECT_EQ(DCT_Allreduce(sendbuf, MPI_IN_PLACE, count, datatype, MPI_SUM, MPI_COMM_WORLD),
                  DCT_ERR_BUFFER);
      }
    }
  }
  EXPECT_TRUE(same_bits(send, pattern));
}

// --- a message rejected by a peer leaves the receive buffer and the residual alone ---------

constexpr float kSentinel = 42.0f;

/// Rank 0 sends its first index twice: not strictly increasing, so every receiver rejects it.
void repeat_first_index(detail::WireIndex *idx, std::size_t entries) {
  if (rank() == 0 && entries >= 2) idx[1] = idx[0];
}

TEST(Hardening, PeerErrorLeavesReceiveBufferAndResidual) {
  if (size() < 2) GTEST_SKIP() << "needs a peer";
  constexpr std::size_t n = 4096;
  for (const char *algorithm : {"allgather", "split", "recursive_doubling"}) {
    SCOPED_TRACE(algorithm);
    std::vector<float> send = gradient<float>(n, 0), recv(n);
    MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_algorithm", algorithm}});
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

    // allgather and split: every rank reads (or learns of) the bad block and fails alike.
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

// --- NaN and Inf entries do not poison the threshold --------------------------------------

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

TEST(Hardening, NonFiniteEntriesAreSentAndDoNotPoisonTau) {
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

// --- a long checkpoint path (Open MPI's sharedfp/lockedfile overflowed on it) -------------

/// A path of `length` characters under `root`, in directories of 49-character names (created).
std::string long_path(const std::string &root, std::size_t length) {
  std::string path = root;
  if (rank() == 0) ::mkdir(path.c_str(), 0755);
  while (path.size() + 51 < length) {
    path += "/" + std::string(49, 'd');
    if (rank() == 0) ::mkdir(path.c_str(), 0755);
  }
  path += "/" + std::string(length - path.size() - 1, 'f');
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

TEST(Hardening, LongCheckpointPathNeverCrashes) {
  std::vector<float> send = gradient<float>(100, 0), recv(100);
  MPI_Info info = make_info({{"dct_name", "long"}});
  DCT_Request request;
  ASSERT_EQ(DCT_Allreduce_init(send.data(), recv.data(), 100, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               info, &request),
            DCT_SUCCESS);
  MPI_Info_free(&info);
  ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
  ASSERT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
  for (std::size_t length : {std::size_t(240), std::size_t(300), std::size_t(1000)}) {
    const std::string path = long_path("dct_long_path.np" + std::to_string(size()), length);
    const int saved = DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str());
    if (saved == DCT_ERR_NOT_COMPILED) GTEST_SKIP() << "built without HDF5";
    // No MPI file was opened before in this process: dct excludes the component and succeeds.
    EXPECT_EQ(saved, DCT_SUCCESS) << length << ": " << DCT_Get_last_error();
    EXPECT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS)
        << length << ": " << DCT_Get_last_error();
  }
  DCT_Request_free(&request);
}

}  // namespace
}  // namespace dct::test
