// Host SIMD tiers of the Kokkos backend's selection pass. The pass is memory-bound, except for its
// sparse part: which of a block's entries pass, and where they go. With a mask per block and a
// loop over its set bits, the loop's branches follow the data (many blocks hold a candidate, at
// random) and their mispredictions cost more than the memory; AVX-512's compress stores and no
// branch come closest to a plain pass (measured: docs/kernels.md, "Host SIMD tiers"). So where
// the CPU has AVX-512F (checked at run time) the pass takes that tier; elsewhere the portable
// code of filter.hpp (SSE2 masks per 64 entries).
//
// Host code only: behind DCT_KOKKOS_HOST_AVX512, which device passes never define.
//
// Private header of backends/kokkos/.
#pragma once

#include "core/host_simd.hpp"
#include "portable.hpp"

#if defined(DCT_KOKKOS_HOST_SSE2) && defined(__x86_64__) && \
    (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define DCT_KOKKOS_HOST_AVX512 1
#include <immintrin.h>
#endif

namespace dct::detail::backends::kokkos {

/// The best tier this CPU runs for the selection pass and the trim (core/host_simd.hpp).
inline HostSimd detect_host_simd() {
#if defined(DCT_KOKKOS_HOST_AVX512)
  return best_host_simd(true);
#else
  return best_host_simd(false);
#endif
}

/// The tier the selection pass runs: the best one, unless lowered (the kernel tests run every
/// tier this CPU has, on the same data, for the same bits).
inline HostSimd host_simd = detect_host_simd();

/// A work item's selected entries so far: staged in its slot, and counted by kind.
struct StageCounts {
  std::size_t staged = 0;
  std::size_t strict = 0;  // above tau, or NaN/Inf
  std::size_t ties = 0;    // finite, |acc| == tau
  std::size_t bad = 0;     // NaN/Inf
};

/// What the trim's pass over a work item's candidates noted (trim.hpp): places kept for sure,
/// places in the window, finite keys above it, NaN/Inf keys. Every tier and pass fills it.
struct TrimPass {
  std::size_t sure = 0, count = 0, above = 0, bad = 0;
};

#if defined(DCT_KOKKOS_HOST_AVX512)
/// The lowest `keep` set bits of `mask`.
inline unsigned lowest_bits(unsigned mask, std::size_t keep) {
  unsigned kept = 0;
  for (std::size_t b = 0; b < keep && mask != 0; ++b, mask &= mask - 1) kept |= mask & (~mask + 1);
  return kept;
}

/// The selection pass's stage over the whole 16-entry blocks of [begin, end) with AVX-512F:
/// acc into the residual (with send), the entries that keep_entry(acc, tau) selects appended
/// to the slot (the first `slot` of the work item's, as the portable code stages them) and
/// counted. An append compresses the vector's entries in registers and stores the vector
/// whole (what lies past the entries is overwritten by the next append): the compress stores'
/// memory form, whose writes stop at the last entry, is several times slower and is left to
/// the slot's last 16 places. Returns where it stopped: the partial block is the caller's. Ties and
/// NaN/Inf are rare: their masks are worked out only for blocks that hold one.
template <bool kHasSend>
__attribute__((target("avx512f"))) inline std::size_t stage_avx512(
    const float *send, float *residual, std::size_t begin, std::size_t end, float tau,
    WireIndex *slot_index, float *slot_acc, std::size_t slot, StageCounts &counts) {
  const __m512 threshold = _mm512_set1_ps(tau), zero = _mm512_setzero_ps();
  const __m512 infinity = _mm512_set1_ps(__builtin_inff());
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  std::size_t staged = counts.staged, selected_count = 0, ties = 0, bad = 0;
  std::size_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m512 acc = _mm512_loadu_ps(residual + i);
    if constexpr (kHasSend) {
      acc = _mm512_add_ps(_mm512_loadu_ps(send + i), acc);
      _mm512_storeu_ps(residual + i, acc);
    }
    const __m512 magnitude = _mm512_abs_ps(acc);
    // !(|acc| < tau) and acc != 0, both true for NaN: the keep rule
    const __mmask16 selected = _mm512_mask_cmp_ps_mask(
        _mm512_cmp_ps_mask(magnitude, threshold, _CMP_NLT_UQ), acc, zero, _CMP_NEQ_UQ);
    // Entries at tau, or NaN/Inf: !(|acc| > tau) among the selected, or |acc| >= Inf.
    const __mmask16 special = _mm512_mask_cmp_ps_mask(selected, magnitude, threshold, _CMP_NGT_UQ) |
                              _mm512_mask_cmp_ps_mask(selected, magnitude, infinity, _CMP_NLT_UQ);
    selected_count += static_cast<std::size_t>(__builtin_popcount(selected));
    if (__builtin_expect(special != 0, 0)) {
      const __mmask16 finite = _mm512_cmp_ps_mask(magnitude, infinity, _CMP_LT_OQ);
      ties += static_cast<std::size_t>(__builtin_popcount(
          selected & finite & _mm512_cmp_ps_mask(magnitude, threshold, _CMP_EQ_OQ)));
      bad += static_cast<std::size_t>(__builtin_popcount(selected & ~finite & 0xffffu));
    }
    const __m512i index = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int>(i)));
    const std::size_t count = static_cast<std::size_t>(__builtin_popcount(selected));
    if (staged + 16 <= slot) {  // compressed in registers, stored whole (see above)
      _mm512_storeu_ps(slot_acc + staged, _mm512_maskz_compress_ps(selected, acc));
      _mm512_storeu_si512(slot_index + staged, _mm512_maskz_compress_epi32(selected, index));
      staged += count;
    } else if (staged < slot) {
      const __mmask16 take = static_cast<__mmask16>(
          staged + count > slot ? lowest_bits(selected, slot - staged) : selected);
      _mm512_mask_compressstoreu_ps(slot_acc + staged, take, acc);
      _mm512_mask_compressstoreu_epi32(slot_index + staged, take, index);
      staged += static_cast<std::size_t>(__builtin_popcount(take));
    }
  }
  counts.staged = staged;
  counts.strict += selected_count - ties;
  counts.ties += ties;
  counts.bad += bad;
  return i;
}

