// The compression kernels of every backend against simple references (sorting, loops), for
// float and double. The bodies are written once and run on the Kokkos core instantiated for each
// execution space of this build's Kokkos (kokkos_spaces.cpp: Serial, OpenMP, Cuda, HIP) and on
// the native CUDA and HIP backends when compiled; a case whose space or backend is missing, or
// has no device on this node, is skipped with a message. Data is prepared on the host and
// copied to the backend's memory. Each execution space is its own ctest entry (CMakeLists.txt).
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

#include "error.hpp"
#include "kernels.hpp"
#include "kokkos_spaces.hpp"

namespace dct::detail {
namespace {

/// Where a case's kernels come from: the Kokkos core on one execution space, or a native
/// GPU backend.
enum class Source {
  kokkos_serial,
  kokkos_openmp,
  kokkos_cuda,
  kokkos_hip,
  native_cuda,
  native_hip
};

template <Source S, typename T>
struct Case {
  static constexpr Source source = S;
  using Element = T;
};

const char *source_name(Source source) {
  switch (source) {
    case Source::kokkos_serial:
      return "kokkos_Serial";
    case Source::kokkos_openmp:
      return "kokkos_OpenMP";
    case Source::kokkos_cuda:
      return "kokkos_Cuda";
    case Source::kokkos_hip:
      return "kokkos_HIP";
    case Source::native_cuda:
      return "cuda";
    default:
      return "hip";
  }
}

/// The library's backend of this kind (nullptr when not compiled).
Backend *compiled_backend(DCT_Backend kind) {
  switch (kind) {
    case DCT_BACKEND_CUDA:
      return kernels::cuda_backend();
    case DCT_BACKEND_HIP:
      return kernels::hip_backend();
    default:
      return kernels::kokkos_backend();
  }
}

Backend *source_backend(Source source) {
  switch (source) {
    case Source::native_cuda:
      return kernels::cuda_backend();
    case Source::native_hip:
      return kernels::hip_backend();
    default:
      return test::kokkos_space_backend(source_name(source) + std::strlen("kokkos_"));
  }
}

template <typename C>
class Kernels : public ::testing::Test {
 protected:
  using Value = typename C::Element;

  void SetUp() override {
    backend_ = source_backend(C::source);
    const char *name = source_name(C::source);
    if (backend_ == nullptr) GTEST_SKIP() << name << " is not compiled in (or not in this Kokkos)";
    if (!backend_->available()) GTEST_SKIP() << name << " has no device here";
  }

  /// A copy of `host` in the backend's memory.
  template <typename U>
  BackendArray<U> upload(const std::vector<U> &host) {
    BackendArray<U> array(*backend_, host.size());
    backend_->copy(array.data(), host.data(), host.size() * sizeof(U), nullptr);
    return array;
  }
  template <typename U>
  std::vector<U> download(const BackendArray<U> &array, std::size_t n) {
    std::vector<U> host(n);
    backend_->copy(host.data(), array.data(), n * sizeof(U), nullptr);
    return host;
  }

  Value kth_largest(const std::vector<Value> *send, const std::vector<Value> &residual,
                    std::size_t k) {
    BackendArray<Value> s;
    if (send) s = upload(*send);
    const auto r = upload(residual);
    return backend_->kth_largest_abs(send ? s.data() : nullptr, r.data(), residual.size(), k,
                                     nullptr);
  }

  struct Filtered {
    std::size_t kept;
    std::vector<WireIndex> idx;
    std::vector<Value> val;
    std::vector<Value> residual;
  };
  /// The filter pass on copies; `send` nullptr means zeros.
  Filtered filter(const std::vector<Value> *send, const std::vector<Value> &residual, Value tau,
                  ValueCoding coding, std::size_t capacity) {
    BackendArray<Value> s;
    if (send) s = upload(*send);
    auto r = upload(residual);
    BackendArray<WireIndex> idx(*backend_, capacity + 1);
    BackendArray<Value> val(*backend_, capacity + 1);
    const std::size_t n = residual.size();
    const std::size_t kept = backend_->filter(send ? s.data() : nullptr, r.data(), n, tau, coding,
                                              idx.data(), val.data(), capacity, nullptr);
    const std::size_t written = std::min(kept, capacity);
    return {kept, download(idx, written), download(val, written), download(r, n)};
  }

