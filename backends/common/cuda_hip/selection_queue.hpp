// The CUDA/HIP backends' selection, queued (cuda_hip_backend.hpp): the radix selection of the
// k-th largest key, the ranks a trim needs, and the positions of a selection at a threshold (the
// count, the tie scan and the keep scan), each a sequence of kernels and copies on one stream
// whose results the host reads back once. Apart from the class so that each file has one
// purpose; the caller holds the backend's workspace while these use it.
//
// Private: included by cuda_hip_backend.hpp inside its namespace, after kernels.hpp.
#pragma once

/// Workspace parts are aligned for any element type and for the libraries' scan temporaries.
constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

/// The radix selection's kernels, queued: init, then a histogram and a digit per 11 bits.
template <typename T>
void queue_radix_selection(const T *send, const T *residual, std::size_t n, unsigned long long k,
                           const unsigned long long *past, SelectState<KeyBits<T>> *state,
                           unsigned long long *histogram, api::stream_t s) {
  using Bits = KeyBits<T>;
  DCT_GPU_LAUNCH(select_init<Bits>, 1, kBlock, s, state, k, past, histogram);
  check_launch("kth_largest_abs (init)");
  // Fewer blocks than the other kernels: each block adds its shared histogram to the global
  // one at the end (kBins atomics per block).
  const unsigned int grid = grid_for(n, 1024);
  for (int high = 8 * sizeof(T) - 1; high > 0;) {
    const int width = high < kDigitBits ? high : kDigitBits;
    const int shift = high - width;
    const Bits digit_mask = (Bits(1) << width) - 1;
    DCT_GPU_LAUNCH(select_histogram<T>, grid, kBlock, s, send, residual, n, state, shift,
                   digit_mask, histogram);
    check_launch("kth_largest_abs (histogram)");
    DCT_GPU_LAUNCH(select_digit<Bits>, 1, kBlock, s, state, shift, digit_mask, histogram);
    check_launch("kth_largest_abs (digit)");
    high = shift;
  }
}

/// The trim's ranks queued: the count of the non-finite candidates
/// and the two radix selections past them (at k and at aim), back to back; the count and the
/// two keys land in host[0..2] once the stream gets there. `scratch`: ranks_bytes<T>() of the
/// workspace. Returns the selection at k (its state), which the trim's threshold reads.
template <typename T>
std::size_t ranks_bytes() {
  return aligned(2 * sizeof(unsigned long long)) +
         2 * (aligned(kBins * sizeof(unsigned long long)) +
              aligned(sizeof(SelectState<KeyBits<T>>)));
}
template <typename T>
const SelectState<KeyBits<T>> *queue_ranks(const T *val, std::size_t m, std::size_t k,
                                           std::size_t aim, char *scratch, unsigned long long *host,
                                           api::stream_t s, const unsigned long long **nonfinite) {
  using Bits = KeyBits<T>;
  const std::size_t counts_bytes = aligned(2 * sizeof(unsigned long long));
  const std::size_t histogram_bytes = aligned(kBins * sizeof(unsigned long long));
  const std::size_t selection_bytes = histogram_bytes + aligned(sizeof(SelectState<Bits>));
  auto *counts = reinterpret_cast<unsigned long long *>(scratch);
  check(api::zero_async(counts, 2 * sizeof(unsigned long long), s), "trim (counts)");
  // At tau = Inf the keep rule selects exactly NaN and +-Inf: counts[1].
  DCT_GPU_LAUNCH(count_selected<T>, grid_for(m, 1024), kBlock, s, static_cast<const T *>(nullptr),
                 val, m, std::numeric_limits<T>::infinity(),
                 static_cast<const DeviceThreshold<T> *>(nullptr), counts);
  check_launch("trim (count)");
  check(api::copy_async(host, counts + 1, sizeof(unsigned long long), s), "trim (copy)");
  const std::size_t rank_of[2] = {k, aim};
  const SelectState<Bits> *at_k = nullptr;
  for (int j = 0; j < 2; ++j) {
    char *selection = scratch + counts_bytes + std::size_t(j) * selection_bytes;
    auto *histogram = reinterpret_cast<unsigned long long *>(selection);
    auto *state = reinterpret_cast<SelectState<Bits> *>(selection + histogram_bytes);
    queue_radix_selection(static_cast<const T *>(nullptr), val, m, rank_of[j], counts + 1, state,
                          histogram, s);
    check(api::copy_async(host + 1 + j, &state->prefix, sizeof(Bits), s), "trim (copy)");
    if (j == 0) at_k = state;
  }
  *nonfinite = counts + 1;
  return at_k;
}
/// The ranks queue_ranks left in host[0..2], once the stream got there.
template <typename T>
CandidateRanks<T> ranks_read(const unsigned long long *host, std::size_t m, std::size_t k,
                             std::size_t aim) {
  CandidateRanks<T> ranks;
  ranks.finite = m - static_cast<std::size_t>(host[0]);
  const std::size_t rank_of[2] = {k, aim};
  for (int j = 0; j < 2; ++j) {
    KeyBits<T> key;
    std::memcpy(&key, host + 1 + j, sizeof key);
    const T kth = rank_of[j] >= 1 && rank_of[j] <= ranks.finite
                      ? kernel_logic::threshold_of_key<T>(key)
                      : T(0);
    (j == 0 ? ranks.kth : ranks.aimth) = kth;
  }
  return ranks;
}

