// The Kokkos backend as a dct Backend, for any Kokkos execution space: KokkosBackend<Exec> runs
// every kernel of filter.hpp and kth_largest.hpp, and the element-wise ones below, on an instance
// of Exec over unmanaged Views of the caller's buffers, which live in Exec's memory space. The
// library's "kokkos" backend is KokkosBackend<Kokkos::DefaultHostExecutionSpace>
// (kokkos_kernels.cpp); the tests instantiate it for every execution space the build's Kokkos has
// (Serial, OpenMP, Cuda, HIP), so the same kernel source is checked on each.
//
// Written against the API common to Kokkos 3.4 and 4.x; device spaces need Kokkos >= 4.1
// (Kokkos::countr_zero, bit_cast).
//
// Private header of backends/kokkos/.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/compute_backend.hpp"
#include "core/error.hpp"
#include "core/sign_values.hpp"
#include "core/wire.hpp"
#include "filter.hpp"
#include "kth_largest.hpp"
#include "lists.hpp"
#include "portable.hpp"

namespace dct::detail::backends::kokkos {

/// Runs body(i) for i in [0, n) on `exec`: on the calling thread when Exec's memory is the
/// host's and n fits one filter work item, as a kernel otherwise. On tensors of a few thousand
/// entries a launch costs more than the loop (the dispatch and the fence: the per-call
/// overhead); the body is the kernel's own, so the bits are too (the scattered indices of one
/// message are distinct). Kokkos takes the label as a std::string: one past 15 characters is a
/// heap allocation per launch (momentum_unroll's was, in every steady-state call), so a longer
/// one does not compile.
template <typename Exec, std::size_t kLabel, typename Body>
void for_each_index(const Exec &exec, const char (&label)[kLabel], std::size_t n,
                    const Body &body) {
  static_assert(kLabel <= 16, "a kernel label longer than std::string's 15 in-place characters");
  if constexpr (kHostAccessible<Exec>) {
    if (n <= static_cast<std::size_t>(kFilterChunk)) {
      for (std::size_t i = 0; i < n; ++i) body(static_cast<std::int64_t>(i));
      return;
    }
  }
  Kokkos::parallel_for(label, range(exec, n), body);
  fence(exec);
}

/// for_each_index for a body with run(from, to), the host's vectorised loop: on the host in work
/// items of kFilterChunk entries, one run() each; per index on a device.
template <typename Exec, std::size_t kLabel, typename Body>
void for_each_chunk(const Exec &exec, const char (&label)[kLabel], std::size_t n,
                    const Body &body) {
  if constexpr (kHostAccessible<Exec>) {
    constexpr auto chunk = static_cast<std::size_t>(kFilterChunk);
    if (n <= chunk) return body.run(0, n);
    for_each_index(exec, label, (n + chunk - 1) / chunk, [=](const std::int64_t c) {
      const std::size_t from = std::size_t(c) * chunk;
      body.run(from, from + chunk < n ? from + chunk : n);
    });
  } else {
    for_each_index(exec, label, n, body);
  }
}

template <typename Exec>
class KokkosBackend final : public TypedBackend<KokkosBackend<Exec>> {
 public:
  using Memory = typename Exec::memory_space;

  DCT_Backend kind() const override { return DCT_BACKEND_KOKKOS; }
  bool available() const override { return true; }
  /// Host spaces: never (host memory is everyone's). Device spaces: memory this backend
  /// allocated (the tests' buffers; the library hands device buffers to the native backends).
  bool owns(const void *pointer) const override {
    if constexpr (kHostAccessible<Exec>) {
      (void)pointer;
      return false;
    } else {
      return find_allocation(pointer) != nullptr;
    }
  }

