// DCT-MP's row codec without MPI: selection, both mask encodings, and the decoder's
// rejection of every kind of damaged message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <utility>

#include "core/config.hpp"
#include "core/error.hpp"
#include "mp/row_codec.hpp"

namespace dct::detail::mp {
namespace {

RowMasks masks_of(std::vector<std::vector<std::uint32_t>> rows) {
  RowMasks m;
  for (const auto &row : rows) {
    m.columns.insert(m.columns.end(), row.begin(), row.end());
    m.offsets.push_back(m.columns.size());
  }
  return m;
}

/// Encodes `masks` over `data` and returns the message and its shape.
std::vector<std::byte> encode(const std::vector<float> &data, const RowMasks &masks,
                              const RowFormat &format, MessageShape &shape) {
  shape = forward_shape(masks, format);
  std::vector<std::byte> message(shape.bytes + 1);
  // The values' coding must match format.value_bytes: 4 is the float itself, 2 is fp16.
  const ValueCoding coding = format.value_bytes == 2 ? ValueCoding::fp16 : ValueCoding::native;
  encode_forward(data.data(), masks, format, shape, coding, message.data());
  return message;
}

TEST(RowCodec, KeptPerRow) {
  EXPECT_EQ(kept_per_row(0.05, 64), 4u);  // 3.2 -> 4
  EXPECT_EQ(kept_per_row(0.1, 30), 3u);   // 3.0000000000000004 is 3
  EXPECT_EQ(kept_per_row(0.25, 64), 16u);
  EXPECT_EQ(kept_per_row(1.0, 7), 7u);
  EXPECT_EQ(kept_per_row(1e-9, 100), 1u);  // at least one
}

TEST(RowCodec, TopKTiesAndNaN) {
  const std::vector<float> row = {1, -3, 3, 0, NAN, -1, 2, 3};
  RowMasks m;
  select_top_k(row.data(), 1, row.size(), 4, m);
  // NaN first, then the three |x| = 3 (columns 1, 2, 7): lower columns win no tie here.
  EXPECT_EQ(m.columns, (std::vector<std::uint32_t>{1, 2, 4, 7}));
  m.clear();
  select_top_k(row.data(), 1, row.size(), 2, m);  // NaN and the lowest of the 3s
  EXPECT_EQ(m.columns, (std::vector<std::uint32_t>{1, 4}));
  m.clear();
  select_above(row.data(), 1, row.size(), 2.0, m);
  EXPECT_EQ(m.columns, (std::vector<std::uint32_t>{1, 2, 4, 6, 7}));
}

// Found by the row_masks fuzz harness: k = 0 read top[k - 1], before the buffer (the library
// keeps at least 1 per row today, so only a caller outside it could reach this).
TEST(RowCodec, TopKOfNone) {
  const std::vector<float> rows = {1, -3, 3, 0, 2, 5};
  RowMasks m;
  select_top_k(rows.data(), 2, 3, 0, m);
  EXPECT_EQ(m.offsets, (std::vector<std::size_t>{0, 0, 0}));
  EXPECT_TRUE(m.columns.empty());
}

/// Runs `body` under every host tier of the row codec this CPU has, restoring the best.
template <typename Body>
void for_each_tier(Body &&body) {
  for (HostSimd tier : {HostSimd::portable, HostSimd::avx512}) {
    if (tier > best_row_simd()) continue;
    SCOPED_TRACE(tier == HostSimd::avx512 ? "avx512" : "portable");
    row_simd = tier;
    body();
  }
  row_simd = best_row_simd();
}

/// Rows that move the floor carried from row to row every way: runs of ties, zeros,
/// infinities, NaN and subnormals; gaussian rows whose scale jumps up and down by 1000x (fewer
/// than k, then all of them, pass the previous row's floor); constant rows.
template <typename T>
std::vector<T> awkward_rows(std::size_t nrows, std::size_t d) {
  std::mt19937_64 engine(5);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> rows(nrows * d);
  for (std::size_t r = 0; r < nrows; ++r) {
    const double scale = std::pow(1000.0, double(int(r / 7 % 3) - 1));
    for (std::size_t c = 0; c < d; ++c) {
      T &x = rows[r * d + c];
      if (r % 4 == 0) {  // few distinct values
        const auto pick = engine() % 20;
        x = pick == 0   ? T(NAN)
            : pick == 1 ? T(-INFINITY)
            : pick == 2 ? T(0)
                        : T(int(engine() % 7) - 3);
        if (pick == 3) x = T(1e-30) * T(int(engine() % 5));  // tiny values and subnormals
      } else if (r % 4 == 1 && r % 8 == 1) {
        x = T(-2.5);
      } else {
        x = T(scale * normal(engine));
      }
    }
  }
  return rows;
}

/// Every top-k path (a short candidate list ranked, a long one searched or selected, a row
/// taken again when fewer than k passed the floor) against sorting, on every tier.
template <typename T>
void top_k_matches_sorting() {
  for (const std::size_t d : {std::size_t(100), std::size_t(256), std::size_t(37)}) {
    const std::size_t nrows = 60;
    const std::vector<T> rows = awkward_rows<T>(nrows, d);
    for (std::size_t k : {1u, 5u, 13u, 32u, 33u, 60u, 99u, 100u}) {
      k = std::min(k, d);
      for_each_tier([&] {
        RowMasks masks;
        select_top_k(rows.data(), nrows, d, k, masks);
        ASSERT_EQ(masks.kept(), nrows * k);
        for (std::size_t r = 0; r < nrows; ++r) {
          std::vector<std::uint32_t> order(d);
          for (std::uint32_t c = 0; c < d; ++c) order[c] = c;
          // NaN above infinity above every finite |x|; stable: lower column first on ties.
          const auto rank = [&](std::uint32_t c) {
            const T x = rows[r * d + c];
            return std::make_pair(x != x          ? 2
                                  : std::isinf(x) ? 1
                                                  : 0,
                                  x != x ? 0.0 : std::fabs(double(x)));
          };
          std::stable_sort(order.begin(), order.end(),
                           [&](std::uint32_t a, std::uint32_t b) { return rank(a) > rank(b); });
          std::vector<std::uint32_t> expected(order.begin(), order.begin() + std::ptrdiff_t(k));
          std::sort(expected.begin(), expected.end());
          const std::vector<std::uint32_t> got(
              masks.columns.begin() + std::ptrdiff_t(masks.offsets[r]),
              masks.columns.begin() + std::ptrdiff_t(masks.offsets[r + 1]));
          ASSERT_EQ(got, expected) << "d=" << d << " k=" << k << " row " << r;
        }
      });
    }
  }
}

TEST(RowCodec, TopKMatchesSortingFloat) {
  top_k_matches_sorting<float>();
}
TEST(RowCodec, TopKMatchesSortingDouble) {
  top_k_matches_sorting<double>();
}

// The values of a message, every coding and tier: bit for bit what encode_value16 gives each
// value (NaN payloads and signs, infinities, the fp16 overflow boundary, fp16 subnormals and
// what rounds below them, float subnormals, -0), over masks whose row ends fall anywhere in
// the vectors of 16.
TEST(RowCodec, GatheredValuesAreEncodeValue16OnEveryTier) {
  const std::uint32_t specials[] = {0x7fc00000u, 0xffc02000u, 0x7f800001u, 0x7f800000u,
                                    0xff800000u, 0x477fefffu, 0x477ff000u, 0xc77ff000u,
                                    0x33800000u, 0x33000000u, 0x33000001u, 0x00000001u,
                                    0x80000000u, 0x387fc000u, 0x3f800fffu, 0x3f801000u};
  const std::size_t d = 50, nrows = 40;
  std::mt19937_64 engine(9);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<float> rows(nrows * d);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i % 3 == 0) {
      std::memcpy(&rows[i], &specials[(i / 3) % std::size(specials)], 4);
    } else {
      rows[i] = normal(engine);
    }
  }
  RowMasks masks;
  for (std::size_t r = 0; r < nrows; ++r) {
    for (std::uint32_t c = 0; c < d; ++c)
      if ((c * 7 + r) % (2 + r % 5) == 0) masks.columns.push_back(c);
    masks.offsets.push_back(masks.columns.size());
  }
  for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16}) {
    const RowFormat format{d, coding == ValueCoding::native ? 4u : 2u};
    std::vector<std::byte> expected(masks.kept() * format.value_bytes);
    std::byte *out = expected.data();
    for (std::size_t r = 0; r < nrows; ++r)
      for (std::size_t j = masks.offsets[r]; j < masks.offsets[r + 1]; ++j) {
        const float value = rows[r * d + masks.columns[j]];
        const std::uint16_t bits = encode_value16(value, coding);
        if (coding == ValueCoding::native)
          std::memcpy(out, &value, 4);
        else
          std::memcpy(out, &bits, 2);
        out += format.value_bytes;
      }
    for_each_tier([&] {
      std::vector<std::byte> got(expected.size() + 1, std::byte{0x5a});
      gather_values(rows.data(), masks, format, coding, got.data());
      EXPECT_EQ(got.back(), std::byte{0x5a}) << "wrote past the values";
      got.pop_back();
      EXPECT_TRUE(got == expected) << "coding " << int(coding);
    });
  }
}