template <bool kHasSend>
__attribute__((target("avx512f"))) inline std::size_t stage_avx512(
    const double *send, double *residual, std::size_t begin, std::size_t end, double tau,
    WireIndex *slot_index, double *slot_acc, std::size_t slot, StageCounts &counts) {
  const __m512d threshold = _mm512_set1_pd(tau), zero = _mm512_setzero_pd();
  const __m512d infinity = _mm512_set1_pd(__builtin_inf());
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0);
  std::size_t staged = counts.staged, selected_count = 0, ties = 0, bad = 0;
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m512d acc = _mm512_loadu_pd(residual + i);
    if constexpr (kHasSend) {
      acc = _mm512_add_pd(_mm512_loadu_pd(send + i), acc);
      _mm512_storeu_pd(residual + i, acc);
    }
    const __m512d magnitude = _mm512_abs_pd(acc);
    const __mmask8 selected = _mm512_mask_cmp_pd_mask(
        _mm512_cmp_pd_mask(magnitude, threshold, _CMP_NLT_UQ), acc, zero, _CMP_NEQ_UQ);
    const __mmask8 special = _mm512_mask_cmp_pd_mask(selected, magnitude, threshold, _CMP_NGT_UQ) |
                             _mm512_mask_cmp_pd_mask(selected, magnitude, infinity, _CMP_NLT_UQ);
    selected_count += static_cast<std::size_t>(__builtin_popcount(selected));
    if (__builtin_expect(special != 0, 0)) {
      const __mmask8 finite = _mm512_cmp_pd_mask(magnitude, infinity, _CMP_LT_OQ);
      ties += static_cast<std::size_t>(__builtin_popcount(
          selected & finite & _mm512_cmp_pd_mask(magnitude, threshold, _CMP_EQ_OQ)));
      bad += static_cast<std::size_t>(__builtin_popcount(selected & ~finite & 0xffu));
    }
    const __m512i index = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int>(i)));
    const std::size_t count = static_cast<std::size_t>(__builtin_popcount(selected));
    if (staged + 16 <= slot) {  // compressed in registers, stored whole (16 index lanes)
      _mm512_storeu_pd(slot_acc + staged, _mm512_maskz_compress_pd(selected, acc));
      _mm512_storeu_si512(slot_index + staged, _mm512_maskz_compress_epi32(selected, index));
      staged += count;
    } else if (staged < slot) {
      const unsigned take = staged + count > slot ? lowest_bits(selected, slot - staged) : selected;
      _mm512_mask_compressstoreu_pd(slot_acc + staged, static_cast<__mmask8>(take), acc);
      _mm512_mask_compressstoreu_epi32(slot_index + staged, static_cast<__mmask16>(take), index);
      staged += static_cast<std::size_t>(__builtin_popcount(take));
    }
  }
  counts.staged = staged;
  counts.strict += selected_count - ties;
  counts.ties += ties;
  counts.bad += bad;
  return i;
}

