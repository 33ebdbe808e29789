// The candidates of the Kokkos backend's exact selection (kth_largest.hpp): the buffer that work
// items append the keys of |acc| to, and the last step over them on the host, radix rounds while
// they are many and std::nth_element at the end.
//
// Private header of backends/kokkos/.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

#include "portable.hpp"

namespace dct::detail::backends::kokkos {

using kernel_logic::kDigitBits;
constexpr std::size_t kBuckets = kernel_logic::kDigitBins;

// Narrows the candidates (keys that agree above bit `high`) to the next 11-bit digit's bucket
// that holds the rank-th largest, in place, while they are many: a bucket of the first pass can
// hold a large share of n (double's top 11 bits are its exponent alone; data that all lies in
// one binade), and each round costs one pass over the survivors only. Returns how many are
// left; `rank` becomes their rank among them.
template <typename Bits>
std::size_t refine_candidates(Bits *keys, std::size_t count, std::size_t &rank, int high) {
  std::uint32_t histogram[kBuckets];  // on the stack: nothing allocated per call
  while (count > 4096 && high > 0) {
    const int width = high < kDigitBits ? high : kDigitBits;
    const int shift = high - width;
    const Bits digit_mask = (Bits(1) << width) - 1;
    std::fill(histogram, histogram + kBuckets, 0u);
    for (std::size_t j = 0; j < count; ++j) ++histogram[(keys[j] >> shift) & digit_mask];
    const Bits digit = kernel_logic::digit_of_rank(histogram, digit_mask, rank);
    std::size_t survivors = 0;
    for (std::size_t j = 0; j < count; ++j)
      if (((keys[j] >> shift) & digit_mask) == digit) keys[survivors++] = keys[j];
    count = survivors;
    high = shift;
  }
  return count;
}

/// Keys that many work items append to one buffer in `Exec`'s memory, each through a local
/// batch of kBatch; keys past `capacity` are counted but not stored. Its counter is a scratch
/// word of the caller's (`Filled`), zeroed here: nothing is allocated per call.
template <typename Bits, typename Exec>
class CandidateSink {
 public:
  static constexpr std::size_t kBatch = 256;
  CandidateSink(const Exec &exec, Bits *keys, std::size_t capacity, std::uint64_t *filled)
      : keys_(keys), capacity_(capacity), filled_(filled, 1) {
    if constexpr (kHostAccessible<Exec>) {
      *filled = 0;  // a deep_copy allocates for its kernel's label, on every call
    } else {
      Kokkos::deep_copy(exec, filled_, std::uint64_t(0));
    }
  }
  KOKKOS_INLINE_FUNCTION void append(const Bits *found, std::size_t count) const {
    const std::uint64_t at = Kokkos::atomic_fetch_add(&filled_(0), std::uint64_t(count));
    if (at + count <= capacity_)
      for (std::size_t j = 0; j < count; ++j) keys_[at + j] = found[j];
  }
  /// Keys appended, stored or not (host code, after the kernels that append, fenced).
  std::size_t filled() const {
    std::uint64_t filled = 0;
    if constexpr (kHostAccessible<Exec>) {
      filled = filled_(0);
    } else {
      Kokkos::deep_copy(filled, Kokkos::subview(filled_, 0));
    }
    return static_cast<std::size_t>(filled);
  }

 private:
  Bits *keys_;
  std::size_t capacity_;
  Buffer<std::uint64_t, Exec> filled_;
};

/// The k-th largest (rank, 1-based) of `count` host keys that agree above bit `high`,
/// reordering them; NaN patterns rank above +Inf and come back as +Inf.
template <typename T>
T kth_largest_key(KeyBits<T> *keys, std::size_t count, std::size_t rank, int high) {
  using Bits = KeyBits<T>;
  const std::size_t kept = refine_candidates<Bits>(keys, count, rank, high);
  std::nth_element(keys, keys + (rank - 1), keys + kept, std::greater<Bits>());
  return kernel_logic::threshold_of_key<T>(keys[rank - 1]);
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
    fence(exec);
    return copy.data();
  }
}

}  // namespace dct::detail::backends::kokkos