TEST(RowCodec, BitmapAndIndexListDecodeTheSame) {
  // d = 64: bitmap 8 bytes; 4 indices = 8 bytes (index list), 5 = 10 bytes (bitmap).
  const RowFormat format{64, 4};
  EXPECT_FALSE(format.uses_bitmap(4));
  EXPECT_TRUE(format.uses_bitmap(5));
  std::vector<float> data(3 * 64);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = float(i) + 0.5f;
  const RowMasks masks = masks_of({{0, 5, 9, 63}, {1, 2, 3, 4, 62}, {}});
  MessageShape shape;
  const std::vector<std::byte> message = encode(data, masks, format, shape);
  EXPECT_EQ(shape.uniform, -1);
  EXPECT_EQ(shape.bytes, 9 * 4 + 3 * 2 + 8 + 8 + 0);
  RowMasks decoded;
  ASSERT_EQ(decode_masks(message.data(), shape, format, decoded), "");
  EXPECT_EQ(decoded.columns, masks.columns);
  EXPECT_EQ(decoded.offsets, masks.offsets);
  std::vector<float> dense(3 * 64, -1.0f);
  scatter_values(message.data(), decoded, format, ValueCoding::native, dense.data());
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 64; ++c) {
      const bool kept = std::count(masks.columns.begin() + masks.offsets[r],
                                   masks.columns.begin() + masks.offsets[r + 1], c) == 1;
      EXPECT_EQ(dense[r * 64 + c], kept ? data[r * 64 + c] : 0.0f);
    }
}

