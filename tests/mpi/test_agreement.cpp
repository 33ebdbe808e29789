// Agreement between ranks: settings and arguments that differ between ranks fail alike on
// every rank (or keep working where the difference is harmless), for the persistent inits, the
// drop-in call and DCT-MP, and a choice made at init (the point-to-point path past MPI's int
// counts) is taken by every rank alike (docs/reliability.md).
#include <cstdlib>
#include <limits>
#include <tuple>

#include "common.hpp"
#include "core/test_hooks.hpp"
#include "mp/alltoallv_validate.hpp"

namespace dct::test {
namespace {

/// Rank 0's code, on every rank, after checking that every rank returned it.
int same_code_on_every_rank(int code) {
  const int first = agreed(code);
  EXPECT_TRUE(all_ranks(code == first)) << "rank " << rank() << " returned " << code;
  return first;
}

/// DCT_Allreduce_init of 1000 floats with `pairs` on rank 0 and `others` on the other ranks;
/// returns the code (the same on every rank) and frees a created request.
int init_with(const std::vector<std::pair<std::string, std::string>> &pairs,
              const std::vector<std::pair<std::string, std::string>> &others,
              std::string *message = nullptr) {
  static std::vector<float> send(1000, 1.0f), recv(1000);
  MPI_Info info = make_info(rank() == 0 ? pairs : others);
  DCT_Request request = DCT_REQUEST_NULL;
  const int code = DCT_Allreduce_init(send.data(), recv.data(), 1000, MPI_FLOAT, MPI_SUM,
                                      MPI_COMM_WORLD, info, &request);
  MPI_Info_free(&info);
  if (message) *message = DCT_Get_last_error();
  if (code == DCT_SUCCESS) {
    EXPECT_NE(request, DCT_REQUEST_NULL);
    EXPECT_EQ(DCT_Start(&request), DCT_SUCCESS);
    EXPECT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS) << DCT_Get_last_error();
    DCT_Request_free(&request);
  } else {
    EXPECT_EQ(request, DCT_REQUEST_NULL);
  }
  return same_code_on_every_rank(code);
}

TEST(Agreement, DifferentConfigurationFailsAlikeOnEveryRank) {
  struct Case {
    std::vector<std::pair<std::string, std::string>> rank0, others;
    const char *named;  // in the message
  };
  const Case cases[] = {
      // Used to deadlock (only the compressed ranks duplicated the communicator).
      {{{"dct_density", "1"}}, {{"dct_density", "0.01"}}, "dct_density"},
      // Used to abort with MPI_ERR_TRUNCATE, crash in MPI's progress or hang.
      {{{"dct_algorithm", "split"}}, {{"dct_algorithm", "allgather"}}, "dct_algorithm"},
      // Used to lose a peer's entry on one rank while the others returned DCT_ERR_PEER.
      {{{"dct_values", "fp16"}}, {{"dct_values", "native"}}, "dct_values"},
      {{{"dct_momentum", "0.9"}}, {}, "dct_momentum"},
      {{{"dct_momentum", "0.9"}, {"dct_momentum_result", "gradient"}},
       {{"dct_momentum", "0.9"}},
       "dct_momentum_result"},
      {{{"dct_tau_control", "fixed"}}, {}, "dct_tau_control"},
      {{{"dct_alpha_us", "50"}}, {}, "dct_alpha_us"},
      {{{"dct_algorithm", "split"}, {"dct_result_density", "0.1"}},
       {{"dct_algorithm", "split"}},
       "dct_result_density"},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.named);
    std::string message;
    EXPECT_EQ(init_with(c.rank0, c.others, &message), DCT_ERR_MISMATCH);
    EXPECT_NE(message.find(c.named), std::string::npos) << message;
  }
  // Harmless differences keep working: densities of compressed requests, the schedule's
  // interval, the threshold method, the backend.
  EXPECT_EQ(init_with({{"dct_density", "0.05"}, {"dct_interval", "3"}},
                      {{"dct_density", "0.01"}, {"dct_threshold", "sampled"}}),
            DCT_SUCCESS);
  // The same setting through the environment on one rank and MPI_Info on the others.
  if (rank() == 0) setenv("DCT_VALUES", "bf16", 1);
  EXPECT_EQ(init_with({}, {{"dct_values", "bf16"}}), DCT_SUCCESS);
  EXPECT_EQ(init_with({}, {}), DCT_ERR_MISMATCH);
  unsetenv("DCT_VALUES");
}

