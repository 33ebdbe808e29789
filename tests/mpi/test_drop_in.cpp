// The drop-in DCT_Allreduce's states: bounded in number (DCT_DROP_IN_LIMIT) and in bytes
// (DCT_DROP_IN_MEMORY) per communicator, and an aliased send and receive buffer reduced in
// place on every path.
#include <cmath>
#include <cstdlib>

#include "common.hpp"
#include "core/comm_context.hpp"
#include "dp/allreduce.hpp"

namespace dct::test {
namespace {

// 40,000 distinct receive buffers used to keep 40,000 states (755 MB per rank) and as many
// duplicated communicators; now at most DCT_DROP_IN_LIMIT, sharing one communicator.
TEST(DropIn, StatesStayBounded) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  setenv("DCT_DROP_IN_LIMIT", "8", 1);
  constexpr std::size_t n = 64, buffers = 300;
  std::vector<float> send = gradient<float>(n, 0), recv(n * buffers);
  for (std::size_t b = 0; b < buffers; ++b)
    ASSERT_EQ(DCT_Allreduce(send.data(), recv.data() + b * n, n, MPI_FLOAT, MPI_SUM, comm),
              DCT_SUCCESS)
        << DCT_Get_last_error();
  unsetenv("DCT_DROP_IN_LIMIT");
  const auto context = detail::find_comm_context(comm);
  EXPECT_EQ(context->drop_in.size(), 8u);
  EXPECT_EQ(context->drop_in.evicted(), static_cast<long long>(buffers - 8));
  // The most recent states live on (their status is there); an evicted one says so.
  DCT_Status status;
  EXPECT_EQ(DCT_Allreduce_status(recv.data() + (buffers - 1) * n, n, MPI_FLOAT, comm, &status),
            DCT_SUCCESS);
  EXPECT_EQ(status.calls, 1);
  EXPECT_EQ(DCT_Allreduce_status(recv.data(), n, MPI_FLOAT, comm, &status), DCT_ERR_ARG);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("evicted"), std::string::npos);
  // A state in use is kept: reusing one buffer keeps its residual and counter.
  for (int call = 0; call < 3; ++call) {
    ASSERT_EQ(DCT_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, comm), DCT_SUCCESS);
    ASSERT_EQ(
        DCT_Allreduce(send.data(), recv.data() + n * (10 + call), n, MPI_FLOAT, MPI_SUM, comm),
        DCT_SUCCESS);
  }
  EXPECT_EQ(DCT_Allreduce_status(recv.data(), n, MPI_FLOAT, comm, &status), DCT_SUCCESS);
  EXPECT_EQ(status.calls, 3);
  EXPECT_EQ(context->drop_in.size(), 8u);
  MPI_Comm_free(&comm);
}

// A receive buffer that moves every call (a caching allocator's blocks) made a state per call,
// bounded only by the count: 1.2 MB more per step at 262,144 floats, 2.4 GB after 2,000 steps.
// DCT_DROP_IN_MEMORY bounds the bytes (default 1 GiB per communicator); the mass
// an evicted residual held is counted for the interposer's report, with the states used once.
TEST(DropIn, StatesStayWithinTheirMemory) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  constexpr std::size_t n = 4096, buffers = 40;
  constexpr long long memory = 10 * n * sizeof(float);  // room for 10 residuals
  setenv("DCT_DROP_IN_MEMORY", std::to_string(memory).c_str(), 1);
  const detail::DropInTotals before = detail::drop_in_totals();
  std::vector<float> send = gradient<float>(n, 0), recv(n * buffers);
  double kept_mass = 0;  // what the calls left in their residuals: the evicted states' mass
  for (std::size_t b = 0; b < buffers; ++b) {
    ASSERT_ALL_RANKS_EQ(
        DCT_Allreduce(send.data(), recv.data() + b * n, n, MPI_FLOAT, MPI_SUM, comm), DCT_SUCCESS);
    const auto context = detail::find_comm_context(comm);
    EXPECT_LE(context->drop_in.bytes(), memory);
    if (b < buffers - 10) {
      double mass = 0;
      for (float x : send) mass += std::fabs(double(x));
      kept_mass += mass;  // density 0.01: all but 1% of it (subtracted below)
    }
  }
  unsetenv("DCT_DROP_IN_MEMORY");
  const auto context = detail::find_comm_context(comm);
  EXPECT_EQ(context->drop_in.size(), 10u);
  const detail::DropInTotals after = detail::drop_in_totals();
  EXPECT_EQ(after.made - before.made, static_cast<long long>(buffers));
  EXPECT_EQ(after.evicted - before.evicted, static_cast<long long>(buffers - 10));
  EXPECT_EQ(after.evicted_unused - before.evicted_unused, static_cast<long long>(buffers - 10));
  const double evicted_mass = after.evicted_mass - before.evicted_mass;
  EXPECT_GT(evicted_mass, 0.9 * kept_mass);  // the top 1% by magnitude left, the rest stranded
  EXPECT_LT(evicted_mass, kept_mass);
  // A state larger than the bound is still made (it is the call's), alone.
  setenv("DCT_DROP_IN_MEMORY", "1", 1);
  MPI_Comm small;
  MPI_Comm_dup(MPI_COMM_WORLD, &small);
  for (int call = 0; call < 2; ++call)
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, small),
                        DCT_SUCCESS);
  unsetenv("DCT_DROP_IN_MEMORY");
  EXPECT_EQ(detail::find_comm_context(small)->drop_in.size(), 1u);
  DCT_Status status;
  EXPECT_EQ(DCT_Allreduce_status(recv.data(), n, MPI_FLOAT, small, &status), DCT_SUCCESS);
  EXPECT_EQ(status.calls, 2);
  MPI_Comm_free(&small);
  MPI_Comm_free(&comm);
}

/// sendbuf == recvbuf (erroneous in MPI, which aborted in its argument check) reduces in place
/// on every path, as compressed requests always did.
TEST(DropIn, AliasedPassthroughIsInPlace) {
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

}  // namespace
}  // namespace dct::test
