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

#include <cstdint>
#include <limits>

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
#define DCT_AVX512 __attribute__((target("avx512f")))

/// A vector of keys (kernel_logic::abs_key: the magnitudes' bits) of `Bits`: 16 of 32 bits or
/// 8 of 64, told apart by type so that the operations below can overload on it.
template <typename Bits>
struct KeyVector {
  __m512i bits;
};

/// The AVX-512F instructions of the two passes below, by element type: each pass is then one
/// template over float and double. Lane masks are unsigned (the low 16 or 8 bits); `among`
/// limits a comparison to the lanes it sets.
struct Avx512 {
  DCT_AVX512 static __m512 load(const float *p) { return _mm512_loadu_ps(p); }
  DCT_AVX512 static __m512d load(const double *p) { return _mm512_loadu_pd(p); }
  DCT_AVX512 static void store(float *p, __m512 v) { _mm512_storeu_ps(p, v); }
  DCT_AVX512 static void store(double *p, __m512d v) { _mm512_storeu_pd(p, v); }
  DCT_AVX512 static __m512 broadcast(float x) { return _mm512_set1_ps(x); }
  DCT_AVX512 static __m512d broadcast(double x) { return _mm512_set1_pd(x); }
  DCT_AVX512 static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  DCT_AVX512 static __m512d add(__m512d a, __m512d b) { return _mm512_add_pd(a, b); }
  DCT_AVX512 static __m512 magnitude(__m512 a) { return _mm512_abs_ps(a); }
  DCT_AVX512 static __m512d magnitude(__m512d a) { return _mm512_abs_pd(a); }
  template <int kPredicate>
  DCT_AVX512 static unsigned compare(__m512 a, __m512 b, unsigned among = ~0u) {
    return _mm512_mask_cmp_ps_mask(static_cast<__mmask16>(among), a, b, kPredicate);
  }
  template <int kPredicate>
  DCT_AVX512 static unsigned compare(__m512d a, __m512d b, unsigned among = ~0u) {
    return _mm512_mask_cmp_pd_mask(static_cast<__mmask8>(among), a, b, kPredicate);
  }
  /// Appends at `p` the lanes of `mask`, compressed in registers and stored as a whole vector:
  /// what lies past them is zeros, for the next append to overwrite.
  DCT_AVX512 static void append_whole(float *p, unsigned mask, __m512 v) {
    _mm512_storeu_ps(p, _mm512_maskz_compress_ps(static_cast<__mmask16>(mask), v));
  }
  DCT_AVX512 static void append_whole(double *p, unsigned mask, __m512d v) {
    _mm512_storeu_pd(p, _mm512_maskz_compress_pd(static_cast<__mmask8>(mask), v));
  }
  /// The same with the compress store's memory form, which writes nothing past the lanes.
  DCT_AVX512 static void append_exact(float *p, unsigned mask, __m512 v) {
    _mm512_mask_compressstoreu_ps(p, static_cast<__mmask16>(mask), v);
  }
  DCT_AVX512 static void append_exact(double *p, unsigned mask, __m512d v) {
    _mm512_mask_compressstoreu_pd(p, static_cast<__mmask8>(mask), v);
  }

  DCT_AVX512 static KeyVector<std::uint32_t> keys(const float *p) {
    return {_mm512_and_si512(_mm512_loadu_si512(p), _mm512_set1_epi32(0x7fffffff))};
  }
  DCT_AVX512 static KeyVector<std::uint64_t> keys(const double *p) {
    return {_mm512_and_si512(_mm512_loadu_si512(p), _mm512_set1_epi64(0x7fffffffffffffffll))};
  }
  DCT_AVX512 static KeyVector<std::uint32_t> broadcast_key(std::uint32_t key) {
    return {_mm512_set1_epi32(static_cast<int>(key))};
  }
  DCT_AVX512 static KeyVector<std::uint64_t> broadcast_key(std::uint64_t key) {
    return {_mm512_set1_epi64(static_cast<long long>(key))};
  }
  template <int kPredicate>
  DCT_AVX512 static unsigned compare(KeyVector<std::uint32_t> a, KeyVector<std::uint32_t> b,
                                     unsigned among = ~0u) {
    return _mm512_mask_cmp_epu32_mask(static_cast<__mmask16>(among), a.bits, b.bits, kPredicate);
  }
  template <int kPredicate>
  DCT_AVX512 static unsigned compare(KeyVector<std::uint64_t> a, KeyVector<std::uint64_t> b,
                                     unsigned among = ~0u) {
    return _mm512_mask_cmp_epu64_mask(static_cast<__mmask8>(among), a.bits, b.bits, kPredicate);
  }
  DCT_AVX512 static void append_whole(std::uint32_t *p, unsigned mask, KeyVector<std::uint32_t> v) {
    _mm512_storeu_si512(p, _mm512_maskz_compress_epi32(static_cast<__mmask16>(mask), v.bits));
  }
  DCT_AVX512 static void append_whole(std::uint64_t *p, unsigned mask, KeyVector<std::uint64_t> v) {
    _mm512_storeu_si512(p, _mm512_maskz_compress_epi64(static_cast<__mmask8>(mask), v.bits));
  }

  /// Entry places: 16 lanes of 32 bits, the first 8 for a vector of doubles.
  DCT_AVX512 static __m512i places(std::size_t first) {
    return _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                            _mm512_set1_epi32(static_cast<int>(first)));
  }
  DCT_AVX512 static void append_whole(std::uint32_t *p, unsigned mask, __m512i places) {
    _mm512_storeu_si512(p, _mm512_maskz_compress_epi32(static_cast<__mmask16>(mask), places));
  }
  DCT_AVX512 static void append_exact(std::uint32_t *p, unsigned mask, __m512i places) {
    _mm512_mask_compressstoreu_epi32(p, static_cast<__mmask16>(mask), places);
  }
};

