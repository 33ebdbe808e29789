// Wire encodings: fp16/bf16 rounding against the compiler's own types, and sparse blocks
// (index lists, bitmaps and Elias-Fano codes, native and 16-bit values) round trips, their
// sizes, and the decoder's checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/float16.hpp"
#include "core/wire.hpp"

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
                       wire::IndexCoding expect_indices) {
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
  EXPECT_EQ(format.indices, expect_indices) << range << " " << entries;
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

TEST(WireBlocks, EveryIndexCodingRoundTripsWithEveryValueCoding) {
  using wire::IndexCoding;
  for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16}) {
    expect_round_trip<float>(10000, 100, coding, IndexCoding::elias_fano);   // 1%
    expect_round_trip<float>(10000, 1000, coding, IndexCoding::elias_fano);  // 10%
    expect_round_trip<float>(10000, 5000, coding, IndexCoding::bitmap);      // 50%
    expect_round_trip<double>(777, 700, coding, IndexCoding::bitmap);  // range not a multiple of 64
    expect_round_trip<double>(64, 0, coding, IndexCoding::offsets);
    expect_round_trip<float>(1, 1, coding, IndexCoding::bitmap);  // one byte beats 4 of index
    expect_round_trip<float>(1 << 20, 1, coding, IndexCoding::elias_fano);  // 3 bytes, not 4
    expect_round_trip<float>(1 << 20, 2, coding, IndexCoding::elias_fano);
    expect_round_trip<double>(1 << 20, 3000, coding, IndexCoding::elias_fano);
  }
  // Entries at both ends of the range, every low-bit width, and dense runs.
  std::mt19937 engine(11);
  for (std::size_t range : {2u, 3u, 63u, 64u, 65u, 1000u, 4097u, 100000u}) {
    for (std::size_t entries = 1; entries <= range; entries = entries * 3 + 1) {
      std::vector<WireIndex> idx(range);
      for (std::size_t i = 0; i < range; ++i) idx[i] = static_cast<WireIndex>(i);
      std::shuffle(idx.begin() + 1, idx.end() - 1, engine);  // keep 0 and range - 1
      idx.resize(entries);
      if (entries > 1) idx[1] = static_cast<WireIndex>(range - 1);
      std::sort(idx.begin(), idx.end());
      for (WireIndex &i : idx) i += 5;  // a block that starts at 5
      wire::BlockFormat format = wire::block_format<float>(entries, range, ValueCoding::native);
      format.indices = IndexCoding::elias_fano;  // forced, whatever is smallest
      const std::vector<float> val(entries, 1.0f);
      std::vector<std::byte> block(format.units() * wire::kUnitBytes);
      wire::encode_block(format, idx.data(), val.data(), 5, block.data());
      std::vector<WireIndex> out(entries);
      std::vector<float> val_out(entries);
      ASSERT_TRUE(
          wire::decode_block(format, block.data(), block.size(), 5, out.data(), val_out.data()))
          << range << " " << entries;
      ASSERT_EQ(out, idx) << range << " " << entries;
    }
  }
}

// dct_values=sign: [magnitude][one bit per entry, 1 = negative][indices]; the decoder gives
// every entry +-magnitude and refuses a negative magnitude or bits past the last entry.
TEST(WireBlocks, SignBlocksCarryOneMagnitudeAndOneBitPerEntry) {
  for (std::size_t entries : {1u, 7u, 8u, 9u, 100u, 1000u}) {
    const std::size_t range = 100000;
    const wire::BlockFormat format = wire::block_format<float>(entries, range, ValueCoding::sign);
    EXPECT_EQ(format.values_bytes(), sizeof(float) + (entries + 7) / 8);
    EXPECT_EQ(format.bytes(), format.values_bytes() + format.index_bytes());
    std::vector<WireIndex> idx(entries);
    std::vector<float> val(entries);
    for (std::size_t j = 0; j < entries; ++j) {
      idx[j] = static_cast<WireIndex>(7 + 97 * j);
      val[j] = (j * 7919) % 3 == 0 ? -0.375f : 0.375f;
    }
    std::vector<std::byte> block(format.units() * wire::kUnitBytes);
    wire::encode_block(format, idx.data(), val.data(), 0, block.data());
    std::vector<WireIndex> idx_out(entries);
    std::vector<float> val_out(entries);
    ASSERT_TRUE(
        wire::decode_block(format, block.data(), block.size(), 0, idx_out.data(), val_out.data()));
    EXPECT_EQ(idx_out, idx);
    EXPECT_EQ(val_out, val);
    std::vector<std::byte> forged(block);
    const float negative = -0.375f;
    std::memcpy(forged.data(), &negative, sizeof negative);
    EXPECT_FALSE(wire::decode_block(format, forged.data(), forged.size(), 0, idx_out.data(),
                                    val_out.data()));
    if (entries % 8 != 0) {
      forged = block;
      forged[sizeof(float) + entries / 8] |= std::byte(0x80);
      EXPECT_FALSE(wire::decode_block(format, forged.data(), forged.size(), 0, idx_out.data(),
                                      val_out.data()));
    }
  }
  // 1% of a 100k range: ~9.6 bits per entry in all instead of ~24.6 with fp16.
  EXPECT_LT(wire::block_format<float>(1000, 100000, ValueCoding::sign).bytes(), 1220u);
  EXPECT_EQ(wire::block_format<float>(0, 100000, ValueCoding::sign).bytes(), 0u);
}

