// The Kokkos backend: compression kernels on Kokkos' default host execution space (Serial,
// OpenMP or Threads, whichever Kokkos was built with), on host memory. Written against the API
// common to Kokkos 3.4 and 4.x.
//
// The sources: masks.hpp (execution space, block masks), select.cpp (exact selection, sample),
// filter.cpp (filter with error feedback), this file (decode, the Backend, the runtime).
#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

#include "error.hpp"
#include "kernels.hpp"
#include "masks.hpp"

namespace dct::detail::kernels {
namespace {

using kokkos::Exec;
using kokkos::range;

// Runs body(i) for i in [0, n): on the calling thread when n fits one filter work item, as a
// Kokkos kernel otherwise. On tensors of a few thousand entries a launch costs more than the
// loop (its label string is a heap allocation, then the dispatch and the fence: issue 14's
// per-call overhead), as for the filter's single work item; the body is the kernel's own, so
// the bits are too (the scattered indices of one message are distinct).
template <typename Body>
void for_each_index(const char *label, std::size_t n, const Body &body) {
  if (n <= static_cast<std::size_t>(kokkos::kFilterChunk)) {
    for (std::size_t i = 0; i < n; ++i) body(static_cast<std::int64_t>(i));
    return;
  }
  Kokkos::parallel_for(label, range(n), body);
  Exec().fence();
}

template <typename T>
void scatter_add_impl(const WireIndex *idx, const T *val, std::size_t m, T *out) {
  for_each_index(
      "dct::scatter_add", m, KOKKOS_LAMBDA(const std::int64_t j) { out[idx[j]] += val[j]; });
}

template <typename T>
void fill_zero_impl(T *out, std::size_t n) {
  for_each_index(
      "dct::fill_zero", n, KOKKOS_LAMBDA(const std::int64_t i) { out[i] = T(0); });
}

template <typename T>
void momentum_update_impl(const T *send, const T *velocity, T momentum, T *out, std::size_t n) {
  for_each_index(
      "dct::momentum_update", n,
      KOKKOS_LAMBDA(const std::int64_t i) { out[i] = momentum * velocity[i] + send[i]; });
}

template <typename T>
void scatter_zero_impl(const WireIndex *idx, std::size_t m, T *out) {
  for_each_index(
      "dct::scatter_zero", m, KOKKOS_LAMBDA(const std::int64_t j) { out[idx[j]] = T(0); });
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
    return kokkos::kth_largest_abs_impl(send, residual, n, k);                                   \
  }                                                                                              \
  void gather_abs_sample(const T *send, const T *residual, std::size_t n, std::size_t m,         \
                         std::uint64_t seed, T *host_out, Stream) override {                     \
    kokkos::gather_abs_sample_impl(send, residual, n, m, seed, host_out);                        \
  }                                                                                              \
  std::size_t filter(const T *send, T *residual, std::size_t n, T tau, ValueCoding coding,       \
                     WireIndex *idx, T *val, std::size_t capacity, Stream) override {            \
    return kokkos::filter_impl(send, residual, n, tau, coding, idx, val, capacity);              \
  }                                                                                              \
  void scatter_add(const WireIndex *idx, const T *val, std::size_t m, T *out, Stream) override { \
    scatter_add_impl(idx, val, m, out);                                                          \
  }                                                                                              \
  void fill_zero(T *out, std::size_t n, Stream) override {                                       \
    fill_zero_impl(out, n);                                                                      \
  }                                                                                              \
  void momentum_update(const T *send, const T *velocity, T momentum, T *out, std::size_t n,      \
                       Stream) override {                                                        \
    momentum_update_impl(send, velocity, momentum, out, n);                                      \
  }                                                                                              \
  void scatter_zero(const WireIndex *idx, std::size_t m, T *out, Stream) override {              \
    scatter_zero_impl(idx, m, out);                                                              \
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
