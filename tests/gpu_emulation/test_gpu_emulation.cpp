// The CUDA/HIP backends' common source (backends/common/cuda_hip/backend.hpp) run on the host
// through the emulation in runtime.hpp, against simple references: the kernels' logic is
// checked on every machine, including CI, which has no GPU. What only a GPU can show (memory
// spaces, real concurrency, CUB/rocPRIM) is left to tests/unit/test_kernels.cpp on a GPU node.
#include "runtime.hpp"  // first: it stands in for backends/cuda/runtime.hpp

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "common/cuda_hip/backend.hpp"

namespace dct::detail {
namespace {

template <typename T>
class Emulated : public ::testing::Test {
 protected:
  emulation::GpuBackend backend_;

  static std::vector<T> random_values(std::size_t n, unsigned seed) {
    std::mt19937 engine(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<T> values(n);
    for (auto &v : values) v = static_cast<T>(normal(engine));
    return values;
  }

  /// The k-th largest |send + residual| by sorting; NaN above everything, returned as +Inf.
  static T reference_kth(const std::vector<T> *send, const std::vector<T> &residual,
                         std::size_t k) {
    std::vector<T> keys(residual.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const T acc = (send ? (*send)[i] : T(0)) + residual[i];
      keys[i] = acc != acc ? std::numeric_limits<T>::infinity() : std::fabs(acc);
    }
    std::sort(keys.begin(), keys.end(), std::greater<T>());
    return keys[k - 1];
  }
};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Emulated, Types);

TYPED_TEST(Emulated, KthLargestEqualsSortedReference) {
  using T = TypeParam;
  for (std::size_t n : {1u, 2u, 7u, 100u, 1000u}) {
    const auto send = this->random_values(n, 1);
    const auto residual = this->random_values(n, 2);
    for (std::size_t k : {std::size_t(1), n / 2 + 1, n}) {
      EXPECT_EQ(this->backend_.kth_largest_abs(send.data(), residual.data(), n, k, nullptr),
                this->reference_kth(&send, residual, k))
          << "n=" << n << " k=" << k;
      EXPECT_EQ(this->backend_.kth_largest_abs(static_cast<const T *>(nullptr), residual.data(), n,
                                               k, nullptr),
                this->reference_kth(nullptr, residual, k));
    }
  }
}

TYPED_TEST(Emulated, KthLargestTiesZerosNanAndInfinity) {
  using T = TypeParam;
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> residual = {0, 3, -3, 3, 0, inf, -1, nan, 2, -0.0f};
  for (std::size_t k = 1; k <= residual.size(); ++k)
    EXPECT_EQ(this->backend_.kth_largest_abs(static_cast<const T *>(nullptr), residual.data(),
                                             residual.size(), k, nullptr),
              this->reference_kth(nullptr, residual, k))
        << "k=" << k;
  EXPECT_THROW(this->backend_.kth_largest_abs(static_cast<const T *>(nullptr), residual.data(),
                                              residual.size(), 0, nullptr),
               Error);
}

TYPED_TEST(Emulated, FilterMatchesReferenceWithCapacityAndCodings) {
  using T = TypeParam;
  const std::size_t n = 500;
  const auto send = this->random_values(n, 3);
  auto initial = this->random_values(n, 4);
  initial[10] = std::numeric_limits<T>::infinity();
  initial[11] = std::numeric_limits<T>::quiet_NaN();
  initial[12] = T(1e6);  // beyond fp16's range: saturates
  const T tau = T(1.5);
  for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16}) {
    for (std::size_t capacity : {std::size_t(0), std::size_t(5), std::size_t(n)}) {
      std::vector<T> residual = initial;
      std::vector<WireIndex> idx(n + 1, 77);
      std::vector<T> val(n + 1, T(77));
      const std::size_t found = this->backend_.filter(send.data(), residual.data(), n, tau, coding,
                                                      idx.data(), val.data(), capacity, nullptr);
      std::size_t expected_found = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const T acc = send[i] + initial[i];
        const bool keep = keep_entry(acc, tau);
        if (keep && expected_found < capacity) {
          const T sent = wire_value(acc, coding);
          ASSERT_EQ(idx[expected_found], i);
          if (sent == sent)
            ASSERT_EQ(val[expected_found], sent);
          else
            ASSERT_TRUE(val[expected_found] != val[expected_found]);
          ASSERT_EQ(residual[i], wire_remainder(acc, sent)) << i;
        } else if (acc == acc) {
          ASSERT_EQ(residual[i], acc) << i;
        } else {
          ASSERT_TRUE(residual[i] != residual[i]);
        }
        expected_found += keep ? 1 : 0;
      }
      EXPECT_EQ(found, expected_found);
      const std::size_t written = std::min(found, capacity);
      EXPECT_EQ(idx[written], 77u) << "wrote past the capacity";
    }
  }
}

TYPED_TEST(Emulated, FilterSecondPassCollectsTheOverflow) {
  using T = TypeParam;
  const std::size_t n = 300;
  const auto send = this->random_values(n, 5);
  auto residual = this->random_values(n, 6);
  const auto original = residual;
  std::vector<WireIndex> idx(n);
  std::vector<T> val(n);
  const std::size_t found =
      this->backend_.filter(send.data(), residual.data(), n, T(1), ValueCoding::native, idx.data(),
                            val.data(), 10, nullptr);
  ASSERT_GT(found, 10u);
  const std::size_t rest = this->backend_.filter(static_cast<const T *>(nullptr), residual.data(),
                                                 n, T(1), ValueCoding::native, idx.data() + 10,
                                                 val.data() + 10, found - 10, nullptr);
  EXPECT_EQ(rest, found - 10);
  for (std::size_t j = 0; j < found; ++j) {
    const std::size_t i = idx[j];
    EXPECT_EQ(val[j], send[i] + original[i]);
    EXPECT_EQ(residual[i], T(0));
    if (j > 0 && j != 10) {
      EXPECT_LT(idx[j - 1], idx[j]);
    }
  }
}

TYPED_TEST(Emulated, SampleScatterAddAndFillZero) {
  using T = TypeParam;
  const std::size_t n = 1000, m = 37;
  const auto send = this->random_values(n, 7);
  const auto residual = this->random_values(n, 8);
  std::vector<T> sample(m);
  this->backend_.gather_abs_sample(send.data(), residual.data(), n, m, 99, sample.data(), nullptr);
  for (std::size_t j = 0; j < m; ++j) {
    const std::size_t p = sample_position(j, m, n, 99);
    EXPECT_EQ(sample[j], std::fabs(send[p] + residual[p]));
  }

  std::vector<T> out = residual;
  const std::vector<WireIndex> idx = {0, 3, 999};
  const std::vector<T> val = {T(1), T(-2), T(0.5)};
  this->backend_.scatter_add(idx.data(), val.data(), idx.size(), out.data(), nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    T expected = residual[i];
    for (std::size_t j = 0; j < idx.size(); ++j)
      if (idx[j] == i) expected += val[j];
    EXPECT_EQ(out[i], expected);
  }
  this->backend_.fill_zero(out.data(), n, nullptr);
  for (T v : out) EXPECT_EQ(v, T(0));
}

}  // namespace
}  // namespace dct::detail