TEST(WireBlocks, EliasFanoCostsTwoPlusLogBitsPerEntry) {
  // 100 of 10000 (1%): 6 low bits + 100 + 157 unary bits = 857 bits, 108 bytes, against 400
  // for offsets; with fp16 values 308 bytes, 3.08 per entry instead of 6.
  const wire::BlockFormat one_percent = wire::block_format<float>(100, 10000, ValueCoding::fp16);
  EXPECT_EQ(one_percent.indices, wire::IndexCoding::elias_fano);
  EXPECT_EQ(one_percent.index_bytes(), 108u);
  EXPECT_EQ(one_percent.bytes(), 100u * 2 + 108u);
  for (double density : {0.1, 0.01, 0.001, 0.0001}) {
    const std::size_t range = 1 << 22, entries = static_cast<std::size_t>(range * density);
    const double bits_per_entry =
        8.0 * wire::block_format<float>(entries, range, ValueCoding::native).index_bytes() /
        entries;
    EXPECT_LE(bits_per_entry, 2.0 + std::ceil(std::log2(1.0 / density))) << density;
  }
  // The bitmap takes over where it is smaller: about a quarter of the range and up.
  EXPECT_EQ(wire::block_format<float>(2000, 10000, ValueCoding::native).indices,
            wire::IndexCoding::elias_fano);
  EXPECT_EQ(wire::block_format<float>(3000, 10000, ValueCoding::native).indices,
            wire::IndexCoding::bitmap);
  // Plain offsets only where Elias-Fano needs more than 32 bits: one entry in 2^32 - 1.
  EXPECT_EQ(wire::block_format<float>(1, 4294967295u, ValueCoding::native).indices,
            wire::IndexCoding::offsets);
}

