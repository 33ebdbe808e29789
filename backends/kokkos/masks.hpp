// What every source of the Kokkos backend shares: its execution space, and the block masks of
// the two passes over acc = send + residual that decide entry by entry (the filter's keep rule
// and the selection's copy of the keys above a bound), inline for their inner loops.
//
// Private header of backends/kokkos/.
#pragma once

#include <Kokkos_Core.hpp>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels.hpp"

namespace dct::detail::kernels::kokkos {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;

inline Policy range(std::size_t n) {
  return Policy(0, static_cast<std::int64_t>(n));
}

/// The mask passes (filter, selection above a bound) work on blocks of 16 entries, and a work
/// item is a run of blocks.
constexpr std::size_t kFilterBlock = 16;
constexpr std::int64_t kFilterChunk = 4096;

/// What a mask pass does with a block of 16 entries of acc = send + residual. `filter` stores
/// acc into `acc_out` and marks the entries the keep rule sends (|acc| >= tau or NaN, never 0);
/// `select` only reads, and marks |acc| >= bound or NaN.
enum class BlockPass { filter, select };

template <BlockPass kPass, bool kHasSend, typename T>
inline unsigned block_mask_scalar(const T *send, const T *residual, T *acc_out, T bound) {
  unsigned mask = 0;
  for (std::size_t j = 0; j < kFilterBlock; ++j) {
    const T acc = (kHasSend ? send[j] : T(0)) + residual[j];
    if constexpr (kPass == BlockPass::filter) {
      acc_out[j] = acc;
      mask |= unsigned(keep_entry(acc, bound)) << j;
    } else {
      mask |= unsigned(!(std::fabs(acc) < bound)) << j;
    }
  }
  return mask;
}

#if defined(__SSE2__)
// !(|acc| < bound) is cmpnlt, which is also true for NaN, as both passes want.
template <BlockPass kPass>
inline unsigned block_mask_sse2(const float *send, const float *residual, float *acc_out,
                                float bound) {
  const __m128 threshold = _mm_set1_ps(bound), sign = _mm_set1_ps(-0.0f);
  unsigned mask = 0;
  for (int v = 0; v < 4; ++v) {
    const __m128 acc = _mm_add_ps(_mm_loadu_ps(send + 4 * v), _mm_loadu_ps(residual + 4 * v));
    __m128 marked = _mm_cmpnlt_ps(_mm_andnot_ps(sign, acc), threshold);
    if constexpr (kPass == BlockPass::filter) {
      _mm_storeu_ps(acc_out + 4 * v, acc);
      marked = _mm_and_ps(marked, _mm_cmpneq_ps(acc, _mm_setzero_ps()));
    }
    mask |= unsigned(_mm_movemask_ps(marked)) << (4 * v);
  }
  return mask;
}
template <BlockPass kPass>
inline unsigned block_mask_sse2(const double *send, const double *residual, double *acc_out,
                                double bound) {
  const __m128d threshold = _mm_set1_pd(bound), sign = _mm_set1_pd(-0.0);
  unsigned mask = 0;
  for (int v = 0; v < 8; ++v) {
    const __m128d acc = _mm_add_pd(_mm_loadu_pd(send + 2 * v), _mm_loadu_pd(residual + 2 * v));
    __m128d marked = _mm_cmpnlt_pd(_mm_andnot_pd(sign, acc), threshold);
    if constexpr (kPass == BlockPass::filter) {
      _mm_storeu_pd(acc_out + 2 * v, acc);
      marked = _mm_and_pd(marked, _mm_cmpneq_pd(acc, _mm_setzero_pd()));
    }
    mask |= unsigned(_mm_movemask_pd(marked)) << (2 * v);
  }
  return mask;
}
#endif

/// The block's mask (SSE2 compare + movemask where the host has it, a plain loop elsewhere).
template <BlockPass kPass, bool kHasSend, typename T>
inline unsigned block_mask(const T *send, const T *residual, T *acc_out, T bound) {
#if defined(__SSE2__)
  if constexpr (kHasSend) return block_mask_sse2<kPass>(send, residual, acc_out, bound);
#endif
  return block_mask_scalar<kPass, kHasSend>(send, residual, acc_out, bound);
}

// The kernels of the other sources, for float and double.

/// The k-th largest |send + residual| (send may be null) of n entries, 1 <= k <= n (select.cpp).
template <typename T>
T kth_largest_abs_impl(const T *send, const T *residual, std::size_t n, std::size_t k);
/// |send + residual| at m sample positions (select.cpp).
template <typename T>
void gather_abs_sample_impl(const T *send, const T *residual, std::size_t n, std::size_t m,
                            std::uint64_t seed, T *out);
/// The filter with error feedback: Backend::filter (filter.cpp).
template <typename T>
std::size_t filter_impl(const T *send, T *residual, std::size_t n, T tau, ValueCoding coding,
                        WireIndex *idx, T *val, std::size_t capacity);

}  // namespace dct::detail::kernels::kokkos
