// The error-bounded codec alone: the bound on every value over random and adversarial blocks,
// exact tables, every lossless coder, and a decoder that rejects damaged messages without
// writing anything.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "mp/error_bounded_codec.hpp"

namespace dct::detail::eb {
namespace {

template <typename T>
struct Encoded {
  std::vector<std::byte> message;
  QuantizeReport report;
  Coder coder;
};

template <typename T>
Encoded<T> encode(const std::vector<T> &rows, std::size_t nrows, const Tables &tables,
                  const std::vector<double> &bounds, Coder coder, Workspace &ws) {
  Encoded<T> e;
  e.report = quantize(rows.data(), nrows, tables, bounds.data(), ws);
  e.message.resize(max_message_bytes(nrows, tables.d, tables.count(), sizeof(T)));
  e.coder = coder;
  e.message.resize(pack(e.coder, ws, e.message.data()));
  return e;
}

/// Asserts that every value of `got` is within bounds[t] * (max - min) of `sent`, table by
/// table (finite range), and that non-finite values arrive bit for bit.
template <typename T>
double check_bound(const std::vector<T> &sent, const std::vector<T> &got, std::size_t nrows,
                   const Tables &tables, const std::vector<double> &bounds) {
  double worst = 0;
  for (std::size_t t = 0; t < tables.count(); ++t) {
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (std::size_t r = 0; r < nrows; ++r)
      for (std::size_t c = 0; c < tables.columns; ++c) {
        const double x = double(sent[r * tables.d + t * tables.columns + c]);
        if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
      }
    const double bound = lo <= hi ? bounds[t] * (hi - lo) : 0.0;
    for (std::size_t r = 0; r < nrows; ++r)
      for (std::size_t c = 0; c < tables.columns; ++c) {
        const std::size_t i = r * tables.d + t * tables.columns + c;
        if (!std::isfinite(double(sent[i])) || bounds[t] == 0 || !std::isfinite(bound)) {
          EXPECT_EQ(std::memcmp(&sent[i], &got[i], sizeof(T)), 0) << "value " << i;
          continue;
        }
        const double error = std::fabs(double(got[i]) - double(sent[i]));
        EXPECT_LE(error, bound) << "value " << i << " sent " << sent[i] << " got " << got[i];
        worst = std::max(worst, error);
      }
  }
  return worst;
}

template <typename T>
std::vector<T> roundtrip(const std::vector<T> &rows, std::size_t nrows, const Tables &tables,
                         const std::vector<double> &bounds, Coder coder, QuantizeReport *report) {
  Workspace ws;
  const Encoded<T> e = encode(rows, nrows, tables, bounds, coder, ws);
  std::vector<T> got(rows.size(), T(-7));
  const std::string error =
      decode(e.message.data(), e.message.size(), nrows, tables, got.data(), ws);
  EXPECT_EQ(error, "");
  if (report) *report = e.report;
  return got;
}

template <typename T>
class ErrorBoundedCodec : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
// A name generator also keeps clang's -Wpedantic quiet (an empty variadic macro argument).
struct TypeNames {
  template <typename T>
  static std::string GetName(int) {
    return sizeof(T) == 4 ? "float" : "double";
  }
};
TYPED_TEST_SUITE(ErrorBoundedCodec, Types, TypeNames);

TYPED_TEST(ErrorBoundedCodec, RandomBlocksStayWithinEveryBound) {
  using T = TypeParam;
  std::mt19937_64 engine(5);
  std::normal_distribution<double> normal(0.0, 1.0);
  const Tables tables{48, 16};
  const std::size_t nrows = 100;
  for (double bound : {1e-5, 1e-3, 0.01, 0.05, 0.3, 1.0})
    for (Coder coder : {Coder::none, Coder::lz4, Coder::zstd}) {
      std::vector<T> rows(nrows * tables.d);
      for (std::size_t i = 0; i < rows.size(); ++i)  // tables of very different scales
        rows[i] = T(normal(engine) * std::pow(10.0, double(i % 48 / 16) * 3 - 3) + 5.0);
      const std::vector<double> bounds{bound, bound / 2, bound};
      QuantizeReport report;
      const std::vector<T> got = roundtrip(rows, nrows, tables, bounds, coder, &report);
      const double worst = check_bound(rows, got, nrows, tables, bounds);
      EXPECT_EQ(report.max_error, worst) << "bound " << bound;
      EXPECT_GT(worst, 0.0);
    }
}

TYPED_TEST(ErrorBoundedCodec, BoundZeroIsBitwiseExact) {
  using T = TypeParam;
  std::vector<T> rows = {
      T(1.5), T(-0.0),  std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::denorm_min(),
      T(3),   T(-1e30), std::numeric_limits<T>::infinity(),  T(0.1)};
  QuantizeReport report;
  const std::vector<T> got = roundtrip(rows, 2, Tables{4, 2}, {0.0, 0.0}, Coder::zstd, &report);
  EXPECT_EQ(std::memcmp(rows.data(), got.data(), rows.size() * sizeof(T)), 0);
  EXPECT_EQ(report.max_error, 0.0);
  EXPECT_EQ(report.exact_tables, 2u);
}

TYPED_TEST(ErrorBoundedCodec, AdversarialBlocks) {
  using T = TypeParam;
  using limits = std::numeric_limits<T>;
  const Tables tables{8, 8};
  std::mt19937_64 engine(9);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const std::vector<std::vector<T>> blocks = {
      std::vector<T>(64, T(3.25)),  // constant
      std::vector<T>(64, T(0)),     // zeros
      [&] {  // the whole finite range: max - min overflows in T (and in double for double)
        std::vector<T> v(64);
        for (std::size_t i = 0; i < v.size(); ++i)
          v[i] = T((unit(engine) * 2 - 1) * double(limits::max()));
        v[0] = limits::lowest();
        v[1] = limits::max();
        return v;
      }(),
      [&] {  // denormals only
        std::vector<T> v(64);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = limits::denorm_min() * T(i % 13);
        return v;
      }(),
      [&] {  // NaN, infinities and -0 among ordinary values
        std::vector<T> v(64);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = T(unit(engine));
        v[3] = limits::quiet_NaN();
        v[9] = limits::infinity();
        v[10] = -limits::infinity();
        v[11] = T(-0.0);
        return v;
      }(),
      std::vector<T>(64, limits::quiet_NaN()),  // nothing finite
      [&] {  // one huge value among small ones: the bound follows the range
        std::vector<T> v(64);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = T(unit(engine) * 1e-6);
        v[20] = T(1e6);
        return v;
      }(),
  };
  for (double bound : {1e-9, 1e-3, 0.05})
    for (const std::vector<T> &block : blocks) {
      const std::vector<T> got = roundtrip(block, 8, tables, {bound}, Coder::lz4, nullptr);
      check_bound(block, got, 8, tables, {bound});
    }
}

// Every host tier of the quantiser (AVX-512F for float where the CPU has it) writes the portable
// code's message bit for bit and reports the same, over tables with NaN, infinities, -0,
// denormals, values on the rounding boundaries and outliers, whose widths leave tails past
// the vectors of 16.
TYPED_TEST(ErrorBoundedCodec, EveryTierWritesTheSameMessage) {
  using T = TypeParam;
  using limits = std::numeric_limits<T>;
  std::mt19937_64 engine(13);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const Tables tables : {Tables{72, 24}, Tables{40, 40}, Tables{64, 16}}) {
    const std::size_t nrows = 37;
    std::vector<T> rows(nrows * tables.d);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows[i] = T(normal(engine) * std::pow(10.0, double(i % 5) - 2));
      if (i % 97 == 3) rows[i] = limits::quiet_NaN();
      if (i % 89 == 5) rows[i] = i % 2 ? limits::infinity() : -limits::infinity();
      if (i % 83 == 7) rows[i] = T(-0.0);
      if (i % 79 == 11) rows[i] = limits::denorm_min() * T(i % 5);
      if (i % 71 == 13) rows[i] = T(1e6);  // outliers at tight bounds
    }
    for (double bound : {1e-9, 1e-5, 1e-3, 0.05, 0.5}) {
      std::vector<double> bounds(tables.count(), bound);
      bounds[0] = bound / 3;
      std::vector<std::vector<std::byte>> messages;
      std::vector<QuantizeReport> reports;
      for (HostSimd tier : {HostSimd::portable, HostSimd::avx512}) {
        if (tier > best_simd()) continue;
        simd = tier;
        Workspace ws;
        const Encoded<T> e = encode(rows, nrows, tables, bounds, Coder::none, ws);
        messages.push_back(e.message);
        reports.push_back(e.report);
      }
      simd = best_simd();
      for (std::size_t i = 1; i < messages.size(); ++i) {
        EXPECT_TRUE(messages[i] == messages[0]) << "bound " << bound << " d " << tables.d;
        EXPECT_EQ(reports[i].max_error, reports[0].max_error);
        EXPECT_EQ(reports[i].outliers, reports[0].outliers);
        EXPECT_EQ(reports[i].exact_tables, reports[0].exact_tables);
      }
    }
  }
}

