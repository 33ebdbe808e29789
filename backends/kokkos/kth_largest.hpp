// The Kokkos backend's exact selection (the k-th largest |acc|) and its sample gather. One source
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

#include "candidate_keys.hpp"
#include "core/error.hpp"
#include "portable.hpp"

namespace dct::detail::backends::kokkos {

// Exact selection, usually in one pass over the data: a small sample gives a lower bound that
// the k-th largest |acc| exceeds with overwhelming probability, one pass copies the keys at or
// above it (a few times k of them), and the k-th largest among those is the answer whenever
// there are at least k. Otherwise (a sample that lied, or a bound that lets too many through)
// two passes: a histogram of the top bits of |acc| finds the bucket that holds the k-th largest
// and a second pass copies that bucket's keys. Either way, radix rounds over the candidates
// alone narrow them further while they are many, and std::nth_element finishes. The later
// radix passes of a textbook radix select would each read all of n again.

/// The first pass's digit: 11 bits of a float (8 of exponent, 3 of mantissa), 14 of a double
/// (11 of exponent, 3 of mantissa): the same resolution, so that the bucket of the k-th largest
/// stays a small share of n for doubles too (with 11 bits its copy cost more than the histogram
/// pass; measured: docs/internals.md, measured reasons).
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

/// |send + residual| at the m stratified sample positions (Backend::gather_abs_sample), into
/// `out`, m values in `Exec`'s memory.
template <typename T, typename Exec>
void gather_abs_sample(const Exec &exec, const T *send, const T *residual, std::size_t n,
                       std::uint64_t seed, const Buffer<T, Exec> &out) {
  const std::size_t m = out.extent(0);
  Kokkos::parallel_for("dct_sample", range(exec, m),
                       kernel_logic::GatherAbsSample<T>{send, residual, n, m, seed, out.data()});
  fence(exec);
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
/// 2048 keys cost little beside a 4 MiB tensor's pass (measured: docs/internals.md, measured
/// reasons); below kBoundFrom entries the second pass of the histogram method reads data still
/// in cache and a bound saves little.
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
  T copy[m];
  const T *values = sample_scratch.data();
  if constexpr (!kHostAccessible<Exec>) {
    Kokkos::deep_copy(exec, Buffer<T, Kokkos::DefaultHostExecutionSpace>(copy, m),
                      Buffer<const T, Exec>(sample_scratch.data(), m));
    fence(exec);
    values = copy;
  }
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
      "dct_above_bound", range(exec, chunks), KOKKOS_LAMBDA(const std::int64_t c) {
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
  fence(exec);
}

/// The histogram of the first digit of |acc| into `histogram` (Digit::buckets counters, zeroed
/// here), counted per work item in team scratch: on the host by a team of one thread, in
/// interleaved lanes with plain increments; on a device by a team of many, in one lane with
/// scratch atomics; then added to the global histogram.
template <typename T, typename Exec>
void first_digit_histogram(const Exec &exec, const T *send, const T *residual, std::size_t n,
                           const Buffer<std::uint64_t, Exec> &histogram) {
  using Digit = FirstDigit<T>;
  using Team = Kokkos::TeamPolicy<Exec>;
  using Local = Kokkos::View<std::uint32_t *, typename Exec::scratch_memory_space,
                             Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  constexpr std::size_t buckets = Digit::buckets;
  const std::size_t chunks = (n + Digit::chunk - 1) / Digit::chunk;
  if constexpr (kHostAccessible<Exec>) {
    for (std::size_t b = 0; b < buckets; ++b) histogram(b) = 0;
  } else {
    Kokkos::deep_copy(exec, histogram, std::uint64_t(0));
  }
  // One thread per team on the host; as many as the device likes on a device.
  const int lanes = kHostAccessible<Exec> ? Digit::lanes : 1;
  Team policy = kHostAccessible<Exec> ? Team(exec, static_cast<int>(chunks), 1)
                                      : Team(exec, static_cast<int>(chunks), Kokkos::AUTO);
  const std::size_t bytes = Local::shmem_size(lanes * buckets);
  // Level 0 is a GPU's shared memory (tens of KiB); a double's 64 KiB histogram goes to level 1.
  const int level = bytes <= 32768 ? 0 : 1;
  policy.set_scratch_size(level, Kokkos::PerTeam(bytes));
  Kokkos::parallel_for(
      "dct_histogram", policy, KOKKOS_LAMBDA(const typename Team::member_type &team) {
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
  fence(exec);
}

struct HistogramTag;  // Scratch tags
struct FilledTag;
struct AimCopyTag;

/// The first-digit histogram of |acc| where the host can read it (a scratch of the caller's
/// thread on host spaces; a copy on a device).
template <typename T, typename Exec>
const std::uint64_t *histogram_on_host(const Exec &exec, const T *send, const T *residual,
                                       std::size_t n, std::vector<std::uint64_t> &copy) {
  const Scratch<HistogramTag, std::uint64_t, Exec> histogram(FirstDigit<T>::buckets);
  const Buffer<std::uint64_t, Exec> counts(histogram.data(), FirstDigit<T>::buckets);
  first_digit_histogram(exec, send, residual, n, counts);
  if constexpr (kHostAccessible<Exec>) {
    return histogram.data();
  } else {
    copy.resize(FirstDigit<T>::buckets);
    Kokkos::deep_copy(
        exec, Buffer<std::uint64_t, Kokkos::DefaultHostExecutionSpace>(copy.data(), copy.size()),
        counts);
    fence(exec);
    return copy.data();
  }
}

/// The first digit whose bucket holds the rank-th largest key (1 <= rank <= total), and how
/// many keys lie in the buckets above it.
struct DigitOfRank {
  std::uint32_t digit = 0;
  std::size_t above = 0;
};
template <typename T>
DigitOfRank first_digit_of_rank(const std::uint64_t *histogram, std::size_t rank) {
  std::size_t within = rank;
  const auto digit = kernel_logic::digit_of_rank(
      histogram, static_cast<std::uint32_t>(FirstDigit<T>::buckets - 1), within);
  return {digit, rank - within};
}

/// The keys of |acc| whose first digit is `digit` (or `other`), appended to `sink` in any order;
/// with `nonzero`, only the keys of nonzero entries.
template <typename T, typename Exec>
void copy_bucket_keys(const Exec &exec, const T *send, const T *residual, std::size_t n,
                      std::uint32_t digit, std::uint32_t other,
                      const CandidateSink<KeyBits<T>, Exec> &sink, bool nonzero = false) {
  using Bits = KeyBits<T>;
  using Digit = FirstDigit<T>;
  constexpr std::size_t kBatch = CandidateSink<Bits, Exec>::kBatch;
  const std::size_t chunks = (n + Digit::chunk - 1) / Digit::chunk;
  Kokkos::parallel_for(
      "dct_bucket_keys", range(exec, chunks), KOKKOS_LAMBDA(const std::int64_t c) {
        const std::size_t begin = static_cast<std::size_t>(c) * Digit::chunk;
        const std::size_t end = begin + Digit::chunk < n ? begin + Digit::chunk : n;
        Bits found[kBatch];
        std::size_t found_count = 0;
        for (std::size_t i = begin; i < end; ++i) {
          const Bits key = abs_key<T>((send ? send[i] : T(0)) + residual[i]);
          const std::uint32_t top = top_digit<T>(key);
          if ((top != digit && top != other) || (nonzero && key == Bits(0))) continue;
          found[found_count++] = key;
          if (found_count == kBatch) {
            sink.append(found, found_count);
            found_count = 0;
          }
        }
        sink.append(found, found_count);
      });
  fence(exec);
}

/// Backend::kth_largest_abs on `exec`: buffers in its memory space, `send` may be empty.
template <typename T, typename Exec>
T kth_largest_abs(const Exec &exec, const Buffer<const T, Exec> &send_buffer,
                  const Buffer<const T, Exec> &residual_buffer, std::size_t k) {
  using Bits = KeyBits<T>;
  const T *const send = send_buffer.data();
  const T *const residual = residual_buffer.data();
  const std::size_t n = residual_buffer.extent(0);
  require(k >= 1 && k <= n, DCT_ERR_INTERNAL, "kth_largest_abs: k out of range");
  std::vector<Bits> host_copy;
  const Scratch<FilledTag, std::uint64_t, Exec> filled(1);

  const LowerBound<T> bound = sampled_lower_bound(exec, send, residual, n, k);
  if (bound.usable && bound.value > T(0)) {  // (a bound of 0 lets every entry through)
    const Scratch<CandidateTag, Bits, Exec> candidates(bound.capacity);
    const CandidateSink<Bits, Exec> sink(exec, candidates.data(), bound.capacity, filled.data());
    if (send)
      copy_keys_at_least<T, true>(exec, send, residual, n, bound.value, sink);
    else
      copy_keys_at_least<T, false>(exec, send, residual, n, bound.value, sink);
    const std::size_t found = sink.filled();
    if (found <= bound.capacity && found >= k)
      return kth_largest_key<T>(keys_on_host(exec, candidates.data(), found, host_copy), found, k,
                                8 * int(sizeof(T)) - 1);
  }

  std::vector<std::uint64_t> histogram_copy;
  const std::uint64_t *histogram = histogram_on_host(exec, send, residual, n, histogram_copy);
  const DigitOfRank at = first_digit_of_rank<T>(histogram, k);
  const std::size_t count = histogram[at.digit];
  if (at.digit == 0) {
    // The lowest bucket holds the zeros: fewer than k entries are nonzero or of a larger
    // binade (a mostly-zero tensor: embeddings, masked layers). Its nonzero keys alone are
    // copied, into room for a few times the rank: copying the whole bucket cost a temporary
    // of nearly n keys and a selection over it (measured: docs/reliability.md, round 3, row 7).
    const std::size_t rank = k - at.above;
    const std::size_t room = std::min(count, 4 * rank + 4096);
    const Scratch<CandidateTag, Bits, Exec> nonzero(room);
    const CandidateSink<Bits, Exec> sink(exec, nonzero.data(), room, filled.data());
    copy_bucket_keys(exec, send, residual, n, 0, 0, sink, true);
    const std::size_t found = sink.filled();
    if (found < rank) return T(0);  // fewer nonzero entries than k: the k-th largest |acc| is 0
    if (found <= room)
      return kth_largest_key<T>(keys_on_host(exec, nonzero.data(), found, host_copy), found, rank,
                                FirstDigit<T>::shift);
  }
  // The keys in the chosen bucket, in any order (each work item appends its own).
  const Scratch<CandidateTag, Bits, Exec> candidates(count);
  const CandidateSink<Bits, Exec> sink(exec, candidates.data(), count, filled.data());
  copy_bucket_keys(exec, send, residual, n, at.digit, at.digit, sink);
  return kth_largest_key<T>(keys_on_host(exec, candidates.data(), count, host_copy), count,
                            k - at.above, FirstDigit<T>::shift);
}

/// Lists up to this long are ranked on the calling thread where the memory is the host's, by
/// std::nth_element; longer ones take the trim's window (trim.hpp) first, whose sample
/// (kTrimSample keys) is no longer than they are: past it the window costs less than
/// nth_element over the list (measured: docs/kernels.md, "The trim").
constexpr std::size_t kShortList = 2048;

/// The finite count and the k-th and aim-th largest finite |val| of m values in Exec's memory
/// (the ranks of trim_candidates' general path, lists.hpp). Short lists are ranked on the host
/// directly; longer ones from one histogram of their first digits (whose top buckets hold
/// exactly the NaN and Inf keys) and one pass that copies the keys of the buckets those ranks
/// fall in.
template <typename T, typename Exec>
CandidateRanks<T> rank_list(const Exec &exec, const T *val, std::size_t m, std::size_t k,
                            std::size_t aim) {
  using Bits = KeyBits<T>;
  using Digit = FirstDigit<T>;
  CandidateRanks<T> ranks;
  if (m == 0) return ranks;
  // The key of +Inf: every key from it up is Inf or NaN.
  constexpr Bits kInfinity =
      static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  std::vector<Bits> host_copy;
  if constexpr (kHostAccessible<Exec>) {
    if (m <= kShortList) {
      // A short list (small tensors, each call's per-call overhead): its finite keys sorted
      // partially on the calling thread, no kernel.
      const Scratch<CandidateTag, Bits, Exec> keys(m);
      Bits *finite = keys.data();
      std::size_t f = 0;
      for (std::size_t j = 0; j < m; ++j) {
        const Bits key = abs_key<T>(val[j]);
        if (key < kInfinity) finite[f++] = key;
      }
      ranks.finite = f;
      if (k >= 1 && k <= f) {
        std::nth_element(finite, finite + (k - 1), finite + f, std::greater<Bits>());
        ranks.kth = value_of_key<T>(finite[k - 1]);
      }
      if (aim >= 1 && aim <= f) {
        // Everything past position k - 1 is <= the k-th: the aim-th (aim >= k) is among them.
        const std::size_t from = k >= 1 && k <= f && aim >= k ? k - 1 : 0;
        std::nth_element(finite + from, finite + (aim - 1), finite + f, std::greater<Bits>());
        ranks.aimth = value_of_key<T>(finite[aim - 1]);
      }
      return ranks;
    }
  }
  std::vector<std::uint64_t> histogram_copy;
  const std::uint64_t *histogram =
      histogram_on_host(exec, static_cast<const T *>(nullptr), val, m, histogram_copy);
  std::size_t nonfinite = 0;
  for (std::size_t b = top_digit<T>(kInfinity); b < Digit::buckets; ++b) nonfinite += histogram[b];
  ranks.finite = m - nonfinite;
  const bool want_k = k >= 1 && k <= ranks.finite, want_aim = aim >= 1 && aim <= ranks.finite;
  if (!want_k && !want_aim) return ranks;
  const DigitOfRank at_k = first_digit_of_rank<T>(histogram, (want_k ? k : aim) + nonfinite);
  const DigitOfRank at_aim = first_digit_of_rank<T>(histogram, (want_aim ? aim : k) + nonfinite);
  const std::size_t count_k = histogram[at_k.digit];
  const std::size_t count = count_k + (at_aim.digit != at_k.digit ? histogram[at_aim.digit] : 0);
  const Scratch<CandidateTag, Bits, Exec> candidates(count);
  const Scratch<FilledTag, std::uint64_t, Exec> filled(1);
  const CandidateSink<Bits, Exec> sink(exec, candidates.data(), count, filled.data());
  copy_bucket_keys(exec, static_cast<const T *>(nullptr), val, m, at_k.digit, at_aim.digit, sink);
  Bits *keys = keys_on_host(exec, candidates.data(), count, host_copy);
  // The two buckets' keys apart (in place): bucket k's first.
  Bits *const split =
      std::partition(keys, keys + count, [&](Bits key) { return top_digit<T>(key) == at_k.digit; });
  const auto kth = [&](Bits *first, std::size_t size, const DigitOfRank &at, std::size_t rank) {
    return kth_largest_key<T>(first, size, rank + nonfinite - at.above, Digit::shift);
  };
  if (want_aim) {
    if (at_aim.digit != at_k.digit) {
      ranks.aimth = kth(split, count - count_k, at_aim, aim);
    } else {
      // One bucket holds both ranks, and a selection narrows its keys in place: the aim-th
      // from a copy, in a host scratch kept between calls (`keys` is on the host).
      const Scratch<AimCopyTag, Bits, Kokkos::DefaultHostExecutionSpace> copy(count_k);
      std::copy(keys, keys + count_k, copy.data());
      ranks.aimth = kth(copy.data(), count_k, at_k, aim);
    }
  }
  if (want_k) ranks.kth = kth(keys, count_k, at_k, k);
  return ranks;
}

}  // namespace dct::detail::backends::kokkos
