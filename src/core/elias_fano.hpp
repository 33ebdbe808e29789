// Elias–Fano coding of the kept indices of a sparse block.
//
// `entries` strictly increasing offsets in [0, range) are split into `low_bits` low bits,
// stored verbatim, and a high part stored in unary: offset j sets bit (offset >> low_bits) + j
// of a bit vector of entries + ((range - 1) >> low_bits) + 1 bits. With
// low_bits = floor(log2(range / entries)) this costs at most 2 + ceil(log2(range / entries))
// bits per entry (Elias 1974; Fano 1971; Vigna, "Quasi-succinct indices", WSDM 2013): about 9
// bits at density 1/100 and 12 at 1/1000, against 32 for a plain offset. The size depends on
// (entries, range) alone, which sender and receiver both know, so the block needs no header.
//
// Hand-written rather than taken from a library: the few dozen lines below are the whole
// codec, the decoder must validate an untrusted peer's bits as it reads them, and the
// libraries that carry Elias–Fano (folly, sdsl-lite) bring far larger dependencies.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/compute_backend.hpp"

namespace dct::detail::wire::elias_fano {

/// Bit counts of one coded sequence.
struct Layout {
  unsigned low_bits = 0;      ///< per entry, stored first (entries * low_bits bits)
  std::size_t high_bits = 0;  ///< the unary part, stored right after the low bits
  std::size_t entries = 0;

  std::size_t bits() const { return entries * low_bits + high_bits; }
  std::size_t bytes() const { return (bits() + 7) / 8; }
};

/// The layout of `entries` offsets in [0, range); entries <= range.
inline Layout layout(std::size_t entries, std::size_t range) {
  Layout l;
  l.entries = entries;
  if (entries == 0) return l;
  while (l.low_bits < 63 && (range >> (l.low_bits + 1)) >= entries) ++l.low_bits;
  l.high_bits = entries + ((range - 1) >> l.low_bits) + 1;
  return l;
}

/// Writes the offsets idx[j] - begin into `out`, which holds layout.bytes() zeroed bytes.
void encode(const Layout &layout, const WireIndex *idx, std::uint64_t begin, std::byte *out);

/// Reads layout.entries offsets from `in` (layout.bytes() bytes) into idx as begin + offset.
/// Returns false, with idx unspecified, unless the offsets strictly increase, lie in
/// [0, range), the unary part holds exactly `entries` ones, and the padding bits are zero.
bool decode(const Layout &layout, const std::byte *in, std::size_t range, std::uint64_t begin,
            WireIndex *idx);

}  // namespace dct::detail::wire::elias_fano
