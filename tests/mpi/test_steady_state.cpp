// DCT-DP's steady state allocates nothing and takes no page faults: once a request's
// lists have grown to what its calls need, 20 more calls of every algorithm, value coding and
// tau control, on every rank, neither allocate (malloc, operator new: anything but MPI's own,
// allocation_counter.hpp) nor touch fresh memory (the process's page faults), and send exactly
// their k entries (adaptive) on every call; with momentum correction in both of its forms too.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "allocation_counter.hpp"
#include "common.hpp"

namespace dct::test {
namespace {

// Long enough that the candidates pass kShortList (the host's trim in a window) at density 0.05.
constexpr std::size_t kElements = std::size_t(1) << 17;
// Error feedback settles over ~1/density = 20 calls. No more calls than that on purpose: 4 ranks
// on 2 cores pay a scheduler time slice per collective round, and CI's machine was ~10x slower
// than this one at 4 ranks (160 calls per setting ran past the 200 s watchdog there).
constexpr int kWarmup = 30;
constexpr int kCounted = 20;

/// Gradients drawn once into a pool; each call reads a window at a pseudo-random offset.
class Pool {
 public:
  explicit Pool(std::size_t n) : n_(n), values_(4 * n) {
    std::mt19937_64 engine(1009u * static_cast<unsigned>(rank()) + 7u);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (double &x : values_) x = normal(engine);
  }
  template <typename T>
  void fill(int call, std::vector<T> &out) const {
    const std::size_t offset = (static_cast<std::size_t>(call) * 7919u) % (3 * n_);
    for (std::size_t i = 0; i < n_; ++i) out[i] = static_cast<T>(values_[offset + i]);
  }

 private:
  std::size_t n_;
  std::vector<double> values_;
};

bool mpi_is_mpich() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  return std::string(version, static_cast<std::size_t>(length)).find("MPICH") != std::string::npos;
}

/// One request of these settings for kWarmup + kCounted calls; with `check`, the counted calls
/// must neither allocate nor fault a page. `momentum_result` (update, gradient): with
/// dct_momentum=0.9.
template <typename T>
void run(const char *algorithm, const char *values, const char *control, bool check,
         const char *momentum_result = nullptr) {
  SCOPED_TRACE(std::string(algorithm) + ", dct_values=" + values + ", " + control +
               (momentum_result ? std::string(", momentum ") + momentum_result : std::string()));
  // fixed: tau re-selected every 10 calls (the paper's 1000 would let the kept count drift up
  // through every counted call, which is growth, not a steady state).
  MPI_Info info =
      make_info({{"dct_density", "0.05"},
                 {"dct_algorithm", algorithm},
                 {"dct_values", values},
                 {"dct_tau_control", control},
                 {"dct_interval", "10"},
                 {"dct_momentum", momentum_result ? "0.9" : "0"},
                 {"dct_momentum_result", momentum_result ? momentum_result : "update"}});
  std::vector<T> send(kElements), recv(kElements);
  DCT_Request request;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), kElements, mpi_type<T>(),
                                         MPI_SUM, MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  const Pool pool(kElements);
  const auto k = static_cast<MPI_Count>(std::ceil(0.05 * double(kElements)));
  AllocationCount first, second;  // two windows of kCounted calls each
  int wrong_count = 0;
  const int calls = check ? kWarmup + 2 * kCounted : kWarmup;
  for (int call = 0; call < calls; ++call) {
    pool.fill(call, send);
    MPI_Barrier(MPI_COMM_WORLD);
    if (check && call == kWarmup) start_counting();
    if (check && call == kWarmup + kCounted) {
      first = stop_counting();
      start_counting();
    }
    DCT_Status status;
    ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
    if (call >= kWarmup && std::string(control) == "adaptive" && status.nnz_sent != k)
      ++wrong_count;
  }
  second = stop_counting();
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
  if (!check) return;
  EXPECT_EQ(wrong_count, 0) << "calls that did not send exactly k = " << k << " entries";
  for (const AllocationCount *count : {&first, &second}) {
    std::string where;
    for (const std::string &caller : count->where) where += "\n  " + caller;
    EXPECT_EQ(count->allocations, 0) << "allocations in " << kCounted << " calls, first:" << where;
  }
  // The process's page faults are MPI's too, and only the allocations can be told apart.
  // Open MPI's shared memory is warm after the first pass; MPICH 4.0.2 over UCX touches fresh
  // pages of its own shared-memory segments in calls long after (perf record -e page-faults in
  // the counted calls: uct_sm_ep_put_bcopy, ucp_eager_only_handler and their copies; 35-39 faults
  // for a request run alone, 1 after the first pass), so under MPICH they are not asserted.
  // Under Open MPI one page is now and then first touched late (1 fault in one window, in about
  // one suite run in five on 2 loaded cores; not traced to its owner): a cost per call shows in
  // both windows, so one of them must be free of faults.
  if (!mpi_is_mpich()) {
    EXPECT_TRUE(first.page_faults == 0 || second.page_faults == 0)
        << "page faults in two windows of " << kCounted << " calls: " << first.page_faults
        << " and " << second.page_faults;
  }
}

