// The compression kernel interface, and only it: what every backend implements and how a
// call picks its backend. One implementation per backend directory:
// backends/kokkos/ (Kokkos' default host execution space), backends/cuda/ (native CUDA + CUB)
// and backends/hip/ (native HIP + rocPRIM), the last two compiled from one source tree
// (backends/common/cuda_hip/). A backend that was not compiled is a stub whose accessor
// returns nullptr; asking for it by name gives DCT_ERR_NOT_COMPILED.
//
// Keep rule, shared by every kernel and documented in dct.h: at a threshold tau an entry is
// sent iff !(|acc| < tau) && acc != 0. Zeros carry nothing, and NaN/Inf are always sent so that
// they reach the result as they would through MPI_Allreduce. An exact selection of the top k
// (Backend::select and keep_top with a `limit`) breaks ties at tau by index: of the entries with
// |acc| == tau the lowest indices are sent, as many as make k finite entries, so exactly k go
// out whatever the values (constant tensors, small integers, 16-bit-rounded gradients).
//
// What the library decides with these kernels (when a sampled threshold pays, for instance)
// lives with the callers: threshold.hpp, gradient_compressor.cpp. The exchanges, which work on
// host buffers, run their kernels through the host backend handed to them (SparseInput::host).
//
// Private header of src/: include it from library sources only.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include "core/float16.hpp"
#include "core/internal_api.hpp"
#include "dct/dct.h"