  Backend *backend_ = nullptr;
};

using Cases =
    ::testing::Types<Case<Source::kokkos_serial, float>, Case<Source::kokkos_serial, double>,
                     Case<Source::kokkos_openmp, float>, Case<Source::kokkos_openmp, double>,
                     Case<Source::kokkos_cuda, float>, Case<Source::kokkos_cuda, double>,
                     Case<Source::kokkos_hip, float>, Case<Source::kokkos_hip, double>,
                     Case<Source::native_cuda, float>, Case<Source::native_cuda, double>,
                     Case<Source::native_hip, float>, Case<Source::native_hip, double>>;
struct CaseNames {
  template <typename C>
  static std::string GetName(int) {
    return std::string(source_name(C::source)) +
           (sizeof(typename C::Element) == 4 ? "_float" : "_double");
  }
};
TYPED_TEST_SUITE(Kernels, Cases, CaseNames);

template <typename T>
std::vector<T> normal(std::size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> distribution(0.0, scale);
  std::vector<T> v(n);
  for (T &x : v) x = static_cast<T>(distribution(engine));
  return v;
}

template <typename T>
T sorted_kth_largest_abs(const std::vector<T> &send, const std::vector<T> &residual,
                         std::size_t k) {
  std::vector<T> magnitudes(send.size());
  for (std::size_t i = 0; i < send.size(); ++i) magnitudes[i] = std::abs(send[i] + residual[i]);
  std::sort(magnitudes.begin(), magnitudes.end(), std::greater<T>());
  return magnitudes[k - 1];
}

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

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

// 50001: 13 work items of 4096, the last block partial; 4096 and 1001: one work item, run on
// the calling thread without kernel launches.
TYPED_TEST(Kernels, FilterMatchesReferenceAndConservesExactly) {
  using T = typename TestFixture::Value;
  for (const std::size_t n : {std::size_t(50001), std::size_t(4096), std::size_t(1001)}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto send = normal<T>(n, 11);
    const auto residual_before = normal<T>(n, 12, 0.3);
    const T tau = this->kth_largest(&send, residual_before, n / 100);
    for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16}) {
      const auto out = this->filter(&send, residual_before, tau, coding, n);
      std::size_t expected_kept = 0, j = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const T acc = send[i] + residual_before[i];
        if (!keep_entry(acc, tau)) {
          ASSERT_TRUE(same_bits(out.residual[i], acc)) << i;  // kept back exactly
          continue;
        }
        ++expected_kept;
        ASSERT_LT(j, out.kept);
        ASSERT_EQ(out.idx[j], i);
        const T sent = out.val[j];
        // Sent what the wire carries; the rest stays: sent + residual == acc, exactly.
        ASSERT_TRUE(same_bits(sent, wire_value(acc, coding))) << i;
        if (coding == ValueCoding::native) {
          ASSERT_TRUE(same_bits(out.residual[i], T(0)));
        }
        ASSERT_TRUE(same_bits(T(sent + out.residual[i]), acc)) << i;
        ++j;
      }
      EXPECT_EQ(out.kept, expected_kept);
      EXPECT_GE(out.kept, n / 100);  // ties can only add entries
    }
  }
}

TYPED_TEST(Kernels, FilterOverflowSecondPassCollectsTheRest) {
  using T = typename TestFixture::Value;
  const std::size_t n = 20007;
  const auto send = normal<T>(n, 21);
  const auto residual_before = normal<T>(n, 22);
  const T tau = this->kth_largest(&send, residual_before, 500);
  const auto one = this->filter(&send, residual_before, tau, ValueCoding::native, n);
  const std::size_t capacity = 123;
  const auto first = this->filter(&send, residual_before, tau, ValueCoding::native, capacity);
  EXPECT_EQ(first.kept, one.kept);
  const auto rest =
      this->filter(nullptr, first.residual, tau, ValueCoding::native, one.kept - capacity);
  EXPECT_EQ(rest.kept, one.kept - capacity);
  auto idx = first.idx;
  idx.insert(idx.end(), rest.idx.begin(), rest.idx.end());
  auto val = first.val;
  val.insert(val.end(), rest.val.begin(), rest.val.end());
  EXPECT_EQ(std::vector<WireIndex>(one.idx.begin(), one.idx.begin() + one.kept), idx);
  EXPECT_EQ(std::vector<T>(one.val.begin(), one.val.begin() + one.kept), val);
  EXPECT_EQ(one.residual, rest.residual);
}

