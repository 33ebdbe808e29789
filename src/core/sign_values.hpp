// dct_values=sign (EF-SignSGD's scaled sign): every kept entry travels as +-w, one magnitude per
// block, and acc - (+-m) stays in the residual. m is the mean magnitude of the finite kept
// values (the m that minimises the block's squared error); w is m, or NaN if a kept value is
// NaN, else Inf if one is infinite, so that the sum is non-finite on every rank as with the
// other codings (and such an entry leaves the residual as sent).
//
// m is summed in double in a fixed order that a GPU can follow without a serial pass over the
// entries: chunks of kChunk consecutive entries, each summed in index order, then the chunks'
// sums in chunk order. Written once for host and device code (Backend::quantise_signs), so
// every backend gets the same bits.
//
// Private header of dct: include it from library sources only.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/float16.hpp"

namespace dct::detail::sign_values {

/// Entries per chunk of the magnitude's sum.
inline constexpr std::size_t kChunk = 1024;

/// The magnitudes of a range of entries, or of all of them.
struct Partial {
  double sum = 0;                 ///< of the finite values' magnitudes, in the fixed order
  unsigned long long finite = 0;  ///< finite values
  unsigned int nonfinite = 0;     ///< kNaN | kInf: what non-finite values were seen
};
inline constexpr unsigned int kNaN = 1, kInf = 2;

template <typename T>
using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

/// Chunk `c` of the m values `val` (index order).
template <typename T>
DCT_HOST_DEVICE inline Partial chunk(const T *val, std::size_t m, std::size_t c) {
  Partial p;
  const std::size_t end = (c + 1) * kChunk < m ? (c + 1) * kChunk : m;
  for (std::size_t j = c * kChunk; j < end; ++j) {
    const T v = val[j];
    if (v - v == T(0)) {
      p.sum += std::fabs(static_cast<double>(v));
      ++p.finite;
    } else {
      p.nonfinite |= v != v ? kNaN : kInf;
    }
  }
  return p;
}

DCT_HOST_DEVICE inline void add(Partial &total, const Partial &chunk) {
  total.sum += chunk.sum;
  total.finite += chunk.finite;
  total.nonfinite |= chunk.nonfinite;
}

/// What a block's entries send (wire) and what the residual keeps them against (mean).
template <typename T>
struct Magnitude {
  T mean = T(0);
  T wire = T(0);
};

template <typename T>
DCT_HOST_DEVICE inline Magnitude<T> magnitude(const Partial &total) {
  // NaN and Inf from their bit patterns: no numeric_limits in device code.
  constexpr Bits<T> nan = sizeof(T) == 4 ? Bits<T>(0x7fc00000u) : Bits<T>(0x7ff8000000000000ull);
  constexpr Bits<T> inf = sizeof(T) == 4 ? Bits<T>(0x7f800000u) : Bits<T>(0x7ff0000000000000ull);
  Magnitude<T> m;
  m.mean = total.finite > 0 ? static_cast<T>(total.sum / static_cast<double>(total.finite)) : T(0);
  m.wire = (total.nonfinite & kNaN)   ? f16::bit_copy<T>(nan)
           : (total.nonfinite & kInf) ? f16::bit_copy<T>(inf)
                                      : m.mean;
  return m;
}

/// Entry v's value on the wire and what stays in the residual.
template <typename T>
DCT_HOST_DEVICE inline void quantise(T v, const Magnitude<T> &m, T &wire, T &remainder) {
  const bool negative = f16::sign_bit(v);
  wire = negative ? -m.wire : m.wire;
  remainder = v - v == T(0) ? v - (negative ? -m.mean : m.mean) : T(0);
}

/// The whole coding on host memory, in the fixed order (the host backends' quantise_signs).
template <typename T>
void quantise_on_host(const T *val, std::size_t m, T *wire, T *remainders) {
  Partial total;
  for (std::size_t c = 0; c * kChunk < m; ++c) add(total, chunk(val, m, c));
  const Magnitude<T> magnitude_of_all = magnitude<T>(total);
  for (std::size_t j = 0; j < m; ++j) quantise(val[j], magnitude_of_all, wire[j], remainders[j]);
}

}  // namespace dct::detail::sign_values
