// DCT-MP's row codec on float rows with AVX-512F, where the CPU has it (checked at run time;
// row_codec.cpp picks the tier):
// - the per-row top k: the same candidates at a floor carried from row to row as the portable
//   code, collected with compress stores; the k-th largest of a short list by counting, for
//   each candidate in its lane, the larger keys (no chain of dependent steps), of a long one
//   by a binary search on the key's bits (a compare and a popcount per 16 per step);
// - the values of a message: gathered 16 at a time and narrowed to fp16 (vcvtps2ph) or bf16
//   in registers, bit for bit what f16::to_fp16 / to_bf16 give.
// Measured: docs/kernels.md, "Host SIMD tiers".
//
// Private header of src/: include it from library sources only.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DCT_ROW_CODEC_AVX512 1
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "core/float16.hpp"

namespace dct::detail::mp::avx512 {

// The intrinsics whose plain forms start from an undefined vector (GCC 12 warns of it with
// -Wmaybe-uninitialized) are taken in their zero-masked forms, every lane on.
constexpr __mmask16 kAll = 0xffff;
__attribute__((target("avx512f"))) inline __m512i srli(__m512i value, unsigned shift) {
  return _mm512_maskz_srli_epi32(kAll, value, shift);
}

/// The 16-bit patterns of 16 floats (`coding` fp16 or bf16), as f16::to_fp16 / to_bf16: round
/// to nearest even; NaN keeps its sign and becomes the quiet NaN those give.
__attribute__((target("avx512f"))) inline __m256i narrow16(__m512 value, ValueCoding coding) {
  const __m512i bits = _mm512_castps_si512(value);
  const __mmask16 nan = _mm512_cmp_ps_mask(value, value, _CMP_UNORD_Q);
  __m512i wide;
  if (coding == ValueCoding::bf16) {
    const __m512i upper = srli(bits, 16);
    const __m512i rounding =
        _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(upper, _mm512_set1_epi32(1)));
    wide = _mm512_mask_or_epi32(srli(_mm512_add_epi32(bits, rounding), 16), nan, upper,
                                _mm512_set1_epi32(0x40));
  } else {
    wide = _mm512_maskz_cvtepu16_epi32(
        kAll, _mm512_maskz_cvtps_ph(kAll, value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    const __m512i quiet = _mm512_or_si512(
        _mm512_and_si512(srli(bits, 16), _mm512_set1_epi32(0x8000)), _mm512_set1_epi32(0x7e00));
    wide = _mm512_mask_mov_epi32(wide, nan, quiet);
  }
  return _mm512_maskz_cvtepi32_epi16(kAll, wide);
}

/// gather_values's whole vectors: the values at rows[at[j]] for j < entries / 16 * 16, as the
/// wire carries them (`coding` native, fp16 or bf16), written to `out`. Returns how many it
/// wrote (the rest is the caller's).
__attribute__((target("avx512f"))) inline std::size_t gather(const float *rows,
                                                             const std::int32_t *at,
                                                             std::size_t entries,
                                                             ValueCoding coding, std::byte *out) {
  std::size_t j = 0;
  for (; j + 16 <= entries; j += 16) {
    const __m512 value =
        _mm512_mask_i32gather_ps(_mm512_setzero_ps(), kAll, _mm512_loadu_si512(at + j), rows, 4);
    if (coding == ValueCoding::native)
      _mm512_storeu_ps(out + 4 * j, value);
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 2 * j), narrow16(value, coding));
  }
  return j;
}

/// A row's candidates in whole vectors: keys (|x|'s bits) and columns, `m` valid.
struct Candidates {
  std::uint32_t *keys;
  std::uint32_t *columns;
  std::size_t m = 0;
};

/// The columns of `row` (d floats) whose |x| bits are >= floor, in column order, into `c`
/// (its arrays hold d + 16: each append stores a whole vector).
__attribute__((target("avx512f"))) inline void collect(const float *row, std::size_t d,
                                                       std::uint32_t floor, Candidates &c) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i floor_v = _mm512_set1_epi32(static_cast<int>(floor));
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  std::size_t m = 0;
  for (std::size_t c0 = 0; c0 < d; c0 += 16) {
    const __mmask16 inside =
        d - c0 >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (d - c0)) - 1u);
    const __m512i key = _mm512_and_si512(_mm512_maskz_loadu_epi32(inside, row + c0), magnitude);
    const __mmask16 pass = _mm512_mask_cmpge_epu32_mask(inside, key, floor_v);
    const __m512i column = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int>(c0)));
    _mm512_storeu_si512(c.keys + m, _mm512_maskz_compress_epi32(pass, key));
    _mm512_storeu_si512(c.columns + m, _mm512_maskz_compress_epi32(pass, column));
    m += static_cast<std::size_t>(__builtin_popcount(pass));
  }
  c.m = m;
}

/// The valid lanes of vector v of `c`.
inline __mmask16 valid(const Candidates &c, std::size_t v) {
  const std::size_t left = c.m - 16 * v;
  return left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1u);
}

/// How many of `c`'s keys are >= x.
__attribute__((target("avx512f"))) inline std::size_t count_at_least(const Candidates &c,
                                                                     std::uint32_t x) {
  const __m512i x_v = _mm512_set1_epi32(static_cast<int>(x));
  std::size_t count = 0;
  for (std::size_t v = 0; 16 * v < c.m; ++v)
    count += static_cast<std::size_t>(__builtin_popcount(
        _mm512_mask_cmpge_epu32_mask(valid(c, v), _mm512_loadu_si512(c.keys + 16 * v), x_v)));
  return count;
}

