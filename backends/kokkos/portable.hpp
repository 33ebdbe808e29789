// What every kernel of the Kokkos backend shares, written once for every execution space: the
// policies over an execution-space instance, unmanaged Views of the caller's buffers, the bit
// operations (Kokkos' own from 4.1; the compiler's builtins on Kokkos 3.x, which dct supports
// on host spaces only), the block masks of the two passes over acc = send + residual, and the
// scratch buffers that the kernels keep between calls.
//
// Host-only fast paths (SSE2 compare + movemask) sit behind the device-compilation guard, so the
// same source compiles for Kokkos::Cuda and Kokkos::HIP, whose KOKKOS_LAMBDA is
// __host__ __device__: the device pass of nvcc or hip-clang sees the portable loop only.
//
// Private header of backends/kokkos/.
#pragma once

#include <Kokkos_Core.hpp>
#if KOKKOS_VERSION >= 40100
#include <Kokkos_BitManipulation.hpp>
#endif

#if defined(__SSE2__) && !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <emmintrin.h>
#define DCT_KOKKOS_HOST_SSE2 1
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/kernel_logic.hpp"
#include "core/compute_backend.hpp"

namespace dct::detail::backends::kokkos {

/// An unmanaged View of a caller's buffer in `Space` (its memory space): no allocation, no
/// reference count.
template <typename T, typename Space>
using Buffer =
    Kokkos::View<T *, typename Space::memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

template <typename Exec>
using Range = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;

/// Work items [0, n) on the instance `exec` (its stream, on a device). With an explicit chunk
/// size on the host: Kokkos 4's automatic one asks the space for its concurrency through a
/// default-constructed instance, an allocation per kernel (tests/mpi/test_steady_state.cpp);
/// the host kernels here have a few work items per thread.
template <typename Exec>
Range<Exec> range(const Exec &exec, std::size_t n) {
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace,
                                           typename Exec::memory_space>::accessible)
    return Range<Exec>(exec, 0, static_cast<std::int64_t>(n), Kokkos::ChunkSize(1));
  else
    return Range<Exec>(exec, 0, static_cast<std::int64_t>(n));
}

/// Whether the calling thread can read `Exec`'s memory: then the kernels may run small work on
/// it directly (a launch costs more than a loop over a few thousand entries) and keep their
/// scratch in host vectors.
template <typename Exec>
constexpr bool kHostAccessible =
    Kokkos::SpaceAccessibility<Kokkos::HostSpace, typename Exec::memory_space>::accessible;

/// The kernels' results are ready: exec.fence() on a device. Host spaces run their kernels to
/// the end before the dispatch returns (Serial inline, OpenMP and Threads in a parallel region
/// that joins), so there it is skipped: Kokkos 4's fence builds a label and profiling events,
/// an allocation per kernel (tests/mpi/test_steady_state.cpp). Kernel labels are kept to 15
/// characters, std::string's inline buffer, for the same reason.
template <typename Exec>
void fence(const Exec &exec) {
  if constexpr (kHostAccessible<Exec>) {
    static_cast<void>(exec);
  } else {
#if KOKKOS_VERSION >= 30500
    static const std::string label = "dct";
    exec.fence(label);
#else
    exec.fence();
#endif
  }
}

/// Index of the lowest set bit of a non-zero mask (unsigned or std::uint64_t). Kokkos'
/// *_builtin form, not Kokkos::countr_zero: that is a constexpr loop (Kokkos 4.6), which made the
/// filter and the exact selection measurably slower on OpenMP than the compiler's instruction
/// (docs/kernels.md). Kokkos 3.x, which dct supports on host spaces only, has neither.
template <typename Mask>
KOKKOS_INLINE_FUNCTION int lowest_set_bit(Mask mask) {
  static_assert(std::is_same_v<Mask, unsigned> || std::is_same_v<Mask, std::uint64_t>);
#if KOKKOS_VERSION >= 40100
  return Kokkos::Experimental::countr_zero_builtin(mask);
#else
  if constexpr (sizeof(Mask) > sizeof(unsigned))
    return __builtin_ctzll(mask);
  else
    return __builtin_ctz(mask);
#endif
}

using kernel_logic::abs_key;
using kernel_logic::is_finite;
using kernel_logic::KeyBits;
using kernel_logic::value_of_key;

/// The mask passes (filter, selection above a bound) work on blocks of 16 entries, and a work
/// item is a run of blocks.
constexpr std::size_t kFilterBlock = 16;
constexpr std::int64_t kFilterChunk = 4096;

/// What a mask pass does with a block of 16 entries of acc = send + residual. `filter` stores
/// acc into `acc_out` and marks the entries the keep rule sends (|acc| >= tau or NaN, never 0);
/// `keep` marks the same entries without storing anything; `select` only reads, and marks
/// |acc| >= bound or NaN (zeros too, when the bound is 0).
enum class BlockPass { filter, keep, select };

template <BlockPass kPass, bool kHasSend, typename T>
KOKKOS_INLINE_FUNCTION unsigned block_mask_scalar(const T *send, const T *residual, T *acc_out,
                                                  T bound) {
  unsigned mask = 0;
  for (std::size_t j = 0; j < kFilterBlock; ++j) {
    const T acc = (kHasSend ? send[j] : T(0)) + residual[j];
    if constexpr (kPass == BlockPass::filter) acc_out[j] = acc;
    if constexpr (kPass == BlockPass::select)
      mask |= unsigned(!(std::fabs(acc) < bound)) << j;
    else
      mask |= unsigned(keep_entry(acc, bound)) << j;
  }
  return mask;
}

