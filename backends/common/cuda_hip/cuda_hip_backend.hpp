// The CUDA and HIP backends, written once (the idea of Ginkgo's common/cuda_hip): this file is
// included by backends/cuda/cuda_kernels.cu and by backends/hip/hip_kernels.hip after their
// cuda_api.hpp / hip_api.hpp, which defines DCT_GPU_NAMESPACE (cuda or hip), DCT_GPU_NAME,
// DCT_GPU_KIND and the functions of namespace api (memory, streams, errors, pointer attributes,
// inclusive_sum_of, the GPU-aware MPI query). Nothing here names a CUDA or HIP function directly;
// the kernel language is common to nvcc and hip-clang. Kernels are launched through
// DCT_GPU_LAUNCH so that tests/gpu_emulation can run this file on the host.
// The kernels are in kernels.hpp and block_codec.hpp, the selection's queued steps in
// selection_queue.hpp, the stream and scratch memory in stream_scratch.hpp; this file is the
// class that queues them, one member template per typed Backend operation.
//
// Errors: every failed runtime call throws dct::detail::Error with the runtime's error name and
// string. Out of memory is DCT_ERR_NO_MEMORY and recoverable (free something, retry). Every
// other error is DCT_ERR_INTERNAL; those the runtime calls sticky (illegal address, launch
// failure, assert, ECC, ...; api::is_sticky) corrupt the device context for the rest of the
// process, and the message says so: every later GPU call fails too.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>

#include "common/kernel_logic.hpp"
#include "core/compute_backend.hpp"
#include "core/elias_fano.hpp"
#include "core/error.hpp"
#include "core/float16.hpp"
#include "core/sign_values.hpp"
#include "core/wire.hpp"

#ifndef DCT_GPU_NAMESPACE
#error "include backends/cuda/cuda_api.hpp or backends/hip/hip_api.hpp first"
#endif

#ifndef DCT_GPU_LAUNCH
#define DCT_GPU_LAUNCH(kernel, grid, block, stream, ...) \
  kernel<<<(grid), (block), 0, (stream)>>>(__VA_ARGS__)
#endif

namespace dct::detail::DCT_GPU_NAMESPACE {
namespace {

// --- Launch helpers and kernels ----------------------------------------------------------
#include "common/cuda_hip/kernels.hpp"

// --- The sparse block codec ----------------------------------------------------------------
#include "common/cuda_hip/block_codec.hpp"

// --- Streams and scratch memory ----------------------------------------------------------
#include "common/cuda_hip/stream_scratch.hpp"

// --- The selection's queued steps ----------------------------------------------------------
#include "common/cuda_hip/selection_queue.hpp"

// --- The Backend ---------------------------------------------------------------------------

class GpuBackend final : public TypedBackend<GpuBackend> {
  friend class TypedBackend<GpuBackend>;  // calls the typed operations below

 public:
  GpuBackend() = default;
  GpuBackend(const GpuBackend &) = delete;
  GpuBackend &operator=(const GpuBackend &) = delete;
  /// The accessors never destroy their backend (the runtime may be gone at exit); a backend
  /// that is destroyed (tests/gpu_emulation) frees its scratch memory. Its stream stays.
  ~GpuBackend() override = default;

  DCT_Backend kind() const override { return DCT_GPU_KIND; }

  bool available() const override {
    std::call_once(available_once_, [this] {
      int count = 0;
      const api::error_t error = api::device_count(&count);
      if (error != api::success) (void)api::get_last_error();  // no driver, no device: clear
      available_ = error == api::success && count > 0;
    });
    return available_;
  }

  bool owns(const void *pointer) const override {
    if (pointer == nullptr || !available()) return false;
    bool device = false;
    if (api::is_device_pointer(pointer, &device) != api::success) {
      (void)api::get_last_error();  // unknown host memory on some runtimes: not ours
      return false;
    }
    return device;
  }