TEST(RowCodec, WideRowsUseWideCountsAndIndices) {
  // d = 65536: indices still fit 16 bits, counts (up to 65536) need 32; d = 70000: both 32.
  for (std::size_t d : {std::size_t(65536), std::size_t(70000)}) {
    const RowFormat format{d, 4};
    EXPECT_EQ(format.count_bytes(), 4u);
    EXPECT_EQ(format.index_bytes(), d == 65536 ? 2u : 4u);
    std::vector<float> data(3 * d, 1.5f);
    std::vector<std::uint32_t> full(d);
    for (std::uint32_t c = 0; c < d; ++c) full[c] = c;
    const RowMasks masks = masks_of({{0, std::uint32_t(d - 1)}, full, {}});  // non-uniform
    MessageShape shape;
    const std::vector<std::byte> message = encode(data, masks, format, shape);
    EXPECT_EQ(shape.uniform, -1);
    EXPECT_EQ(shape.bytes, (d + 2) * 4 + 3 * 4 + 2 * format.index_bytes() + format.bitmap_bytes());
    RowMasks decoded;
    ASSERT_EQ(decode_masks(message.data(), shape, format, decoded), "");
    EXPECT_EQ(decoded.columns, masks.columns);
    EXPECT_EQ(decoded.offsets, masks.offsets);
  }
}

TEST(RowCodec, UniformRowsSendNoCounts) {
  const RowFormat format{10, 2};
  std::vector<float> data(20, 1.0f);
  MessageShape shape;
  encode(data, masks_of({{1, 2}, {0, 9}}), format, shape);
  EXPECT_EQ(shape.uniform, 2);
  EXPECT_EQ(shape.bytes, 4 * 2 + 2 * 2u);  // 16-bit values + two 2-byte bitmaps (< 2 indices)
}

class Tampered : public ::testing::Test {
 protected:
  // d = 16: an index list for 1 entry (the 2-byte bitmap is not smaller), a bitmap for more.
  const RowFormat format{16, 4};
  std::vector<float> data = std::vector<float>(32, 2.0f);
  RowMasks masks = masks_of({{3}, {0, 7, 15}});
  MessageShape shape;
  std::vector<std::byte> message = encode(data, masks, format, shape);
  RowMasks out;

  std::string decode() { return decode_masks(message.data(), shape, format, out); }
  std::byte *counts() { return message.data() + shape.nnz * 4; }
  std::byte *row0_index() { return counts() + 2 * 2; }
  std::byte *row1_bitmap() { return row0_index() + 2; }
};

