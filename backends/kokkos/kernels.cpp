// The Kokkos backend: compression kernels on Kokkos' default host execution space (Serial,
// OpenMP or Threads, whichever Kokkos was built with), on host memory. Written against the API
// common to Kokkos 3.4 and 4.x.
#include <Kokkos_Core.hpp>
#include <Kokkos_ScatterView.hpp>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <type_traits>
#include <vector>

#include "error.hpp"
#include "kernels.hpp"

namespace dct::detail::kernels {
namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<std::int64_t>>;

Policy range(std::size_t n) {
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

// Exact selection, usually in one pass over the data: a small sample gives a lower bound that
// the k-th largest |acc| exceeds with overwhelming probability, one pass copies the keys at or
// above it (a few times k of them), and the k-th largest among those is the answer whenever
// there are at least k. Otherwise (a sample that lied, or a bound that lets too many through)
// two passes: a histogram of the top bits of |acc| finds the bucket that holds the k-th largest
// and a second pass copies that bucket's keys. Either way, radix rounds over the candidates
// alone narrow them further while they are many, and std::nth_element finishes. The later
// radix passes of a textbook radix select would each read all of n again.
constexpr int kDigitBits = 11;
constexpr std::size_t kBuckets = std::size_t(1) << kDigitBits;

/// The first pass's digit: 11 bits of a float (8 of exponent, 3 of mantissa), 14 of a double
/// (11 of exponent, 3 of mantissa): the same resolution, so that the bucket of the k-th largest
/// stays a small share of n for doubles too (measured: 15% of n with 11 bits on Gaussian data,
/// whose copy then cost more than the histogram pass).
template <typename T>
struct FirstDigit {
  static constexpr int bits = sizeof(T) == 4 ? 11 : 14;
  static constexpr std::size_t buckets = std::size_t(1) << bits;
  static constexpr int lanes = sizeof(T) == 4 ? 4 : 2;  // interleaved counters: 32/128 KiB
  static constexpr std::int64_t chunk = sizeof(T) == 4 ? 1 << 16 : 1 << 18;
  static constexpr int shift = 8 * int(sizeof(T)) - 1 - bits;
};

template <typename T>
KOKKOS_INLINE_FUNCTION std::uint32_t top_digit(KeyBits<T> key) {
  return static_cast<std::uint32_t>(key >> FirstDigit<T>::shift);
}

/// Candidate keys of the last selection on this thread, kept so that their pages are not
/// faulted in again on every call (a fresh 40 MB buffer cost ~100 ms in a VM).
template <typename Bits>
std::vector<Bits> &candidate_buffer() {
  static thread_local std::vector<Bits> buffer;
  return buffer;
}

// Narrows the candidates (keys that agree above bit `high`) to the next 11-bit digit's bucket
// that holds the rank-th largest, in place, while they are many: a bucket of the first pass can
// hold a large share of n (double's top 11 bits are its exponent alone; data that all lies in
// one binade), and each round costs one pass over the survivors only. Returns how many are
// left; `rank` becomes their rank among them.
template <typename Bits>
std::size_t refine_candidates(Bits *keys, std::size_t count, std::size_t &rank, int high) {
  std::vector<std::size_t> histogram(kBuckets);
  while (count > 4096 && high > 0) {
    const int width = high < kDigitBits ? high : kDigitBits;
    const int shift = high - width;
    const Bits digit_mask = (Bits(1) << width) - 1;
    std::fill(histogram.begin(), histogram.end(), 0);
    for (std::size_t j = 0; j < count; ++j) ++histogram[(keys[j] >> shift) & digit_mask];
    std::size_t above = 0;
    Bits digit = digit_mask;
    while (above + histogram[digit] < rank) above += histogram[digit--];
    std::size_t survivors = 0;
    for (std::size_t j = 0; j < count; ++j)
      if (((keys[j] >> shift) & digit_mask) == digit) keys[survivors++] = keys[j];
    rank -= above;
    count = survivors;
    high = shift;
  }
  return count;
}

/// Keys that many work items append to one buffer, each through a local batch of kBatch; keys
/// past `capacity` are counted but not stored.
template <typename Bits>
class CandidateSink {
 public:
  static constexpr std::size_t kBatch = 256;
  CandidateSink(Bits *keys, std::size_t capacity) : keys_(keys), capacity_(capacity) {}
  void append(const Bits *found, std::size_t count) const {
    const std::uint64_t at = Kokkos::atomic_fetch_add(&filled_(), std::uint64_t(count));
    if (at + count <= capacity_)
      for (std::size_t j = 0; j < count; ++j) keys_[at + j] = found[j];
  }
  /// Keys appended, stored or not (read after a fence).
  std::size_t filled() const { return filled_(); }
  bool overflowed() const { return filled() > capacity_; }

 private:
  Bits *keys_;
  std::size_t capacity_;
  Kokkos::View<std::uint64_t, Kokkos::HostSpace> filled_{"dct::filled"};
};

/// The k-th largest (rank, 1-based) of `count` keys that agree above bit `high`, reordering them;
/// NaN patterns rank above +Inf and come back as +Inf.
template <typename T>
T kth_largest_key(KeyBits<T> *keys, std::size_t count, std::size_t rank, int high) {
  using Bits = KeyBits<T>;
  const std::size_t kept = refine_candidates<Bits>(keys, count, rank, high);
  std::nth_element(keys, keys + (rank - 1), keys + kept, std::greater<Bits>());
  T tau;
  const Bits bits = keys[rank - 1];
  std::memcpy(&tau, &bits, sizeof tau);
  return tau != tau ? std::numeric_limits<T>::infinity() : tau;
}

/// A lower bound for the k-th largest |acc| from a stratified sample of kBoundSample keys, and
/// how many keys it may let through (twice the sampled share). The key at sample rank
/// k m / n + 5 sigma + 2 lies below the k-th largest unless the sample misrepresents the tensor
/// badly; when it does, fewer than k keys pass and the caller notices.
template <typename T>
struct LowerBound {
  bool usable = false;
  T value = T(0);
  std::size_t capacity = 0;
};
/// 2048 keys cost ~0.1% of a 4 MiB tensor's pass; below kBoundFrom entries the second pass of
/// the histogram method reads data still in cache and a bound saves little.
constexpr std::size_t kBoundSample = 2048;
constexpr std::size_t kBoundFrom = std::size_t(1) << 18;

template <typename T>
LowerBound<T> sampled_lower_bound(const T *send, const T *residual, std::size_t n, std::size_t k) {
  using Bits = KeyBits<T>;
  LowerBound<T> bound;
  constexpr std::size_t m = kBoundSample;
  if (n < kBoundFrom) return bound;
  const double p = double(k) / double(n);
  const double last = p * double(m) - 1 + 5 * std::sqrt(double(m) * p * (1 - p)) + 2;
  if (last >= double(m - 1)) return bound;  // k is a large share of n: nearly everything passes
  Bits sample[m];
  for (std::size_t j = 0; j < m; ++j) {
    const std::size_t i = sample_position(j, m, n, 0x5eed);
    sample[j] = abs_key<T>((send ? send[i] : T(0)) + residual[i]);
  }
  Bits *const at = sample + static_cast<std::size_t>(std::ceil(last));
  std::nth_element(sample, at, sample + m, std::greater<Bits>());
  std::memcpy(&bound.value, at, sizeof(T));
  if (bound.value != bound.value) return bound;  // a NaN bound would let everything through
  const std::size_t passing = static_cast<std::size_t>(at - sample) + 1;
  bound.capacity = 2 * passing * (n / m + 1) + 4096;
  bound.usable = bound.capacity <= n / 4;
  return bound;
}

/// Appends the keys of |acc| >= bound (and NaN) to `sink`: read-only, at filter speed.
template <typename T, bool kHasSend>
void copy_keys_at_least(const T *send, const T *residual, std::size_t n, T bound,
                        const CandidateSink<KeyBits<T>> &sink) {
  using Bits = KeyBits<T>;
  const std::int64_t chunks = static_cast<std::int64_t>((n + kFilterChunk - 1) / kFilterChunk);
  Kokkos::parallel_for(
      "dct::select_above_bound", Policy(0, chunks), KOKKOS_LAMBDA(const std::int64_t c) {
        const std::size_t begin = static_cast<std::size_t>(c) * kFilterChunk;
        const std::size_t end = begin + kFilterChunk < n ? begin + kFilterChunk : n;
        Bits found[CandidateSink<Bits>::kBatch];
        std::size_t count = 0;
        auto take = [&](std::size_t i) {
          found[count++] = abs_key<T>((kHasSend ? send[i] : T(0)) + residual[i]);
        };
        std::size_t block = begin;
        for (; block + kFilterBlock <= end; block += kFilterBlock) {
          unsigned mask = block_mask<BlockPass::select, kHasSend, T>(
              kHasSend ? send + block : nullptr, residual + block, nullptr, bound);
          while (mask != 0) {
            take(block + static_cast<std::size_t>(__builtin_ctz(mask)));
            mask &= mask - 1;
          }
          if (count > CandidateSink<Bits>::kBatch - kFilterBlock) {
            sink.append(found, count);
            count = 0;
          }
        }
        for (std::size_t i = block; i < end; ++i)
          if (!(std::fabs((kHasSend ? send[i] : T(0)) + residual[i]) < bound)) take(i);
        sink.append(found, count);
      });
  Exec().fence();
}

template <typename T>
T kth_largest_abs_impl(const T *send, const T *residual, std::size_t n, std::size_t k) {
  using Bits = KeyBits<T>;
  using Digit = FirstDigit<T>;
  require(k >= 1 && k <= n, DCT_ERR_INTERNAL, "kth_largest_abs: k out of range");
  std::vector<Bits> &buffer = candidate_buffer<Bits>();

  const LowerBound<T> bound = sampled_lower_bound(send, residual, n, k);
  if (bound.usable) {
    if (buffer.size() < bound.capacity) buffer.resize(bound.capacity);
    const CandidateSink<Bits> sink(buffer.data(), bound.capacity);
    if (send)
      copy_keys_at_least<T, true>(send, residual, n, bound.value, sink);
    else
      copy_keys_at_least<T, false>(send, residual, n, bound.value, sink);
    if (!sink.overflowed() && sink.filled() >= k)
      return kth_largest_key<T>(buffer.data(), sink.filled(), k, 8 * int(sizeof(T)) - 1);
  }

  const std::int64_t chunks = static_cast<std::int64_t>((n + Digit::chunk - 1) / Digit::chunk);
  const Policy chunk_range(0, chunks);
  Kokkos::View<std::uint64_t *, Kokkos::HostSpace> histogram("dct::histogram", Digit::buckets);
  Kokkos::parallel_for(
      "dct::select_histogram", chunk_range, KOKKOS_LAMBDA(const std::int64_t c) {
        // Interleaved counters per bucket: neighbours that fall into the same bucket (most of
        // them) do not wait for each other's increment.
        std::uint32_t local[Digit::lanes][Digit::buckets] = {};
        const std::size_t begin = static_cast<std::size_t>(c) * Digit::chunk;
        const std::size_t end = begin + Digit::chunk < n ? begin + Digit::chunk : n;
        std::size_t i = begin;
        for (; i + Digit::lanes <= end; i += Digit::lanes)
          for (int lane = 0; lane < Digit::lanes; ++lane)
            ++local[lane]
                   [top_digit<T>(abs_key<T>((send ? send[i + lane] : T(0)) + residual[i + lane]))];
        for (; i < end; ++i)
          ++local[0][top_digit<T>(abs_key<T>((send ? send[i] : T(0)) + residual[i]))];
        for (std::size_t b = 0; b < Digit::buckets; ++b) {
          std::uint64_t count = 0;
          for (int lane = 0; lane < Digit::lanes; ++lane) count += local[lane][b];
          if (count) Kokkos::atomic_add(&histogram(b), count);
        }
      });
  Exec().fence();
  std::size_t above = 0;
  std::uint32_t digit = Digit::buckets - 1;
  while (above + histogram(digit) < k) above += histogram(digit--);
  const std::size_t candidates = histogram(digit);

  // The keys in the chosen bucket, in any order (each work item appends its own).
  if (buffer.size() < candidates) buffer.resize(candidates);
  const CandidateSink<Bits> sink(buffer.data(), candidates);
  Kokkos::parallel_for(
      "dct::select_candidates", chunk_range, KOKKOS_LAMBDA(const std::int64_t c) {
        const std::size_t begin = static_cast<std::size_t>(c) * Digit::chunk;
        const std::size_t end = begin + Digit::chunk < n ? begin + Digit::chunk : n;
        Bits found[CandidateSink<Bits>::kBatch];
        std::size_t count = 0;
        for (std::size_t i = begin; i < end; ++i) {
          const Bits key = abs_key<T>((send ? send[i] : T(0)) + residual[i]);
          if (top_digit<T>(key) != digit) continue;
          found[count++] = key;
          if (count == CandidateSink<Bits>::kBatch) {
            sink.append(found, count);
            count = 0;
          }
        }
        sink.append(found, count);
      });
  Exec().fence();
  return kth_largest_key<T>(buffer.data(), candidates, k - above, Digit::shift);
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

// The filter in two passes over work items of kFilterChunk entries, reading send and residual
// once. Pass 1, in blocks of 16: acc is computed and stored with no branch while a 16-bit mask
// of the block's kept entries is built (SSE2 where the host has it: compare + movemask; a plain
// loop elsewhere); only the set bits are then visited, on data still in L1, and each kept entry
// is staged as (index, acc) in the work item's slot, its residual set to what stays home. An
// exclusive scan of the work items' counts gives each its output position; pass 2 copies the
// staged entries there (a few percent of the tensor's bytes). Entries past the caller's
// capacity get acc back in the residual; a work item with more kept entries than its slot
// holds finds the rest again in pass 2, after its last staged entry. A parallel_scan over the data
// (its counting pass, then its writing pass) read send and residual twice on threaded backends:
// 3-4x slower than Serial on OpenMP at 1 thread, and a second read of only the blocks with a kept
// entry (pass 1 keeping the blocks' masks alone) was still 2x slower: at 1% density those are a
// sixth of the cache lines, read back from memory one at a time.

/// Scratch of the filter, kept between calls on this thread (as candidate_buffer).
template <typename T>
struct FilterScratch {
  std::vector<WireIndex> index;  // the slots: staged kept entries
  std::vector<T> acc;
  static FilterScratch &get() {
    static thread_local FilterScratch scratch;
    return scratch;
  }
};

template <typename T, bool kHasSend>
std::size_t filter_chunks(const T *send, T *residual, std::size_t n, T tau, ValueCoding coding,
                          WireIndex *idx, T *val, std::size_t capacity) {
  const std::size_t chunks = (n + kFilterChunk - 1) / kFilterChunk;
  if (chunks == 0) return 0;
  // A slot holds twice a work item's share of the capacity: overflowing it is rare, and costs
  // the work item only a second look at its own blocks.
  const std::size_t share = (2 * capacity + chunks - 1) / chunks + 32;
  const std::size_t slot = std::min<std::size_t>(kFilterChunk, share);
  FilterScratch<T> &scratch = FilterScratch<T>::get();
  if (scratch.index.size() < chunks * slot) {
    scratch.index.resize(chunks * slot);
    scratch.acc.resize(chunks * slot);
  }
  WireIndex *const staged_index = scratch.index.data();
  T *const staged_acc = scratch.acc.data();
  Kokkos::View<std::size_t *, Kokkos::HostSpace> first(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "dct::filter_first"), chunks);
  const Policy work(0, static_cast<std::int64_t>(chunks));

  Kokkos::parallel_for(
      "dct::filter_stage", work, KOKKOS_LAMBDA(const std::int64_t c) {
        const std::size_t begin = static_cast<std::size_t>(c) * kFilterChunk;
        const std::size_t end = begin + kFilterChunk < n ? begin + kFilterChunk : n;
        WireIndex *const slot_index = staged_index + static_cast<std::size_t>(c) * slot;
        T *const slot_acc = staged_acc + static_cast<std::size_t>(c) * slot;
        std::size_t count = 0;
        auto stage = [&](std::size_t block, unsigned mask) {
          for (; mask != 0 && count < slot; mask &= mask - 1, ++count) {
            const std::size_t i = block + static_cast<std::size_t>(__builtin_ctz(mask));
            const T acc = residual[i];
            slot_index[count] = static_cast<WireIndex>(i);
            slot_acc[count] = acc;
            residual[i] = wire_remainder(acc, wire_value(acc, coding));
          }
          count += static_cast<std::size_t>(__builtin_popcount(mask));  // past the slot
        };
        std::size_t block = begin;
        for (; block + kFilterBlock <= end; block += kFilterBlock)
          stage(block,
                block_mask<BlockPass::filter, kHasSend, T>(
                    kHasSend ? send + block : nullptr, residual + block, residual + block, tau));
        if (block < end) {  // the last, partial block
          unsigned mask = 0;
          for (std::size_t i = block; i < end; ++i) {
            residual[i] = (kHasSend ? send[i] : T(0)) + residual[i];
            mask |= unsigned(keep_entry(residual[i], tau)) << (i - block);
          }
          stage(block, mask);
        }
        first(c) = count;
      });
  std::size_t kept = 0;
  Kokkos::parallel_scan(
      "dct::filter_positions", work,
      KOKKOS_LAMBDA(const std::int64_t c, std::size_t &position, const bool final) {
        const std::size_t count = first(c);
        if (final) first(c) = position;
        position += count;
      },
      kept);
  Kokkos::parallel_for(
      "dct::filter_emit", work, KOKKOS_LAMBDA(const std::int64_t c) {
        const std::size_t begin = first(c);
        const std::size_t count =
            (static_cast<std::size_t>(c) + 1 < chunks ? first(c + 1) : kept) - begin;
        const WireIndex *const slot_index = staged_index + static_cast<std::size_t>(c) * slot;
        const T *const slot_acc = staged_acc + static_cast<std::size_t>(c) * slot;
        const std::size_t staged = count < slot ? count : slot;
        for (std::size_t j = 0; j < staged; ++j) {
          const std::size_t position = begin + j;
          if (position < capacity) {
            idx[position] = slot_index[j];
            val[position] = wire_value(slot_acc[j], coding);
          } else {
            residual[slot_index[j]] = slot_acc[j];  // stays home whole
          }
        }
        if (count == staged || begin + staged >= capacity) return;
        // The slot overflowed: the kept entries after the last staged one (whose residual still
        // holds acc) are found again, while the capacity lasts.
        const std::size_t stop = static_cast<std::size_t>(c) * kFilterChunk + kFilterChunk;
        std::size_t position = begin + staged;
        for (std::size_t i = std::size_t(slot_index[staged - 1]) + 1;
             i < (stop < n ? stop : n) && position < capacity; ++i) {
          const T acc = residual[i];
          if (!keep_entry(acc, tau)) continue;
          const T sent = wire_value(acc, coding);
          idx[position] = static_cast<WireIndex>(i);
          val[position] = sent;
          residual[i] = wire_remainder(acc, sent);
          ++position;
        }
      });
  Exec().fence();
  return kept;
}

template <typename T>
std::size_t filter_impl(const T *send, T *residual, std::size_t n, T tau, ValueCoding coding,
                        WireIndex *idx, T *val, std::size_t capacity) {
  return send ? filter_chunks<T, true>(send, residual, n, tau, coding, idx, val, capacity)
              : filter_chunks<T, false>(send, residual, n, tau, coding, idx, val, capacity);
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

template <typename T>
void momentum_update_impl(const T *send, const T *velocity, T momentum, T *out, std::size_t n) {
  Kokkos::parallel_for(
      "dct::momentum_update", range(n),
      KOKKOS_LAMBDA(const std::int64_t i) { out[i] = momentum * velocity[i] + send[i]; });
  Exec().fence();
}

template <typename T>
void scatter_zero_impl(const WireIndex *idx, std::size_t m, T *out) {
  Kokkos::parallel_for(
      "dct::scatter_zero", range(m), KOKKOS_LAMBDA(const std::int64_t j) { out[idx[j]] = T(0); });
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