/// The positions of a selection at tau with `limit` over accumulated(send, residual, i),
/// i < n (select_compact and keep_compact write the entries): the scanned keep flags in the
/// workspace and the flag itself. queue_positions queues the count and the scans in
/// `scratch` (positions_bytes of the workspace) and the copies of the counts into host[0..2]
/// (pinned); positions_read reads what Backend::select returns from there once the stream got
/// there. `at`: the threshold on the device instead of `tau` (DeviceThreshold). The caller
/// holds the scratch mutex (StreamScratch).
template <typename T>
struct Positions {
  const unsigned int *inclusive = nullptr;
  SelectFlag<T> flag{};
};
template <typename T>
std::size_t positions_bytes(const T *send, const T *residual, std::size_t n, api::stream_t s) {
  require(n <= std::numeric_limits<unsigned int>::max(), DCT_ERR_INTERNAL,
          "select: more elements than DCT_MAX_COUNT");
  const TieFlag<T> tie{{send, residual, T(0), nullptr}};
  const SelectFlag<T> flag{{send, residual, T(0), nullptr}, nullptr, nullptr, 0};
  std::size_t tie_scan = 0, keep_scan = 0;
  check(api::inclusive_sum_of(nullptr, tie_scan, tie, n, static_cast<unsigned int *>(nullptr), s),
        "select (scan size)");
  check(api::inclusive_sum_of(nullptr, keep_scan, flag, n, static_cast<unsigned int *>(nullptr), s),
        "select (scan size)");
  return aligned(2 * sizeof(unsigned long long)) + 2 * aligned(n * sizeof(unsigned int)) +
         aligned(tie_scan > keep_scan ? tie_scan : keep_scan);
}
template <typename T>
Positions<T> queue_positions(const T *send, const T *residual, std::size_t n, T tau,
                             const DeviceThreshold<T> *at, std::size_t limit, char *scratch,
                             std::size_t bytes, unsigned long long *host, api::stream_t s) {
  const std::size_t counts_bytes = aligned(2 * sizeof(unsigned long long));
  const std::size_t array_bytes = aligned(n * sizeof(unsigned int));
  std::size_t temporary_bytes = bytes - counts_bytes - 2 * array_bytes;
  auto *counts = reinterpret_cast<unsigned long long *>(scratch);
  auto *tie_inclusive = reinterpret_cast<unsigned int *>(scratch + counts_bytes);
  auto *inclusive = reinterpret_cast<unsigned int *>(scratch + counts_bytes + array_bytes);
  char *temporary = scratch + counts_bytes + 2 * array_bytes;
  const TieFlag<T> tie{{send, residual, tau, at}};
  SelectFlag<T> flag{{send, residual, tau, at}, nullptr, nullptr, 0};
  check(api::zero_async(counts, 2 * sizeof(unsigned long long), s), "select (counts)");
  DCT_GPU_LAUNCH(count_selected<T>, grid_for(n, 1024), kBlock, s, send, residual, n, tau, at,
                 counts);
  check_launch("select (count)");
  check(api::copy_async(host, counts, 2 * sizeof(unsigned long long), s), "select (copy)");
  if (limit != kEveryTie) {  // the tie budget is counts[0]'s business, on the device
    check(api::inclusive_sum_of(temporary, temporary_bytes, tie, n, tie_inclusive, s),
          "select (ties)");
    flag.tie_inclusive = tie_inclusive;
    flag.above = counts;
    flag.limit = limit;
  }
  check(api::inclusive_sum_of(temporary, temporary_bytes, flag, n, inclusive, s), "select (scan)");
  check(api::copy_async(host + 2, inclusive + (n - 1), sizeof(unsigned int), s), "select (copy)");
  return Positions<T>{inclusive, flag};
}
inline Selected positions_read(const unsigned long long *host) {
  unsigned int kept;
  std::memcpy(&kept, host + 2, sizeof kept);
  return Selected{kept, static_cast<std::size_t>(host[1])};
}