  void *allocate(std::size_t bytes) override { return allocate_device(bytes); }
  void deallocate(void *pointer) noexcept override { free_device(pointer); }
  void *allocate_host(std::size_t bytes) override { return allocate_pinned(bytes); }
  void deallocate_host(void *pointer) noexcept override { free_pinned(pointer); }

  void copy(void *destination, const void *source, std::size_t bytes, Stream stream) override {
    if (bytes == 0) return;
    const api::stream_t s = resolve(stream);
    check(api::copy_async(destination, source, bytes, s), "copy");
    if (!owns(destination) || !owns(source))  // host memory: readable or reusable on return
      check(api::stream_synchronize(s), "copy (synchronize)");
  }

  void synchronize(Stream stream) override {
    check(api::stream_synchronize(resolve(stream)), "synchronize");
  }
  Stream queue_of(Stream stream) override { return resolve(stream); }

  bool mpi_accepts_device_memory() const override {
    std::call_once(mpi_once_, [this] { mpi_aware_ = api::mpi_accepts_device_memory(); });
    return mpi_aware_;
  }

  void lower_bounds(const WireIndex *idx, std::size_t m, const std::uint64_t *keys,
                    std::size_t count, std::uint64_t *host_out, Stream stream) override {
    if (count == 0) return;
    const api::stream_t s = resolve(stream);
    std::lock_guard<std::mutex> lock(scratch_.mutex);
    const std::size_t bytes = count * sizeof(std::uint64_t);
    char *scratch = workspace(2 * aligned(bytes), s);
    auto *device_keys = reinterpret_cast<std::uint64_t *>(scratch);
    auto *bounds = reinterpret_cast<std::uint64_t *>(scratch + aligned(bytes));
    check(api::copy_async(device_keys, keys, bytes, s), "lower_bounds (keys)");
    for_each("lower_bounds", count, kernel_logic::LowerBounds{idx, m, device_keys, bounds}, s);
    check(api::copy_async(host_out, bounds, bytes, s), "lower_bounds (copy)");
    check(api::stream_synchronize(s), "lower_bounds");
  }

 private:
  api::stream_t resolve(Stream stream) { return scratch_.resolve(stream); }
  char *readback(std::size_t bytes) { return scratch_.readback(bytes); }
  char *workspace(std::size_t bytes, api::stream_t s) { return scratch_.workspace(bytes, s); }

  /// Backend's trim (keep_top at the k-th largest finite |value| with limit k, where more than
  /// k are finite: the composition tests/gpu_emulation checks it against) with one wait instead of
  /// four: the ranks, the threshold they give (trim_threshold, on the device), keep_top's count,
  /// scans and compaction at that threshold, all queued; then the ranks and the count read back
  /// together.
  template <typename T>
  Trimmed<T> trim_candidates(const WireIndex *idx, const T *val, std::size_t m, std::size_t k,
                             std::size_t aim, ValueCoding coding, WireIndex *out_idx, T *out_val,
                             T *remainders, Stream stream) {
    if (m == 0) return Trimmed<T>{};
    const api::stream_t s = resolve(stream);
    std::lock_guard<std::mutex> lock(scratch_.mutex);
    const std::size_t threshold_bytes = aligned(sizeof(DeviceThreshold<T>));
    const std::size_t ranks_part = ranks_bytes<T>();
    const std::size_t positions_part = positions_bytes<T>(nullptr, val, m, s);
    char *scratch = workspace(ranks_part + threshold_bytes + positions_part, s);
    auto *host = reinterpret_cast<unsigned long long *>(readback(6 * sizeof(unsigned long long)));
    const unsigned long long *nonfinite = nullptr;
    const SelectState<KeyBits<T>> *at_k = queue_ranks(val, m, k, aim, scratch, host, s, &nonfinite);
    auto *threshold = reinterpret_cast<DeviceThreshold<T> *>(scratch + ranks_part);
    DCT_GPU_LAUNCH(trim_threshold<T>, 1, 1, s, at_k, nonfinite, m, k, threshold);
    check_launch("trim (threshold)");
    const Positions<T> positions =
        queue_positions<T>(nullptr, val, m, T(0), threshold, k,
                           scratch + ranks_part + threshold_bytes, positions_part, host + 3, s);
    DCT_GPU_LAUNCH(keep_compact<T>, grid_for(m), kBlock, s, idx, val, m, positions.flag,
                   positions.inclusive, coding, out_idx, out_val, remainders);
    check_launch("trim (compact)");
    check(api::stream_synchronize(s), "trim");
    const CandidateRanks<T> ranks = ranks_read<T>(host, m, k, aim);
    Trimmed<T> trimmed{ranks.finite, ranks.kth, ranks.aimth, 0};
    if (ranks.finite > k) trimmed.kept = positions_read(host + 3).count;
    return trimmed;
  }

