// The Kokkos backend: compression kernels on Kokkos' default host execution space (Serial,
// OpenMP or Threads, whichever Kokkos was built with), on host memory. Written against the API
// common to Kokkos 3.4 and 4.x.
#include <Kokkos_Core.hpp>
#include <Kokkos_ScatterView.hpp>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

#include "error.hpp"
#include "kernels.hpp"

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

template <typename T>
T kth_largest_abs_impl(const T *send, const T *residual, std::size_t n, std::size_t k) {
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
void gather_abs_sample_impl(const T *send, const T *residual, std::size_t n, std::size_t m,
                            std::uint64_t seed, T *out) {
  Kokkos::parallel_for(
      "dct::gather_sample", range(m), KOKKOS_LAMBDA(const std::int64_t j) {
        const std::size_t i = sample_position(static_cast<std::size_t>(j), m, n, seed);
        out[j] = std::fabs((send ? send[i] : T(0)) + residual[i]);
      });
  Exec().fence();
}

template <typename T>
std::size_t filter_impl(const T *send, T *residual, std::size_t n, T tau, ValueCoding coding,
                        WireIndex *idx, T *val, std::size_t capacity) {
  std::size_t kept = 0;
  Kokkos::parallel_scan(
      "dct::filter", range(n),
      KOKKOS_LAMBDA(const std::int64_t i, std::size_t &position, const bool final) {
        const T acc = (send ? send[i] : T(0)) + residual[i];
        const bool keep = keep_entry(acc, tau);
        if (final) {
          if (keep && position < capacity) {
            const T sent = wire_value(acc, coding);
            idx[position] = static_cast<WireIndex>(i);
            val[position] = sent;
            residual[i] = wire_remainder(acc, sent);
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

template <typename T>
void scatter_add_impl(const WireIndex *idx, const T *val, std::size_t m, T *out) {
  Kokkos::parallel_for(
      "dct::scatter_add", range(m), KOKKOS_LAMBDA(const std::int64_t j) { out[idx[j]] += val[j]; });
  Exec().fence();
}

template <typename T>
void fill_zero_impl(T *out, std::size_t n) {
  Kokkos::parallel_for(
      "dct::fill_zero", range(n), KOKKOS_LAMBDA(const std::int64_t i) { out[i] = T(0); });
  Exec().fence();
}

class KokkosBackend final : public Backend {
 public:
  DCT_Backend kind() const override { return DCT_BACKEND_KOKKOS; }
  bool available() const override { return true; }
  bool owns(const void *) const override { return false; }

  void *allocate(std::size_t bytes) override { return allocate_host(bytes); }
  void deallocate(void *pointer) noexcept override { deallocate_host(pointer); }
  void *allocate_host(std::size_t bytes) override {
    void *pointer = std::malloc(bytes > 0 ? bytes : 1);
    require(pointer != nullptr, DCT_ERR_NO_MEMORY,
            "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    return pointer;
  }
  void deallocate_host(void *pointer) noexcept override { std::free(pointer); }
  void copy(void *destination, const void *source, std::size_t bytes, Stream) override {
    if (bytes > 0 && destination != source) std::memcpy(destination, source, bytes);
  }
  bool mpi_accepts_device_memory() const override { return true; }  // host memory is MPI's own

#define DCT_KOKKOS_KERNELS(T)                                                                    \
  T kth_largest_abs(const T *send, const T *residual, std::size_t n, std::size_t k, Stream)      \
      override {                                                                                 \
    return kth_largest_abs_impl(send, residual, n, k);                                           \
  }                                                                                              \
  void gather_abs_sample(const T *send, const T *residual, std::size_t n, std::size_t m,         \
                         std::uint64_t seed, T *host_out, Stream) override {                     \
    gather_abs_sample_impl(send, residual, n, m, seed, host_out);                                \
  }                                                                                              \
  std::size_t filter(const T *send, T *residual, std::size_t n, T tau, ValueCoding coding,       \
                     WireIndex *idx, T *val, std::size_t capacity, Stream) override {            \
    return filter_impl(send, residual, n, tau, coding, idx, val, capacity);                      \
  }                                                                                              \
  void scatter_add(const WireIndex *idx, const T *val, std::size_t m, T *out, Stream) override { \
    scatter_add_impl(idx, val, m, out);                                                          \
  }                                                                                              \
  void fill_zero(T *out, std::size_t n, Stream) override {                                       \
    fill_zero_impl(out, n);                                                                      \
  }
  DCT_KOKKOS_KERNELS(float)
  DCT_KOKKOS_KERNELS(double)
#undef DCT_KOKKOS_KERNELS
};

}  // namespace

Backend *kokkos_backend() {
  static KokkosBackend backend;
  return &backend;
}

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

}  // namespace dct::detail::kernels