TEST_F(Tampered, IntactDecodes) {
  EXPECT_EQ(shape.uniform, -1);
  EXPECT_EQ(decode(), "");
}
TEST_F(Tampered, IndexPastD) {
  const std::uint16_t bad = 16;
  std::memcpy(row0_index(), &bad, 2);
  EXPECT_NE(decode().find("index past d"), std::string::npos);
}
TEST(RowCodec, UnsortedOrRepeatedIndices) {
  const RowFormat format{1000, 4};  // index lists up to 62 entries (bitmap 125 bytes)
  std::vector<float> data(1000, 1.0f);
  for (const auto &row : {std::vector<std::uint32_t>{5, 3}, std::vector<std::uint32_t>{4, 4}}) {
    MessageShape shape;
    const std::vector<std::byte> message = encode(data, masks_of({row}), format, shape);
    RowMasks out;
    EXPECT_NE(decode_masks(message.data(), shape, format, out).find("not strictly increasing"),
              std::string::npos);
  }
}
TEST_F(Tampered, BitmapPopcount) {
  row1_bitmap()[0] |= std::byte(0x02);  // a fourth bit
  EXPECT_NE(decode().find("more bits"), std::string::npos);
  row1_bitmap()[0] = std::byte(0);  // two bits left
  EXPECT_NE(decode().find("fewer bits"), std::string::npos);
}
TEST_F(Tampered, CountsAndLengths) {
  const std::uint16_t too_many = 17;
  std::memcpy(counts(), &too_many, 2);
  EXPECT_NE(decode().find("more than d"), std::string::npos);
  message = encode(data, masks, format, shape);
  MessageShape lying = shape;
  lying.nnz = 5;  // counts add up to 4
  EXPECT_NE(decode_masks(message.data(), lying, format, out), "");
  lying = shape;
  lying.bytes -= 1;  // truncated
  EXPECT_NE(decode_masks(message.data(), lying, format, out).find("length"), std::string::npos);
  lying.bytes = 3;  // shorter than its values
  EXPECT_NE(decode_masks(message.data(), lying, format, out), "");
  lying = shape;
  lying.nnz = 100;  // more than the rows hold
  EXPECT_NE(decode_masks(message.data(), lying, format, out), "");
  lying = shape;
  lying.uniform = 17;
  EXPECT_NE(decode_masks(message.data(), lying, format, out), "");
}
TEST(RowCodec, BitmapBitPastD) {
  const RowFormat format{12, 4};  // bitmap of 2 bytes, bits 12..15 unused
  std::vector<float> data(12, 1.0f);
  MessageShape shape;
  std::vector<std::byte> message = encode(data, masks_of({{0, 1, 2}}), format, shape);
  ASSERT_TRUE(format.uses_bitmap(3));
  std::byte *bitmap = message.data() + 3 * 4;
  bitmap[0] &= std::byte(0xfe);  // drop column 0 ...
  bitmap[1] |= std::byte(0x80);  // ... for column 15 >= d
  RowMasks out;
  EXPECT_NE(decode_masks(message.data(), shape, format, out).find("past d"), std::string::npos);
}

TEST(RowCodec, SixteenBitValuesRoundOnce) {
  const RowFormat format{4, 2};
  const std::vector<float> row = {1.0f / 3.0f, 0, 0, -70000.0f};
  const RowMasks masks = masks_of({{0, 3}});
  for (ValueCoding coding : {ValueCoding::fp16, ValueCoding::bf16}) {
    std::vector<std::byte> values(4);
    gather_values(row.data(), masks, format, coding, values.data());
    std::vector<float> dense(4, 9.0f);
    scatter_values(values.data(), masks, format, coding, dense.data());
    EXPECT_EQ(dense[0], decode_value16<float>(encode_value16(row[0], coding), coding));
    EXPECT_EQ(dense[1], 0.0f);
    EXPECT_EQ(dense[3], decode_value16<float>(encode_value16(row[3], coding), coding));
  }
}

TEST(RowCodec, ConfigKeys) {
  setenv("DCT_ROW_LENGTH", "128", 1);
  setenv("DCT_KEEP", "0.25", 1);
  setenv("DCT_MP_SELECT", "laplace", 1);
  setenv("DCT_VALUES", "bf16", 1);
  const Config config = Config::from(MPI_INFO_NULL);
  EXPECT_EQ(config.row_length, 128);
  EXPECT_EQ(config.keep, 0.25);
  EXPECT_EQ(config.mp_select, MpSelect::laplace);
  EXPECT_EQ(config.values, ValueCoding::bf16);
  setenv("DCT_KEEP", "0", 1);
  try {
    Config::from(MPI_INFO_NULL);
    ADD_FAILURE() << "keep 0 accepted";
  } catch (const Error &e) {
    EXPECT_EQ(e.code(), DCT_ERR_INFO);
  }
  for (const char *name : {"DCT_ROW_LENGTH", "DCT_KEEP", "DCT_MP_SELECT", "DCT_VALUES"})
    unsetenv(name);
}

}  // namespace
}  // namespace dct::detail::mp
