// The CUDA/HIP backends' common source (backends/common/cuda_hip/cuda_hip_backend.hpp) run on the
// host through the emulation in emulated_api.hpp, against simple references: the kernels' logic is
// checked on every machine, including CI, which has no GPU. What only a GPU can show (memory
// spaces, real concurrency, CUB/rocPRIM) is left to tests/unit/test_kernels.cpp on a GPU node.
#include "emulated_api.hpp"  // first: it stands in for backends/cuda/cuda_api.hpp

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda_hip/cuda_hip_backend.hpp"

namespace dct::detail {
namespace {

// Backend::trim_candidates composed of the other operations, as its contract defines it: the
// reference the GPU backend's trim in one wait is checked against.
/// The ranks: select at tau = Inf selects exactly NaN and +-Inf, then kth_largest_abs past them.
template <typename T>
CandidateRanks<T> ranks_by_selections(Backend &backend, const T *val, std::size_t m, std::size_t k,
                                      std::size_t aim, Stream stream) {
  CandidateRanks<T> ranks;
  if (m == 0) return ranks;
  const std::size_t nonfinite = backend
                                    .select(static_cast<const T *>(nullptr), const_cast<T *>(val),
                                            m, std::numeric_limits<T>::infinity(), kEveryTie,
                                            nullptr, nullptr, 0, SparseList<T>{}, stream)
                                    .nonfinite;
  ranks.finite = m - nonfinite;
  const auto kth = [&](std::size_t rank) {
    return rank >= 1 && rank <= ranks.finite
               ? backend.kth_largest_abs(static_cast<const T *>(nullptr), val, m, rank + nonfinite,
                                         stream)
               : T(0);
  };
  ranks.kth = kth(k);
  ranks.aimth = kth(aim);
  return ranks;
}

/// keep_top at the k-th with limit k, where more than k are finite.
template <typename T>
Trimmed<T> trim_by_ranks(Backend &backend, const CandidateRanks<T> &ranks, const WireIndex *idx,
                         const T *val, std::size_t m, std::size_t k, ValueCoding coding,
                         WireIndex *out_idx, T *out_val, T *remainders, Stream stream) {
  Trimmed<T> trimmed{ranks.finite, ranks.kth, ranks.aimth, 0};
  if (ranks.finite > k)
    trimmed.kept =
        backend.keep_top(idx, val, m, ranks.kth, k, coding, out_idx, out_val, remainders, stream);
  return trimmed;
}

template <typename T>
class Emulated : public ::testing::Test {
 protected:
  emulation::GpuBackend gpu_;
  Backend &backend_ = gpu_;  // the calls the library makes: through the interface

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

/// The entries keep_entry(acc, tau) with `limit` selects: NaN/Inf, |acc| > tau, then ties at
/// tau from the lowest index while at most `limit` finite entries are taken.
template <typename T>
std::vector<std::size_t> reference_selection(const std::vector<T> &acc, T tau, std::size_t limit) {
  std::size_t above = 0;
  for (T v : acc)
    if (keep_entry(v, tau) && std::isfinite(v) && std::fabs(v) > tau) ++above;
  std::size_t ties = limit == kEveryTie ? kEveryTie : (limit > above ? limit - above : 0);
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < acc.size(); ++i) {
    if (!keep_entry(acc[i], tau)) continue;
    if (std::isfinite(acc[i]) && std::fabs(acc[i]) == tau) {
      if (ties == 0) continue;
      if (ties != kEveryTie) --ties;
    }
    kept.push_back(i);
  }
  return kept;
}

// select: acc into the residual, the selection in index order up to the capacity, with and
// without a limit (ties at tau: values of 5 repeat), NaN and Inf counted apart.
TYPED_TEST(Emulated, SelectMatchesReferenceWithCapacityAndLimit) {
  using T = TypeParam;
  const std::size_t n = 500;
  const auto send = this->random_values(n, 3);
  auto initial = this->random_values(n, 4);
  for (std::size_t i = 0; i < n; i += 9) initial[i] = T(5) - send[i];  // acc = 5 exactly
  initial[10] = std::numeric_limits<T>::infinity();
  initial[11] = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> acc(n);
  for (std::size_t i = 0; i < n; ++i) acc[i] = send[i] + initial[i];
  for (const std::size_t limit : {kEveryTie, std::size_t(20)}) {
    const T tau = limit == kEveryTie ? T(1.5) : T(5);
    const auto expected = reference_selection(acc, tau, limit);
    for (std::size_t capacity : {std::size_t(0), std::size_t(5), std::size_t(n)}) {
      std::vector<T> residual = initial;
      std::vector<WireIndex> idx(n + 1, 77);
      std::vector<T> val(n + 1, T(77));
      const Selected found =
          this->backend_.select(send.data(), residual.data(), n, tau, limit, idx.data(), val.data(),
                                capacity, SparseList<T>{}, nullptr);
      this->backend_.synchronize(nullptr);  // the entries and the residual are only queued
      EXPECT_EQ(found.count, expected.size());
      EXPECT_EQ(found.nonfinite, 2u);
      const std::size_t written = std::min(found.count, capacity);
      for (std::size_t j = 0; j < written; ++j) {
        ASSERT_EQ(idx[j], expected[j]);
        if (acc[expected[j]] == acc[expected[j]]) {
          ASSERT_EQ(val[j], acc[expected[j]]);
        }
      }
      EXPECT_EQ(idx[written], 77u) << "wrote past the capacity";
      for (std::size_t i = 0; i < n; ++i) {
        if (acc[i] == acc[i]) {
          ASSERT_EQ(residual[i], acc[i]) << i;
        }
      }
    }
  }
}

// select_with_momentum: the velocity (a non-finite one taken as 0) written, then selected from.
TYPED_TEST(Emulated, SelectWithMomentumSelectsFromTheUpdatedVelocity) {
  using T = TypeParam;
  const std::size_t n = 700;
  const T momentum = T(0.9);
  const auto gradient = this->random_values(n, 5);
  auto velocity = this->random_values(n, 6);
  velocity[3] = std::numeric_limits<T>::quiet_NaN();
  const auto initial = this->random_values(n, 7);
  std::vector<T> update(n), acc(n);
  for (std::size_t i = 0; i < n; ++i) {
    update[i] = (std::isfinite(velocity[i]) ? momentum * velocity[i] : T(0)) + gradient[i];
    acc[i] = update[i] + initial[i];
  }
  const auto expected = reference_selection(acc, T(1.5), kEveryTie);
  std::vector<T> residual = initial, out(n), val(n);
  std::vector<WireIndex> idx(n);
  const Selected found = this->backend_.select_with_momentum(
      gradient.data(), velocity.data(), momentum, out.data(), residual.data(), n, T(1.5), kEveryTie,
      idx.data(), val.data(), n, SparseList<T>{}, nullptr);
  this->backend_.synchronize(nullptr);
  ASSERT_EQ(found.count, expected.size());
  for (std::size_t j = 0; j < expected.size(); ++j) ASSERT_EQ(idx[j], expected[j]);
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(out[i], update[i]) << i;
    ASSERT_EQ(residual[i], acc[i]) << i;
  }
}

// keep_top and the default trim_candidates (select, kth_largest_abs, keep_top): the top k of a
// candidate list with ties to the lowest indices, rounded for the wire, what stays home as the
// remainders.
TYPED_TEST(Emulated, TrimKeepsTheTopKWithTiesByIndex) {
  using T = TypeParam;
  const std::size_t m = 300;
  std::vector<WireIndex> idx(m);
  std::vector<T> val(m);
  for (std::size_t j = 0; j < m; ++j) {
    idx[j] = static_cast<WireIndex>(3 * j + 1);
    val[j] = static_cast<T>((j % 7) + 1) * (j % 2 ? T(-1) : T(1));  // magnitudes 1..7, tied
  }
  for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16}) {
    std::vector<WireIndex> out_idx(m);
    std::vector<T> out_val(m), remainders(m, T(0.25));
    const std::size_t k = 50, aim = 150;
    const Trimmed<T> trimmed =
        this->backend_.trim_candidates(idx.data(), val.data(), m, k, aim, coding, out_idx.data(),
                                       out_val.data(), remainders.data(), nullptr);
    this->backend_.synchronize(nullptr);                      // the kept entries are only queued
    const auto expected = reference_selection(val, T(6), k);  // 42 sevens + 8 of the sixes
    EXPECT_EQ(trimmed.finite, m);
    EXPECT_EQ(trimmed.kth, T(6));
    EXPECT_EQ(trimmed.aimth, T(4));  // 42 sevens, 43 sixes, 43 fives, then the fours
    ASSERT_EQ(trimmed.kept, k);
    for (std::size_t j = 0; j < k; ++j) {
      EXPECT_EQ(out_idx[j], idx[expected[j]]);
      EXPECT_EQ(out_val[j], wire_value(val[expected[j]], coding));
      EXPECT_EQ(remainders[j], T(0));  // small integers travel exactly in fp16 too
    }
  }
}

