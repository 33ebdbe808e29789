#include "elias_fano.hpp"

#include <algorithm>
#include <cstring>

namespace dct::detail::wire::elias_fano {
namespace {

/// ORs the `width` (<= 64) low bits of `value` into the little-endian bit stream at `bit`.
void put_bits(std::byte *out, std::size_t bit, std::uint64_t value, unsigned width) {
  while (width > 0) {
    const unsigned shift = bit % 8, take = std::min(8u - shift, width);
    const std::uint64_t part = value & ((std::uint64_t{1} << take) - 1);
    out[bit / 8] |= std::byte(part << shift);
    value >>= take;
    bit += take;
    width -= take;
  }
}

std::uint64_t get_bits(const std::byte *in, std::size_t bit, unsigned width) {
  std::uint64_t value = 0;
  for (unsigned done = 0; done < width;) {
    const unsigned shift = bit % 8, take = std::min(8u - shift, width - done);
    const std::uint64_t part =
        (std::to_integer<std::uint64_t>(in[bit / 8]) >> shift) & ((std::uint64_t{1} << take) - 1);
    value |= part << done;
    bit += take;
    done += take;
  }
  return value;
}

}  // namespace

void encode(const Layout &layout, const WireIndex *idx, std::uint64_t begin, std::byte *out) {
  const std::size_t high = layout.entries * layout.low_bits;
  for (std::size_t j = 0; j < layout.entries; ++j) {
    const std::uint64_t offset = idx[j] - begin;
    put_bits(out, j * layout.low_bits, offset, layout.low_bits);
    const std::size_t bit = high + (offset >> layout.low_bits) + j;
    out[bit / 8] |= std::byte(1u << (bit % 8));
  }
}

bool decode(const Layout &layout, const std::byte *in, std::size_t range, std::uint64_t begin,
            WireIndex *idx) {
  const std::size_t high = layout.entries * layout.low_bits, end = layout.bits();
  std::size_t found = 0;
  std::uint64_t previous = 0;
  // The unary part, one 64-bit word at a time from bit `high` (not byte aligned): each one
  // bit at position p is the entry `found` with high part p - found.
  for (std::size_t word_start = high; word_start < end; word_start += 64) {
    const unsigned width = static_cast<unsigned>(std::min<std::size_t>(64, end - word_start));
    std::uint64_t bits = get_bits(in, word_start, width);
    while (bits != 0) {
      const std::size_t position =
          word_start - high + static_cast<std::size_t>(__builtin_ctzll(bits));
      bits &= bits - 1;
      if (found == layout.entries) return false;
      const std::uint64_t offset = (std::uint64_t(position - found) << layout.low_bits) |
                                   get_bits(in, found * layout.low_bits, layout.low_bits);
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
