// Wire encodings: fp16/bf16 rounding against the compiler's own types, and sparse blocks
// (index lists and bitmaps, native and 16-bit values) round trips and the decoder's checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "exchange/exchange.hpp"
#include "float16.hpp"

namespace dct::detail {
namespace {

TEST(Float16, EveryHalfRoundTripsThroughFloat) {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const float value = f16::from_fp16(half);
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(f16::from_fp16(f16::to_fp16(value)))) << bits;
      continue;
    }
    ASSERT_EQ(f16::to_fp16(value), half) << bits;
    const float bvalue = f16::from_bf16(half);
    if (!std::isnan(bvalue)) {
      ASSERT_EQ(f16::to_bf16(bvalue), half) << bits;
    }
  }
}

#if defined(__FLT16_MAX__)
TEST(Float16, RoundsToNearestEvenLikeTheCompiler) {
  std::mt19937 engine(7);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int i = 0; i < 2000000; ++i) {
    const std::uint32_t bits = any_bits(engine);
    float value;
    std::memcpy(&value, &bits, sizeof value);
    if (std::isnan(value)) continue;
    const _Float16 reference = static_cast<_Float16>(value);
    std::uint16_t expected;
    std::memcpy(&expected, &reference, sizeof expected);
    ASSERT_EQ(f16::to_fp16(value), expected) << value;
  }
}
#endif

TEST(Float16, BfloatRoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even 1.
  EXPECT_EQ(f16::from_bf16(f16::to_bf16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(f16::from_bf16(f16::to_bf16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  EXPECT_EQ(f16::from_bf16(f16::to_bf16(-3.0f)), -3.0f);
  EXPECT_TRUE(std::isnan(f16::from_bf16(f16::to_bf16(std::nanf("")))));
}

TEST(Float16, WireValueLeavesAnExactRemainder) {
  std::mt19937_64 engine(3);
  std::normal_distribution<double> normal(0.0, 100.0);
  for (ValueCoding coding : {ValueCoding::fp16, ValueCoding::bf16}) {
    for (int i = 0; i < 100000; ++i) {
      const float acc = static_cast<float>(normal(engine));
      const float sent = wire_value(acc, coding);
      const float rest = wire_remainder(acc, sent);
      ASSERT_EQ(sent + rest, acc);
      ASSERT_EQ(wire_value(sent, coding), sent);  // the receiver decodes exactly `sent`
      const double dacc = normal(engine);
      const double dsent = wire_value(dacc, coding);
      ASSERT_EQ(dsent + wire_remainder(dacc, dsent), dacc);
    }
  }
}

template <typename T>
void expect_round_trip(std::size_t range, std::size_t entries, ValueCoding coding,
                       bool expect_bitmap) {
  std::mt19937 engine(static_cast<unsigned>(range * 31 + entries));
  std::vector<WireIndex> all(range);
  for (std::size_t i = 0; i < range; ++i) all[i] = static_cast<WireIndex>(i);
  std::shuffle(all.begin(), all.end(), engine);
  std::vector<WireIndex> idx(all.begin(), all.begin() + entries);
  std::sort(idx.begin(), idx.end());
  const std::uint64_t begin = 1000;
  for (WireIndex &i : idx) i += begin;
  std::normal_distribution<double> normal;
  std::vector<T> val(entries);
  for (T &v : val) v = wire_value(static_cast<T>(normal(engine)), coding);

  const wire::BlockFormat format = wire::block_format<T>(entries, range, coding);
  EXPECT_EQ(format.bitmap, expect_bitmap) << range << " " << entries;
  std::vector<std::byte> block(format.units() * wire::kUnitBytes + 8);
  wire::encode_block(format, idx.data(), val.data(), begin, block.data());
  std::vector<WireIndex> idx_out(entries);
  std::vector<T> val_out(entries);
  ASSERT_TRUE(wire::decode_block(format, block.data(), format.units() * wire::kUnitBytes, begin,
                                 idx_out.data(), val_out.data()));
  EXPECT_EQ(idx_out, idx);
  EXPECT_EQ(val_out, val);
  // A message shorter than the block is refused.
  if (format.bytes() > 0) {
    EXPECT_FALSE(wire::decode_block(format, block.data(), format.bytes() - 1, begin, idx_out.data(),
                                    val_out.data()));
  }
}

TEST(WireBlocks, ListsAndBitmapsRoundTripWithEveryValueCoding) {
  for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16}) {
    expect_round_trip<float>(10000, 100, coding, false);  // 1%: a list
    expect_round_trip<float>(10000, 1000, coding, true);  // 10%: a bitmap
    expect_round_trip<double>(777, 700, coding, true);    // range not a multiple of 64
    expect_round_trip<double>(64, 0, coding, false);
    expect_round_trip<float>(1, 1, coding, true);  // one byte of bitmap beats 4 of index
  }
  // Both encodings of the same entries decode to the same tensor: the switch is at 1/32.
  EXPECT_FALSE(wire::block_format<float>(312, 10000, ValueCoding::native).bitmap);
  EXPECT_TRUE(wire::block_format<float>(313, 10000, ValueCoding::native).bitmap);
  EXPECT_EQ(wire::block_format<float>(100, 10000, ValueCoding::fp16).bytes(), 100u * 6);
}

TEST(WireBlocks, DecoderRejectsOutOfRangeDisorderAndWrongPopulation) {
  const std::vector<float> val = {1, 2, 3};
  std::vector<WireIndex> idx_out(3);
  std::vector<float> val_out(3);
  auto decode = [&](const wire::BlockFormat &f, const std::vector<std::byte> &b) {
    return wire::decode_block(f, b.data(), b.size(), 0, idx_out.data(), val_out.data());
  };
  // Lists: forge the index bytes directly.
  const wire::BlockFormat list = wire::block_format<float>(3, 1000, ValueCoding::native);
  ASSERT_FALSE(list.bitmap);
  for (const std::vector<WireIndex> &bad : {std::vector<WireIndex>{1, 5, 1000},  // out of range
                                            std::vector<WireIndex>{1, 5, 5},     // duplicate
                                            std::vector<WireIndex>{7, 5, 9}}) {  // disorder
    std::vector<std::byte> block(list.units() * wire::kUnitBytes);
    std::memcpy(block.data(), val.data(), 12);
    std::memcpy(block.data() + 12, bad.data(), 12);
    EXPECT_FALSE(decode(list, block));
  }
  // Bitmaps: a bit set past the range, or a population that differs from the count.
  const wire::BlockFormat bitmap = wire::block_format<float>(3, 60, ValueCoding::native);
  ASSERT_TRUE(bitmap.bitmap);
  std::vector<std::byte> block(bitmap.units() * wire::kUnitBytes);
  std::memcpy(block.data(), val.data(), 12);
  const std::uint64_t good = 0b1011, past_range = 0b1011 | (1ull << 61), too_many = 0b1111;
  std::memcpy(block.data() + 12, &good, 8);
  EXPECT_TRUE(decode(bitmap, block));
  EXPECT_EQ(idx_out, (std::vector<WireIndex>{0, 1, 3}));
  std::memcpy(block.data() + 12, &past_range, 8);
  EXPECT_FALSE(decode(bitmap, block));
  std::memcpy(block.data() + 12, &too_many, 8);
  EXPECT_FALSE(decode(bitmap, block));
  const std::uint64_t too_few = 0b1;
  std::memcpy(block.data() + 12, &too_few, 8);
  EXPECT_FALSE(decode(bitmap, block));
}

}  // namespace
}  // namespace dct::detail