TEST(Agreement, ArgumentRefusedOnOneRankFailsOnEveryRank) {
  // A bad value on one rank used to leave the others blocked in MPI_Comm_dup.
  std::string message;
  EXPECT_EQ(init_with({{"dct_density", "2"}}, {{"dct_density", "0.01"}}, &message), DCT_ERR_INFO);
  EXPECT_NE(message.find(rank() == 0 ? "dct_density" : "rank 0"), std::string::npos) << message;
  // A count that differs is a mismatch, found at init instead of at the first call.
  std::vector<float> send(1000, 1.0f), recv(1000);
  DCT_Request request = DCT_REQUEST_NULL;
  const MPI_Count count = rank() == 0 ? 999 : 1000;
  EXPECT_EQ(
      same_code_on_every_rank(DCT_Allreduce_init(send.data(), recv.data(), count, MPI_FLOAT,
                                                 MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &request)),
      DCT_ERR_MISMATCH);
  // A NULL request pointer on one rank.
  EXPECT_EQ(same_code_on_every_rank(DCT_Allreduce_init(send.data(), recv.data(), 1000, MPI_FLOAT,
                                                       MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL,
                                                       rank() == 0 ? nullptr : &request)),
            DCT_ERR_ARG);
  // Nothing was left behind: default names still count from where they were on every rank.
  EXPECT_EQ(init_with({}, {}), DCT_SUCCESS);
}

TEST(Agreement, DropInConfigurationIsAgreedOnPerCommunicator) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  std::vector<float> send = gradient<float>(1000, 0), recv(1000);
  setenv("DCT_ALGORITHM", rank() == 0 ? "split" : "allgather", 1);
  EXPECT_EQ(same_code_on_every_rank(
                DCT_Allreduce(send.data(), recv.data(), 1000, MPI_FLOAT, MPI_SUM, comm)),
            DCT_ERR_MISMATCH);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("dct_algorithm"), std::string::npos)
      << DCT_Get_last_error();
  unsetenv("DCT_ALGORITHM");
  EXPECT_EQ(same_code_on_every_rank(
                DCT_Allreduce(send.data(), recv.data(), 1000, MPI_FLOAT, MPI_SUM, comm)),
            DCT_SUCCESS);
  MPI_Comm_free(&comm);
}

constexpr float kUntouched = 42.0f;