  void *allocate(std::size_t bytes) override {
    if constexpr (kHostAccessible<Exec>) {
      return allocate_host(bytes);
    } else {
      void *pointer = nullptr;
      try {
        pointer = Kokkos::kokkos_malloc<Memory>("dct::backend", bytes > 0 ? bytes : 1);
      } catch (const std::exception &e) {
        fail(DCT_ERR_NO_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes of " +
                                    Memory::name() + " memory: " + e.what());
      }
      const std::lock_guard<std::mutex> lock(mutex_);
      allocations_[static_cast<const char *>(pointer)] = bytes;
      return pointer;
    }
  }
  void deallocate(void *pointer) noexcept override {
    if constexpr (kHostAccessible<Exec>) {
      deallocate_host(pointer);
    } else {
      if (pointer == nullptr) return;
      {
        const std::lock_guard<std::mutex> lock(mutex_);
        allocations_.erase(static_cast<const char *>(pointer));
      }
      Kokkos::kokkos_free<Memory>(pointer);
    }
  }
  void *allocate_host(std::size_t bytes) override {
    void *pointer = std::malloc(bytes > 0 ? bytes : 1);
    require(pointer != nullptr, DCT_ERR_NO_MEMORY,
            "cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    return pointer;
  }
  void deallocate_host(void *pointer) noexcept override { std::free(pointer); }
  void synchronize(Stream) override {}  // every call fences its execution space already
  void copy(void *destination, const void *source, std::size_t bytes, Stream) override {
    if (bytes == 0 || destination == source) return;
    if constexpr (kHostAccessible<Exec>) {
      std::memcpy(destination, source, bytes);
    } else {
      using Host = Kokkos::DefaultHostExecutionSpace;
      const Exec &exec = this->exec();
      auto *to = static_cast<char *>(destination);
      const auto *from = static_cast<const char *>(source);
      const bool to_device = owns(to), from_device = owns(from);
      if (to_device && from_device)
        Kokkos::deep_copy(exec, Buffer<char, Exec>(to, bytes),
                          Buffer<const char, Exec>(from, bytes));
      else if (to_device)
        Kokkos::deep_copy(exec, Buffer<char, Exec>(to, bytes),
                          Buffer<const char, Host>(from, bytes));
      else if (from_device)
        Kokkos::deep_copy(exec, Buffer<char, Host>(to, bytes),
                          Buffer<const char, Exec>(from, bytes));
      else
        std::memcpy(destination, source, bytes);
      fence(exec);
    }
  }
  /// Host memory is MPI's own; device memory needs a GPU-aware MPI, which this backend does
  /// not ask about (the library's device path is the native backends').
  bool mpi_accepts_device_memory() const override { return kHostAccessible<Exec>; }

  void lower_bounds(const WireIndex *idx, std::size_t m, const std::uint64_t *keys,
                    std::size_t count, std::uint64_t *host_out, Stream) override {
    if constexpr (kHostAccessible<Exec>) {
      for (std::size_t j = 0; j < count; ++j) host_out[j] = count_below(idx, m, keys[j]);
    } else {
      using Host = Kokkos::DefaultHostExecutionSpace;
      if (count == 0) return;
      const Exec &exec = this->exec();
      const Kokkos::View<std::uint64_t *, Memory> bounds(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "dct::bounds"), count);
      Kokkos::deep_copy(exec, bounds, Buffer<const std::uint64_t, Host>(keys, count));
      Kokkos::parallel_for("dct_lower_bounds", range(exec, count),
                           kernel_logic::LowerBounds{idx, m, bounds.data(), bounds.data()});
      Kokkos::deep_copy(exec, Buffer<std::uint64_t, Host>(host_out, count), bounds);
      fence(exec);
    }
  }

