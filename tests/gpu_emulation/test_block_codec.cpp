// The device block codec (backends/common/cuda_hip/block_codec.hpp) against the host's
// (src/core/wire.cpp), run through the emulation: the same bytes for every value coding and index
// coding, the same entries back, and the same verdict on damaged blocks (every single-bit flip
// of small blocks, random multi-bit damage of larger ones, short messages).
#include "emulated_api.hpp"  // first: it stands in for backends/cuda/cuda_api.hpp

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_hip/cuda_hip_backend.hpp"
#include "core/wire.hpp"

namespace dct::detail {
namespace {

/// One sparse list and its block, as a sender holds them.
template <typename T>
struct Case {
  wire::BlockFormat format;
  std::vector<WireIndex> idx;
  std::vector<T> val;
  std::uint64_t begin = 0;
};

template <typename T>
Case<T> make_case(std::size_t entries, std::size_t range, ValueCoding coding, std::uint64_t begin,
                  unsigned seed) {
  std::mt19937_64 engine(seed);
  Case<T> c;
  c.begin = begin;
  c.format = wire::block_format<T>(entries, range, coding);
  // `entries` distinct offsets in [0, range), increasing (Floyd's sampling, then sorted).
  std::vector<std::uint64_t> offsets;
  std::vector<bool> taken(range < (1u << 24) ? range : 0);
  while (offsets.size() < entries) {
    const std::uint64_t o = engine() % range;
    if (!taken.empty()) {
      if (taken[o]) continue;
      taken[o] = true;
    } else if (std::find(offsets.begin(), offsets.end(), o) != offsets.end()) {
      continue;
    }
    offsets.push_back(o);
  }
  std::sort(offsets.begin(), offsets.end());
  std::normal_distribution<double> normal(0.0, 1.0);
  const T magnitude = T(0.375);
  for (std::uint64_t o : offsets) {
    c.idx.push_back(static_cast<WireIndex>(begin + o));
    const T v = static_cast<T>(normal(engine));
    c.val.push_back(coding == ValueCoding::sign ? (v < 0 ? -magnitude : magnitude)
                                                : wire_value(v, coding));
  }
  return c;
}

/// The host codec's block, in a buffer of at least one unit (as the library's: wire::size_buffer)
/// whose first format.units() units are the block.
std::vector<std::byte> host_block(const wire::BlockFormat &format, const WireIndex *idx,
                                  const void *val, std::size_t native_bytes, std::uint64_t begin) {
  std::vector<std::byte> out(std::max<std::size_t>(format.units(), 1) * wire::kUnitBytes);
  if (native_bytes == 4)
    wire::encode_block(format, idx, static_cast<const float *>(val), begin, out.data());
  else
    wire::encode_block(format, idx, static_cast<const double *>(val), begin, out.data());
  return out;
}

template <typename T>
class BlockCodec : public ::testing::Test {
 protected:
  emulation::GpuBackend gpu_;
  Backend &backend_ = gpu_;  // the calls the library makes: through the interface