namespace dct::detail {

/// Index type on the wire; it bounds a compressed tensor to DCT_MAX_COUNT elements.
using WireIndex = std::uint32_t;

/// A backend's queue of work: cudaStream_t / hipStream_t, nullptr on the host. dct never uses
/// the legacy default stream: a null stream on a GPU backend means the backend's own stream.
using Stream = void *;

// fabs, not a sign test: gradient signs are coin flips, and a branch on them mispredicts half
// the time (measured: docs/internals.md, measured reasons).
template <typename T>
DCT_HOST_DEVICE inline bool keep_entry(T acc, T tau) {
  return !(std::fabs(acc) < tau) && acc != T(0);
}

/// How many of the m increasing indices `idx` lie below `key`: std::lower_bound's position, in
/// the one binary search every backend's Backend::lower_bounds runs.
DCT_HOST_DEVICE inline std::size_t count_below(const WireIndex *idx, std::size_t m,
                                               std::uint64_t key) {
  std::size_t low = 0, high = m;
  while (low < high) {
    const std::size_t middle = low + (high - low) / 2;
    if (idx[middle] < key)
      low = middle + 1;
    else
      high = middle;
  }
  return low;
}

/// `limit` of a selection that keeps every entry at the threshold (Backend::select).
inline constexpr std::size_t kEveryTie = ~std::size_t(0);

/// What Backend::select found: entries selected (written or not) and how many are NaN or Inf.
struct Selected {
  std::size_t count = 0;
  std::size_t nonfinite = 0;
};

/// Of a candidate list, the finite entries and two of their ranks (what a trim needs).
template <typename T>
struct CandidateRanks {
  std::size_t finite = 0;  ///< entries that are neither NaN nor +-Inf
  T kth = T(0);            ///< the k-th largest finite |value| (0 if fewer than k are finite)
  T aimth = T(0);          ///< the aim-th largest finite |value| (0 if fewer than aim are)
};

/// Backend::trim_candidates: what the candidates of a call held, and how many it kept.
template <typename T>
struct Trimmed {
  std::size_t finite = 0;  ///< candidates neither NaN nor +-Inf
  T kth = T(0);            ///< the k-th largest finite |value| (0 if fewer than k are finite)
  T aimth = T(0);          ///< about the aim-th largest (0 if fewer than aim are finite)
  std::size_t kept = 0;    ///< entries kept (k and every NaN/Inf); 0 unless finite > k
};

/// One sorted list of (index, value) entries, for Backend::sum_lists and the pending writes of
/// Backend::select (there val may be nullptr: zeros).
template <typename T>
struct SparseList {
  const WireIndex *idx = nullptr;
  const T *val = nullptr;
  std::size_t size = 0;
};

/// Position of sample j (0 <= j < m) among n elements: one uniformly random position in each of
/// m equal strata (stratified sampling: no aliasing with periodic layouts such as the columns
/// of a matrix, and monotone addresses). Identical on every backend for the same seed.
DCT_HOST_DEVICE inline std::size_t sample_position(std::size_t j, std::size_t m, std::size_t n,
                                                   std::uint64_t seed) {
  // j * n / m without overflow (m <= 2^24, see dct_sample_size): j q + j r / m, n = q m + r.
  const std::size_t q = n / m, r = n % m;
  const std::size_t begin = j * q + j * r / m;
  const std::size_t end = (j + 1) * q + (j + 1) * r / m;
  // splitmix64 of (seed, j)
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ull * (j + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return begin + static_cast<std::size_t>(z % (end - begin));
}

namespace wire {
struct BlockFormat;  // wire.hpp
}

/// One block for Backend::decode_blocks: decode_block's arguments, and its verdict.
template <typename T>
struct BlockToDecode {
  const wire::BlockFormat *format;
  const std::byte *in;
  std::size_t in_bytes;
  std::uint64_t begin;
  WireIndex *idx;
  T *val;
  bool valid = false;  ///< written by decode_blocks: decode_block's verdict
};

// The typed operations of every backend, for T = float and double: the one list of them.
// Backend declares them from it, TypedBackend forwards them to a backend's member templates.
// X(T, result, name, (parameters), (arguments)).
//
// kth_largest_abs: the k-th largest |send[i] + residual[i]| (1 <= k <= n), exact, O(n) radix
//   selection. NaN ranks above +Inf; a NaN result is returned as +Inf. `send` may be nullptr
//   (zeros).
// gather_abs_sample: |send[p] + residual[p]| at the m positions sample_position(j, m, n, seed),
//   into `host_out` (host memory, m values).
// select: the one pass over the tensor. First the previous call's `pending` writes:
//   residual[pending.idx[j]] = pending.val[j] (0 where val is nullptr; sorted, distinct). Then
//   acc = send + residual is stored into the residual (with send == nullptr the residual holds
//   acc already and is only read), and the entries that keep_entry(acc, tau, limit) selects
//   are written in index order as (idx, acc), the first `capacity` of them. Returns how many it
//   selected (possibly more than capacity) and how many of those are NaN or +-Inf.
// select_with_momentum: momentum_update(send, velocity, momentum, velocity_out, n), then select
//   with velocity_out as its send: the same bits, in one pass where the backend fuses them (the
//   Kokkos backend updates the velocity a cache-sized chunk ahead of the selection that reads
//   it; a GPU runs the two kernels back to back). velocity_out must not overlap the others.
// trim_candidates: of the m candidates (idx, val = acc), in index order: the finite count, the
//   k-th largest finite |val| and about the aim-th (exact, or from a sample: it only steers the
//   next call's floor). With more than k finite, keep_top at the k-th with limit k: exactly the
//   top k finite (ties to the lowest indices) and every NaN/Inf; otherwise nothing is written
//   and `kept` is 0: keep_top at the k-th largest finite |val| with limit k, the ranks from
//   select at tau = Inf (exactly the NaN and +-Inf) and kth_largest_abs past them.
// keep_top: the candidates (idx, val = acc) that keep_entry(acc, tau, limit) selects, in index
//   order, into out_idx / out_val as (idx, wire_value(acc)), and what the wire does not carry
//   of each, wire_remainder(acc, wire_value(acc)), into `remainders` (the next call's pending
//   writes; nullptr: not written, the caller knows them to be 0). Returns how many it kept
//   (<= m). The outputs must not overlap the inputs.
// sum_lists: out[i] = the sum of the lists' values at i (in list order, from +0), for i in
//   [begin, end); each list sorted, its indices distinct and in [begin, end) (the caller
//   validated them). `lists` is host memory, their arrays the backend's; the same bits as
//   fill_zero, then scatter_add of each list in list order.
// encode_block: wire::encode_block in this backend's memory: the block of the `format.entries`
//   entries idx/val (indices in [begin, begin + format.range), increasing; values already the
//   wire's), format.units() units into `out`, the same bytes (host backends: that function).
// quantise_signs: dct_values=sign (core/sign_values.hpp): the m kept values `val` as they
//   travel, +-w, into `wire`, and what stays in the residual into `remainders`; the magnitude
//   summed in its fixed order, so the same bits on every backend.
// decode_block: wire::decode_block in this backend's memory: the same validation and verdict on
//   the `in_bytes` bytes at `in` (false leaves idx/val unspecified).
// decode_blocks: decode_block of each of `count` blocks (a host array), its verdict into its
//   `valid`: what a rank does with every peer's block at once (on a GPU: one wait for all).
// scatter_add: out[idx[j]] += val[j] for j < m; indices validated by the caller (distinct, < n).
// fill_zero: out[i] = 0 for i < n.
// add: sum[i] += x[i] for i < n.
// momentum_update: momentum correction (dct_momentum): out[i] = momentum * v + send[i], i < n,
//   where v is velocity[i] if finite, else 0: a non-finite entry is delivered once, then
//   forgotten.
// momentum_unroll: dct_momentum_result=gradient, for i < n: u = result[i];
//   result[i] = u - momentum * p; previous[i] = u, where p is previous[i] if finite, else 0 (a
//   heavy-ball momentum of the results gives the updates; a non-finite update is not carried
//   into the next result).
// scatter_zero: out[idx[j]] = 0 for j < m; indices validated by the caller (< n).
#define DCT_BACKEND_TYPED_OPERATIONS(X, T)                                                         \
  X(T, T, kth_largest_abs,                                                                         \
    (const T *send, const T *residual, std::size_t n, std::size_t k, Stream stream),               \
    (send, residual, n, k, stream))                                                                \
  X(T, void, gather_abs_sample,                                                                    \
    (const T *send, const T *residual, std::size_t n, std::size_t m, std::uint64_t seed,           \
     T *host_out, Stream stream),                                                                  \
    (send, residual, n, m, seed, host_out, stream))                                                \
  X(T, Selected, select,                                                                           \
    (const T *send, T *residual, std::size_t n, T tau, std::size_t limit, WireIndex *idx, T *val,  \
     std::size_t capacity, const SparseList<T> &pending, Stream stream),                           \
    (send, residual, n, tau, limit, idx, val, capacity, pending, stream))                          \
  X(T, Selected, select_with_momentum,                                                             \
    (const T *send, const T *velocity, T momentum, T *velocity_out, T *residual, std::size_t n,    \
     T tau, std::size_t limit, WireIndex *idx, T *val, std::size_t capacity,                       \
     const SparseList<T> &pending, Stream stream),                                                 \
    (send, velocity, momentum, velocity_out, residual, n, tau, limit, idx, val, capacity, pending, \
     stream))                                                                                      \
  X(T, Trimmed<T>, trim_candidates,                                                                \
    (const WireIndex *idx, const T *val, std::size_t m, std::size_t k, std::size_t aim,            \
     ValueCoding coding, WireIndex *out_idx, T *out_val, T *remainders, Stream stream),            \
    (idx, val, m, k, aim, coding, out_idx, out_val, remainders, stream))                           \
  X(T, std::size_t, keep_top,                                                                      \
    (const WireIndex *idx, const T *val, std::size_t m, T tau, std::size_t limit,                  \
     ValueCoding coding, WireIndex *out_idx, T *out_val, T *remainders, Stream stream),            \
    (idx, val, m, tau, limit, coding, out_idx, out_val, remainders, stream))                       \
  X(T, void, sum_lists,                                                                            \
    (const SparseList<T> *lists, std::size_t count, T *out, std::size_t begin, std::size_t end,    \
     Stream stream),                                                                               \
    (lists, count, out, begin, end, stream))                                                       \
  X(T, void, encode_block,                                                                         \
    (const wire::BlockFormat &format, const WireIndex *idx, const T *val, std::uint64_t begin,     \
     std::byte *out, Stream stream),                                                               \
    (format, idx, val, begin, out, stream))                                                        \
  X(T, void, quantise_signs, (const T *val, std::size_t m, T *wire, T *remainders, Stream stream), \
    (val, m, wire, remainders, stream))                                                            \
  X(T, bool, decode_block,                                                                         \
    (const wire::BlockFormat &format, const std::byte *in, std::size_t in_bytes,                   \
     std::uint64_t begin, WireIndex *idx, T *val, Stream stream),                                  \
    (format, in, in_bytes, begin, idx, val, stream))                                               \
  X(T, void, decode_blocks, (BlockToDecode<T> * blocks, std::size_t count, Stream stream),         \
    (blocks, count, stream))                                                                       \
  X(T, void, scatter_add,                                                                          \
    (const WireIndex *idx, const T *val, std::size_t m, T *out, Stream stream),                    \
    (idx, val, m, out, stream))                                                                    \
  X(T, void, fill_zero, (T * out, std::size_t n, Stream stream), (out, n, stream))                 \
  X(T, void, add, (const T *x, T *sum, std::size_t n, Stream stream), (x, sum, n, stream))         \
  X(T, void, momentum_update,                                                                      \
    (const T *send, const T *velocity, T momentum, T *out, std::size_t n, Stream stream),          \
    (send, velocity, momentum, out, n, stream))                                                    \
  X(T, void, momentum_unroll,                                                                      \
    (T * result, T * previous, T momentum, std::size_t n, Stream stream),                          \
    (result, previous, momentum, n, stream))                                                       \
  X(T, void, scatter_zero, (const WireIndex *idx, std::size_t m, T *out, Stream stream),           \
    (idx, m, out, stream))

/// The kernels and memory operations of one backend. Pointers passed to a backend live in
/// its memory space (device memory for CUDA/HIP, host memory for Kokkos on the host), except
/// where a parameter says host.
///
/// Ordering: a call that gives the host something (a return value, host memory written or read:
/// `copy` with a host end, `lower_bounds`, `kth_largest_abs`, `gather_abs_sample`, the counts of
/// `select` (and `select_with_momentum`), `keep_top` and `trim_candidates`, the verdict of
/// `decode_block`) waits for `stream`, so what it returns or wrote can be read at once, and so can
/// everything queued before it. A call that only writes the backend's memory (`copy` between two of
/// its buffers, `encode_block`, `quantise_signs`, `scatter_add`, `sum_lists`, `fill_zero`,
/// `momentum_update`, `momentum_unroll`, `scatter_zero`, and the entries (and velocity) the
/// selections and `keep_top` write) is only queued on `stream`: later calls on the same stream see
/// its results, the host and MPI only after the next waiting call or `synchronize(stream)`. A GPU
/// between two such kernels then runs them back to back, without a round trip to the host (a few
/// microseconds each on a GPU). The Kokkos backend finishes every call before it returns (it
/// fences).
class Backend {
 public:
  virtual ~Backend() = default;

  virtual DCT_Backend kind() const = 0;
  /// False when the backend was compiled but cannot run here (no GPU, or no driver).
  virtual bool available() const = 0;

  /// True iff `pointer` is memory of this backend's device (never true for Kokkos-host).
  virtual bool owns(const void *pointer) const = 0;

  /// Memory of the backend's space; throws DCT_ERR_NO_MEMORY.
  virtual void *allocate(std::size_t bytes) = 0;
  virtual void deallocate(void *pointer) noexcept = 0;
  /// Host memory for staging copies (pinned on GPU backends).
  virtual void *allocate_host(std::size_t bytes) = 0;
  virtual void deallocate_host(void *pointer) noexcept = 0;
  /// Copies between any two of: this backend's memory, host memory.
  virtual void copy(void *destination, const void *source, std::size_t bytes, Stream stream) = 0;
  /// Waits until everything queued on `stream` is done: before MPI reads or writes this
  /// backend's memory, and before a dct call returns.
  virtual void synchronize(Stream stream) = 0;
  /// The queue this backend's calls given `stream` run on: `stream`, or on a GPU backend its own
  /// stream where `stream` is nullptr. Work another library queues in order with dct's kernels
  /// (the NCCL transport) goes there, so that no wait is needed between them.
  virtual Stream queue_of(Stream stream) { return stream; }

  /// Whether MPI can read and write this backend's memory directly (GPU-aware MPI).
  virtual bool mpi_accepts_device_memory() const = 0;

  /// count_below(idx, m, keys[j]) for the `count` keys (host memory) into `host_out` (host
  /// memory): where split cuts a rank's sorted indices at its segment boundaries and counts
  /// them per histogram bucket, when the indices lie in this backend's memory.
  virtual void lower_bounds(const WireIndex *idx, std::size_t m, const std::uint64_t *keys,
                            std::size_t count, std::uint64_t *host_out, Stream stream) = 0;

  // The typed operations, declared from the one list of them (DCT_BACKEND_TYPED_OPERATIONS).
#define DCT_BACKEND_DECLARE(T, result, name, parameters, arguments) \
  virtual result name parameters = 0;
  DCT_BACKEND_TYPED_OPERATIONS(DCT_BACKEND_DECLARE, float)
  DCT_BACKEND_TYPED_OPERATIONS(DCT_BACKEND_DECLARE, double)
#undef DCT_BACKEND_DECLARE
};

/// A Backend whose typed operations are `Implementation`'s member templates of the same names
/// and parameters (`template <typename T> Selected select(...)`), for float and double: each
/// backend writes an operation once, and a missing or mistyped one fails to compile here.
template <typename Implementation>
class TypedBackend : public Backend {
#define DCT_BACKEND_FORWARD(T, result, name, parameters, arguments)         \
  result name parameters final {                                            \
    return static_cast<Implementation *>(this)->template name<T> arguments; \
  }
  DCT_BACKEND_TYPED_OPERATIONS(DCT_BACKEND_FORWARD, float)
  DCT_BACKEND_TYPED_OPERATIONS(DCT_BACKEND_FORWARD, double)
#undef DCT_BACKEND_FORWARD
};

/// An array in a backend's memory (device memory on a GPU backend, or pinned host memory with
/// `host` set), freed with it. Contents are uninitialized.
template <typename T>
class BackendArray {
 public:
  BackendArray() = default;
  BackendArray(Backend &backend, std::size_t size, bool host = false)
      : backend_(&backend), host_(host), size_(size) {
    data_ = static_cast<T *>(host ? backend.allocate_host(size * sizeof(T))
                                  : backend.allocate(size * sizeof(T)));
  }
  BackendArray(BackendArray &&other) noexcept { swap(other); }
  BackendArray &operator=(BackendArray &&other) noexcept {
    BackendArray(std::move(other)).swap(*this);
    return *this;
  }
  ~BackendArray() {
    if (data_ == nullptr) return;
    if (host_)
      backend_->deallocate_host(data_);
    else
      backend_->deallocate(data_);
  }

  /// Grows to at least `size` elements, keeping the first `keep` ones.
  void grow(std::size_t size, std::size_t keep) {
    if (size <= size_) return;
    BackendArray bigger(*backend_, size, host_);
    if (keep > 0) backend_->copy(bigger.data_, data_, keep * sizeof(T), nullptr);
    swap(bigger);
  }

  /// Makes room for at least `size` elements of `backend`'s memory (not pinned), contents lost:
  /// a quarter more than asked when it must grow, so that sizes creeping up from call to call
  /// reallocate rarely (as wire::reserve_growing does for vectors).
  void reserve_growing(Backend &backend, std::size_t size) {
    if (size_ < size) *this = BackendArray(backend, size + size / 4);
  }

  T *data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void swap(BackendArray &other) noexcept {
    std::swap(backend_, other.backend_);
    std::swap(host_, other.host_);
    std::swap(size_, other.size_);
    std::swap(data_, other.data_);
  }

  Backend *backend_ = nullptr;
  bool host_ = false;
  std::size_t size_ = 0;
  T *data_ = nullptr;
};

namespace backends {

/// The compiled backends; nullptr when not compiled (the stubs in backends/*/*_stub.cpp).
DCT_INTERNAL_API Backend *kokkos_backend();
DCT_INTERNAL_API Backend *cuda_backend();
DCT_INTERNAL_API Backend *hip_backend();

/// The backend that runs the kernels for `buffer`: `requested` if not DCT_BACKEND_AUTO (throws
/// DCT_ERR_NOT_COMPILED if it was not compiled), else the GPU backend that owns the pointer,
/// else Kokkos on the host. Throws DCT_ERR_BUFFER if a forced host backend is given device
/// memory or the reverse.
Backend &backend_for(const void *buffer, DCT_Backend requested);

/// Makes sure the host backend's runtime (Kokkos) is up; returns true if this call started it.
DCT_INTERNAL_API bool initialize_runtime();
/// Shuts down what initialize_runtime started; no-op if the application owns the runtime.
DCT_INTERNAL_API void finalize_runtime();

}  // namespace backends
}  // namespace dct::detail