const char *const kAlgorithms[] = {"allgather",          "split", "hierarchical",
                                   "recursive_doubling", "dense", "auto"};
const char *const kValues[] = {"native", "fp16", "bf16", "sign"};

template <typename T>
class SteadyState : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SteadyState, ElementTypes);

TYPED_TEST(SteadyState, CallsAllocateNothingAndTakeNoPageFaults) {
  if (!allocation_counting_available())
    GTEST_SKIP() << "a sanitizer build replaces the allocation functions itself";
  // Twice over every setting, checked the second time: the process's first calls of each kind
  // also warm what is not a request's (MPI's shared-memory fragments, the kernels' scratch of
  // this thread, which every request shares).
  for (const bool check : {false, true})
    for (const char *control : {"adaptive", "fixed"})
      for (const char *algorithm : kAlgorithms)
        for (const char *values : kValues) run<TypeParam>(algorithm, values, control, check);
}

// Momentum correction (the README's recommended settings), in both forms: the velocity and the
// last update are the request's from init, so its calls allocate nothing either.
TYPED_TEST(SteadyState, MomentumCallsAllocateNothingAndTakeNoPageFaults) {
  if (!allocation_counting_available())
    GTEST_SKIP() << "a sanitizer build replaces the allocation functions itself";
  for (const bool check : {false, true})
    for (const char *result : {"update", "gradient"})
      for (const char *algorithm : kAlgorithms)
        run<TypeParam>(algorithm, "fp16", "adaptive", check, result);
}

// A tensor with fewer nonzero entries than the budget (embeddings, masked layers) costs what its
// nonzeros cost, from the first call; before, the first call's exact selection copied the
// zeros' bucket (nearly n keys, a temporary the thread kept) and selected over it, 8.9 s and
// 1.4 GB more at 2^28 floats. The pages touched by its first calls are counted: no temporary
// of the tensor's size (the candidate lists are 2 * 3k entries; the residual was touched at init).
TYPED_TEST(SteadyState, MostlyZeroTensorsTouchNoTensorSizedTemporary) {
  using T = TypeParam;
  if (!allocation_counting_available())
    GTEST_SKIP() << "a sanitizer build replaces the allocation functions itself";
  constexpr std::size_t n = std::size_t(1) << 22;  // larger than every tensor before it
  std::vector<T> send(n, T(0)), recv(n, T(1));
  MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_algorithm", "allgather"}});
  DCT_Request request = DCT_REQUEST_NULL;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, mpi_type<T>(), MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  start_counting();
  for (int call = 0; call < 3; ++call) {
    std::fill(send.begin(), send.end(), T(0));
    for (std::size_t j = 0; j < 200; ++j)
      send[(j * 7919 + std::size_t(call) * 104729 + std::size_t(rank()) * 31) % n] = T(1 + j % 7);
    ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
    DCT_Status status;
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
    EXPECT_EQ(status.nnz_sent, 200) << "call " << call;
  }
  const AllocationCount count = stop_counting();
  const long tensor_pages = static_cast<long>(n * sizeof(T) / 4096);
  EXPECT_LT(count.page_faults, tensor_pages / 2) << "of a tensor of " << tensor_pages << " pages";
  EXPECT_EQ(DCT_Request_free(&request), DCT_SUCCESS);
}

}  // namespace
}  // namespace dct::test
