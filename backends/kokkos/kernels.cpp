// Compression kernels on Kokkos' default host execution space (Serial, OpenMP or Threads,
// whichever Kokkos was built with). Written against the API common to Kokkos 3.4 and 4.x.
#include "kernels.hpp"

#include <Kokkos_Core.hpp>
#include <Kokkos_ScatterView.hpp>

#include <cstring>
#include <limits>
#include <type_traits>

#include "error.hpp"

namespace dct::detail::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;

Policy range(std::size_t n) {
  return Policy(0, static_cast<std::int64_t>(n));
}

/// Unsigned integer with the bits of T; for non-negative floats its order is the float order,
/// with NaN patterns above +Inf.
template <typename T>
using KeyBits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

template <typename T>
KOKKOS_INLINE_FUNCTION KeyBits<T> abs_key(T value) {
  KeyBits<T> bits;
  std::memcpy(&bits, &value, sizeof bits);
  constexpr KeyBits<T> sign = KeyBits<T>(1) << (8 * sizeof(T) - 1);
  return bits & ~sign;
}

// Digits of 11 bits: 3 histogram passes for float, 6 for double, 2048 bins each.
constexpr int kDigitBits = 11;

}  // namespace

bool initialize_runtime() {
  if (Kokkos::is_initialized()) return false;
#if KOKKOS_VERSION >= 40000
  require(!Kokkos::is_finalized(), DCT_ERR_NOT_INITIALIZED,
          "Kokkos was already finalized by the application; dct cannot restart it");
#endif
  Kokkos::initialize();
  return true;
}

void finalize_runtime() {
  if (Kokkos::is_initialized()) Kokkos::finalize();
}

template <typename T>
T kth_largest_abs(const T *send, const T *residual, std::size_t n, std::size_t k) {
  using Bits = KeyBits<T>;
  require(k >= 1 && k <= n, DCT_ERR_INTERNAL, "kth_largest_abs: k out of range");
  Kokkos::View<std::size_t *, Kokkos::HostSpace> histogram("dct::histogram", std::size_t(1)
                                                                                 << kDigitBits);
  Bits prefix = 0, mask = 0;
  std::size_t remaining = k;  // rank of the answer among the entries matching `prefix`
  for (int high = 8 * sizeof(T) - 1; high > 0;) {
    const int width = high < kDigitBits ? high : kDigitBits;
    const int shift = high - width;
    const Bits digit_mask = (Bits(1) << width) - 1;
    Kokkos::deep_copy(histogram, std::size_t(0));
    auto scatter = Kokkos::Experimental::create_scatter_view(histogram);
    Kokkos::parallel_for(
        "dct::radix_histogram", range(n), KOKKOS_LAMBDA(const std::int64_t i) {
          const Bits key = abs_key<T>((send ? send[i] : T(0)) + residual[i]);
          if ((key & mask) == prefix) scatter.access()((key >> shift) & digit_mask) += 1;
        });
    Kokkos::Experimental::contribute(histogram, scatter);
    std::size_t above = 0;
    Bits digit = digit_mask;
    while (above + histogram(digit) < remaining) above += histogram(digit--);
    remaining -= above;
    prefix |= digit << shift;
    mask |= digit_mask << shift;
    high = shift;
  }
  T tau;
  std::memcpy(&tau, &prefix, sizeof tau);
  return tau != tau ? std::numeric_limits<T>::infinity() : tau;
}

template <typename T>
std::size_t filter(const T *send, T *residual, std::size_t n, T tau, WireIndex *idx, T *val,
                   std::size_t capacity) {
  std::size_t kept = 0;
  Kokkos::parallel_scan(
      "dct::filter", range(n),
      KOKKOS_LAMBDA(const std::int64_t i, std::size_t &position, const bool final) {
        const T acc = (send ? send[i] : T(0)) + residual[i];
        const bool keep = keep_entry(acc, tau);
        if (final) {
          if (keep && position < capacity) {
            idx[position] = static_cast<WireIndex>(i);
            val[position] = acc;
            residual[i] = T(0);
          } else {
            residual[i] = acc;
          }
        }
        position += keep ? 1 : 0;
      },
      kept);
  Exec().fence();
  return kept;
}

bool indices_valid(const WireIndex *idx, std::size_t m, std::size_t n) {
  std::size_t violations = 0;
  Kokkos::parallel_reduce(
      "dct::validate_indices", range(m),
      KOKKOS_LAMBDA(const std::int64_t j, std::size_t &bad) {
        if (idx[j] >= n || (j > 0 && idx[j] <= idx[j - 1])) ++bad;
      },
      violations);
  return violations == 0;
}

template <typename T>
void scatter_add(const WireIndex *idx, const T *val, std::size_t m, T *out) {
  Kokkos::parallel_for(
      "dct::scatter_add", range(m), KOKKOS_LAMBDA(const std::int64_t j) { out[idx[j]] += val[j]; });
  Exec().fence();
}

template <typename T>
void fill_zero(T *out, std::size_t n) {
  Kokkos::parallel_for(
      "dct::fill_zero", range(n), KOKKOS_LAMBDA(const std::int64_t i) { out[i] = T(0); });
  Exec().fence();
}

#define DCT_INSTANTIATE_KERNELS(T)                                                               \
  template T kth_largest_abs<T>(const T *, const T *, std::size_t, std::size_t);                 \
  template std::size_t filter<T>(const T *, T *, std::size_t, T, WireIndex *, T *, std::size_t); \
  template void scatter_add<T>(const WireIndex *, const T *, std::size_t, T *);                  \
  template void fill_zero<T>(T *, std::size_t);
DCT_INSTANTIATE_KERNELS(float)
DCT_INSTANTIATE_KERNELS(double)
#undef DCT_INSTANTIATE_KERNELS

}  // namespace dct::detail::kernels