  template <typename T>
  T kth_largest_abs(const T *send, const T *residual, std::size_t n, std::size_t k, Stream stream) {
    using Bits = KeyBits<T>;
    require(k >= 1 && k <= n, DCT_ERR_INTERNAL, "kth_largest_abs: k out of range");
    const api::stream_t s = resolve(stream);
    std::lock_guard<std::mutex> lock(scratch_.mutex);
    const std::size_t histogram_bytes = aligned(kBins * sizeof(unsigned long long));
    char *scratch = workspace(histogram_bytes + aligned(sizeof(SelectState<Bits>)), s);
    auto *histogram = reinterpret_cast<unsigned long long *>(scratch);
    auto *state = reinterpret_cast<SelectState<Bits> *>(scratch + histogram_bytes);
    queue_radix_selection(send, residual, n, k, nullptr, state, histogram, s);
    auto *host_prefix = reinterpret_cast<Bits *>(readback(sizeof(Bits)));
    check(api::copy_async(host_prefix, &state->prefix, sizeof(Bits), s), "kth_largest_abs (copy)");
    check(api::stream_synchronize(s), "kth_largest_abs");
    return kernel_logic::threshold_of_key<T>(*host_prefix);
  }

  template <typename T>
  void gather_abs_sample(const T *send, const T *residual, std::size_t n, std::size_t m,
                         std::uint64_t seed, T *host_out, Stream stream) {
    if (m == 0) return;
    require(n > 0, DCT_ERR_INTERNAL, "gather_abs_sample: samples of an empty tensor");
    const api::stream_t s = resolve(stream);
    std::lock_guard<std::mutex> lock(scratch_.mutex);
    T *samples = reinterpret_cast<T *>(workspace(m * sizeof(T), s));
    for_each("gather_abs_sample", m,
             kernel_logic::GatherAbsSample<T>{send, residual, n, m, seed, samples}, s);
    check(api::copy_async(host_out, samples, m * sizeof(T), s), "gather_abs_sample (copy)");
    check(api::stream_synchronize(s), "gather_abs_sample");
  }

  /// queue_positions in the workspace, then the wait for what select returns.
  template <typename T>
  Positions<T> select_positions(const T *send, const T *residual, std::size_t n, T tau,
                                std::size_t limit, api::stream_t s, Selected &selected) {
    const std::size_t bytes = positions_bytes<T>(send, residual, n, s);
    char *scratch = workspace(bytes, s);
    auto *host = reinterpret_cast<unsigned long long *>(readback(3 * sizeof(unsigned long long)));
    const Positions<T> positions =
        queue_positions<T>(send, residual, n, tau, nullptr, limit, scratch, bytes, host, s);
    check(api::stream_synchronize(s), "select (scan)");
    selected = positions_read(host);
    return positions;
  }