TEST(WireBlocks, DecoderRejectsOutOfRangeDisorderAndWrongPopulation) {
  const std::vector<float> val = {1, 2, 3};
  std::vector<WireIndex> idx_out(3);
  std::vector<float> val_out(3);
  auto decode = [&](const wire::BlockFormat &f, const std::vector<std::byte> &b) {
    return wire::decode_block(f, b.data(), b.size(), 0, idx_out.data(), val_out.data());
  };
  // Lists: forge the index bytes directly.
  wire::BlockFormat list = wire::block_format<float>(3, 1000, ValueCoding::native);
  list.indices = wire::IndexCoding::offsets;
  for (const std::vector<WireIndex> &bad : {std::vector<WireIndex>{1, 5, 1000},  // out of range
                                            std::vector<WireIndex>{1, 5, 5},     // duplicate
                                            std::vector<WireIndex>{7, 5, 9}}) {  // disorder
    std::vector<std::byte> block(list.units() * wire::kUnitBytes);
    std::memcpy(block.data(), val.data(), 12);
    std::memcpy(block.data() + 12, bad.data(), 12);
    EXPECT_FALSE(decode(list, block));
  }
  // Bitmaps: a bit set past the range, or a population that differs from the count.
  wire::BlockFormat bitmap = wire::block_format<float>(3, 60, ValueCoding::native);
  bitmap.indices = wire::IndexCoding::bitmap;
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

  // Elias-Fano, 3 entries of 1000: 8 low bits each (bits 0-23), then 7 unary bits (24-30),
  // bit 31 padding. Entry j with offset x sets unary bit (x >> 8) + j.
  wire::BlockFormat ef = wire::block_format<float>(3, 1000, ValueCoding::native);
  ASSERT_EQ(ef.indices, wire::IndexCoding::elias_fano);
  ASSERT_EQ(ef.index_bytes(), 4u);
  auto forge = [&](std::uint32_t low0, std::uint32_t low1, std::uint32_t low2,
                   std::uint32_t unary) {
    std::vector<std::byte> b(ef.units() * wire::kUnitBytes);
    std::memcpy(b.data(), val.data(), 12);
    const std::uint32_t code = low0 | low1 << 8 | low2 << 16 | unary << 24;
    std::memcpy(b.data() + 12, &code, 4);
    return b;
  };
  // {1, 5, 900}: high parts 0, 0, 3 -> unary bits 0, 1, 5.
  EXPECT_TRUE(decode(ef, forge(1, 5, 900 & 255, 0b100011)));
  EXPECT_EQ(idx_out, (std::vector<WireIndex>{1, 5, 900}));
  EXPECT_FALSE(decode(ef, forge(1, 5, 255, 0b100011)));    // 3 << 8 | 255 = 1023 >= 1000
  EXPECT_FALSE(decode(ef, forge(5, 5, 132, 0b100011)));    // duplicate
  EXPECT_FALSE(decode(ef, forge(9, 5, 132, 0b100011)));    // disorder
  EXPECT_FALSE(decode(ef, forge(1, 5, 132, 0b1100011)));   // four ones
  EXPECT_FALSE(decode(ef, forge(1, 5, 132, 0b000011)));    // two ones
  EXPECT_FALSE(decode(ef, forge(1, 5, 132, 0b10100011)));  // padding bit set
  std::vector<std::byte> short_block = forge(1, 5, 132, 0b100011);
  EXPECT_FALSE(wire::decode_block(ef, short_block.data(), ef.bytes() - 1, 0, idx_out.data(),
                                  val_out.data()));
}

TEST(WireBlocks, EliasFanoDecoderAcceptsOnlyValidListsFromRandomBytes) {
  // Random and bit-flipped codes: the decoder never reads past the block, and whatever it
  // accepts is a strictly increasing list inside the range.
  std::mt19937 engine(5);
  std::uniform_int_distribution<int> byte(0, 255);
  std::size_t accepted = 0;
  for (int trial = 0; trial < 200000; ++trial) {
    const std::size_t range = 1 + engine() % 5000,
                      entries = 1 + engine() % std::min<std::size_t>(range, 40);
    wire::BlockFormat format = wire::block_format<float>(entries, range, ValueCoding::native);
    format.indices = wire::IndexCoding::elias_fano;
    std::vector<std::byte> block(format.bytes());  // exactly the block: ASan sees any overread
    if (trial % 2 == 0) {
      for (std::byte &b : block) b = std::byte(byte(engine));
    } else {  // a valid code with one bit flipped, or none
      std::vector<WireIndex> idx(range);
      for (std::size_t i = 0; i < range; ++i) idx[i] = static_cast<WireIndex>(i);
      std::shuffle(idx.begin(), idx.end(), engine);
      idx.resize(entries);
      std::sort(idx.begin(), idx.end());
      const std::vector<float> val(entries, 1.0f);
      std::vector<std::byte> padded(format.units() * wire::kUnitBytes);
      wire::encode_block(format, idx.data(), val.data(), 0, padded.data());
      std::copy(padded.begin(), padded.begin() + static_cast<std::ptrdiff_t>(block.size()),
                block.begin());
      const std::size_t bit = engine() % (block.size() * 8 + 1);
      if (bit < block.size() * 8) block[bit / 8] ^= std::byte(1u << (bit % 8));
    }
    std::vector<WireIndex> out(entries);
    std::vector<float> val_out(entries);
    if (!wire::decode_block(format, block.data(), block.size(), 0, out.data(), val_out.data()))
      continue;
    ++accepted;
    for (std::size_t j = 0; j < entries; ++j) {
      ASSERT_LT(out[j], range);
      if (j > 0) {
        ASSERT_LT(out[j - 1], out[j]);
      }
    }
  }
  EXPECT_GT(accepted, 0u);
}

}  // namespace
}  // namespace dct::detail