TYPED_TEST(ErrorBoundedCodec, DecoderRejectsDamageAndWritesNothing) {
  using T = TypeParam;
  std::mt19937_64 engine(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  const Tables tables{32, 8};
  const std::size_t nrows = 16;
  std::vector<T> rows(nrows * tables.d);
  for (std::size_t i = 0; i < rows.size(); ++i)  // 4 distinct rows, repeated: LZ4 finds them
    rows[i] = i < 4 * tables.d ? T(normal(engine)) : rows[i % (4 * tables.d)];
  rows[5] = std::numeric_limits<T>::quiet_NaN();  // an outlier to miscount
  for (Coder coder : {Coder::none, Coder::lz4, Coder::zstd}) {
    Workspace ws;
    const Encoded<T> e = encode(rows, nrows, tables, {0.01, 0.02, 0.0, 0.01}, coder, ws);
    ASSERT_EQ(e.coder, coder) << "the codes compress";
    const std::vector<T> sentinel(rows.size(), T(42));
    std::vector<T> got = sentinel;
    // Wrong row counts, truncations and extensions.
    EXPECT_NE(decode(e.message.data(), e.message.size(), nrows + 1, tables, got.data(), ws), "");
    for (std::size_t cut :
         {std::size_t(0), std::size_t(1), kMessageHeaderBytes, e.message.size() - 1})
      EXPECT_NE(decode(e.message.data(), cut, nrows, tables, got.data(), ws), "") << cut;
    std::vector<std::byte> longer = e.message;
    longer.push_back(std::byte{0});
    EXPECT_NE(decode(longer.data(), longer.size(), nrows, tables, got.data(), ws), "");
    EXPECT_NE(decode(e.message.data(), e.message.size(), nrows, Tables{32, 16}, got.data(), ws),
              "");
    EXPECT_EQ(got, sentinel);
    // Every single-byte change of the headers, and random changes anywhere: either rejected
    // with nothing written, or (a change the format cannot see, e.g. in an offset) accepted.
    std::uniform_int_distribution<std::size_t> position(0, e.message.size() - 1);
    std::uniform_int_distribution<int> byte(0, 255);
    std::size_t rejected = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<std::byte> damaged = e.message;
      const std::size_t at =
          trial < 256 ? std::size_t(trial) % (kMessageHeaderBytes + 4 * kTableHeaderBytes)
                      : position(engine);
      damaged[at] ^= std::byte(byte(engine) | 1);
      got = sentinel;
      if (decode(damaged.data(), damaged.size(), nrows, tables, got.data(), ws) != "") {
        ++rejected;
        EXPECT_EQ(got, sentinel) << "written although rejected (byte " << at << ")";
      }
    }
    EXPECT_GT(rejected, 100u);
  }
}