/// The trim's pass over a candidate list (lists.hpp, trim_in_window), its whole vectors from
/// `from` on: the places of the keys above `high` appended to `above_list`, those in
/// [low, high] with their keys to `window` / `keys`, each compressed in registers and stored
/// whole (the lists have room for a vector past their ends), and the finite keys above `high`
/// and the NaN/Inf keys counted. Returns where it stopped. Measured on 1.1M candidates of 16M
/// floats: 2.5 ms for the scalar, branch-free loop.
__attribute__((target("avx512f"))) inline std::size_t trim_pass_avx512(
    const float *val, std::size_t from, std::size_t m, std::uint32_t high, std::uint32_t low,
    std::uint32_t infinity, std::uint32_t *above_list, std::uint32_t *window, std::uint32_t *keys,
    TrimPass &pass) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
  const __m512i high_v = _mm512_set1_epi32(static_cast<int>(high));
  const __m512i low_v = _mm512_set1_epi32(static_cast<int>(low));
  const __m512i infinity_v = _mm512_set1_epi32(static_cast<int>(infinity));
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  std::size_t j = from;
  for (; j + 16 <= m; j += 16) {
    const __m512i key = _mm512_and_si512(_mm512_loadu_si512(val + j), magnitude);
    const __mmask16 over = _mm512_cmpgt_epu32_mask(key, high_v);
    const __mmask16 inside =
        _mm512_mask_cmpge_epu32_mask(static_cast<__mmask16>(~over), key, low_v);
    const __mmask16 finite = _mm512_cmplt_epu32_mask(key, infinity_v);
    const __m512i index = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int>(j)));
    _mm512_storeu_si512(above_list + pass.sure, _mm512_maskz_compress_epi32(over, index));
    _mm512_storeu_si512(window + pass.count, _mm512_maskz_compress_epi32(inside, index));
    _mm512_storeu_si512(keys + pass.count, _mm512_maskz_compress_epi32(inside, key));
    pass.sure += static_cast<std::size_t>(__builtin_popcount(over));
    pass.count += static_cast<std::size_t>(__builtin_popcount(inside));
    pass.above += static_cast<std::size_t>(__builtin_popcount(over & finite));
    pass.bad += static_cast<std::size_t>(__builtin_popcount(static_cast<__mmask16>(~finite)));
  }
  return j;
}
__attribute__((target("avx512f"))) inline std::size_t trim_pass_avx512(
    const double *val, std::size_t from, std::size_t m, std::uint64_t high, std::uint64_t low,
    std::uint64_t infinity, std::uint32_t *above_list, std::uint32_t *window, std::uint64_t *keys,
    TrimPass &pass) {
  const __m512i magnitude = _mm512_set1_epi64(0x7fffffffffffffffll);
  const __m512i high_v = _mm512_set1_epi64(static_cast<long long>(high));
  const __m512i low_v = _mm512_set1_epi64(static_cast<long long>(low));
  const __m512i infinity_v = _mm512_set1_epi64(static_cast<long long>(infinity));
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0);
  std::size_t j = from;
  for (; j + 8 <= m; j += 8) {
    const __m512i key = _mm512_and_si512(_mm512_loadu_si512(val + j), magnitude);
    const __mmask8 over = _mm512_cmpgt_epu64_mask(key, high_v);
    const __mmask8 inside = _mm512_mask_cmpge_epu64_mask(static_cast<__mmask8>(~over), key, low_v);
    const __mmask8 finite = _mm512_cmplt_epu64_mask(key, infinity_v);
    const __m512i index = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int>(j)));
    _mm512_storeu_si512(above_list + pass.sure, _mm512_maskz_compress_epi32(over, index));
    _mm512_storeu_si512(window + pass.count, _mm512_maskz_compress_epi32(inside, index));
    _mm512_storeu_si512(keys + pass.count, _mm512_maskz_compress_epi64(inside, key));
    pass.sure += static_cast<std::size_t>(__builtin_popcount(over));
    pass.count += static_cast<std::size_t>(__builtin_popcount(inside));
    pass.above += static_cast<std::size_t>(__builtin_popcount(over & finite));
    pass.bad += static_cast<std::size_t>(__builtin_popcount(static_cast<__mmask8>(~finite)));
  }
  return j;
}
#endif

}  // namespace dct::detail::backends::kokkos