  template <typename T>
  Selected select(const T *send, T *residual, std::size_t n, T tau, std::size_t limit,
                  WireIndex *idx, T *val, std::size_t capacity, const SparseList<T> &pending,
                  Stream stream) {
    if (n == 0) return Selected{};
    const api::stream_t s = resolve(stream);
    std::lock_guard<std::mutex> lock(scratch_.mutex);
    if (pending.size > 0) {  // a kernel of their own, before the pass (it reads the residual)
      for_each("select (pending writes)", pending.size,
               kernel_logic::ScatterSet<T>{pending.idx, pending.val, residual}, s);
    }
    Selected selected;
    const Positions<T> positions = select_positions(send, residual, n, tau, limit, s, selected);
    if (send != nullptr || capacity > 0) {  // else only counted: nothing to write
      DCT_GPU_LAUNCH(select_compact<T>, grid_for(n), kBlock, s, send, residual, n, positions.flag,
                     positions.inclusive, idx, val, capacity);
      check_launch("select (compact)");
    }
    return selected;
  }

  template <typename T>  // two kernels back to back (a fused pass is not measured on a GPU)
  Selected select_with_momentum(const T *send, const T *velocity, T momentum, T *velocity_out,
                                T *residual, std::size_t n, T tau, std::size_t limit,
                                WireIndex *idx, T *val, std::size_t capacity,
                                const SparseList<T> &pending, Stream stream) {
    momentum_update<T>(send, velocity, momentum, velocity_out, n, stream);
    return select<T>(velocity_out, residual, n, tau, limit, idx, val, capacity, pending, stream);
  }

  template <typename T>
  std::size_t keep_top(const WireIndex *idx, const T *val, std::size_t m, T tau, std::size_t limit,
                       ValueCoding coding, WireIndex *out_idx, T *out_val, T *remainders,
                       Stream stream) {
    if (m == 0) return 0;
    const api::stream_t s = resolve(stream);
    std::lock_guard<std::mutex> lock(scratch_.mutex);
    Selected selected;
    const Positions<T> positions = select_positions<T>(nullptr, val, m, tau, limit, s, selected);
    DCT_GPU_LAUNCH(keep_compact<T>, grid_for(m), kBlock, s, idx, val, m, positions.flag,
                   positions.inclusive, coding, out_idx, out_val, remainders);
    check_launch("keep_top (compact)");
    return selected.count;
  }

  template <typename T>
  void encode_block(const wire::BlockFormat &format, const WireIndex *idx, const T *val,
                    std::uint64_t begin, std::byte *out, Stream stream) {
    const BlockBits b = block_bits(format);
    const api::stream_t s = resolve(stream);
    if (b.words > 0) check(api::zero_async(out, 4 * b.words, s), "encode_block (zero)");
    auto *words = reinterpret_cast<unsigned int *>(out);
    if (b.entries > 0) {
      DCT_GPU_LAUNCH(encode_entries<T>, grid_for(b.entries), kBlock, s, b, idx, val, begin, words);
      check_launch("encode_block");
    }
  }

