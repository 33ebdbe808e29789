// The logic every backend's kernels share, written once for host code, Kokkos functors (on a
// device space KOKKOS_LAMBDA is __host__ __device__) and CUDA/HIP kernels (DCT_HOST_DEVICE):
// the keys of the radix selection and its digit step, the classification of a selected entry
// at a threshold, and the element-wise kernels as functors of one index. A backend supplies the
// parallel loop that runs them (Kokkos::parallel_for, a grid-stride CUDA/HIP kernel), so each
// rule is one source and the bits are the same on every backend; what differs between them is
// only how the work is spread (the Kokkos backend's candidate pass against the GPU's passes of a
// radix select, for instance), which docs/kernels.md explains.
//
// Private header of backends/: included by backends/kokkos/ and backends/common/cuda_hip/.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "core/compute_backend.hpp"
#include "core/float16.hpp"

namespace dct::detail::kernel_logic {

// --- The keys of |acc| ---------------------------------------------------------------------

/// Unsigned integer with the bits of T; for non-negative floats its order is the float order,
/// with NaN patterns above +Inf.
template <typename T>
using KeyBits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

/// The bits of |value| (the sign cleared) as an unsigned integer.
template <typename T>
DCT_HOST_DEVICE inline KeyBits<T> abs_key(T value) {
  constexpr KeyBits<T> sign = KeyBits<T>(1) << (8 * sizeof(T) - 1);
  return f16::bit_copy<KeyBits<T>>(value) & ~sign;
}

/// The value whose bits are `key`.
template <typename T>
DCT_HOST_DEVICE inline T value_of_key(KeyBits<T> key) {
  return f16::bit_copy<T>(key);
}

/// A selected key as the threshold it stands for: |acc|, and a NaN pattern (above +Inf's) as
/// +Inf, as Backend::kth_largest_abs returns it.
template <typename T>
DCT_HOST_DEVICE inline T threshold_of_key(KeyBits<T> key) {
  constexpr KeyBits<T> infinity =
      sizeof(T) == 4 ? KeyBits<T>(0xffu) << 23 : KeyBits<T>(0x7ffu) << 52;
  return value_of_key<T>(key > infinity ? infinity : key);
}

/// Digits of the radix selection: 11 bits (3 passes over a float's key, 6 over a double's).
constexpr int kDigitBits = 11;
constexpr unsigned int kDigitBins = 1u << kDigitBits;

/// The digit whose bin of `histogram` (bins 0 to `top`, counts of keys by that digit) holds the
/// rank-th largest key (1 <= rank <= the keys counted); `rank` becomes its rank within that bin.
template <typename Digit, typename Count, typename Rank>
DCT_HOST_DEVICE inline Digit digit_of_rank(const Count *histogram, Digit top, Rank &rank) {
  Rank above = 0;
  Digit digit = top;
  while (digit > 0 && above + histogram[digit] < rank) above += histogram[digit--];
  rank -= above;
  return digit;
}

// --- The entries a selection keeps -----------------------------------------------------------

/// Whether `v` is neither NaN nor +-Inf (std::isfinite is not device code everywhere).
template <typename T>
DCT_HOST_DEVICE inline bool is_finite(T v) {
  return v - v == T(0);
}

/// `finite ? a : b` for a finite test done on the bits (the exponent not all ones, exactly
/// is_finite): a float comparison there is a branch GCC will not turn into a select (it may trap,
/// by -ftrapping-math), which kept the host's element-wise loops scalar; this vectorises.
template <typename T>
DCT_HOST_DEVICE inline T if_finite(T tested, T a, T b) {
  constexpr KeyBits<T> exponent =
      sizeof(T) == 4 ? KeyBits<T>(0xffu) << 23 : KeyBits<T>(0x7ffu) << 52;
  const KeyBits<T> keep =
      (f16::bit_copy<KeyBits<T>>(tested) & exponent) != exponent ? ~KeyBits<T>(0) : KeyBits<T>(0);
  return f16::bit_copy<T>((f16::bit_copy<KeyBits<T>>(a) & keep) |
                          (f16::bit_copy<KeyBits<T>>(b) & ~keep));
}

/// acc = send + residual at i; a null `send` is zeros (a candidate list as residual).
template <typename T>
DCT_HOST_DEVICE inline T accumulated(const T *send, const T *residual, std::size_t i) {
  return (send != nullptr ? send[i] : T(0)) + residual[i];
}

/// How an entry that keep_entry selected at tau counts toward a limit: strictly above tau, a tie
/// at tau (the lowest indices go first), or NaN/Inf (always sent, never counted).
enum class Selection { above, tie, nonfinite };
template <typename T>
DCT_HOST_DEVICE inline Selection classify(T acc, T tau) {
  if (!is_finite(acc)) return Selection::nonfinite;
  return std::fabs(acc) == tau ? Selection::tie : Selection::above;
}

// --- Element-wise kernels: body(i) for i in [0, n) -------------------------------------------

/// sum[i] += x[i].
template <typename T>
struct Add {
  const T *x;
  T *sum;
  DCT_HOST_DEVICE void operator()(std::size_t i) const { sum[i] += x[i]; }
};

/// out[idx[j]] += val[j] (indices distinct: no two work items write one entry).
template <typename T>
struct ScatterAdd {
  const WireIndex *idx;
  const T *val;
  T *out;
  DCT_HOST_DEVICE void operator()(std::size_t j) const { out[idx[j]] += val[j]; }
};

/// out[idx[j]] = val[j], or 0 where `val` is null (select's pending writes, scatter_zero).
template <typename T>
struct ScatterSet {
  const WireIndex *idx;
  const T *val;
  T *out;
  DCT_HOST_DEVICE void operator()(std::size_t j) const {
    out[idx[j]] = val != nullptr ? val[j] : T(0);
  }
};

/// Backend::momentum_update: out[i] = momentum * velocity[i] + send[i], a non-finite velocity
/// taken as 0 (a NaN/Inf is delivered once, then forgotten). The product is formed either way
/// and chosen by if_finite: with a branch the host's loops stayed scalar (a 16M-float update
/// took longer than the whole selection pass). run() is the host's loop over [from, to), the
/// fields in registers: a store through `out` may alias a float member, so a loop over
/// operator() reloads them.
template <typename T>
struct MomentumUpdate {
  const T *send;
  const T *velocity;
  T momentum;
  T *out;
  DCT_HOST_DEVICE static T value(T send, T velocity, T momentum) {
    return if_finite(velocity, momentum * velocity, T(0)) + send;
  }
  DCT_HOST_DEVICE void operator()(std::size_t i) const {
    out[i] = value(send[i], velocity[i], momentum);
  }
  DCT_HOST_DEVICE void run(std::size_t from, std::size_t to) const {
    const T *const g = send, *const v = velocity;
    T *const o = out;
    const T m = momentum;
    for (std::size_t i = from; i < to; ++i) o[i] = value(g[i], v[i], m);
  }
};

/// Backend::momentum_unroll: result[i] = u - momentum * previous[i] (previous[i] taken as 0 where
/// not finite), then previous[i] = u, for u the result as summed (if_finite and run() as above).
template <typename T>
struct MomentumUnroll {
  T *result;
  T *previous;
  T momentum;
  DCT_HOST_DEVICE static T value(T update, T last, T momentum) {
    return if_finite(last, update - momentum * last, update);
  }
  DCT_HOST_DEVICE void operator()(std::size_t i) const {
    const T update = result[i];
    result[i] = value(update, previous[i], momentum);
    previous[i] = update;
  }
  DCT_HOST_DEVICE void run(std::size_t from, std::size_t to) const {
    T *const r = result, *const p = previous;
    const T m = momentum;
    for (std::size_t i = from; i < to; ++i) {
      const T update = r[i];
      r[i] = value(update, p[i], m);
      p[i] = update;
    }
  }
};

/// Backend::gather_abs_sample: out[j] = |acc| at sample_position(j, m, n, seed).
template <typename T>
struct GatherAbsSample {
  const T *send;
  const T *residual;
  std::size_t n;
  std::size_t m;
  std::uint64_t seed;
  T *out;
  DCT_HOST_DEVICE void operator()(std::size_t j) const {
    out[j] = std::fabs(accumulated(send, residual, sample_position(j, m, n, seed)));
  }
};

/// Backend::lower_bounds: out[j] = count_below(idx, m, keys[j]) (keys may be out, in place).
struct LowerBounds {
  const WireIndex *idx;
  std::size_t m;
  const std::uint64_t *keys;
  std::uint64_t *out;
  DCT_HOST_DEVICE void operator()(std::size_t j) const { out[j] = count_below(idx, m, keys[j]); }
};

}  // namespace dct::detail::kernel_logic
