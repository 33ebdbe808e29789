// The compression kernels against simple references (sorting, loops), for float and double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels.hpp"

namespace dct::detail {
namespace {

template <typename T>
class Kernels : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Kernels, ElementTypes);

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
  using T = TypeParam;
  for (std::size_t n : {1u, 2u, 7u, 1000u, 100003u}) {
    const auto send = normal<T>(n, 1 + n);
    const auto residual = normal<T>(n, 2 + n, 0.1);
    for (std::size_t k : {std::size_t(1), n / 100 + 1, n / 2 + 1, n}) {
      const T expected = sorted_kth_largest_abs(send, residual, k);
      const T tau = kernels::kth_largest_abs(send.data(), residual.data(), n, k);
      EXPECT_TRUE(same_bits(tau, expected))
          << "n=" << n << " k=" << k << " tau=" << tau << " expected=" << expected;
    }
  }
}

TYPED_TEST(Kernels, KthLargestHandlesTiesZerosAndNullSend) {
  using T = TypeParam;
  std::vector<T> residual = {T(-2), T(2), T(0), T(1), T(-2), T(0), T(0.5)};
  const std::size_t n = residual.size();
  const T expected[] = {2, 2, 2, 1, 0.5, 0, 0};
  for (std::size_t k = 1; k <= n; ++k)
    EXPECT_EQ(kernels::kth_largest_abs<T>(nullptr, residual.data(), n, k), expected[k - 1])
        << "k=" << k;
  const std::vector<T> zeros(100, T(0));
  EXPECT_EQ(kernels::kth_largest_abs<T>(nullptr, zeros.data(), zeros.size(), 5), T(0));
}

TYPED_TEST(Kernels, KthLargestRanksNanAndInfinityOnTop) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> residual = {T(1), nan, -inf, T(3), T(-2)};
  EXPECT_EQ(kernels::kth_largest_abs<T>(nullptr, residual.data(), 5, 1), inf);  // NaN -> +Inf
  EXPECT_EQ(kernels::kth_largest_abs<T>(nullptr, residual.data(), 5, 2), inf);
  EXPECT_EQ(kernels::kth_largest_abs<T>(nullptr, residual.data(), 5, 3), T(3));
  EXPECT_EQ(kernels::kth_largest_abs<T>(nullptr, residual.data(), 5, 5), T(1));
}

TYPED_TEST(Kernels, FilterConservesEveryEntryExactly) {
  using T = TypeParam;
  const std::size_t n = 50000;
  const auto send = normal<T>(n, 11);
  const auto residual_before = normal<T>(n, 12, 0.3);
  const T tau = kernels::kth_largest_abs(send.data(), residual_before.data(), n, n / 100);
  auto residual = residual_before;
  std::vector<WireIndex> idx(n);
  std::vector<T> val(n);
  const std::size_t kept =
      kernels::filter(send.data(), residual.data(), n, tau, idx.data(), val.data(), n);

  std::size_t expected_kept = 0, j = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const T acc = send[i] + residual_before[i];
    if (keep_entry(acc, tau)) {
      ++expected_kept;
      ASSERT_LT(j, kept);
      EXPECT_EQ(idx[j], i);
      EXPECT_TRUE(same_bits(val[j], acc));        // sent exactly acc ...
      EXPECT_TRUE(same_bits(residual[i], T(0)));  // ... and nothing left behind
      ++j;
    } else {
      EXPECT_TRUE(same_bits(residual[i], acc));  // kept back exactly
    }
  }
  EXPECT_EQ(kept, expected_kept);
  EXPECT_GE(kept, n / 100);  // ties can only add entries
}

TYPED_TEST(Kernels, FilterOverflowSecondPassCollectsTheRest) {
  using T = TypeParam;
  const std::size_t n = 20000;
  const auto send = normal<T>(n, 21);
  const auto residual_before = normal<T>(n, 22);
  const T tau = kernels::kth_largest_abs(send.data(), residual_before.data(), n, 500);

  auto residual_one = residual_before;
  std::vector<WireIndex> idx_one(n);
  std::vector<T> val_one(n);
  const std::size_t kept =
      kernels::filter(send.data(), residual_one.data(), n, tau, idx_one.data(), val_one.data(), n);

  auto residual_two = residual_before;
  const std::size_t capacity = 123;
  std::vector<WireIndex> idx_two(kept);
  std::vector<T> val_two(kept);
  EXPECT_EQ(kernels::filter(send.data(), residual_two.data(), n, tau, idx_two.data(),
                            val_two.data(), capacity),
            kept);
  EXPECT_EQ(kernels::filter<T>(nullptr, residual_two.data(), n, tau, idx_two.data() + capacity,
                               val_two.data() + capacity, kept - capacity),
            kept - capacity);
  EXPECT_EQ(std::vector<WireIndex>(idx_one.begin(), idx_one.begin() + kept), idx_two);
  EXPECT_EQ(std::vector<T>(val_one.begin(), val_one.begin() + kept), val_two);
  EXPECT_EQ(residual_one, residual_two);
}

TYPED_TEST(Kernels, FilterNeverSendsZerosAndAlwaysSendsNonFinite) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> residual = {T(0), nan, T(0.5), -inf, T(0), T(-4)};
  std::vector<WireIndex> idx(6);
  std::vector<T> val(6);
  // tau = 0 would keep everything by magnitude; zeros still stay home.
  const std::size_t kept =
      kernels::filter<T>(nullptr, residual.data(), 6, T(0), idx.data(), val.data(), 6);
  EXPECT_EQ(kept, 4u);
  EXPECT_EQ(std::vector<WireIndex>(idx.begin(), idx.begin() + 4),
            (std::vector<WireIndex>{1, 2, 3, 5}));
  std::vector<T> residual2 = {T(1), nan, T(2)};
  EXPECT_EQ(kernels::filter<T>(nullptr, residual2.data(), 3, inf, idx.data(), val.data(), 3), 1u);
  EXPECT_EQ(idx[0], 1u);
}

TEST(KernelsIndices, ValidationRejectsOutOfRangeAndDisorder) {
  const std::vector<WireIndex> good = {0, 3, 4, 9};
  EXPECT_TRUE(kernels::indices_valid(good.data(), good.size(), 10));
  EXPECT_FALSE(kernels::indices_valid(good.data(), good.size(), 9));  // 9 out of range
  const std::vector<WireIndex> duplicate = {0, 3, 3, 5};
  EXPECT_FALSE(kernels::indices_valid(duplicate.data(), duplicate.size(), 10));
  const std::vector<WireIndex> decreasing = {5, 1};
  EXPECT_FALSE(kernels::indices_valid(decreasing.data(), decreasing.size(), 10));
  EXPECT_TRUE(kernels::indices_valid(nullptr, 0, 0));
}

TYPED_TEST(Kernels, ScatterAddAndFillZero) {
  using T = TypeParam;
  std::vector<T> out(8, T(7));
  kernels::fill_zero(out.data(), out.size());
  EXPECT_EQ(out, std::vector<T>(8, T(0)));
  const std::vector<WireIndex> idx = {1, 4, 7};
  const std::vector<T> val = {T(1.5), T(-2), T(3)};
  kernels::scatter_add(idx.data(), val.data(), 3, out.data());
  kernels::scatter_add(idx.data(), val.data(), 2, out.data());
  EXPECT_EQ(out, (std::vector<T>{0, 3, 0, 0, -4, 0, 0, 3}));
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
