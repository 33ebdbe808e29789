// Over 450 lines: each selection kernel beside its plain reference and its cases.
// The selection kernels of every backend (kernel_cases.hpp) against a reference written as
// plainly as possible: select (the pass over the tensor), trim_candidates and keep_top (the exact
// top k of a candidate list, ties to the lowest indices, rounded for the wire, what stays home
// in the residual) and sum_lists (an exchange's result). Each case runs on every host SIMD tier
// of the selection pass this CPU has, for the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/compute_backend.hpp"
#include "kernel_cases.hpp"

namespace dct::detail {
namespace {

using test::CaseNames;
using test::Cases;
using test::for_each_host_tier;
using test::normal;
using test::same_bits;

template <typename T>
bool finite(T v) {
  return std::isfinite(v);
}

/// The entries keep_entry(acc, tau) with `limit` selects, by brute force: every NaN/Inf and
/// every |acc| > tau (nonzero), then the ties |acc| == tau from the lowest index while the
/// finite ones number at most `limit`.
template <typename T>
std::vector<std::size_t> reference_selection(const std::vector<T> &acc, T tau, std::size_t limit) {
  std::size_t above = 0;
  for (T v : acc)
    if (keep_entry(v, tau) && finite(v) && std::fabs(v) > tau) ++above;
  std::size_t ties = limit == kEveryTie ? kEveryTie : (limit > above ? limit - above : 0);
  std::vector<std::size_t> kept;
  for (std::size_t i = 0; i < acc.size(); ++i) {
    if (!keep_entry(acc[i], tau)) continue;
    if (finite(acc[i]) && std::fabs(acc[i]) == tau) {
      if (ties == 0) continue;
      if (ties != kEveryTie) --ties;
    }
    kept.push_back(i);
  }
  return kept;
}

/// The k-th largest finite |acc| (0 when fewer than k are finite).
template <typename T>
T reference_kth(const std::vector<T> &acc, std::size_t k) {
  std::vector<T> magnitudes;
  for (T v : acc)
    if (finite(v)) magnitudes.push_back(std::fabs(v));
  if (k < 1 || k > magnitudes.size()) return T(0);
  std::sort(magnitudes.begin(), magnitudes.end(), std::greater<T>());
  return magnitudes[k - 1];
}

template <typename T>
std::vector<T> add(const std::vector<T> &a, const std::vector<T> &b) {
  std::vector<T> sum(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i];
  return sum;
}

/// Inputs full of ties at any k: every value the same, small integers, gradients rounded to
/// 16 bits (their magnitudes repeat a few hundred times each at these sizes).
template <typename T>
std::vector<std::pair<std::string, std::vector<T>>> tied_inputs(std::size_t n) {
  std::vector<T> constant(n, T(0.5)), integers(n), half(n), brain(n);
  std::mt19937_64 engine(77);
  std::uniform_int_distribution<int> few(-3, 3);
  std::normal_distribution<double> gaussian(0.0, 1.0);
  for (T &x : integers) x = static_cast<T>(few(engine));
  for (T &x : half)
    x = decode_value16<T>(encode_value16(T(gaussian(engine)), ValueCoding::fp16),
                          ValueCoding::fp16);
  for (T &x : brain)
    x = decode_value16<T>(encode_value16(T(gaussian(engine)), ValueCoding::bf16),
                          ValueCoding::bf16);
  return {{"constant", constant}, {"integers", integers}, {"fp16", half}, {"bf16", brain}};
}

template <typename C>
class Selection : public test::BackendTest<C> {
 protected:
  using T = typename C::Element;