  // The typed operations (compute_backend.hpp's list), each once for float and double.
  template <typename T>
  T kth_largest_abs(const T *send, const T *residual, std::size_t n, std::size_t k, Stream) {
    return kokkos::kth_largest_abs<T>(exec(), in(send, n), in(residual, n), k);
  }
  template <typename T>
  void gather_abs_sample(const T *send, const T *residual, std::size_t n, std::size_t m,
                         std::uint64_t seed, T *host_out, Stream) {
    sample_to_host(send, residual, n, m, seed, host_out);
  }
  template <typename T>
  Selected select(const T *send, T *residual, std::size_t n, T tau, std::size_t limit,
                  WireIndex *idx, T *val, std::size_t capacity, const SparseList<T> &pending,
                  Stream) {
    return kokkos::select<T>(exec(), in(send, n), Buffer<T, Exec>(residual, n), tau, limit,
                             Buffer<WireIndex, Exec>(idx, capacity), Buffer<T, Exec>(val, capacity),
                             capacity, pending);
  }
  template <typename T>
  Selected select_with_momentum(const T *send, const T *velocity, T momentum, T *velocity_out,
                                T *residual, std::size_t n, T tau, std::size_t limit,
                                WireIndex *idx, T *val, std::size_t capacity,
                                const SparseList<T> &pending, Stream) {
    return kokkos::select<T>(exec(), in(velocity_out, n), Buffer<T, Exec>(residual, n), tau, limit,
                             Buffer<WireIndex, Exec>(idx, capacity), Buffer<T, Exec>(val, capacity),
                             capacity, pending,
                             kokkos::VelocityPass<T>{send, velocity, momentum, velocity_out});
  }
  template <typename T>
  Trimmed<T> trim_candidates(const WireIndex *idx, const T *val, std::size_t m, std::size_t k,
                             std::size_t aim, ValueCoding coding, WireIndex *out_idx, T *out_val,
                             T *remainders, Stream) {
    return kokkos::trim<T>(exec(), idx, val, m, k, aim, coding, out_idx, out_val, remainders);
  }
  template <typename T>
  std::size_t keep_top(const WireIndex *idx, const T *val, std::size_t m, T tau, std::size_t limit,
                       ValueCoding coding, WireIndex *out_idx, T *out_val, T *remainders, Stream) {
    return kokkos::keep_top<T>(exec(), idx, val, m, tau, limit, coding, out_idx, out_val,
                               remainders);
  }
  template <typename T>
  void sum_lists(const SparseList<T> *lists, std::size_t count, T *out, std::size_t begin,
                 std::size_t end, Stream) {
    kokkos::sum_lists<T>(exec(), lists, count, out, begin, end);
  }
  template <typename T>
  void scatter_add(const WireIndex *idx, const T *val, std::size_t m, T *out, Stream) {
    for_each_index(exec(), "dct_scatter_add", m, kernel_logic::ScatterAdd<T>{idx, val, out});
  }
  template <typename T>
  void fill_zero(T *out, std::size_t n, Stream) {
    for_each_index(
        exec(), "dct_fill_zero", n, KOKKOS_LAMBDA(const std::int64_t i) { out[i] = T(0); });
  }
  template <typename T>
  void add(const T *x, T *sum, std::size_t n, Stream) {
    for_each_index(exec(), "dct_add", n, kernel_logic::Add<T>{x, sum});
  }
  template <typename T>
  void momentum_update(const T *send, const T *velocity, T momentum, T *out, std::size_t n,
                       Stream) {
    for_each_chunk(exec(), "dct_momentum", n,
                   kernel_logic::MomentumUpdate<T>{send, velocity, momentum, out});
  }
  template <typename T>
  void momentum_unroll(T *result, T *previous, T momentum, std::size_t n, Stream) {
    for_each_chunk(exec(), "dct_unroll", n,
                   kernel_logic::MomentumUnroll<T>{result, previous, momentum});
  }
  template <typename T>
  void scatter_zero(const WireIndex *idx, std::size_t m, T *out, Stream) {
    for_each_index(exec(), "dct_zero_at", m, kernel_logic::ScatterSet<T>{idx, nullptr, out});
  }
  // The wire codec and the sign coding themselves, on host memory (the library hands device
  // buffers to the native backends, which run them on the device; Kokkos' device spaces never
  // get one).
  template <typename T>
  void encode_block(const wire::BlockFormat &format, const WireIndex *idx, const T *val,
                    std::uint64_t begin, std::byte *out, Stream) {
    wire::encode_block(format, idx, val, begin, out);
  }
  template <typename T>
  void quantise_signs(const T *val, std::size_t m, T *wire, T *remainders, Stream) {
    sign_values::quantise_on_host(val, m, wire, remainders);
  }
  template <typename T>
  bool decode_block(const wire::BlockFormat &format, const std::byte *in, std::size_t in_bytes,
                    std::uint64_t begin, WireIndex *idx, T *val, Stream) {
    return wire::decode_block(format, in, in_bytes, begin, idx, val);
  }
  template <typename T>
  void decode_blocks(BlockToDecode<T> *blocks, std::size_t count, Stream) {
    for (std::size_t b = 0; b < count; ++b)
      blocks[b].valid = wire::decode_block(*blocks[b].format, blocks[b].in, blocks[b].in_bytes,
                                           blocks[b].begin, blocks[b].idx, blocks[b].val);
  }

 public:
  /// The instance every kernel runs on, made at first use (Kokkos must be up by then) and kept:
  /// from Kokkos 4 an instance holds a reference-counted handle, and making one per kernel
  /// allocated on every call. Dropped before Kokkos is finalized (kokkos_kernels.cpp).
  const Exec &exec() const {
    if (!exec_) exec_.emplace();
    return *exec_;
  }
  void release() { exec_.reset(); }

 private:
  /// A read-only View of n entries at `pointer` (empty for nullptr: a send of zeros).
  template <typename T>
  static Buffer<const T, Exec> in(const T *pointer, std::size_t n) {
    return Buffer<const T, Exec>(pointer, pointer ? n : 0);
  }

  template <typename T>
  void sample_to_host(const T *send, const T *residual, std::size_t n, std::size_t m,
                      std::uint64_t seed, T *host_out) {
    const Exec &exec = this->exec();
    if constexpr (kHostAccessible<Exec>) {
      kokkos::gather_abs_sample(exec, send, residual, n, seed, Buffer<T, Exec>(host_out, m));
    } else {
      const Kokkos::View<T *, Memory> sample(
          Kokkos::view_alloc(Kokkos::WithoutInitializing, "dct::sample"), m);
      kokkos::gather_abs_sample(exec, send, residual, n, seed, Buffer<T, Exec>(sample.data(), m));
      Kokkos::deep_copy(exec, Buffer<T, Kokkos::DefaultHostExecutionSpace>(host_out, m), sample);
      fence(exec);
    }
  }

  /// The allocation that holds `pointer`, or nullptr.
  const char *find_allocation(const void *pointer) const {
    const auto *address = static_cast<const char *>(pointer);
    const std::lock_guard<std::mutex> lock(mutex_);
    auto next = allocations_.upper_bound(address);
    if (next == allocations_.begin()) return nullptr;
    const auto &[begin, bytes] = *std::prev(next);
    return address < begin + (bytes > 0 ? bytes : 1) ? begin : nullptr;
  }

  mutable std::mutex mutex_;
  std::map<const char *, std::size_t> allocations_;  // device spaces: begin -> bytes
  mutable std::optional<Exec> exec_;
};

}  // namespace dct::detail::backends::kokkos