  /// Both decoders on `bytes` (the first `in_bytes` of them): the same verdict, and where they
  /// accept, the same entries.
  void expect_same_decode(const Case<T> &c, const std::vector<std::byte> &bytes,
                          std::size_t in_bytes, const std::string &what) {
    const std::size_t n = c.format.entries;
    std::vector<WireIndex> host_idx(n), device_idx(n);
    std::vector<T> host_val(n), device_val(n);
    const bool host = wire::decode_block(c.format, bytes.data(), in_bytes, c.begin, host_idx.data(),
                                         host_val.data());
    const bool device = backend_.decode_block(c.format, bytes.data(), in_bytes, c.begin,
                                              device_idx.data(), device_val.data(), nullptr);
    ASSERT_EQ(device, host) << what;
    if (!host) return;
    EXPECT_EQ(device_idx, host_idx) << what;
    if (n > 0) {
      EXPECT_EQ(0, std::memcmp(device_val.data(), host_val.data(), n * sizeof(T))) << what;
    }
  }
};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(BlockCodec, Types);

struct Shape {
  std::size_t entries, range;
  wire::IndexCoding indices;
};
// Every index coding, sizes that fill no word evenly, a block of one entry, an empty one.
const Shape kShapes[] = {
    {200, 100003, wire::IndexCoding::elias_fano}, {1, 1000, wire::IndexCoding::elias_fano},
    {37, 40, wire::IndexCoding::bitmap},          {300, 1001, wire::IndexCoding::bitmap},
    {2, 4000000000u, wire::IndexCoding::offsets}, {5, 3000000000u, wire::IndexCoding::offsets},
    {0, 77, wire::IndexCoding::offsets},
};
const ValueCoding kCodings[] = {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16,
                                ValueCoding::sign};

std::string name(const Shape &shape, ValueCoding coding) {
  return std::to_string(shape.entries) + " of " + std::to_string(shape.range) + ", coding " +
         std::to_string(static_cast<int>(coding));
}

TYPED_TEST(BlockCodec, EncodesTheHostsBytesAndDecodesThemBack) {
  using T = TypeParam;
  unsigned seed = 1;
  for (const Shape &shape : kShapes)
    for (ValueCoding coding : kCodings)
      for (std::uint64_t begin : {std::uint64_t{0}, std::uint64_t{5}}) {
        if (begin + shape.range > (std::uint64_t{1} << 32)) continue;
        const std::string what = name(shape, coding) + ", begin " + std::to_string(begin);
        const Case<T> c = make_case<T>(shape.entries, shape.range, coding, begin, ++seed);
        ASSERT_EQ(c.format.indices, shape.indices) << what;
        const std::vector<std::byte> expected =
            host_block(c.format, c.idx.data(), c.val.data(), sizeof(T), begin);
        const std::size_t block = c.format.units() * wire::kUnitBytes;
        std::vector<std::byte> device(expected.size(), std::byte{0xa5});  // not zeroed
        this->backend_.encode_block(c.format, c.idx.data(), c.val.data(), begin, device.data(),
                                    nullptr);
        this->backend_.synchronize(nullptr);  // queued only
        EXPECT_EQ(0, std::memcmp(device.data(), expected.data(), block)) << what;
        this->expect_same_decode(c, expected, block, what);
        if (c.format.bytes() > 0)
          this->expect_same_decode(c, expected, c.format.bytes() - 1, what + ", one byte short");
      }
}

// Every verdict of the host decoder is the device's: a peer's damaged block is rejected (or,
// where the damage still makes a valid block, read) alike on every rank.
TYPED_TEST(BlockCodec, DamagedBlocksGetTheHostsVerdict) {
  using T = TypeParam;
  std::mt19937 engine(11);
  unsigned seed = 100;
  for (const Shape &shape : kShapes)
    for (ValueCoding coding : kCodings) {
      const Case<T> c = make_case<T>(shape.entries, shape.range, coding, 0, ++seed);
      const std::vector<std::byte> good =
          host_block(c.format, c.idx.data(), c.val.data(), sizeof(T), 0);
      const std::size_t bits = 8 * good.size();
      if (bits <= 1024) {  // every single-bit flip
        for (std::size_t bit = 0; bit < bits; ++bit) {
          std::vector<std::byte> bad = good;
          bad[bit / 8] ^= std::byte(1u << (bit % 8));
          this->expect_same_decode(c, bad, bad.size(),
                                   name(shape, coding) + ", bit " + std::to_string(bit));
        }
      } else {  // random damage, 1 to 3 bits
        for (int trial = 0; trial < 200; ++trial) {
          std::vector<std::byte> bad = good;
          const int flips = 1 + trial % 3;
          for (int f = 0; f < flips; ++f) {
            const std::size_t bit = engine() % bits;
            bad[bit / 8] ^= std::byte(1u << (bit % 8));
          }
          this->expect_same_decode(c, bad, bad.size(),
                                   name(shape, coding) + ", trial " + std::to_string(trial));
        }
      }
    }
}

// A block whose code holds an index past its range (the sender's encoder writes what it is
// given): both decoders refuse it, for Elias–Fano and for plain offsets.
TYPED_TEST(BlockCodec, IndicesPastTheRangeAreRejected) {
  using T = TypeParam;
  for (const Shape &shape : {Shape{3, 1000, wire::IndexCoding::elias_fano},
                             Shape{2, 4000000000u, wire::IndexCoding::offsets}}) {
    Case<T> c = make_case<T>(shape.entries, shape.range, ValueCoding::native, 0, 5);
    ASSERT_EQ(c.format.indices, shape.indices);
    c.idx.back() = static_cast<WireIndex>(shape.range + 3);  // still fits the code's bits
    const std::vector<std::byte> bad =
        host_block(c.format, c.idx.data(), c.val.data(), sizeof(T), 0);
    std::vector<WireIndex> idx(shape.entries);
    std::vector<T> val(shape.entries);
    EXPECT_FALSE(wire::decode_block(c.format, bad.data(), bad.size(), 0, idx.data(), val.data()));
    this->expect_same_decode(c, bad, bad.size(), name(shape, ValueCoding::native));
  }
}

}  // namespace
}  // namespace dct::detail