/// The largest key x in [lo, hi) with at least `rank` keys >= x, given count_at_least(lo) >=
/// rank > count_at_least(hi); stopping once the interval is `slack` wide (0: exact, the
/// rank-th largest key itself).
__attribute__((target("avx512f"))) inline std::uint32_t search(const Candidates &c,
                                                               std::size_t rank, std::uint32_t lo,
                                                               std::uint32_t hi,
                                                               std::uint32_t slack) {
  while (hi - lo > 1 && hi - lo > slack) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (count_at_least(c, mid) >= rank)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/// Lists up to this long are ranked by counting (kth_keys); longer ones searched (search).
constexpr std::size_t kRankedCandidates = 64;

/// The least of `c`'s keys (in vectors `key`) with fewer than r larger ones (`larger`).
__attribute__((target("avx512f"))) inline std::uint32_t least_with_fewer(const Candidates &c,
                                                                         const __m512i *key,
                                                                         const __m512i *larger,
                                                                         std::size_t r) {
  const __m512i r_v = _mm512_set1_epi32(static_cast<int>(r));
  __m512i least = _mm512_set1_epi32(-1);
  for (std::size_t v = 0; 16 * v < c.m; ++v)
    least = _mm512_mask_min_epu32(least, valid(c, v) & _mm512_cmplt_epu32_mask(larger[v], r_v),
                                  least, key[v]);
  alignas(64) std::uint32_t lanes[16];
  _mm512_store_si512(lanes, least);
  return *std::min_element(lanes, lanes + 16);
}

/// The `rank`-th largest keys of a list of at most kRankedCandidates, for the two ranks asked
/// (0: not asked; a rank past m gives 0): each candidate's count of larger keys, in lanes,
/// summed over every candidate (independent compares, no chain from one to the next as a
/// search has). The keys with fewer than r larger ones are those >= the r-th largest: their
/// least is it.
__attribute__((target("avx512f"))) inline void kth_keys(const Candidates &c, std::size_t r1,
                                                        std::size_t r2, std::uint32_t &key1,
                                                        std::uint32_t &key2) {
  const std::size_t vectors = (c.m + 15) / 16;
  __m512i key[kRankedCandidates / 16], larger[kRankedCandidates / 16];
  for (std::size_t v = 0; v < vectors; ++v) {
    key[v] = _mm512_loadu_si512(c.keys + 16 * v);
    larger[v] = _mm512_setzero_si512();
  }
  const __m512i one = _mm512_set1_epi32(1);
  for (std::size_t j = 0; j < c.m; ++j) {
    const __m512i other = _mm512_set1_epi32(static_cast<int>(c.keys[j]));
    for (std::size_t v = 0; v < vectors; ++v)
      larger[v] =
          _mm512_mask_add_epi32(larger[v], _mm512_cmplt_epu32_mask(key[v], other), larger[v], one);
  }
  key1 = r1 >= 1 && r1 <= c.m ? least_with_fewer(c, key, larger, r1) : 0;
  key2 = r2 >= 1 && r2 <= c.m ? least_with_fewer(c, key, larger, r2) : 0;
}

/// The top k (1 <= k <= c.m) of `c` (larger key first, then lower column) appended to `out` in
/// column order. Returns the (aim)-th largest key (exactly, or from below within `slack`
/// for long lists), or 0 when fewer than aim came.
__attribute__((target("avx512f"))) inline std::uint32_t keep_top(const Candidates &c, std::size_t k,
                                                                 std::size_t aim,
                                                                 std::uint32_t lowest,
                                                                 std::uint32_t slack,
                                                                 std::uint32_t *out) {
  std::uint32_t t = 0, aimth = 0;
  if (c.m <= kRankedCandidates) {
    kth_keys(c, k, aim, t, aimth);
  } else {
    __m512i most = _mm512_setzero_si512();
    for (std::size_t v = 0; 16 * v < c.m; ++v)
      most = _mm512_mask_max_epu32(most, valid(c, v), most, _mm512_loadu_si512(c.keys + 16 * v));
    alignas(64) std::uint32_t lanes[16];
    _mm512_store_si512(lanes, most);
    const std::uint32_t highest = *std::max_element(lanes, lanes + 16);
    // count(lowest) = m >= k > count(highest + 1) = 0; highest <= 0x7fffffff: no overflow.
    t = search(c, k, lowest, highest + 1, 0);
    // count(lowest) = m >= aim > count(t + 1), as aim > k.
    if (aim <= c.m) aimth = search(c, aim, lowest, t + 1, slack);
  }
  std::size_t ties = k - count_at_least(c, t + 1);  // the entries equal to t that go
  const __m512i t_v = _mm512_set1_epi32(static_cast<int>(t));
  for (std::size_t v = 0; 16 * v < c.m; ++v) {
    const __m512i key = _mm512_loadu_si512(c.keys + 16 * v);
    const __mmask16 inside = valid(c, v);
    unsigned take = _mm512_mask_cmpgt_epu32_mask(inside, key, t_v);
    for (unsigned equal = _mm512_mask_cmpeq_epu32_mask(inside, key, t_v); equal != 0 && ties > 0;
         equal &= equal - 1, --ties)
      take |= equal & (~equal + 1);  // the lowest columns equal to t
    _mm512_mask_compressstoreu_epi32(out, static_cast<__mmask16>(take),
                                     _mm512_loadu_si512(c.columns + 16 * v));
    out += __builtin_popcount(take);
  }
  return aimth;
}

}  // namespace dct::detail::mp::avx512
#endif