  struct Selected {
    dct::detail::Selected found;
    std::vector<WireIndex> idx;
    std::vector<T> val;
    std::vector<T> residual;
  };
  /// Backend::select on copies; `send` nullptr means none; `pending` writes (host lists; no
  /// values: zeros) first.
  Selected select(const std::vector<T> *send, const std::vector<T> &residual, T tau,
                  std::size_t limit, std::size_t capacity,
                  const std::vector<WireIndex> &pending_idx = {},
                  const std::vector<T> &pending_val = {}) {
    BackendArray<T> s;
    if (send) s = this->upload(*send);
    auto r = this->upload(residual);
    BackendArray<WireIndex> idx(*this->backend_, capacity + 1);
    BackendArray<T> val(*this->backend_, capacity + 1);
    const auto p_idx = this->upload(pending_idx);
    const auto p_val = this->upload(pending_val);
    const SparseList<T> pending{p_idx.data(), pending_val.empty() ? nullptr : p_val.data(),
                                pending_idx.size()};
    const std::size_t n = residual.size();
    Selected out;
    out.found = this->backend_->select(send ? s.data() : nullptr, r.data(), n, tau, limit,
                                       idx.data(), val.data(), capacity, pending, nullptr);
    const std::size_t written = std::min(out.found.count, capacity);
    out.idx = this->download(idx, written);
    out.val = this->download(val, written);
    out.residual = this->download(r, n);
    return out;
  }

  /// The candidate list of `acc` at `floor` (every entry the keep rule selects), as a host
  /// would hand it to trim_candidates and keep_top.
  static void candidates_of(const std::vector<T> &acc, T floor, std::vector<WireIndex> &idx,
                            std::vector<T> &val) {
    idx.clear();
    val.clear();
    for (std::size_t i = 0; i < acc.size(); ++i)
      if (keep_entry(acc[i], floor)) {
        idx.push_back(static_cast<WireIndex>(i));
        val.push_back(acc[i]);
      }
  }

  struct Kept {
    std::size_t kept = 0;
    Trimmed<T> trimmed;
    std::vector<WireIndex> idx;
    std::vector<T> val;
    std::vector<T> remainders;
  };
  /// keep_top (limit given) or trim_candidates (`limit` == 0: k and aim) on copies of the
  /// list; the remainders are asked for (and come back) unless `remainders` is false.
  Kept keep(const std::vector<WireIndex> &idx, const std::vector<T> &val, T tau, std::size_t limit,
            std::size_t k, std::size_t aim, ValueCoding coding, bool remainders = true) {
    const auto in_idx = this->upload(idx);
    const auto in_val = this->upload(val);
    BackendArray<WireIndex> out_idx(*this->backend_, idx.size() + 1);
    BackendArray<T> out_val(*this->backend_, idx.size() + 1);
    BackendArray<T> out_remainders(*this->backend_, idx.size() + 1);
    T *const rest = remainders ? out_remainders.data() : nullptr;
    Kept out;
    if (limit > 0) {
      out.kept = this->backend_->keep_top(in_idx.data(), in_val.data(), idx.size(), tau, limit,
                                          coding, out_idx.data(), out_val.data(), rest, nullptr);
    } else {
      out.trimmed =
          this->backend_->trim_candidates(in_idx.data(), in_val.data(), idx.size(), k, aim, coding,
                                          out_idx.data(), out_val.data(), rest, nullptr);
      out.kept = out.trimmed.kept;
    }
    out.idx = this->download(out_idx, out.kept);
    out.val = this->download(out_val, out.kept);
    if (remainders) out.remainders = this->download(out_remainders, out.kept);
    return out;
  }