// Kept entries bunched in one stretch (here 3000 in one work item of 4096, more than a work
// item's share of any of these capacities), with capacities that cut the list inside it.
// The second layout (4000 entries) is one work item, run on the calling thread.
TYPED_TEST(Kernels, FilterKeepsOrderAndCapacityWhenKeptEntriesBunch) {
  using T = typename TestFixture::Value;
  const std::size_t bunch = 3000;
  for (const auto &[n, from] : {std::pair<std::size_t, std::size_t>{4 * 4096 + 3, 5000},
                                std::pair<std::size_t, std::size_t>{4000, 500}}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const auto send = normal<T>(n, 31, 0.01);
    auto residual_before = normal<T>(n, 32, 0.01);
    for (std::size_t i = from; i < from + bunch; ++i) residual_before[i] = T(1) + T(1e-4) * T(i);
    for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16}) {
      for (std::size_t capacity : {bunch, bunch - 500, std::size_t(1000), std::size_t(0)}) {
        const auto out = this->filter(&send, residual_before, T(0.5), coding, capacity);
        EXPECT_EQ(out.kept, bunch);
        const std::size_t sent = std::min(bunch, capacity);
        ASSERT_EQ(out.idx.size(), sent);
        for (std::size_t i = 0; i < n; ++i) {
          const T acc = send[i] + residual_before[i];
          const std::size_t j = i - from;
          if (i < from || j >= sent) {  // not kept, or past the capacity: stays home whole
            ASSERT_TRUE(same_bits(out.residual[i], acc)) << i << " capacity " << capacity;
            continue;
          }
          ASSERT_EQ(out.idx[j], i);
          ASSERT_TRUE(same_bits(out.val[j], wire_value(acc, coding))) << i;
          ASSERT_TRUE(same_bits(T(out.val[j] + out.residual[i]), acc)) << i;
        }
      }
    }
  }
}

TYPED_TEST(Kernels, FilterNeverSendsZerosAndAlwaysSendsNonFinite) {
  using T = typename TestFixture::Value;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> residual = {T(0), nan, T(0.5), -inf, T(0), T(-4)};
  for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16}) {
    // tau = 0 would keep everything by magnitude; zeros still stay home.
    const auto out = this->filter(nullptr, residual, T(0), coding, 6);
    EXPECT_EQ(out.kept, 4u);
    EXPECT_EQ(out.idx, (std::vector<WireIndex>{1, 2, 3, 5}));
    EXPECT_TRUE(std::isnan(out.val[0]));
    EXPECT_EQ(out.val[2], -inf);
    for (T r : out.residual) EXPECT_EQ(r, T(0));  // NaN and Inf leave nothing behind
  }
  const auto top = this->filter(nullptr, {T(1), nan, T(2)}, inf, ValueCoding::native, 3);
  EXPECT_EQ(top.kept, 1u);
  EXPECT_EQ(top.idx[0], 1u);
}

TYPED_TEST(Kernels, FilterSaturatesValuesBeyondTheSixteenBitRange) {
  using T = typename TestFixture::Value;
  const auto out = this->filter(nullptr, {T(1e5), T(-7e4), T(3)}, T(1), ValueCoding::fp16, 3);
  ASSERT_EQ(out.kept, 3u);
  EXPECT_EQ(out.val[0], T(65504));
  EXPECT_EQ(out.val[1], T(-65504));
  EXPECT_EQ(out.residual[0], T(1e5) - T(65504));  // the rest waits for the next call
  EXPECT_EQ(out.residual[1], T(-7e4) + T(65504));
  EXPECT_EQ(out.residual[2], T(0));
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
  EXPECT_EQ(kernels::backend_for(host.data(), DCT_BACKEND_AUTO).kind(), DCT_BACKEND_KOKKOS);
  EXPECT_EQ(kernels::backend_for(host.data(), DCT_BACKEND_KOKKOS).kind(), DCT_BACKEND_KOKKOS);
  for (DCT_Backend gpu : {DCT_BACKEND_CUDA, DCT_BACKEND_HIP}) {
    int compiled = -1;
    ASSERT_EQ(DCT_Backend_compiled(gpu, &compiled), DCT_SUCCESS);
    EXPECT_EQ(compiled, compiled_backend(gpu) != nullptr ? 1 : 0);
    if (compiled_backend(gpu) != nullptr) continue;
    try {
      kernels::backend_for(host.data(), gpu);
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
  const bool started = dct::detail::kernels::initialize_runtime();
  const int failed = RUN_ALL_TESTS();
  if (started) dct::detail::kernels::finalize_runtime();
  return failed;
}