  // The verdicts need the device's: per block a flag and the count of set bits, all read back
  // together after every block's kernels were queued (one wait, however many peers).
  template <typename T>
  void decode_blocks(BlockToDecode<T> *blocks, std::size_t count, Stream stream) {
    const auto decodable = [](const BlockToDecode<T> &block) {
      return block.in_bytes >= block.format->bytes() && block.format->entries > 0;
    };
    const auto ones_of = [](const BlockToDecode<T> &block) {
      const BlockBits b = block_bits(*block.format);
      return ChunkOnes{b, reinterpret_cast<const unsigned int *>(block.in)};
    };
    const auto chunks_of = [](const ChunkOnes &ones) { return (ones.b.ones_bits + 31) / 32; };
    std::size_t queued = 0;
    for (std::size_t b = 0; b < count; ++b) queued += decodable(blocks[b]) ? 1 : 0;
    if (queued == 0) {
      for (std::size_t b = 0; b < count; ++b)
        blocks[b].valid = blocks[b].in_bytes >= blocks[b].format->bytes();
      return;
    }
    const api::stream_t s = resolve(stream);
    std::lock_guard<std::mutex> lock(scratch_.mutex);
    // One scratch buffer: a flag per block, each block's scanned chunk counts, the scan's storage
    // (one block's scan after another on the stream: they share it).
    std::size_t arrays_bytes = 0, scan_bytes = 0;
    for (std::size_t b = 0; b < count; ++b) {
      if (!decodable(blocks[b])) continue;
      const ChunkOnes ones = ones_of(blocks[b]);
      const std::size_t chunks = chunks_of(ones);
      if (chunks == 0) continue;
      std::size_t bytes = 0;
      check(api::inclusive_sum_of(nullptr, bytes, ones, chunks,
                                  static_cast<unsigned int *>(nullptr), s),
            "decode_block (scan size)");
      scan_bytes = bytes > scan_bytes ? bytes : scan_bytes;
      arrays_bytes += aligned(chunks * sizeof(unsigned int));
    }
    const std::size_t flags_bytes = aligned(count * sizeof(unsigned int));
    char *scratch = workspace(flags_bytes + arrays_bytes + aligned(scan_bytes), s);
    auto *failed = reinterpret_cast<unsigned int *>(scratch);
    char *array = scratch + flags_bytes;
    char *temporary = scratch + flags_bytes + arrays_bytes;
    // Pinned: each block's flag, then the ones its bitmap holds (its entries, where none).
    auto *host = reinterpret_cast<unsigned int *>(readback(2 * count * sizeof(unsigned int)));
    unsigned int *found = host + count;
    check(api::zero_async(failed, count * sizeof(unsigned int), s), "decode_block (flags)");
    for (std::size_t b = 0; b < count; ++b) {
      const BlockToDecode<T> &block = blocks[b];
      found[b] = static_cast<unsigned int>(block.format->entries);
      if (!decodable(block)) continue;
      const ChunkOnes ones = ones_of(block);
      const std::size_t chunks = chunks_of(ones);
      if (chunks > 0) {
        auto *inclusive = reinterpret_cast<unsigned int *>(array);
        array += aligned(chunks * sizeof(unsigned int));
        std::size_t bytes = scan_bytes;
        check(api::inclusive_sum_of(temporary, bytes, ones, chunks, inclusive, s),
              "decode_block (scan)");
        DCT_GPU_LAUNCH(decode_ones, grid_for(chunks), kBlock, s, ones, chunks, inclusive,
                       block.begin, block.idx, failed + b);
        check_launch("decode_block (indices)");
        check(api::copy_async(found + b, inclusive + (chunks - 1), sizeof(unsigned int), s),
              "decode_block (copy)");
      }
      DCT_GPU_LAUNCH(decode_entries<T>, grid_for(ones.b.entries), kBlock, s, ones.b, ones.words,
                     block.begin, block.idx, block.val, failed + b);
      check_launch("decode_block (values)");
      if (ones.b.indices != wire::IndexCoding::bitmap) {
        DCT_GPU_LAUNCH(check_increasing, grid_for(ones.b.entries), kBlock, s, ones.b.entries,
                       block.idx, failed + b);
        check_launch("decode_block (order)");
      }
      DCT_GPU_LAUNCH(check_padding, 1, 1, s, ones.b, ones.words, failed + b);
      check_launch("decode_block (padding)");
    }
    check(api::copy_async(host, failed, count * sizeof(unsigned int), s), "decode_block (copy)");
    check(api::stream_synchronize(s), "decode_block");
    for (std::size_t b = 0; b < count; ++b) {
      BlockToDecode<T> &block = blocks[b];
      block.valid =
          block.in_bytes >= block.format->bytes() &&
          (block.format->entries == 0 || (host[b] == 0 && found[b] == block.format->entries));
    }
  }

