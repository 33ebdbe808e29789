// Bad input: a documented code, a message, and nothing changed (buffers, residual, counters).
#include <climits>
#include <cstdlib>

#include "common.hpp"

namespace dct::test {
namespace {

constexpr std::size_t kCount = 1000;

/// Buffers with a recognisable pattern, to check that a failed call touched nothing.
struct Buffers {
  std::vector<float> send = gradient<float>(kCount, 0);
  std::vector<float> recv = std::vector<float>(kCount, 42.0f);
  bool untouched() const {
    return same_bits(send, gradient<float>(kCount, 0)) &&
           same_bits(recv, std::vector<float>(kCount, 42.0f));
  }
};

int init(const void *send, void *recv, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
         MPI_Comm comm, MPI_Info info = MPI_INFO_NULL) {
  DCT_Request request = DCT_REQUEST_NULL;
  const int code = DCT_Allreduce_init(send, recv, count, datatype, op, comm, info, &request);
  EXPECT_EQ(request == DCT_REQUEST_NULL, code != DCT_SUCCESS);
  if (code == DCT_SUCCESS) DCT_Request_free(&request);
  return code;
}

TEST(BadInput, NullBuffersWithPositiveCount) {
  Buffers b;
  EXPECT_EQ(init(nullptr, b.recv.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            DCT_ERR_BUFFER);
  EXPECT_EQ(init(b.send.data(), nullptr, kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            DCT_ERR_BUFFER);
  EXPECT_EQ(DCT_Allreduce(nullptr, b.recv.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            DCT_ERR_BUFFER);
  EXPECT_EQ(DCT_Allreduce(b.send.data(), nullptr, kCount, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
            DCT_ERR_BUFFER);
  EXPECT_EQ(DCT_Allreduce(b.send.data(), nullptr, kCount, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
            DCT_ERR_BUFFER);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("recvbuf is NULL"), std::string::npos)
      << DCT_Get_last_error();
  EXPECT_TRUE(b.untouched());
}

TEST(BadInput, NegativeAndOverflowingCounts) {
  Buffers b;
  for (MPI_Count count :
       {MPI_Count(-1), MPI_Count(LLONG_MIN), DCT_MAX_COUNT + 1, MPI_Count(LLONG_MAX)}) {
    EXPECT_EQ(init(b.send.data(), b.recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
              DCT_ERR_COUNT)
        << count;
    EXPECT_EQ(
        DCT_Allreduce(b.send.data(), b.recv.data(), count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
        DCT_ERR_COUNT)
        << count;
  }
  // Passed-through calls go to MPI with an int count.
  EXPECT_EQ(DCT_Allreduce(b.send.data(), b.recv.data(), MPI_Count(INT_MAX) + 1, MPI_INT, MPI_SUM,
                          MPI_COMM_WORLD),
            DCT_ERR_COUNT);
  EXPECT_TRUE(b.untouched());
}

TEST(BadInput, NullHandles) {
  Buffers b;
  EXPECT_EQ(init(b.send.data(), b.recv.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_NULL),
            DCT_ERR_COMM);
  EXPECT_EQ(DCT_Allreduce(b.send.data(), b.recv.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_NULL),
            DCT_ERR_COMM);
  EXPECT_EQ(init(b.send.data(), b.recv.data(), kCount, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD),
            DCT_ERR_DATATYPE);
  EXPECT_EQ(init(b.send.data(), b.recv.data(), kCount, MPI_FLOAT, MPI_OP_NULL, MPI_COMM_WORLD),
            DCT_ERR_OP);
  EXPECT_EQ(DCT_Allreduce_init(b.send.data(), b.recv.data(), kCount, MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD, MPI_INFO_NULL, nullptr),
            DCT_ERR_ARG);
  EXPECT_TRUE(b.untouched());
}

// The drop-in passes what it does not compress to MPI; a pair MPI refuses is a code on every
// rank, not an abort through the user communicator's MPI_ERRORS_ARE_FATAL (the job
// exited with rc 10). An uncommitted derived datatype is refused before MPI sees it.
TEST(BadInput, PairsMpiRefusesReturnACode) {
  Buffers b;
  int bools[4] = {1, 0, 1, 0};
  int bools_out[4] = {7, 7, 7, 7};
  EXPECT_ALL_RANKS_EQ(DCT_Allreduce(bools, bools_out, 4, MPI_C_BOOL, MPI_SUM, MPI_COMM_WORLD),
                      DCT_ERR_MPI);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("MPI_Allreduce failed"), std::string::npos)
      << DCT_Get_last_error();
  EXPECT_ALL_RANKS_EQ(
      DCT_Allreduce(b.send.data(), b.recv.data(), 10, MPI_FLOAT, MPI_MAXLOC, MPI_COMM_WORLD),
      DCT_ERR_MPI);
  EXPECT_ALL_RANKS_EQ(
      DCT_Allreduce(b.send.data(), b.recv.data(), 10, MPI_PACKED, MPI_SUM, MPI_COMM_WORLD),
      DCT_ERR_MPI);
  EXPECT_EQ(bools_out[0], 7);
  EXPECT_TRUE(b.untouched());
  // The communicator still works (nothing was left half done on it).
  int one = 1, sum = 0;
  EXPECT_ALL_RANKS_EQ(DCT_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), DCT_SUCCESS);
  int ranks = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  EXPECT_EQ(sum, ranks);

  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_INT, &pair);  // not committed
  EXPECT_ALL_RANKS_EQ(init(b.send.data(), b.recv.data(), 4, pair, MPI_SUM, MPI_COMM_WORLD),
                      DCT_ERR_DATATYPE);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("not committed"), std::string::npos)
      << DCT_Get_last_error();
  EXPECT_ALL_RANKS_EQ(DCT_Allreduce(b.send.data(), b.recv.data(), 4, pair, MPI_SUM, MPI_COMM_WORLD),
                      DCT_ERR_DATATYPE);
  MPI_Type_commit(&pair);
  EXPECT_ALL_RANKS_EQ(init(b.send.data(), b.recv.data(), 4, pair, MPI_SUM, MPI_COMM_WORLD),
                      DCT_SUCCESS);
  MPI_Type_free(&pair);
  EXPECT_TRUE(b.untouched());
}

TEST(BadInput, BadInfoValues) {
  Buffers b;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"dct_density", "0"},    {"dct_density", "-0.5"},    {"dct_density", "1.0001"},
      {"dct_density", "abc"},  {"dct_density", "0.1 0.2"}, {"dct_density", "inf"},
      {"dct_interval", "0"},   {"dct_interval", "-1"},     {"dct_interval", "2.5"},
      {"dct_interval", "ten"}, {"dct_algorithm", "ring"},  {"dct_algorithm", "AUTO"},
      {"dct_name", "."},       {"dct_name", ".."},         {"dct_name", "layer/0"},
      {"dct_densty", "0.1"}};  // (names no checkpoint could save)
  for (const auto &[key, value] : bad) {
    MPI_Info info = make_info({{key, value}});
    EXPECT_EQ(init(b.send.data(), b.recv.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, info),
              DCT_ERR_INFO)
        << key << "=" << value;
    MPI_Info_free(&info);
  }
  EXPECT_NE(std::string(DCT_Get_last_error()).find("dct_densty"), std::string::npos);
  // Keys of other software are not dct's business.
  MPI_Info info = make_info({{"cb_nodes", "4"}, {"dct_density", "0.5"}});
  EXPECT_EQ(init(b.send.data(), b.recv.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, info),
            DCT_SUCCESS);
  MPI_Info_free(&info);
  // The drop-in states read the DCT_* variables at the first DCT_Allreduce on a communicator.
  MPI_Comm fresh;
  MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
  setenv("DCT_INTERVAL", "0", 1);
  EXPECT_EQ(DCT_Allreduce(b.send.data(), b.recv.data(), kCount, MPI_FLOAT, MPI_SUM, fresh),
            DCT_ERR_INFO);
  unsetenv("DCT_INTERVAL");
  MPI_Comm_free(&fresh);
  EXPECT_TRUE(b.untouched());
}

TEST(BadInput, RequestLifecycleMisuse) {
  Buffers b;
  EXPECT_EQ(DCT_Start(nullptr), DCT_ERR_ARG);
  DCT_Request null_request = DCT_REQUEST_NULL;
  EXPECT_EQ(DCT_Start(&null_request), DCT_ERR_REQUEST);
  EXPECT_EQ(DCT_Wait(&null_request, DCT_STATUS_IGNORE), DCT_ERR_REQUEST);
  EXPECT_EQ(DCT_Request_free(&null_request), DCT_ERR_REQUEST);
  EXPECT_EQ(DCT_Request_free(nullptr), DCT_ERR_ARG);

  DCT_Request request;
  ASSERT_EQ(DCT_Allreduce_init(b.send.data(), b.recv.data(), kCount, MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD, MPI_INFO_NULL, &request),
            DCT_SUCCESS);
  EXPECT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_ERR_ACTIVE);  // never started
  DCT_Request copy = request;
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  EXPECT_EQ(request, DCT_REQUEST_NULL);
  EXPECT_EQ(DCT_Request_free(&request), DCT_ERR_REQUEST);  // freed twice
  EXPECT_EQ(DCT_Request_free(&copy), DCT_ERR_REQUEST);     // a copy of a freed handle
  EXPECT_EQ(DCT_Start(&copy), DCT_ERR_REQUEST);
  EXPECT_TRUE(b.untouched());
}

// A second DCT_Start is refused and changes nothing: the call completes exactly as the
// reference says, with the residual the reference has.
TEST(BadInput, StartOnActiveRequestChangesNothing) {
  Buffers b;
  MPI_Info info = make_info({{"dct_density", "0.05"}, {"dct_algorithm", "allgather"}});
  DCT_Request request;
  ASSERT_EQ(DCT_Allreduce_init(b.send.data(), b.recv.data(), kCount, MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD, info, &request),
            DCT_SUCCESS);
  ReferenceDct<float> reference(kCount, 0.05, 1000);
  const std::vector<float> expected = sum_in_rank_order(reference.step(b.send));
  ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
  EXPECT_EQ(DCT_Start(&request), DCT_ERR_ACTIVE);
  EXPECT_EQ(DCT_Request_free(&request), DCT_ERR_ACTIVE);  // cannot free a started request
  EXPECT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
  EXPECT_TRUE(same_bits(b.recv, expected));
  EXPECT_TRUE(same_bits(residual_of<float>(request, kCount), reference.residual));
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  MPI_Info_free(&info);
}

// Ranks that disagree on the count all get DCT_ERR_MISMATCH: at init for a persistent
// request; for drop-in calls at every call, before anything is compressed, with the receive
// buffers as they were.
TEST(BadInput, CountMismatchAcrossRanksIsDetectedEverywhere) {
  if (size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const std::size_t n = rank() == 0 ? kCount + 1 : kCount;
  const std::vector<float> send = gradient<float>(n, 5);
  std::vector<float> recv(n, 42.0f);
  DCT_Request request = DCT_REQUEST_NULL;
  EXPECT_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               MPI_INFO_NULL, &request),
            DCT_ERR_MISMATCH);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("count"), std::string::npos)
      << DCT_Get_last_error();
  EXPECT_EQ(request, DCT_REQUEST_NULL);

  // Drop-in states (compressed: a fresh communicator reads the default configuration); a
  // first call agrees on the configuration.
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  std::vector<float> agreed_on(kCount);
  ASSERT_EQ(DCT_Allreduce(MPI_IN_PLACE, agreed_on.data(), kCount, MPI_FLOAT, MPI_SUM, comm),
            DCT_SUCCESS);
  for (int call = 0; call < 2; ++call) {
    EXPECT_EQ(DCT_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, comm),
              DCT_ERR_MISMATCH);
    // Agreed on before any rank blocks: the fields that differ are named.
    EXPECT_NE(std::string(DCT_Get_last_error()).find("count"), std::string::npos)
        << DCT_Get_last_error();
    EXPECT_TRUE(same_bits(recv, std::vector<float>(n, 42.0f)));
  }
  MPI_Comm_free(&comm);
}

TEST(BadInput, ReceiveBufferInPlaceIsRefused) {
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

/// A DCT_* variable is only the default of an absent MPI_Info key, and only of the collectives
/// it acts on.
TEST(BadInput, VariablesAreDefaultsOfAbsentKeysOnly) {
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
TEST(BadInput, NumbersAreReadOneWay) {
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

}  // namespace
}  // namespace dct::test