  /// The kept entries are exactly `expected` (places in the tensor), in order, each sent as
  /// the wire carries it, with what stays home of it as its remainder.
  static void expect_kept(const Kept &out, const std::vector<std::size_t> &expected,
                          const std::vector<T> &acc, ValueCoding coding) {
    ASSERT_EQ(out.kept, expected.size());
    for (std::size_t j = 0; j < expected.size(); ++j) {
      const std::size_t i = expected[j];
      ASSERT_EQ(out.idx[j], i) << "entry " << j;
      const T sent = wire_value(acc[i], coding);
      ASSERT_TRUE(same_bits(out.val[j], sent) || (sent != sent && out.val[j] != out.val[j])) << i;
      if (out.remainders.empty()) continue;
      ASSERT_TRUE(same_bits(out.remainders[j], wire_remainder(acc[i], sent))) << i;
    }
  }
};
TYPED_TEST_SUITE(Selection, Cases, CaseNames);

// 50001: 13 work items of 4096 (or a few per thread), the last block partial; 4096 and 1001:
// one work item, run on the calling thread.
TYPED_TEST(Selection, SelectMatchesTheReferenceAndLeavesAccInTheResidual) {
  using V = typename TestFixture::Value;
  for_each_host_tier([&] {
    for (const std::size_t n : {std::size_t(50001), std::size_t(4096), std::size_t(1001)}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const auto send = normal<V>(n, 11);
      const auto residual = normal<V>(n, 12, 0.3);
      const auto acc = add(send, residual);
      const std::size_t k = n / 100;
      const V tau = reference_kth(acc, k);
      for (const std::size_t limit : {kEveryTie, k}) {
        const auto expected = reference_selection(acc, tau, limit);
        for (const std::size_t capacity :
             {n, expected.size(), expected.size() / 3, std::size_t(0)}) {
          const auto out = this->select(&send, residual, tau, limit, capacity);
          EXPECT_EQ(out.found.count, expected.size());
          EXPECT_EQ(out.found.nonfinite, 0u);
          for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(out.residual[i], acc[i])) << i;
          ASSERT_EQ(out.idx.size(), std::min(capacity, expected.size()));
          for (std::size_t j = 0; j < out.idx.size(); ++j) {
            ASSERT_EQ(out.idx[j], expected[j]) << "capacity " << capacity;
            ASSERT_TRUE(same_bits(out.val[j], acc[expected[j]]));
          }
        }
      }
      // Without send the pass only reads: the same selection, the residual as it was.
      const auto again = this->select(nullptr, acc, tau, k, n);
      EXPECT_EQ(again.found.count, k);
      EXPECT_EQ(again.residual, acc);
    }
  });
}

// Exactly k finite entries with ties at the k-th, the lowest indices first, whatever the
// values: what dct sends per call (DESIGN.md). Sizes of several work items and of one.
TYPED_TEST(Selection, SelectWithALimitTakesExactlyKWithTiesToTheLowestIndices) {
  using V = typename TestFixture::Value;
  for_each_host_tier([&] {
    for (const std::size_t n : {3 * std::size_t(4096) + 7, std::size_t(1000)}) {
      for (const auto &[name, acc] : tied_inputs<V>(n)) {
        for (const std::size_t k : {std::size_t(1), std::size_t(17), n / 100, n / 3}) {
          SCOPED_TRACE(name + " n = " + std::to_string(n) + " k = " + std::to_string(k));
          const V tau = reference_kth(acc, k);
          const auto expected = reference_selection(acc, tau, k);
          const auto out = this->select(nullptr, acc, tau, k, n);
          EXPECT_EQ(out.found.count, k);
          ASSERT_EQ(out.idx.size(), expected.size());
          for (std::size_t j = 0; j < expected.size(); ++j) ASSERT_EQ(out.idx[j], expected[j]);
        }
      }
    }
  });
}

// Zeros are never selected; NaN and Inf always, counted apart and outside the limit.
TYPED_TEST(Selection, SelectNeverTakesZerosAndAlwaysNonFiniteOutsideTheLimit) {
  using V = typename TestFixture::Value;
  const V nan = std::numeric_limits<V>::quiet_NaN(), inf = std::numeric_limits<V>::infinity();
  for_each_host_tier([&] {
    for (const std::size_t n : {std::size_t(40), 2 * std::size_t(4096) + 40}) {
      std::vector<V> acc(n, V(0));
      for (std::size_t i = 0; i < n; i += 5) acc[i] = V(1) + V(i % 7);
      acc[3] = nan;
      acc[n - 2] = -inf;
      acc[n / 2 + 1] = inf;
      const auto all = this->select(nullptr, acc, V(0), kEveryTie, n);
      EXPECT_EQ(all.found.nonfinite, 3u);
      EXPECT_EQ(all.idx.size(), reference_selection(acc, V(0), kEveryTie).size());
      for (WireIndex i : all.idx) EXPECT_TRUE(acc[i] != V(0) || acc[i] != acc[i]);
      // The limit counts finite entries only: 4 of them, and the three others besides.
      const V tau = reference_kth(acc, 4);
      const auto top = this->select(nullptr, acc, tau, 4, n);
      EXPECT_EQ(top.found.count, 7u);
      EXPECT_EQ(top.found.nonfinite, 3u);
      ASSERT_EQ(top.idx.size(), 7u);
      const auto expected = reference_selection(acc, tau, 4);
      for (std::size_t j = 0; j < 7; ++j) EXPECT_EQ(top.idx[j], expected[j]);
      // At tau = Inf only the non-finite entries pass.
      const auto bad = this->select(nullptr, acc, inf, kEveryTie, n);
      EXPECT_EQ(bad.found.count, 3u);
      EXPECT_EQ(bad.found.nonfinite, 3u);
    }
  });
}

// Selected entries bunched in one stretch (3000 in 4096 entries: more than a work item's share
// of any of these capacities, so its slot overflows), with capacities that cut the list inside
// the bunch, and ties in it under a limit.
TYPED_TEST(Selection, SelectKeepsOrderWhenEntriesBunchPastTheirSlot) {
  using V = typename TestFixture::Value;
  const std::size_t bunch = 3000;
  for_each_host_tier([&] {
    for (const auto &[n, from] : {std::pair<std::size_t, std::size_t>{4 * 4096 + 3, 5000},
                                  std::pair<std::size_t, std::size_t>{4000, 500}}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const auto send = normal<V>(n, 31, 0.01);
      auto residual = normal<V>(n, 32, 0.01);
      for (std::size_t i = from; i < from + bunch; ++i)
        residual[i] = V(1) + V(1e-4) * V((i - from) % 1000);  // three of each value
      const auto acc = add(send, residual);
      for (const std::size_t limit : {kEveryTie, bunch - 100}) {
        const V tau = limit == kEveryTie ? V(0.5) : reference_kth(acc, limit);
        const auto expected = reference_selection(acc, tau, limit);
        for (const std::size_t capacity : {bunch, bunch - 500, std::size_t(1000), std::size_t(0)}) {
          const auto out = this->select(&send, residual, tau, limit, capacity);
          EXPECT_EQ(out.found.count, expected.size());
          ASSERT_EQ(out.idx.size(), std::min(capacity, expected.size()));
          for (std::size_t j = 0; j < out.idx.size(); ++j)
            ASSERT_EQ(out.idx[j], expected[j]) << "capacity " << capacity;
          EXPECT_EQ(out.residual, acc);
        }
      }
    }
  });
}

// The previous call's pending writes go in before the pass reads the residual: the same as
// writing them first, for values and for zeros (no values), at every work item's edges.
TYPED_TEST(Selection, SelectDoesThePendingWritesFirst) {
  using V = typename TestFixture::Value;
  for_each_host_tier([&] {
    for (const std::size_t n : {5 * std::size_t(4096) + 9, std::size_t(700)}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const auto send = normal<V>(n, 61);
      const auto residual = normal<V>(n, 62);
      std::vector<WireIndex> pending_idx;
      std::vector<V> pending_val;
      for (std::size_t i = 0; i < n; i += (i % 4096 == 4095 ? 1 : 37)) {  // chunk edges too
        pending_idx.push_back(static_cast<WireIndex>(i));
        pending_val.push_back(V(0.001) * V(i % 13));
      }
      for (const bool zeros : {false, true}) {
        std::vector<V> written = residual;
        for (std::size_t j = 0; j < pending_idx.size(); ++j)
          written[pending_idx[j]] = zeros ? V(0) : pending_val[j];
        const auto acc = add(send, written);
        const V tau = reference_kth(acc, n / 50);
        const auto expected = this->select(&send, written, tau, kEveryTie, n);
        const auto out = this->select(&send, residual, tau, kEveryTie, n, pending_idx,
                                      zeros ? std::vector<V>{} : pending_val);
        EXPECT_EQ(out.found.count, expected.found.count);
        EXPECT_EQ(out.idx, expected.idx);
        EXPECT_EQ(out.residual, acc);
      }
    }
  });
}

// select_with_momentum is momentum_update and then select, to the bit: the velocity it writes,
// the residual, the entries and the counts, with pending writes, a non-finite velocity (taken
// as 0) and capacities that cut the list, over several work items and one.
TYPED_TEST(Selection, SelectWithMomentumIsTheUpdateThenTheSelection) {
  using V = typename TestFixture::Value;
  const V nan = std::numeric_limits<V>::quiet_NaN(), inf = std::numeric_limits<V>::infinity();
  const V momentum = V(0.9);
  for_each_host_tier([&] {
    for (const std::size_t n : {5 * std::size_t(4096) + 9, std::size_t(4096), std::size_t(700)}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      auto gradient = normal<V>(n, 71);
      gradient[n / 3] = inf;  // a non-finite update: selected, counted apart
      auto velocity = normal<V>(n, 72, 0.5);
      velocity[n / 2] = nan;
      velocity[n - 1] = -inf;
      const auto residual = normal<V>(n, 73, 0.2);
      std::vector<V> update(n);  // the plain reference of momentum_update
      for (std::size_t i = 0; i < n; ++i)
        update[i] = (std::isfinite(velocity[i]) ? momentum * velocity[i] : V(0)) + gradient[i];
      std::vector<WireIndex> pending_idx;
      for (std::size_t i = 3; i < n; i += 53) pending_idx.push_back(static_cast<WireIndex>(i));
      const V tau = reference_kth(add(update, residual), n / 50);
      for (const std::size_t limit : {kEveryTie, n / 50}) {
        const auto expected = this->select(&update, residual, tau, limit, n, pending_idx);
        for (const std::size_t capacity : {n, expected.idx.size() / 2}) {
          auto g = this->upload(gradient);
          auto v = this->upload(velocity);
          auto r = this->upload(residual);
          BackendArray<V> out(*this->backend_, n);
          BackendArray<WireIndex> idx(*this->backend_, capacity + 1);
          BackendArray<V> val(*this->backend_, capacity + 1);
          const auto p_idx = this->upload(pending_idx);
          const SparseList<V> pending{p_idx.data(), nullptr, pending_idx.size()};
          const dct::detail::Selected found = this->backend_->select_with_momentum(
              g.data(), v.data(), momentum, out.data(), r.data(), n, tau, limit, idx.data(),
              val.data(), capacity, pending, nullptr);
          EXPECT_EQ(found.count, expected.found.count);
          EXPECT_EQ(found.nonfinite, expected.found.nonfinite);
          const auto written = std::min(capacity, found.count);
          const auto got_velocity = this->download(out, n);
          const auto got_residual = this->download(r, n);
          for (std::size_t i = 0; i < n; ++i) {
            ASSERT_TRUE(same_bits(got_velocity[i], update[i])) << i;
            ASSERT_TRUE(same_bits(got_residual[i], expected.residual[i])) << i;
          }
          EXPECT_EQ(this->download(idx, written),
                    std::vector<WireIndex>(expected.idx.begin(), expected.idx.begin() + written));
          const auto got_val = this->download(val, written);
          for (std::size_t j = 0; j < written; ++j)
            ASSERT_TRUE(same_bits(got_val[j], expected.val[j])) << j;
        }
      }
    }
  });
}

// trim_candidates on candidate lists short (ranked directly) and long (a window placed by a
// sample, and its fallback when the window misses): exactly the top k finite and every
// NaN/Inf, ties to the lowest indices, for every value coding.
TYPED_TEST(Selection, TrimKeepsExactlyTheTopKOfTheCandidates) {
  using V = typename TestFixture::Value;
  const V nan = std::numeric_limits<V>::quiet_NaN(), inf = std::numeric_limits<V>::infinity();
  // 150001 and 600001: aim-long lists (4500, 18000) past kShortList, so trimmed in a window.
  for (const std::size_t n : {std::size_t(3000), std::size_t(150001), std::size_t(600001)}) {
    auto gaussian = add(normal<V>(n, 41), normal<V>(n, 42, 0.5));
    auto inputs = tied_inputs<V>(n);
    // Finite, the floor at the aim-th: the list is exactly aim long (a re-estimated call's),
    // whose aim-th is its smallest, not 0.
    inputs.emplace_back("gaussian, finite", gaussian);
    gaussian[7] = nan;
    gaussian[n / 3] = -inf;
    inputs.emplace_back("gaussian", gaussian);
    for (const auto &[name, acc] : inputs) {
      const std::size_t k = n / 100, aim = 3 * k;
      SCOPED_TRACE(name + " n = " + std::to_string(n));
      const V floor = reference_kth(acc, aim);
      std::vector<WireIndex> idx;
      std::vector<V> val;
      this->candidates_of(acc, floor, idx, val);
      for (ValueCoding coding :
           {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16, ValueCoding::sign}) {
        const auto out =
            this->keep(idx, val, V(0), 0, k, aim, coding, coding != ValueCoding::native);
        std::vector<V> finite_values;
        for (V v : val)
          if (finite(v)) finite_values.push_back(v);
        EXPECT_EQ(out.trimmed.finite, finite_values.size());
        if (out.trimmed.finite <= k) {
          EXPECT_EQ(out.kept, 0u);
          continue;
        }
        const V tau = reference_kth(acc, k);
        EXPECT_TRUE(same_bits(out.trimmed.kth, tau));
        this->expect_kept(out, reference_selection(acc, tau, k), acc, coding);
        // About the aim-th: between the (aim/2)-th and the (2 aim)-th largest.
        if (aim <= out.trimmed.finite) {
          EXPECT_LE(out.trimmed.aimth, reference_kth(acc, aim / 2));
          EXPECT_GE(out.trimmed.aimth, reference_kth(acc, std::min(2 * aim, out.trimmed.finite)));
        }
      }
    }
  }
}

TYPED_TEST(Selection, TrimLeavesEverythingWhenKOrFewerAreFinite) {
  using V = typename TestFixture::Value;
  const std::vector<V> acc = {V(3), std::numeric_limits<V>::quiet_NaN(), V(-2), V(0), V(5)};
  std::vector<WireIndex> idx;
  std::vector<V> val;
  this->candidates_of(acc, V(0), idx, val);
  const auto out = this->keep(idx, val, V(0), 0, 3, 9, ValueCoding::native);
  EXPECT_EQ(out.trimmed.finite, 3u);
  EXPECT_EQ(out.kept, 0u);
}

// A list past kShortList but no longer than k (the floor let few through: the gradients shrank)
// has no window to place (a share k/m past 1 once sampled past every index: UBSan's finding in
// examples/first): it is counted, nothing cut, on every path.
TYPED_TEST(Selection, TrimLeavesEverythingOfALongListNoLongerThanK) {
  using V = typename TestFixture::Value;
  const std::size_t n = 5000;
  auto acc = normal<V>(n, 43);
  acc[11] = std::numeric_limits<V>::quiet_NaN();
  std::vector<WireIndex> idx;
  std::vector<V> val;
  this->candidates_of(acc, V(0), idx, val);
  ASSERT_EQ(idx.size(), n);
  for (const std::size_t k : {n + 3000, n, n - 1}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const auto out = this->keep(idx, val, V(0), 0, k, 3 * k, ValueCoding::native);
    EXPECT_EQ(out.trimmed.finite, n - 1);
    EXPECT_EQ(out.kept, 0u);
  }
}

TYPED_TEST(Selection, KeepTopMatchesTheReferenceForEveryCoding) {
  using V = typename TestFixture::Value;
  for (const std::size_t n : {std::size_t(20011), std::size_t(300)}) {
    for (const auto &[name, acc] : tied_inputs<V>(n)) {
      SCOPED_TRACE(name + " n = " + std::to_string(n));
      std::vector<WireIndex> idx;
      std::vector<V> val;
      this->candidates_of(acc, reference_kth(acc, n / 10), idx, val);
      for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16}) {
        for (const std::size_t limit : {kEveryTie, n / 40}) {
          const V tau = limit == kEveryTie ? reference_kth(acc, n / 20) : reference_kth(acc, limit);
          const auto out = this->keep(idx, val, tau, limit, 0, 0, coding);
          this->expect_kept(out, reference_selection(acc, tau, limit), acc, coding);
        }
      }
    }
  }
}

