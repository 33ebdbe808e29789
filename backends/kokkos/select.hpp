// The Kokkos core's exact selection (the k-th largest |acc|) and its sample gather. One source
// for every execution space: the passes over the data are kernels on the caller's instance; the
// last step, over the few candidates that survive them, runs on the host (on a copy of them
// when they live on a device).
//
// Private header of backends/kokkos/.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "error.hpp"
#include "portable.hpp"

namespace dct::detail::kernels::kokkos {

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

/// Keys that many work items append to one buffer in `Exec`'s memory, each through a local
/// batch of kBatch; keys past `capacity` are counted but not stored.
template <typename Bits, typename Exec>
class CandidateSink {
 public:
  static constexpr std::size_t kBatch = 256;
  CandidateSink(Bits *keys, std::size_t capacity) : keys_(keys), capacity_(capacity) {}
  KOKKOS_INLINE_FUNCTION void append(const Bits *found, std::size_t count) const {
    const std::uint64_t at = Kokkos::atomic_fetch_add(&filled_(), std::uint64_t(count));
    if (at + count <= capacity_)
      for (std::size_t j = 0; j < count; ++j) keys_[at + j] = found[j];
  }
  /// Keys appended, stored or not (host code, after the kernels that append).
  std::size_t filled() const {
    std::uint64_t filled = 0;
    Kokkos::deep_copy(filled, filled_);
    return static_cast<std::size_t>(filled);
  }

