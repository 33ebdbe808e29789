#include "core/elias_fano.hpp"

#include <algorithm>
#include <cstring>

namespace dct::detail::wire::elias_fano {
namespace {

// The bit stream is little-endian (bit b is bit b % 8 of byte b / 8); words move through
// 64-bit integers, byte-swapped on a big-endian host. A byte at a time was far slower each way
// (measured: docs/internals.md, measured reasons).

std::uint64_t load_word(const std::byte *at, std::size_t bytes) {
  std::uint64_t word = 0;
  std::memcpy(&word, at, bytes);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  word = __builtin_bswap64(word) >> (64 - 8 * bytes);
#endif
  return word;
}

void store_word(std::byte *at, std::uint64_t word, std::size_t bytes) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  word = __builtin_bswap64(word << (64 - 8 * bytes));
#endif
  std::memcpy(at, &word, bytes);
}

/// The `width` (<= 64) bits of the `size`-byte stream `in` from bit `bit` (all inside it).
std::uint64_t get_bits(const std::byte *in, std::size_t size, std::size_t bit, unsigned width) {
  if (width == 0) return 0;
  const std::size_t first = bit / 8;
  const unsigned shift = static_cast<unsigned>(bit % 8);
  const std::size_t available = size - first;
  std::uint64_t value = load_word(in + first, std::min<std::size_t>(8, available)) >> shift;
  if (shift + width > 64 && available > 8)  // the 9th byte
    value |= std::to_integer<std::uint64_t>(in[first + 8]) << (64 - shift);
  return width == 64 ? value : value & ((std::uint64_t{1} << width) - 1);
}

}  // namespace

void encode(const Layout &layout, const WireIndex *idx, std::uint64_t begin, std::byte *out) {
  const unsigned low = layout.low_bits;
  const std::size_t high = layout.entries * low;
  const std::uint64_t mask = (std::uint64_t{1} << low) - 1;  // low <= 63
  // The low bits, whole words as they fill (they lie below the unary part), then the rest.
  std::uint64_t word = 0;
  unsigned filled = 0;
  std::size_t at = 0;
  for (std::size_t j = 0; j < layout.entries; ++j) {
    const std::uint64_t offset = idx[j] - begin;
    if (low > 0) {
      const std::uint64_t bits = offset & mask;
      word |= bits << filled;
      if (filled + low >= 64) {
        store_word(out + at, word, 8);
        at += 8;
        word = filled == 0 ? 0 : bits >> (64 - filled);
        filled = filled + low - 64;
      } else {
        filled += low;
      }
    }
    const std::size_t bit = high + (offset >> low) + j;
    out[bit / 8] |= std::byte(1u << (bit % 8));
  }
  const std::size_t tail = (filled + 7) / 8;  // shared with the unary part's first byte: ORed
  if (tail > 0) store_word(out + at, load_word(out + at, tail) | word, tail);
}

bool decode(const Layout &layout, const std::byte *in, std::size_t range, std::uint64_t begin,
            WireIndex *idx) {
  const std::size_t high = layout.entries * layout.low_bits, end = layout.bits();
  const std::size_t size = layout.bytes();
  std::size_t found = 0;
  std::uint64_t previous = 0;
  // The unary part, one 64-bit word at a time from bit `high` (not byte aligned): each one
  // bit at position p is the entry `found` with high part p - found.
  for (std::size_t word_start = high; word_start < end; word_start += 64) {
    const unsigned width = static_cast<unsigned>(std::min<std::size_t>(64, end - word_start));
    std::uint64_t bits = get_bits(in, size, word_start, width);
    while (bits != 0) {
      const std::size_t position =
          word_start - high + static_cast<std::size_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      if (found == layout.entries) return false;
      const std::uint64_t offset = (std::uint64_t(position - found) << layout.low_bits) |
                                   get_bits(in, size, found * layout.low_bits, layout.low_bits);
      if (offset >= range || (found > 0 && offset <= previous)) return false;
      previous = offset;
      idx[found++] = static_cast<WireIndex>(begin + offset);
    }
  }
  // The last byte's padding must be zero, so that one block has one encoding.
  if (end % 8 != 0 && (std::to_integer<unsigned>(in[end / 8]) >> (end % 8)) != 0) return false;
  return found == layout.entries;
}

}  // namespace dct::detail::wire::elias_fano