TYPED_TEST(Selection, KeepTopSaturatesValuesBeyondTheSixteenBitRange) {
  using V = typename TestFixture::Value;
  const std::vector<WireIndex> idx = {0, 1, 2};
  const std::vector<V> val = {V(1e5), V(-7e4), V(3)};
  const auto out = this->keep(idx, val, V(1), kEveryTie, 0, 0, ValueCoding::fp16);
  ASSERT_EQ(out.kept, 3u);
  EXPECT_EQ(out.val[0], V(65504));
  EXPECT_EQ(out.val[1], V(-65504));
  EXPECT_EQ(out.remainders[0], V(1e5) - V(65504));  // the rest waits for the next call
  EXPECT_EQ(out.remainders[1], V(-7e4) + V(65504));
  EXPECT_EQ(out.remainders[2], V(0));
}

// sum_lists against the fill and the scatter of each list in list order (the bits every
// algorithm had): one list, three, and 70 (more than the host path's cursors at once), over a
// range that starts unaligned inside the tensor and spans several work items, or one.
TYPED_TEST(Selection, SumListsIsTheScatterOfEveryListInOrder) {
  using V = typename TestFixture::Value;
  for (const auto &[n, begin, end] :
       {std::tuple<std::size_t, std::size_t, std::size_t>{3 * 65536 + 40, 3, 3 * 65536 + 33},
        std::tuple<std::size_t, std::size_t, std::size_t>{1000, 1, 999}}) {
    for (const std::size_t lists : {std::size_t(1), std::size_t(3), std::size_t(70)}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", " + std::to_string(lists) + " lists");
      std::mt19937_64 engine(lists);
      std::vector<std::vector<WireIndex>> idx(lists);
      std::vector<std::vector<V>> val(lists);
      std::vector<V> expected(n, V(7));  // outside [begin, end): untouched
      std::fill(expected.begin() + long(begin), expected.begin() + long(end), V(0));
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      for (std::size_t l = 0; l < lists; ++l) {
        for (std::size_t i = begin; i < end; ++i)
          if (unit(engine) < 0.05) {
            idx[l].push_back(static_cast<WireIndex>(i));
            val[l].push_back(static_cast<V>(unit(engine) * 1e3 - 500));
            expected[i] += val[l].back();
          }
      }
      std::vector<BackendArray<WireIndex>> device_idx;
      std::vector<BackendArray<V>> device_val;
      std::vector<SparseList<V>> descriptors;
      for (std::size_t l = 0; l < lists; ++l) {
        device_idx.push_back(this->upload(idx[l]));
        device_val.push_back(this->upload(val[l]));
        descriptors.push_back({device_idx.back().data(), device_val.back().data(), idx[l].size()});
      }
      auto out = this->upload(std::vector<V>(n, V(7)));
      this->backend_->sum_lists(descriptors.data(), lists, out.data(), begin, end, nullptr);
      const auto result = this->download(out, n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(result[i], expected[i])) << i;
    }
  }
}

}  // namespace
}  // namespace dct::detail