TEST(Agreement, DropInDatatypesThatDifferFailAlike) {
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

/// DCT_Alltoallv_init of two rows of 8 floats to each rank with `pairs` (this rank's) fails on
/// every rank with DCT_ERR_MISMATCH naming `key`, and makes no request.
void expect_alltoallv_mismatch(const std::vector<std::pair<std::string, std::string>> &pairs,
                               const char *key) {
  SCOPED_TRACE(key);
  const int p = size();
  constexpr int d = 8;
  std::vector<int> counts(p, 2 * d), displs(p);
  for (int j = 0; j < p; ++j) displs[j] = 2 * d * j;
  std::vector<float> send(static_cast<std::size_t>(2 * d * p), 1.0f), recv(send.size());
  MPI_Info info = make_info(pairs);
  DCT_Request request = DCT_REQUEST_NULL;
  EXPECT_EQ(same_code_on_every_rank(DCT_Alltoallv_init(send.data(), counts.data(), displs.data(),
                                                       recv.data(), counts.data(), displs.data(),
                                                       MPI_FLOAT, MPI_COMM_WORLD, info, &request)),
            DCT_ERR_MISMATCH);
  EXPECT_EQ(request, DCT_REQUEST_NULL);
  EXPECT_NE(std::string(DCT_Get_last_error()).find(key), std::string::npos) << DCT_Get_last_error();
  MPI_Info_free(&info);
}

TEST(Agreement, AlltoallvConfigurationIsAgreedOn) {
  for (const auto &[key, mine, theirs] :
       {std::tuple<const char *, const char *, const char *>{"dct_values", "fp16", "native"},
        {"dct_row_length", "4", "8"}})
    expect_alltoallv_mismatch({{"dct_row_length", "8"}, {key, rank() == 0 ? mine : theirs}}, key);
}

/// DCT-MP's compressor and whether an error-bounded backward is compressed decide which
/// collectives a call makes: ranks that differ fail at init, all alike. Before they were agreed
/// on, every rank's init succeeded and the first call mismatched its collectives.
TEST(Agreement, AlltoallvCompressorIsAgreedOn) {
  using Pairs = std::vector<std::pair<std::string, std::string>>;
  const Pairs eb = {{"dct_row_length", "8"}, {"dct_mp_compressor", "error_bounded"}};
  Pairs backward_on_rank_0 = eb;
  if (rank() == 0) backward_on_rank_0.push_back({"dct_backward_error_bound", "0.01"});
  for (const auto &[key, pairs] :
       {std::pair<const char *, Pairs>{"dct_mp_compressor",
                                       rank() == 0 ? eb : Pairs{{"dct_row_length", "8"}}},
        {"dct_backward_error_bound", backward_on_rank_0}})
    expect_alltoallv_mismatch(pairs, key);
}

/// The error-bounded sender's own choices (bound, its schedule, the lossless coder, the tables
/// of a row) may differ between ranks: every message says how to decode it, and each arrives
/// within its sender's bound.
TEST(Agreement, AlltoallvSendersBoundsMayDiffer) {
  const int p = size(), me = rank();
  constexpr int d = 8, rows = 2;
  std::vector<int> counts(p, rows * d), displs(p);
  for (int j = 0; j < p; ++j) displs[j] = rows * d * j;
  // Rank r's block for rank j, element i: 10 r + j + 0.01 i (each block spans 0.15).
  auto value = [](int r, int j, int i) { return float(10 * r + j) + 0.01f * float(i); };
  std::vector<float> send(static_cast<std::size_t>(rows * d * p)), recv(send.size(), -1.0f);
  for (int j = 0; j < p; ++j)
    for (int i = 0; i < rows * d; ++i) send[std::size_t(displs[j] + i)] = value(me, j, i);
  const bool first = me == 0;
  MPI_Info info = make_info({{"dct_row_length", "8"},
                             {"dct_mp_compressor", "error_bounded"},
                             {"dct_error_bound", first ? "0.01" : "0"},
                             {"dct_error_bound_schedule", first ? "4,10" : "1,0"},
                             {"dct_lossless", first ? "zstd" : "lz4"},
                             {"dct_table_columns", first ? "4" : "0"}});
  DCT_Request request = DCT_REQUEST_NULL;
  ASSERT_EQ(same_code_on_every_rank(DCT_Alltoallv_init(send.data(), counts.data(), displs.data(),
                                                       recv.data(), counts.data(), displs.data(),
                                                       MPI_FLOAT, MPI_COMM_WORLD, info, &request)),
            DCT_SUCCESS)
      << DCT_Get_last_error();
  MPI_Info_free(&info);
  ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
  ASSERT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS) << DCT_Get_last_error();
  // Rank 0's bound on this first call: 0.01 x 4 of a block's span 0.15 (0.006); the others'
  // blocks are exact.
  for (int r = 0; r < p; ++r)
    for (int i = 0; i < rows * d; ++i) {
      const float got = recv[std::size_t(displs[r] + i)], want = value(r, me, i);
      if (r == 0)
        EXPECT_NEAR(got, want, 0.0075) << "from rank " << r << ", element " << i;
      else
        EXPECT_EQ(got, want) << "from rank " << r << ", element " << i;
    }
  DCT_Request_free(&request);
}