TEST(ErrorBoundedCodecWire, CodesOutsideTheLevelsAreRejected) {
  Workspace ws;
  const Tables tables{4, 4};
  const std::vector<float> rows = {0.0f, 0.25f, 0.5f, 1.0f, 0.75f, 0.5f, 0.25f, 0.0f};
  Encoded<float> e = encode(rows, 2, tables, {0.1}, Coder::none, ws);
  // Levels: 1 / (2 * 0.1) + 1 = 6; the body's first code is right after the headers.
  const std::size_t body = kMessageHeaderBytes + kTableHeaderBytes;
  ASSERT_EQ(e.message.size(), body + 8);
  std::vector<float> got(8, 42.0f);
  e.message[body] = std::byte{6};
  EXPECT_NE(decode(e.message.data(), e.message.size(), 2, tables, got.data(), ws).find("outside"),
            std::string::npos);
  e.message[body] = std::byte{255};  // an outlier mark with no outlier announced
  EXPECT_NE(decode(e.message.data(), e.message.size(), 2, tables, got.data(), ws).find("outlier"),
            std::string::npos);
  EXPECT_EQ(got, std::vector<float>(8, 42.0f));
}

TEST(ErrorBoundedCodecWire, TightBoundsFallBackToExactTables) {
  // 1e-6 needs ~500000 levels: more than 16-bit codes hold, so the table travels exactly.
  std::vector<float> rows(64);
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = float(i) * 0.37f;
  QuantizeReport report;
  const std::vector<float> got = roundtrip(rows, 8, Tables{8, 8}, {1e-6}, Coder::none, &report);
  EXPECT_EQ(report.exact_tables, 1u);
  EXPECT_EQ(got, rows);
  // 1e-4 needs 5001 levels: 16-bit codes.
  roundtrip(rows, 8, Tables{8, 8}, {1e-4}, Coder::none, &report);
  EXPECT_EQ(report.exact_tables, 0u);
}

TEST(ErrorBoundedCodecWire, DistinctRowsStatistic) {
  // Rows 0..3 differ by 1e-3 of a range of 1: one level of 0.05 holds them all, 0.0001 not.
  std::vector<float> rows = {0.0f, 0.0f, 0.001f, 0.0f, 0.002f, 0.0f, 0.003f, 0.0f, 1.0f, 1.0f};
  std::size_t distinct = 0, surviving = 0;
  count_distinct(rows.data(), 5, 2, 0, 2, 0.05, distinct, surviving);
  EXPECT_EQ(distinct, 5u);
  EXPECT_EQ(surviving, 2u);
  distinct = surviving = 0;
  count_distinct(rows.data(), 5, 2, 0, 2, 0.0001, distinct, surviving);
  EXPECT_EQ(surviving, 5u);
}

}  // namespace
}  // namespace dct::detail::eb
