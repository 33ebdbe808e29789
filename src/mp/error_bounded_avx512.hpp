// The error-bounded quantiser's two passes over float tables with AVX-512F, where the CPU has
// it (checked at run time; error_bounded_codec.cpp picks the tier): the finite range, and the
// codes with the encoder's check of every reconstruction, 16 values at a time in two halves of
// 8 doubles. Every value goes through the scalar code's very operations in double precision
// (subtract, multiply, round to nearest even, clamp, convert; multiply then add, unfused, and
// round to float for the check), so the codes, outliers and bounds are the scalar code's bit
// for bit (tests/unit/test_error_bounded.cpp runs both tiers on the same tables).
//
// Private header of src/: include it from library sources only.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DCT_EB_AVX512 1
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace dct::detail::eb::avx512 {

// Intrinsics whose plain forms start from an undefined vector (GCC 12 warns of it with
// -Wmaybe-uninitialized) are taken in their zero-masked forms, every lane on.
constexpr __mmask8 kAll8 = 0xff;
constexpr __mmask16 kAll16 = 0xffff;

/// Floats 8h to 8h + 7 of x (h 0 or 1).
__attribute__((target("avx512f"))) inline __m256 half(__m512 x, int h) {
  return _mm256_castpd_ps(h == 0 ? _mm512_maskz_extractf64x4_pd(kAll8, _mm512_castps_pd(x), 0)
                                 : _mm512_maskz_extractf64x4_pd(kAll8, _mm512_castps_pd(x), 1));
}

/// The finite minimum and maximum of row[0, columns / 16 * 16) folded into lo and hi.
/// Returns how many columns it read.
__attribute__((target("avx512f"))) inline std::size_t finite_range(const float *row,
                                                                   std::size_t columns, float &lo,
                                                                   float &hi) {
  const __m512 infinity = _mm512_set1_ps(__builtin_inff());
  __m512 low = _mm512_set1_ps(lo), high = _mm512_set1_ps(hi);
  std::size_t c = 0;
  for (; c + 16 <= columns; c += 16) {
    const __m512 x = _mm512_loadu_ps(row + c);
    const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(x), infinity, _CMP_LT_OQ);
    low = _mm512_mask_min_ps(low, finite, low, x);
    high = _mm512_mask_max_ps(high, finite, high, x);
  }
  alignas(64) float lanes[2][16];
  _mm512_store_ps(lanes[0], low);
  _mm512_store_ps(lanes[1], high);
  for (int j = 0; j < 16; ++j) {
    lo = lanes[0][j] < lo ? lanes[0][j] : lo;
    hi = lanes[1][j] > hi ? lanes[1][j] : hi;
  }
  return c;
}

/// The quantiser of one table, in vectors.
struct Quantiser {
  double offset, step, inverse, top, bound;
};

/// Codes of 8 values (as doubles) and which of them pass the check; `worst` takes their errors.
__attribute__((target("avx512f"))) inline __m256i codes8(const Quantiser &q, __m512d x,
                                                         __mmask8 &ok, __m512d &worst) {
  const __m512d infinity = _mm512_set1_pd(__builtin_inf());
  const __mmask8 finite = _mm512_cmp_pd_mask(_mm512_abs_pd(x), infinity, _CMP_LT_OQ);
  const __m512d scaled =
      _mm512_mul_pd(_mm512_sub_pd(x, _mm512_set1_pd(q.offset)), _mm512_set1_pd(q.inverse));
  const __m512d rounded =
      _mm512_maskz_roundscale_pd(kAll8, scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512d clamped = _mm512_maskz_min_pd(
      kAll8, _mm512_maskz_max_pd(kAll8, rounded, _mm512_setzero_pd()), _mm512_set1_pd(q.top));
  const __m256i code = _mm512_maskz_cvttpd_epu32(finite, clamped);
  const __m512d product =
      _mm512_mul_pd(_mm512_maskz_cvtepu32_pd(kAll8, code), _mm512_set1_pd(q.step));
  const __m256 narrowed =
      _mm512_maskz_cvtpd_ps(kAll8, _mm512_add_pd(_mm512_set1_pd(q.offset), product));
  const __m512d error = _mm512_abs_pd(_mm512_sub_pd(_mm512_maskz_cvtps_pd(kAll8, narrowed), x));
  ok = _mm512_cmp_pd_mask(error, _mm512_set1_pd(q.bound), _CMP_LE_OQ);  // false for NaN
  worst = _mm512_mask_max_pd(worst, ok, worst, error);
  return code;
}

/// The codes of row[0, columns / 16 * 16) (`Code` 8 or 16 bits; `mark` for the values that
/// miss the bound, which are appended to `outliers`). Returns how many columns it did;
/// `outlier_count` and `worst` carry over from call to call.
template <typename Code>
__attribute__((target("avx512f"))) inline std::size_t codes(const Quantiser &q, const float *row,
                                                            std::size_t columns, Code mark,
                                                            std::byte *out, float *outliers,
                                                            std::size_t &outlier_count,
                                                            double &worst) {
  __m512d worst_v = _mm512_set1_pd(worst);
  const __m512i mark_v = _mm512_set1_epi32(static_cast<int>(mark));
  std::size_t c = 0;
  for (; c + 16 <= columns; c += 16) {
    const __m512 x = _mm512_loadu_ps(row + c);
    __mmask8 ok_low = 0, ok_high = 0;
    const __m256i low = codes8(q, _mm512_maskz_cvtps_pd(kAll8, half(x, 0)), ok_low, worst_v);
    const __m256i high = codes8(q, _mm512_maskz_cvtps_pd(kAll8, half(x, 1)), ok_high, worst_v);
    const __mmask16 ok = static_cast<__mmask16>(ok_low | (unsigned(ok_high) << 8));
    const __m512i code = _mm512_mask_blend_epi32(
        ok, mark_v, _mm512_maskz_inserti64x4(kAll8, _mm512_castsi256_si512(low), high, 1));
    if constexpr (sizeof(Code) == 1) {
      const __m128i bytes = _mm512_maskz_cvtepi32_epi8(kAll16, code);
      std::memcpy(out + c, &bytes, 16);
    } else {
      const __m256i words = _mm512_maskz_cvtepi32_epi16(kAll16, code);
      std::memcpy(out + 2 * c, &words, 32);
    }
    const __mmask16 missed = static_cast<__mmask16>(~ok);
    if (missed != 0) {
      _mm512_mask_compressstoreu_ps(outliers + outlier_count, missed, x);
      outlier_count += static_cast<std::size_t>(__builtin_popcount(missed));
    }
  }
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, worst_v);
  for (double lane : lanes) worst = lane > worst ? lane : worst;
  return c;
}

}  // namespace dct::detail::eb::avx512
#endif