// select's pending writes go in before the pass: as if written first.
TYPED_TEST(Emulated, SelectDoesThePendingWritesFirst) {
  using T = TypeParam;
  const std::size_t n = 200;
  const auto send = this->random_values(n, 9);
  const auto initial = this->random_values(n, 10);
  const std::vector<WireIndex> pending_idx = {0, 5, 77, 199};
  const std::vector<T> pending_val = {T(3), T(-4), T(0.5), T(7)};
  std::vector<T> written = initial;
  for (std::size_t j = 0; j < pending_idx.size(); ++j) written[pending_idx[j]] = pending_val[j];
  std::vector<WireIndex> idx(n), expected_idx(n);
  std::vector<T> val(n), expected_val(n);
  const Selected expected =
      this->backend_.select(send.data(), written.data(), n, T(1.2), kEveryTie, expected_idx.data(),
                            expected_val.data(), n, SparseList<T>{}, nullptr);
  std::vector<T> residual = initial;
  const Selected found = this->backend_.select(
      send.data(), residual.data(), n, T(1.2), kEveryTie, idx.data(), val.data(), n,
      SparseList<T>{pending_idx.data(), pending_val.data(), pending_idx.size()}, nullptr);
  this->backend_.synchronize(nullptr);
  EXPECT_EQ(found.count, expected.count);
  EXPECT_EQ(idx, expected_idx);
  EXPECT_EQ(residual, written);
}

