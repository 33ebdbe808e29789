// The compression kernels of every backend against simple references (sorting, loops), for
// float and double: the exact and sampled thresholds and the element-wise kernels here, the
// selection (select, trim_candidates, keep_top) and the result (sum_lists) in
// test_selection.cpp. The bodies are written once and run on the Kokkos backend instantiated for
// each execution space of this build's Kokkos (kokkos_spaces.cpp: Serial, OpenMP, Cuda, HIP) and
// on the native CUDA and HIP backends when compiled (kernel_cases.hpp). Each execution space is
// its own ctest entry (CMakeLists.txt).
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/compute_backend.hpp"
#include "core/error.hpp"
#include "kernel_cases.hpp"
#include "kokkos_spaces.hpp"

namespace dct::detail {
namespace {

using test::Case;
using test::CaseNames;
using test::Cases;
using test::compiled_backend;
using test::normal;
using test::same_bits;
using test::sorted_kth_largest_abs;
using test::Source;

template <typename C>
class Kernels : public test::BackendTest<C> {};
TYPED_TEST_SUITE(Kernels, Cases, CaseNames);

TYPED_TEST(Kernels, KthLargestEqualsSortedReference) {
  using T = typename TestFixture::Value;
  for (std::size_t n : {1u, 2u, 7u, 1000u, 100003u}) {
    const auto send = normal<T>(n, 1 + n);
    const auto residual = normal<T>(n, 2 + n, 0.1);
    for (std::size_t k : {std::size_t(1), n / 100 + 1, n / 2 + 1, n}) {
      const T expected = sorted_kth_largest_abs(send, residual, k);
      const T tau = this->kth_largest(&send, residual, k);
      EXPECT_TRUE(same_bits(tau, expected))
          << "n=" << n << " k=" << k << " tau=" << tau << " expected=" << expected;
    }
  }
}

// From 2^18 entries one pass copies the keys above a bound taken from a sample, and two passes
// run where the bound is not used or fails; the answer must be the same either way (heavy
// tails, ties at the bound, k at the ends, NaN and Inf).
TYPED_TEST(Kernels, KthLargestOnLargeTensorsEqualsSortedReference) {
  using T = typename TestFixture::Value;
  const std::size_t n = (std::size_t(1) << 19) + 3;
  std::mt19937_64 engine(31);
  std::cauchy_distribution<double> heavy(0.0, 1.0);
  std::uniform_int_distribution<int> few(-3, 3);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<T> cauchy(n), ties(n), plateau(n);
  for (T &x : cauchy) x = static_cast<T>(heavy(engine));
  for (T &x : ties) x = static_cast<T>(few(engine));
  // 1% at 5, half exactly at 2 (where a sampled bound lands for k = n/100, letting far more
  // keys through than the sample suggested), the rest 0.
  for (T &x : plateau) {
    const double u = unit(engine);
    x = u < 0.01 ? T(5) : u < 0.51 ? T(-2) : T(0);
  }
  const std::vector<std::pair<const char *, std::vector<T>>> inputs = {
      {"normal", normal<T>(n, 32)}, {"cauchy", cauchy}, {"ties", ties}, {"plateau", plateau}};
  const auto residual = normal<T>(n, 33, 1e-3);
  const std::vector<T> no_residual(n, T(0));
  for (const auto &[name, send] : inputs) {
    const bool exact_values = std::string(name) == "ties" || std::string(name) == "plateau";
    const auto &r = exact_values ? no_residual : residual;
    std::vector<T> sorted(n);
    for (std::size_t i = 0; i < n; ++i) sorted[i] = std::abs(send[i] + r[i]);
    std::sort(sorted.begin(), sorted.end(), std::greater<T>());
    for (std::size_t k : {std::size_t(1), std::size_t(7), n / 1000, n / 100, n / 2, n}) {
      const T tau = this->kth_largest(&send, r, k);
      EXPECT_TRUE(same_bits(tau, sorted[k - 1]))
          << name << " k=" << k << " tau=" << tau << " expected=" << sorted[k - 1];
    }
  }
  // NaN ranks above +Inf (and comes back as +Inf) on this path too.
  auto send = normal<T>(n, 34);
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  send[10] = nan;
  send[n / 2] = -inf;
  send[n - 1] = nan;
  T largest_finite = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (std::isfinite(send[i])) largest_finite = std::max(largest_finite, std::abs(send[i]));
  EXPECT_EQ(this->kth_largest(&send, no_residual, 1), inf);
  EXPECT_EQ(this->kth_largest(&send, no_residual, 3), inf);
  EXPECT_EQ(this->kth_largest(&send, no_residual, 4), largest_finite);
}

// A mostly-zero tensor (embeddings, masked layers): the k-th largest lies in the lowest bucket
// of the first digit, with the zeros. Issue 61: that bucket (nearly n keys) was copied and
// selected over, 8.9 s and 1.4 GB more at 2^28 floats; now only its nonzero keys are, into room
// for a few times the rank, with the whole bucket's copy left for more tiny values than that.
TYPED_TEST(Kernels, KthLargestOfAMostlyZeroTensor) {
  using T = typename TestFixture::Value;
  const std::size_t n = (std::size_t(1) << 19) + 3;
  const T tiny = std::numeric_limits<T>::denorm_min();
  std::mt19937_64 engine(41);
  std::uniform_int_distribution<std::size_t> position(0, n - 1);
  for (const std::size_t tinies : {std::size_t(0), std::size_t(300), std::size_t(20000)}) {
    std::vector<T> send(n, T(0));
    for (std::size_t j = 0; j < 500; ++j) send[position(engine)] = T(1) + T(j % 17);
    for (std::size_t j = 0; j < tinies; ++j) send[position(engine)] = tiny * T(1 + j % 5);
    std::vector<T> sorted(n);
    for (std::size_t i = 0; i < n; ++i) sorted[i] = std::abs(send[i]);
    std::sort(sorted.begin(), sorted.end(), std::greater<T>());
    const std::vector<T> zero(n, T(0));
    for (std::size_t k : {std::size_t(1), std::size_t(499), std::size_t(500), std::size_t(501),
                          std::size_t(510), std::size_t(800), n / 100, n}) {
      const T tau = this->kth_largest(&send, zero, k);
      EXPECT_TRUE(same_bits(tau, sorted[k - 1]))
          << tinies << " tiny values, k=" << k << " tau=" << tau << " expected=" << sorted[k - 1];
      EXPECT_TRUE(same_bits(this->kth_largest(nullptr, send, k), sorted[k - 1])) << "k=" << k;
    }
  }
}

TYPED_TEST(Kernels, KthLargestHandlesTiesZerosAndNullSend) {
  using T = typename TestFixture::Value;
  std::vector<T> residual = {T(-2), T(2), T(0), T(1), T(-2), T(0), T(0.5)};
  const T expected[] = {2, 2, 2, 1, 0.5, 0, 0};
  for (std::size_t k = 1; k <= residual.size(); ++k)
    EXPECT_EQ(this->kth_largest(nullptr, residual, k), expected[k - 1]) << "k=" << k;
  EXPECT_EQ(this->kth_largest(nullptr, std::vector<T>(100, T(0)), 5), T(0));
}

TYPED_TEST(Kernels, KthLargestRanksNanAndInfinityOnTop) {
  using T = typename TestFixture::Value;
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> residual = {T(1), nan, -inf, T(3), T(-2)};
  EXPECT_EQ(this->kth_largest(nullptr, residual, 1), inf);  // NaN -> +Inf
  EXPECT_EQ(this->kth_largest(nullptr, residual, 2), inf);
  EXPECT_EQ(this->kth_largest(nullptr, residual, 3), T(3));
  EXPECT_EQ(this->kth_largest(nullptr, residual, 5), T(1));
}

TYPED_TEST(Kernels, SampleIsTheAbsoluteValuesAtTheStratifiedPositions) {
  using T = typename TestFixture::Value;
  const std::size_t n = 10007, m = 300;
  const auto send = normal<T>(n, 31);
  const auto residual = normal<T>(n, 32);
  const auto s = this->upload(send);
  const auto r = this->upload(residual);
  std::vector<T> sample(m);
  this->backend_->gather_abs_sample(s.data(), r.data(), n, m, 99, sample.data(), nullptr);
  std::size_t previous_stratum_end = 0;
  for (std::size_t j = 0; j < m; ++j) {
    const std::size_t i = sample_position(j, m, n, 99);
    EXPECT_GE(i, previous_stratum_end);  // one position per stratum, in order
    previous_stratum_end = (j + 1) * n / m;
    EXPECT_LT(i, previous_stratum_end);
    EXPECT_TRUE(same_bits(sample[j], T(std::fabs(send[i] + residual[i])))) << j;
  }
}

TYPED_TEST(Kernels, ScatterAddAndFillZero) {
  using T = typename TestFixture::Value;
  auto out = this->upload(std::vector<T>(8, T(7)));
  this->backend_->fill_zero(out.data(), 8, nullptr);
  EXPECT_EQ(this->download(out, 8), std::vector<T>(8, T(0)));
  const auto idx = this->upload(std::vector<WireIndex>{1, 4, 7});
  const auto val = this->upload(std::vector<T>{T(1.5), T(-2), T(3)});
  this->backend_->scatter_add(idx.data(), val.data(), 3, out.data(), nullptr);
  this->backend_->scatter_add(idx.data(), val.data(), 2, out.data(), nullptr);
  EXPECT_EQ(this->download(out, 8), (std::vector<T>{0, 3, 0, 0, -4, 0, 0, 3}));
}

// split cuts a rank's sorted indices at the segment boundaries and counts them per histogram
// bucket with lower_bounds, where the indices lie: std::lower_bound's positions for keys before,
// on, between and after the indices, past 2^32, and over no index at all.
TYPED_TEST(Kernels, LowerBoundsAreStdLowerBound) {
  std::mt19937_64 engine(5);
  for (std::size_t m : {0u, 1u, 7u, 1000u, 100003u}) {
    std::vector<WireIndex> idx(m);
    std::uint64_t next = 3;
    for (WireIndex &i : idx) {
      i = static_cast<WireIndex>(next);
      next += 1 + engine() % 4;
    }
    std::vector<std::uint64_t> keys = {0, 1, 3, 4, next - 1, next, std::uint64_t(1) << 40};
    for (int j = 0; j < 300; ++j) keys.push_back(engine() % (next + 2));
    std::sort(keys.begin(), keys.end());
    const auto on_backend = this->upload(idx);
    std::vector<std::uint64_t> bounds(keys.size(), ~std::uint64_t(0));
    this->backend_->lower_bounds(on_backend.data(), m, keys.data(), keys.size(), bounds.data(),
                                 nullptr);
    for (std::size_t j = 0; j < keys.size(); ++j)
      ASSERT_EQ(bounds[j],
                std::uint64_t(std::lower_bound(idx.begin(), idx.end(), keys[j]) - idx.begin()))
          << "m=" << m << " key=" << keys[j];
  }
}

TEST(Backends, CompiledAnswersThroughItsOutputAndReturnsACode) {
  int compiled = -1;
  EXPECT_EQ(DCT_Backend_compiled(DCT_BACKEND_KOKKOS, &compiled), DCT_SUCCESS);
  EXPECT_EQ(compiled, 1);
  compiled = -1;
  EXPECT_EQ(DCT_Backend_compiled(DCT_BACKEND_AUTO, &compiled), DCT_SUCCESS);
  EXPECT_EQ(compiled, 1);
  compiled = -1;
  EXPECT_EQ(DCT_Backend_compiled(42, &compiled), DCT_ERR_ARG);
  EXPECT_EQ(compiled, -1);
  EXPECT_EQ(DCT_Backend_compiled(DCT_BACKEND_KOKKOS, nullptr), DCT_ERR_ARG);
}

TEST(Backends, HostBuffersRunOnKokkosAndMissingBackendsSayNotCompiled) {
  std::vector<float> host(4);
  EXPECT_EQ(backends::backend_for(host.data(), DCT_BACKEND_AUTO).kind(), DCT_BACKEND_KOKKOS);
  EXPECT_EQ(backends::backend_for(host.data(), DCT_BACKEND_KOKKOS).kind(), DCT_BACKEND_KOKKOS);
  for (DCT_Backend gpu : {DCT_BACKEND_CUDA, DCT_BACKEND_HIP}) {
    int compiled = -1;
    ASSERT_EQ(DCT_Backend_compiled(gpu, &compiled), DCT_SUCCESS);
    EXPECT_EQ(compiled, compiled_backend(gpu) != nullptr ? 1 : 0);
    if (compiled_backend(gpu) != nullptr) continue;
    try {
      backends::backend_for(host.data(), gpu);
      ADD_FAILURE() << "a backend that is not compiled was returned";
    } catch (const Error &e) {
      EXPECT_EQ(e.code(), DCT_ERR_NOT_COMPILED);
    }
  }
}

// The thread count of the test environment (cmake/dctTesting.cmake) reaches a threaded Kokkos,
// so that a suite run "at 2 threads" really ran the kernels on 2.
TEST(Backends, KokkosRunsWithTheEnvironmentsThreadCount) {
  using Host = Kokkos::DefaultHostExecutionSpace;
  const int concurrency = Host().concurrency();
  std::printf("Kokkos %d, host execution space %s, concurrency %d\n", KOKKOS_VERSION, Host::name(),
              concurrency);
#if defined(KOKKOS_ENABLE_OPENMP)
  const char *threads = std::getenv("OMP_NUM_THREADS");
  if (std::is_same_v<Host, Kokkos::OpenMP> && threads != nullptr) {
    EXPECT_EQ(concurrency, std::atoi(threads));
  }
#endif
#if defined(KOKKOS_ENABLE_SERIAL)
  if (std::is_same_v<Host, Kokkos::Serial>) {
    EXPECT_EQ(concurrency, 1);
  }
#endif
}

}  // namespace
}  // namespace dct::detail

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const bool started = dct::detail::backends::initialize_runtime();
  const int failed = RUN_ALL_TESTS();
  if (started) dct::detail::backends::finalize_runtime();
  return failed;
}
