// The Kokkos backend's exact selection (the k-th largest |acc|) and its sample gather.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>
#include <vector>

#include "error.hpp"
#include "masks.hpp"

namespace dct::detail::kernels::kokkos {
namespace {

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

}  // namespace

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

template float kth_largest_abs_impl(const float *, const float *, std::size_t, std::size_t);
template double kth_largest_abs_impl(const double *, const double *, std::size_t, std::size_t);
template void gather_abs_sample_impl(const float *, const float *, std::size_t, std::size_t,
                                     std::uint64_t, float *);
template void gather_abs_sample_impl(const double *, const double *, std::size_t, std::size_t,
                                     std::uint64_t, double *);

}  // namespace dct::detail::kernels::kokkos