#if defined(DCT_KOKKOS_HOST_SSE2)
/// The SSE2 instructions of block_mask_sse2, by element type: one template over float and double.
struct Sse2 {
  static __m128 load(const float *p) { return _mm_loadu_ps(p); }
  static __m128d load(const double *p) { return _mm_loadu_pd(p); }
  static void store(float *p, __m128 v) { _mm_storeu_ps(p, v); }
  static void store(double *p, __m128d v) { _mm_storeu_pd(p, v); }
  static __m128 broadcast(float x) { return _mm_set1_ps(x); }
  static __m128d broadcast(double x) { return _mm_set1_pd(x); }
  static __m128 add(__m128 a, __m128 b) { return _mm_add_ps(a, b); }
  static __m128d add(__m128d a, __m128d b) { return _mm_add_pd(a, b); }
  /// !(|a| < bound) is cmpnlt, which is also true for NaN, as every pass wants.
  static __m128 magnitude_not_below(__m128 a, __m128 bound) {
    return _mm_cmpnlt_ps(_mm_andnot_ps(_mm_set1_ps(-0.0f), a), bound);
  }
  static __m128d magnitude_not_below(__m128d a, __m128d bound) {
    return _mm_cmpnlt_pd(_mm_andnot_pd(_mm_set1_pd(-0.0), a), bound);
  }
  static __m128 and_nonzero(__m128 marked, __m128 a) {
    return _mm_and_ps(marked, _mm_cmpneq_ps(a, _mm_setzero_ps()));
  }
  static __m128d and_nonzero(__m128d marked, __m128d a) {
    return _mm_and_pd(marked, _mm_cmpneq_pd(a, _mm_setzero_pd()));
  }
  static unsigned lane_bits(__m128 marked) { return unsigned(_mm_movemask_ps(marked)); }
  static unsigned lane_bits(__m128d marked) { return unsigned(_mm_movemask_pd(marked)); }
};

template <BlockPass kPass, bool kHasSend, typename T>
inline unsigned block_mask_sse2(const T *send, const T *residual, T *acc_out, T bound) {
  constexpr std::size_t kLanes = 16 / sizeof(T);
  const auto threshold = Sse2::broadcast(bound);
  unsigned mask = 0;
  for (std::size_t v = 0; v < kFilterBlock; v += kLanes) {
    const auto r = Sse2::load(residual + v);
    const auto acc = kHasSend ? Sse2::add(Sse2::load(send + v), r) : r;
    auto marked = Sse2::magnitude_not_below(acc, threshold);
    if constexpr (kPass == BlockPass::filter) Sse2::store(acc_out + v, acc);
    if constexpr (kPass != BlockPass::select) marked = Sse2::and_nonzero(marked, acc);
    mask |= Sse2::lane_bits(marked) << v;
  }
  return mask;
}
#endif

/// The block's mask: SSE2 in host code where the host has it, the portable loop elsewhere
/// (device code, other hosts). Both give the same bits. `send` is read only with kHasSend.
template <BlockPass kPass, bool kHasSend, typename T>
KOKKOS_INLINE_FUNCTION unsigned block_mask(const T *send, const T *residual, T *acc_out, T bound) {
#if defined(DCT_KOKKOS_HOST_SSE2)
  return block_mask_sse2<kPass, kHasSend>(send, residual, acc_out, bound);
#else
  return block_mask_scalar<kPass, kHasSend>(send, residual, acc_out, bound);
#endif
}

/// The kept values at [from, to) as the wire carries them (wire_value), and what it does not
/// carry of each (wire_remainder) into `remainders` where given.
template <typename T>
KOKKOS_INLINE_FUNCTION void round_for_the_wire(T *values, T *remainders, std::size_t from,
                                               std::size_t to, ValueCoding coding) {
  if (coding == ValueCoding::native || coding == ValueCoding::sign) {
    if (remainders != nullptr)
      for (std::size_t p = from; p < to; ++p) remainders[p] = T(0);
    return;
  }
  for (std::size_t p = from; p < to; ++p) {
    const T acc = values[p];
    const T sent = wire_value(acc, coding);
    values[p] = sent;
    if (remainders != nullptr) remainders[p] = wire_remainder(acc, sent);
  }
}

/// A kernel's scratch array of `size` elements in `Exec`'s memory. On host-accessible memory it
/// is a vector kept between calls on this thread (its pages are not faulted in again on every
/// call; measured: docs/internals.md, measured reasons); on a device, this call's own allocation.
/// `Tag` keeps apart the scratch arrays of one kernel that share an element type.
template <typename Tag, typename U, typename Exec>
class Scratch {
 public:
  explicit Scratch(std::size_t size) {
    if constexpr (kHostAccessible<Exec>) {
      static thread_local std::vector<U> kept;
      // With room to spare: sizes that move from call to call would allocate at every new high.
      if (kept.size() < size) kept.resize(size + size / 4);
      data_ = kept.data();
    } else {
      owned_ = Kokkos::View<U *, typename Exec::memory_space>(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "dct::scratch"), size);
      data_ = owned_.data();
    }
  }
  U *data() const { return data_; }

 private:
  Kokkos::View<U *, typename Exec::memory_space> owned_;
  U *data_ = nullptr;
};

}  // namespace dct::detail::backends::kokkos