/// A request whose messages could pass MPI's int counts on one rank only, on its send side or
/// its receive side, goes point to point on every rank (one path for all, agreed at init), and
/// delivers bitwise what MPI_Alltoallv delivers. Before, such a request was refused at init
/// with DCT_ERR_COUNT. The limit (INT_MAX 8-byte units, 16 GiB) is lowered on the last rank
/// through a test hook; both compressors, forward and uncompressed or compressed backward.
TEST(Agreement, MessagesPastIntCountsGoPointToPointOnEveryRank) {
  if (size() < 2) GTEST_SKIP() << "needs a peer";
  const int p = size(), last = p - 1, me = rank();
  const bool me_last = me == last;
  constexpr int d = 8, rows = 4;
  for (const char *backward : {"none", "0.001"}) {
    for (const char *compressor : {"topk", "error_bounded"}) {
      SCOPED_TRACE(std::string(compressor) + ", backward bound " + backward);
      MPI_Info info = make_info({{"dct_row_length", "8"},
                                 {"dct_mp_compressor", compressor},
                                 {"dct_backward_error_bound", backward}});
      const std::size_t units = detail::longest_message_units(rows, detail::Config::from(info), 4);
      // Every rank sends `rows` rows to every rank, except that with `last_sends` false the
      // last rank sends nothing (its messages all come in: only its receive side is large).
      // Returns what the forward and the backward delivered, and whether they went point to
      // point here.
      auto run = [&](bool last_sends, std::size_t limit) {
        std::vector<int> sendcounts(p, me_last && !last_sends ? 0 : rows * d), recvcounts(p),
            displs(p);
        for (int j = 0; j < p; ++j) {
          recvcounts[j] = j == last && !last_sends ? 0 : rows * d;
          displs[j] = rows * d * j;
        }
        std::vector<float> send = gradient<float>(std::size_t(rows * d * p), 0, me),
                           recv(send.size(), -1.0f), grad = gradient<float>(send.size(), 1, me),
                           dx(send.size(), -1.0f);
        detail::testing::max_mpi_count = me_last ? limit : 0;
        detail::testing::point_to_point_exchanges = 0;
        DCT_Request forward = DCT_REQUEST_NULL, back = DCT_REQUEST_NULL;
        EXPECT_EQ(same_code_on_every_rank(DCT_Alltoallv_init(
                      send.data(), sendcounts.data(), displs.data(), recv.data(), recvcounts.data(),
                      displs.data(), MPI_FLOAT, MPI_COMM_WORLD, info, &forward)),
                  DCT_SUCCESS)
            << DCT_Get_last_error();
        EXPECT_EQ(
            DCT_Alltoallv_backward_init(forward, grad.data(), recvcounts.data(), displs.data(),
                                        dx.data(), sendcounts.data(), displs.data(), &back),
            DCT_SUCCESS)
            << DCT_Get_last_error();
        for (DCT_Request *request : {&forward, &back}) {
          EXPECT_EQ(same_code_on_every_rank(DCT_Start(request)), DCT_SUCCESS);
          EXPECT_EQ(same_code_on_every_rank(DCT_Wait(request, DCT_STATUS_IGNORE)), DCT_SUCCESS)
              << DCT_Get_last_error();
        }
        detail::testing::max_mpi_count = 0;
        DCT_Request_free(&back);
        DCT_Request_free(&forward);
        recv.insert(recv.end(), dx.begin(), dx.end());
        return std::make_pair(recv, detail::testing::point_to_point_exchanges);
      };
      // Exactly at the limit keeps MPI_Alltoallv; one unit less goes point to point, whether
      // one message or their sum (the displacements) is what no longer fits: on every rank.
      // The results are those of MPI_Alltoallv, bit for bit.
      for (bool last_sends : {true, false}) {
        const std::size_t at_limit = std::size_t(last_sends ? p : p - 1) * units;
        const auto reference = run(last_sends, 0);
        EXPECT_EQ(reference.second, 0u);
        const auto fits = run(last_sends, at_limit);
        EXPECT_EQ(fits.second, 0u);
        EXPECT_TRUE(same_bits(fits.first, reference.first));
        for (std::size_t limit : {at_limit - 1, units - 1}) {
          const auto passes = run(last_sends, limit);
          EXPECT_EQ(passes.second, 2u) << "limit " << limit;  // the forward's and the backward's
          EXPECT_TRUE(same_bits(passes.first, reference.first)) << "limit " << limit;
        }
      }
      MPI_Info_free(&info);
    }
  }
}

}  // namespace
}  // namespace dct::test