/// The lowest `keep` set bits of `mask`.
inline unsigned lowest_bits(unsigned mask, std::size_t keep) {
  unsigned kept = 0;
  for (std::size_t b = 0; b < keep && mask != 0; ++b, mask &= mask - 1) kept |= mask & (~mask + 1);
  return kept;
}

/// The selection pass's stage over the whole vectors of [begin, end) with AVX-512F: acc into
/// the residual (with send), the entries that keep_entry(acc, tau) selects appended to the slot
/// (the first `slot` of the work item's, as the portable code stages them) and counted. An
/// append compresses the vector's entries in registers and stores the vector whole (what lies
/// past the entries is overwritten by the next append): the compress stores' memory form, whose
/// writes stop at the last entry, is several times slower and is left to the slot's last 16
/// places. Returns where it stopped: the rest is the caller's. Ties and NaN/Inf are rare: their
/// masks are worked out only for vectors that hold one.
template <bool kHasSend, typename T>
DCT_AVX512 inline std::size_t stage_avx512(const T *send, T *residual, std::size_t begin,
                                           std::size_t end, T tau, WireIndex *slot_index,
                                           T *slot_acc, std::size_t slot, StageCounts &counts) {
  constexpr std::size_t kLanes = 64 / sizeof(T);
  constexpr unsigned kAll = (1u << kLanes) - 1;
  const auto threshold = Avx512::broadcast(tau), zero = Avx512::broadcast(T(0));
  const auto infinity = Avx512::broadcast(std::numeric_limits<T>::infinity());
  std::size_t staged = counts.staged, selected_count = 0, ties = 0, bad = 0;
  std::size_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    auto acc = Avx512::load(residual + i);
    if constexpr (kHasSend) {
      acc = Avx512::add(Avx512::load(send + i), acc);
      Avx512::store(residual + i, acc);
    }
    const auto magnitude = Avx512::magnitude(acc);
    // !(|acc| < tau) and acc != 0, both true for NaN: the keep rule
    const unsigned selected =
        Avx512::compare<_CMP_NEQ_UQ>(acc, zero, Avx512::compare<_CMP_NLT_UQ>(magnitude, threshold));
    // Entries at tau, or NaN/Inf: !(|acc| > tau) among the selected, or |acc| >= Inf.
    const unsigned special = Avx512::compare<_CMP_NGT_UQ>(magnitude, threshold, selected) |
                             Avx512::compare<_CMP_NLT_UQ>(magnitude, infinity, selected);
    const std::size_t count = static_cast<std::size_t>(__builtin_popcount(selected));
    selected_count += count;
    if (__builtin_expect(special != 0, 0)) {
      const unsigned finite = Avx512::compare<_CMP_LT_OQ>(magnitude, infinity);
      ties += static_cast<std::size_t>(__builtin_popcount(
          selected & finite & Avx512::compare<_CMP_EQ_OQ>(magnitude, threshold)));
      bad += static_cast<std::size_t>(__builtin_popcount(selected & ~finite & kAll));
    }
    const __m512i places = Avx512::places(i);
    if (staged + 16 <= slot) {  // compressed in registers, stored whole (see above)
      Avx512::append_whole(slot_acc + staged, selected, acc);
      Avx512::append_whole(slot_index + staged, selected, places);
      staged += count;
    } else if (staged < slot) {
      const unsigned take = staged + count > slot ? lowest_bits(selected, slot - staged) : selected;
      Avx512::append_exact(slot_acc + staged, take, acc);
      Avx512::append_exact(slot_index + staged, take, places);
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
/// and the NaN/Inf keys counted. Returns where it stopped. A loop without a data-dependent
/// branch, as the portable one (trim.hpp), with compress stores for its appends.
template <typename T>
DCT_AVX512 inline std::size_t trim_pass_avx512(const T *val, std::size_t from, std::size_t m,
                                               KeyBits<T> high, KeyBits<T> low, KeyBits<T> infinity,
                                               std::uint32_t *above_list, std::uint32_t *window,
                                               KeyBits<T> *keys, TrimPass &pass) {
  constexpr std::size_t kLanes = 64 / sizeof(T);
  constexpr unsigned kAll = (1u << kLanes) - 1;
  const auto high_v = Avx512::broadcast_key(high), low_v = Avx512::broadcast_key(low);
  const auto infinity_v = Avx512::broadcast_key(infinity);
  std::size_t j = from;
  for (; j + kLanes <= m; j += kLanes) {
    const auto key = Avx512::keys(val + j);
    const unsigned over = Avx512::compare<_MM_CMPINT_NLE>(key, high_v);
    const unsigned inside = Avx512::compare<_MM_CMPINT_NLT>(key, low_v, ~over);
    const unsigned finite = Avx512::compare<_MM_CMPINT_LT>(key, infinity_v);
    const __m512i places = Avx512::places(j);
    Avx512::append_whole(above_list + pass.sure, over, places);
    Avx512::append_whole(window + pass.count, inside, places);
    Avx512::append_whole(keys + pass.count, inside, key);
    pass.sure += static_cast<std::size_t>(__builtin_popcount(over));
    pass.count += static_cast<std::size_t>(__builtin_popcount(inside));
    pass.above += static_cast<std::size_t>(__builtin_popcount(over & finite));
    pass.bad += static_cast<std::size_t>(__builtin_popcount(~finite & kAll));
  }
  return j;
}
#undef DCT_AVX512
#endif

}  // namespace dct::detail::backends::kokkos