 private:
  Bits *keys_;
  std::size_t capacity_;
  Kokkos::View<std::uint64_t, typename Exec::memory_space> filled_{"dct::filled"};
};

/// The k-th largest (rank, 1-based) of `count` host keys that agree above bit `high`,
/// reordering them; NaN patterns rank above +Inf and come back as +Inf.
template <typename T>
T kth_largest_key(KeyBits<T> *keys, std::size_t count, std::size_t rank, int high) {
  using Bits = KeyBits<T>;
  const std::size_t kept = refine_candidates<Bits>(keys, count, rank, high);
  std::nth_element(keys, keys + (rank - 1), keys + kept, std::greater<Bits>());
  const T tau = value_of_key<T>(keys[rank - 1]);
  return tau != tau ? std::numeric_limits<T>::infinity() : tau;
}

/// `count` keys of `Exec`'s memory where the host can reorder them: the keys themselves on
/// host-accessible memory, else a copy in `copy`.
template <typename Bits, typename Exec>
Bits *keys_on_host(const Exec &exec, Bits *keys, std::size_t count,
                   [[maybe_unused]] std::vector<Bits> &copy) {
  if constexpr (kHostAccessible<Exec>) {
    return keys;
  } else {
    copy.resize(count);
    Kokkos::deep_copy(exec, Buffer<Bits, Kokkos::DefaultHostExecutionSpace>(copy.data(), count),
                      Buffer<const Bits, Exec>(keys, count));
    exec.fence();
    return copy.data();
  }
}

/// |send + residual| at the m stratified sample positions (Backend::gather_abs_sample), into
/// `out`, m values in `Exec`'s memory.
template <typename T, typename Exec>
void gather_abs_sample(const Exec &exec, const T *send, const T *residual, std::size_t n,
                       std::uint64_t seed, const Buffer<T, Exec> &out) {
  const std::size_t m = out.extent(0);
  Kokkos::parallel_for(
      "dct::gather_sample", range(exec, m), KOKKOS_LAMBDA(const std::int64_t j) {
        const std::size_t i = sample_position(static_cast<std::size_t>(j), m, n, seed);
        out(j) = std::fabs((send ? send[i] : T(0)) + residual[i]);
      });
  exec.fence();
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

struct SampleTag;  // Scratch tags
struct CandidateTag;

template <typename T, typename Exec>
LowerBound<T> sampled_lower_bound(const Exec &exec, const T *send, const T *residual, std::size_t n,
                                  std::size_t k) {
  using Bits = KeyBits<T>;
  LowerBound<T> bound;
  constexpr std::size_t m = kBoundSample;
  if (n < kBoundFrom) return bound;
  const double p = double(k) / double(n);
  const double last = p * double(m) - 1 + 5 * std::sqrt(double(m) * p * (1 - p)) + 2;
  if (last >= double(m - 1)) return bound;  // k is a large share of n: nearly everything passes
  const Scratch<SampleTag, T, Exec> sample_scratch(m);
  gather_abs_sample(exec, send, residual, n, 0x5eed, Buffer<T, Exec>(sample_scratch.data(), m));
  T values[m];
  Kokkos::deep_copy(exec, Buffer<T, Kokkos::DefaultHostExecutionSpace>(values, m),
                    Buffer<const T, Exec>(sample_scratch.data(), m));
  exec.fence();
  Bits sample[m];
  for (std::size_t j = 0; j < m; ++j) sample[j] = abs_key<T>(values[j]);
  Bits *const at = sample + static_cast<std::size_t>(std::ceil(last));
  std::nth_element(sample, at, sample + m, std::greater<Bits>());
  bound.value = value_of_key<T>(*at);
  if (bound.value != bound.value) return bound;  // a NaN bound would let everything through
  const std::size_t passing = static_cast<std::size_t>(at - sample) + 1;
  bound.capacity = 2 * passing * (n / m + 1) + 4096;
  bound.usable = bound.capacity <= n / 4;
  return bound;
}

/// Appends the keys of |acc| >= bound (and NaN) to `sink`: read-only, at filter speed.
template <typename T, bool kHasSend, typename Exec>
void copy_keys_at_least(const Exec &exec, const T *send, const T *residual, std::size_t n, T bound,
                        const CandidateSink<KeyBits<T>, Exec> &sink) {
  using Bits = KeyBits<T>;
  constexpr std::size_t kBatch = CandidateSink<Bits, Exec>::kBatch;
  const std::size_t chunks = (n + kFilterChunk - 1) / kFilterChunk;
  Kokkos::parallel_for(
      "dct::select_above_bound", range(exec, chunks), KOKKOS_LAMBDA(const std::int64_t c) {
        const std::size_t begin = static_cast<std::size_t>(c) * kFilterChunk;
        const std::size_t end = begin + kFilterChunk < n ? begin + kFilterChunk : n;
        Bits found[kBatch];
        std::size_t count = 0;
        std::size_t block = begin;
        for (; block + kFilterBlock <= end; block += kFilterBlock) {
          unsigned mask = block_mask<BlockPass::select, kHasSend, T>(
              kHasSend ? send + block : nullptr, residual + block, nullptr, bound);
          for (; mask != 0; mask &= mask - 1) {
            const std::size_t i = block + static_cast<std::size_t>(lowest_set_bit(mask));
            found[count++] = abs_key<T>((kHasSend ? send[i] : T(0)) + residual[i]);
          }
          if (count > kBatch - kFilterBlock) {
            sink.append(found, count);
            count = 0;
          }
        }
        for (std::size_t i = block; i < end; ++i) {
          const T acc = (kHasSend ? send[i] : T(0)) + residual[i];
          if (!(std::fabs(acc) < bound)) found[count++] = abs_key<T>(acc);
        }
        sink.append(found, count);
      });
  exec.fence();
}

/// The histogram of the first digit of |acc|, counted per work item in team scratch: on the host
/// by a team of one thread, in interleaved lanes with plain increments; on a device by a team of
/// many, in one lane with scratch atomics; then added to the global histogram.
template <typename T, typename Exec>
Kokkos::View<std::uint64_t *, typename Exec::memory_space> first_digit_histogram(const Exec &exec,
                                                                                 const T *send,
                                                                                 const T *residual,
                                                                                 std::size_t n) {
  using Digit = FirstDigit<T>;
  using Team = Kokkos::TeamPolicy<Exec>;
  using Local = Kokkos::View<std::uint32_t *, typename Exec::scratch_memory_space,
                             Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  constexpr std::size_t buckets = Digit::buckets;
  const std::size_t chunks = (n + Digit::chunk - 1) / Digit::chunk;
  Kokkos::View<std::uint64_t *, typename Exec::memory_space> histogram("dct::histogram", buckets);
  // One thread per team on the host; as many as the device likes on a device.
  const int lanes = kHostAccessible<Exec> ? Digit::lanes : 1;
  Team policy = kHostAccessible<Exec> ? Team(exec, static_cast<int>(chunks), 1)
                                      : Team(exec, static_cast<int>(chunks), Kokkos::AUTO);
  const std::size_t bytes = Local::shmem_size(lanes * buckets);
  // Level 0 is a GPU's shared memory (tens of KiB); a double's 64 KiB histogram goes to level 1.
  const int level = bytes <= 32768 ? 0 : 1;
  policy.set_scratch_size(level, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(
      "dct::select_histogram", policy, KOKKOS_LAMBDA(const typename Team::member_type &team) {
        const Local local(team.team_scratch(level), lanes * buckets);
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, lanes * buckets),
                             [&](const std::size_t b) { local(b) = 0; });
        team.team_barrier();
        const std::size_t begin = static_cast<std::size_t>(team.league_rank()) * Digit::chunk;
        const std::size_t end = begin + Digit::chunk < n ? begin + Digit::chunk : n;
        auto digit_at = [&](std::size_t i) {
          return top_digit<T>(abs_key<T>((send ? send[i] : T(0)) + residual[i]));
        };
        if (lanes > 1) {
          // Interleaved counters per bucket: neighbours that fall into the same bucket (most
          // of them) do not wait for each other's increment.
          std::size_t i = begin;
          for (; i + Digit::lanes <= end; i += Digit::lanes)
            for (int lane = 0; lane < Digit::lanes; ++lane)
              ++local(lane * buckets + digit_at(i + lane));
          for (; i < end; ++i) ++local(digit_at(i));
        } else {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(team, begin, end), [&](const std::size_t i) {
            Kokkos::atomic_add(&local(digit_at(i)), std::uint32_t(1));
          });
        }
        team.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(team, buckets), [&](const std::size_t b) {
          std::uint64_t count = 0;
          for (int lane = 0; lane < lanes; ++lane) count += local(lane * buckets + b);
          if (count) Kokkos::atomic_add(&histogram(b), count);
        });
      });
  exec.fence();
  return histogram;
}