// The GPU's trim_candidates makes the host wait once (the selections past the non-finite start
// from the count on the device, keep_top takes its threshold and whether to keep anything from
// them there, and the ranks and the count are read back together): the same ranks and entries
// as Backend's composition of select, kth_largest_abs and keep_top, which waits four times,
// with NaN and +-Inf among the candidates, ties (the k-th among them too), and ranks beyond the
// finite ones.
TYPED_TEST(Emulated, TrimInOneWaitIsTheComposedTrim) {
  using T = TypeParam;
  const std::size_t m = 400;
  std::vector<WireIndex> idx(m);
  std::vector<T> val = this->random_values(m, 11);
  for (std::size_t j = 0; j < m; ++j) idx[j] = static_cast<WireIndex>(2 * j + 3);
  for (std::size_t j = 0; j < m; j += 13) val[j] = T(0.75);  // ties
  val[5] = std::numeric_limits<T>::quiet_NaN();
  val[6] = std::numeric_limits<T>::infinity();
  val[7] = -std::numeric_limits<T>::infinity();
  // The k-th largest is a tie, of which the budget keeps 2.
  const std::size_t above_ties = static_cast<std::size_t>(std::count_if(
      val.begin(), val.end(), [](T v) { return v - v == T(0) && std::fabs(v) > T(0.75); }));
  for (const auto &[k, aim] : {std::pair<std::size_t, std::size_t>{40, 120},
                               {above_ties + 2, above_ties + 1},
                               {1, 1},
                               {0, 3},
                               {m - 3, m - 3},
                               {m - 2, m},
                               {m + 5, m + 9}}) {
    SCOPED_TRACE(std::to_string(k) + ", " + std::to_string(aim));
    std::vector<WireIndex> one_idx(m, 0), composed_idx(m, 0);
    std::vector<T> one_val(m, T(0)), composed_val(m, T(0)), one_rest(m, T(0)),
        composed_rest(m, T(0));
    const std::size_t waited = emulation::waits;
    const Trimmed<T> one =
        this->backend_.trim_candidates(idx.data(), val.data(), m, k, aim, ValueCoding::fp16,
                                       one_idx.data(), one_val.data(), one_rest.data(), nullptr);
    EXPECT_EQ(emulation::waits - waited, 1u);
    const Trimmed<T> composed = trim_by_ranks(
        this->backend_, ranks_by_selections(this->backend_, val.data(), m, k, aim, nullptr),
        idx.data(), val.data(), m, k, ValueCoding::fp16, composed_idx.data(), composed_val.data(),
        composed_rest.data(), nullptr);
    this->backend_.synchronize(nullptr);
    EXPECT_EQ(one.finite, m - 3);
    EXPECT_EQ(one.finite, composed.finite);
    EXPECT_EQ(one.kth, composed.kth);
    EXPECT_EQ(one.aimth, composed.aimth);
    EXPECT_EQ(one.kept, composed.kept);
    EXPECT_EQ(one_idx, composed_idx);
    for (std::size_t j = 0; j < one.kept; ++j) {
      EXPECT_TRUE(one_val[j] == composed_val[j] ||
                  (one_val[j] != one_val[j] && composed_val[j] != composed_val[j]));
      EXPECT_EQ(one_rest[j], composed_rest[j]);
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
  this->backend_.synchronize(nullptr);  // queued only: a host read needs the wait
  for (std::size_t i = 0; i < n; ++i) {
    T expected = residual[i];
    for (std::size_t j = 0; j < idx.size(); ++j)
      if (idx[j] == i) expected += val[j];
    EXPECT_EQ(out[i], expected);
  }
  this->backend_.fill_zero(out.data(), n, nullptr);
  this->backend_.synchronize(nullptr);
  for (T v : out) EXPECT_EQ(v, T(0));

  // sum_lists over [2, n): zeros, then the lists added in list order.
  const std::vector<WireIndex> other_idx = {3, 4};
  const std::vector<T> other_val = {T(0.25), T(8)};
  const SparseList<T> lists[2] = {{idx.data() + 1, val.data() + 1, 2},
                                  {other_idx.data(), other_val.data(), 2}};
  out.assign(n, T(-7));
  this->backend_.sum_lists(lists, 2, out.data(), 2, n, nullptr);
  this->backend_.synchronize(nullptr);
  for (std::size_t i = 0; i < n; ++i) {
    const T expected = i < 2      ? T(-7)
                       : i == 3   ? T(-2) + T(0.25)
                       : i == 4   ? T(8)
                       : i == 999 ? T(0.5)
                                  : T(0);
    EXPECT_EQ(out[i], expected) << i;
  }
}

// split's cuts of a rank's sorted indices, one thread per key: std::lower_bound's positions,
// with more keys than one block has threads.
TEST(EmulatedLowerBounds, AreStdLowerBound) {
  emulation::GpuBackend gpu;
  Backend &backend = gpu;
  std::mt19937 engine(11);
  std::vector<WireIndex> idx(5000);
  std::uint64_t next = 0;
  for (WireIndex &i : idx) {
    i = static_cast<WireIndex>(next);
    next += 1 + engine() % 3;
  }
  std::vector<std::uint64_t> keys = {0, next, next + 7};
  for (int j = 0; j < 40; ++j) keys.push_back(engine() % (next + 1));
  std::vector<std::uint64_t> bounds(keys.size());
  for (std::size_t m : {std::size_t(0), std::size_t(1), idx.size()}) {
    backend.lower_bounds(idx.data(), m, keys.data(), keys.size(), bounds.data(), nullptr);
    for (std::size_t j = 0; j < keys.size(); ++j)
      EXPECT_EQ(bounds[j], std::uint64_t(std::lower_bound(idx.begin(), idx.begin() + m, keys[j]) -
                                         idx.begin()))
          << "m=" << m << " key=" << keys[j];
  }
}

}  // namespace
}  // namespace dct::detail