  template <typename T>
  void quantise_signs(const T *val, std::size_t m, T *wire, T *remainders, Stream stream) {
    if (m == 0) return;
    const api::stream_t s = resolve(stream);
    std::lock_guard<std::mutex> lock(scratch_.mutex);
    const std::size_t chunks = (m + sign_values::kChunk - 1) / sign_values::kChunk;
    const std::size_t magnitude_bytes = aligned(sizeof(sign_values::Magnitude<T>));
    char *scratch = workspace(magnitude_bytes + chunks * sizeof(sign_values::Partial), s);
    auto *magnitude = reinterpret_cast<sign_values::Magnitude<T> *>(scratch);
    auto *partials = reinterpret_cast<sign_values::Partial *>(scratch + magnitude_bytes);
    DCT_GPU_LAUNCH(sign_chunks_kernel<T>, grid_for(chunks), kBlock, s, val, m, chunks, partials);
    check_launch("quantise_signs (chunks)");
    DCT_GPU_LAUNCH(sign_magnitude_kernel<T>, 1, 1, s, partials, chunks, magnitude);
    check_launch("quantise_signs (magnitude)");
    DCT_GPU_LAUNCH(sign_entries_kernel<T>, grid_for(m), kBlock, s, val, m, magnitude, wire,
                   remainders);
    check_launch("quantise_signs (entries)");
  }

  template <typename T>
  void scatter_add(const WireIndex *idx, const T *val, std::size_t m, T *out, Stream stream) {
    for_each("scatter_add", m, kernel_logic::ScatterAdd<T>{idx, val, out}, stream);
  }

  template <typename T>
  void fill_zero(T *out, std::size_t n, Stream stream) {
    if (n == 0) return;
    const api::stream_t s = resolve(stream);
    check(api::zero_async(out, n * sizeof(T), s), "fill_zero");  // all-zero bits: +0.0
  }

  template <typename T>
  void add(const T *x, T *sum, std::size_t n, Stream stream) {
    for_each("add", n, kernel_logic::Add<T>{x, sum}, stream);
  }

  template <typename T>
  void momentum_update(const T *send, const T *velocity, T momentum, T *out, std::size_t n,
                       Stream stream) {
    for_each("momentum_update", n, kernel_logic::MomentumUpdate<T>{send, velocity, momentum, out},
             stream);
  }

  template <typename T>
  void momentum_unroll(T *result, T *previous, T momentum, std::size_t n, Stream stream) {
    for_each("momentum_unroll", n, kernel_logic::MomentumUnroll<T>{result, previous, momentum},
             stream);
  }

  template <typename T>
  void scatter_zero(const WireIndex *idx, std::size_t m, T *out, Stream stream) {
    for_each("scatter_zero", m, kernel_logic::ScatterSet<T>{idx, nullptr, out}, stream);
  }

  template <typename T>
  bool decode_block(const wire::BlockFormat &format, const std::byte *in, std::size_t in_bytes,
                    std::uint64_t begin, WireIndex *idx, T *val, Stream stream) {
    BlockToDecode<T> block{&format, in, in_bytes, begin, idx, val};
    decode_blocks(&block, 1, stream);
    return block.valid;
  }
  template <typename T>
  void sum_lists(const SparseList<T> *lists, std::size_t count, T *out, std::size_t begin,
                 std::size_t end, Stream stream) {
    // fill_zero, then scatter_add per list in list order: the Kokkos backend's bits. Its own
    // templates, not the Backend calls: GCC 12 at -O3 devirtualised those calls made on *this
    // into code that wrote nothing (the emulated backend in tests/gpu_emulation; -O0, -O1 and
    // -fno-devirtualize were right).
    if (end > begin) fill_zero(out + begin, end - begin, stream);
    for (std::size_t l = 0; l < count; ++l)
      scatter_add(lists[l].idx, lists[l].val, lists[l].size, out, stream);
  }

  /// body(i) for i < n (kernel_logic's element-wise kernels), queued on the stream.
  template <typename Body>
  void for_each(const char *what, std::size_t n, const Body &body, Stream stream) {
    if (n == 0) return;
    DCT_GPU_LAUNCH(for_each_kernel<Body>, grid_for(n), kBlock, resolve(stream), body, n);
    check_launch(what);
  }

  mutable std::once_flag available_once_;
  mutable bool available_ = false;
  mutable std::once_flag mpi_once_;
  mutable bool mpi_aware_ = false;

  StreamScratch scratch_;  // the stream, the workspace and the readback buffer
};

}  // namespace
}  // namespace dct::detail::DCT_GPU_NAMESPACE