/// Backend::kth_largest_abs on `exec`: buffers in its memory space, `send` may be empty.
template <typename T, typename Exec>
T kth_largest_abs(const Exec &exec, const Buffer<const T, Exec> &send_buffer,
                  const Buffer<const T, Exec> &residual_buffer, std::size_t k) {
  using Bits = KeyBits<T>;
  using Digit = FirstDigit<T>;
  const T *const send = send_buffer.data();
  const T *const residual = residual_buffer.data();
  const std::size_t n = residual_buffer.extent(0);
  require(k >= 1 && k <= n, DCT_ERR_INTERNAL, "kth_largest_abs: k out of range");
  std::vector<Bits> host_copy;

  const LowerBound<T> bound = sampled_lower_bound(exec, send, residual, n, k);
  if (bound.usable) {
    const Scratch<CandidateTag, Bits, Exec> candidates(bound.capacity);
    const CandidateSink<Bits, Exec> sink(candidates.data(), bound.capacity);
    if (send)
      copy_keys_at_least<T, true>(exec, send, residual, n, bound.value, sink);
    else
      copy_keys_at_least<T, false>(exec, send, residual, n, bound.value, sink);
    const std::size_t filled = sink.filled();
    if (filled <= bound.capacity && filled >= k)
      return kth_largest_key<T>(keys_on_host(exec, candidates.data(), filled, host_copy), filled, k,
                                8 * int(sizeof(T)) - 1);
  }

  const auto histogram = Kokkos::create_mirror_view_and_copy(
      Kokkos::HostSpace(), first_digit_histogram(exec, send, residual, n));
  std::size_t above = 0;
  std::uint32_t digit = Digit::buckets - 1;
  while (above + histogram(digit) < k) above += histogram(digit--);
  const std::size_t count = histogram(digit);

  // The keys in the chosen bucket, in any order (each work item appends its own).
  constexpr std::size_t kBatch = CandidateSink<Bits, Exec>::kBatch;
  const Scratch<CandidateTag, Bits, Exec> candidates(count);
  const CandidateSink<Bits, Exec> sink(candidates.data(), count);
  const std::size_t chunks = (n + Digit::chunk - 1) / Digit::chunk;
  Kokkos::parallel_for(
      "dct::select_candidates", range(exec, chunks), KOKKOS_LAMBDA(const std::int64_t c) {
        const std::size_t begin = static_cast<std::size_t>(c) * Digit::chunk;
        const std::size_t end = begin + Digit::chunk < n ? begin + Digit::chunk : n;
        Bits found[kBatch];
        std::size_t found_count = 0;
        for (std::size_t i = begin; i < end; ++i) {
          const Bits key = abs_key<T>((send ? send[i] : T(0)) + residual[i]);
          if (top_digit<T>(key) != digit) continue;
          found[found_count++] = key;
          if (found_count == kBatch) {
            sink.append(found, found_count);
            found_count = 0;
          }
        }
        sink.append(found, found_count);
      });
  exec.fence();
  return kth_largest_key<T>(keys_on_host(exec, candidates.data(), count, host_copy), count,
                            k - above, Digit::shift);
}

}  // namespace dct::detail::kernels::kokkos
