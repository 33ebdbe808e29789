// The Kokkos backend's kernels on short lists of (index, value) entries: keep_top and trim (the
// exact top k of a call's candidates, rounded for the wire, what stays home of them as the next
// call's pending writes) and sum_lists
// (the result of an exchange, built from sorted lists in one pass over the tensor). One source
// for every execution space.
//
// Private header of backends/kokkos/.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "filter.hpp"
#include "kth_largest.hpp"
#include "portable.hpp"
#include "trim.hpp"

namespace dct::detail::backends::kokkos {

/// Entries of a list per work item of keep_top.
constexpr std::size_t kListChunk = 4096;

/// keep_top's work items over the m candidates: count (pass 1) and emit (pass 2) of item c.
template <typename T>
struct KeepTopPasses {
  const WireIndex *idx;
  const T *val;
  std::size_t m;
  T tau;
  ValueCoding coding;
  WireIndex *out_idx;
  T *out_val;
  T *remainders;          // nullptr: not written (they are 0)
  std::uint64_t *counts;  // per work item: packed (filter.hpp), then the packed prefix
  std::uint32_t *nonfinite;

  KOKKOS_INLINE_FUNCTION std::size_t end_of(std::size_t c) const {
    const std::size_t end = (c + 1) * kListChunk;
    return end < m ? end : m;
  }

  /// Whether candidate j is selected at tau, and whether it is a tie there (finite, |v| == tau):
  /// branch-free, since about a third of the candidates are kept, at random.
  KOKKOS_INLINE_FUNCTION void classify_at(std::size_t j, bool &selected, bool &tie,
                                          bool &finite) const {
    const T v = val[j];
    const T magnitude = std::fabs(v);
    finite = v - v == T(0);
    selected = !(magnitude < tau) & (v != T(0));
    tie = selected & finite & (magnitude == tau);
  }

  KOKKOS_INLINE_FUNCTION void count(std::size_t c) const {
    std::size_t strict = 0, ties = 0, bad = 0;
    for (std::size_t j = c * kListChunk, end = end_of(c); j < end; ++j) {
      bool selected, tie, finite;
      classify_at(j, selected, tie, finite);
      strict += std::size_t(selected & !tie);
      ties += std::size_t(tie);
      bad += std::size_t(selected & !finite);
    }
    counts[c] = pack_counts(strict, ties);
    nonfinite[c] = static_cast<std::uint32_t>(bad);
  }

  /// The kept entries of item c, to positions [from, to) of the output (from the packed prefix
  /// `before`), then rounded for the wire, what the wire does not carry of each into the
  /// remainders.
  KOKKOS_INLINE_FUNCTION void emit(std::size_t c, std::uint64_t before, std::size_t to,
                                   std::size_t budget) const {
    std::size_t tie_rank = ties_of(before);
    const std::size_t from = strict_of(before) + (tie_rank < budget ? tie_rank : budget);
    std::size_t position = from;
    for (std::size_t j = c * kListChunk, end = end_of(c); j < end && position < to; ++j) {
      bool selected, tie, finite;
      classify_at(j, selected, tie, finite);
      const bool kept = selected & (!tie | (tie_rank < budget));
      tie_rank += std::size_t(tie);
      out_idx[position] = idx[j];  // written always, kept only when the position moves on
      out_val[position] = val[j];
      position += std::size_t(kept);
    }
    round_for_the_wire(out_val, remainders, from, to, coding);
  }
};

struct KeepCounts;  // Scratch tags
struct KeepNonfinite;

/// Backend::keep_top on `exec`: every buffer in its memory space.
template <typename T, typename Exec>
std::size_t keep_top(const Exec &exec, const WireIndex *idx, const T *val, std::size_t m, T tau,
                     std::size_t limit, ValueCoding coding, WireIndex *out_idx, T *out_val,
                     T *remainders) {
  const std::size_t chunks = (m + kListChunk - 1) / kListChunk;
  if (chunks == 0) return 0;
  const Scratch<KeepCounts, std::uint64_t, Exec> counts(chunks);
  const Scratch<KeepNonfinite, std::uint32_t, Exec> nonfinite(chunks);
  const KeepTopPasses<T> passes{idx,     val,     m,          tau,           coding,
                                out_idx, out_val, remainders, counts.data(), nonfinite.data()};
  const auto budget_for = [limit](std::uint64_t total, std::size_t bad) {
    if (limit == kEveryTie) return kEveryTie;
    const std::size_t above = strict_of(total) - bad;
    return limit > above ? limit - above : std::size_t(0);
  };
  if constexpr (kHostAccessible<Exec>) {
    if (chunks == 1) {  // the calling thread: a few thousand entries cost less than a launch
      passes.count(0);
      const std::uint64_t total = counts.data()[0];
      const std::size_t budget = budget_for(total, nonfinite.data()[0]);
      const std::size_t kept = strict_of(total) + std::min(ties_of(total), budget);
      passes.emit(0, 0, kept, budget);
      return kept;
    }
  }
  const Buffer<std::uint64_t, Exec> first(counts.data(), chunks);
  const Range<Exec> work = range(exec, chunks);
  Kokkos::parallel_for(
      "dct_keep_count", work,
      KOKKOS_LAMBDA(const std::int64_t c) { passes.count(std::size_t(c)); });
  fence(exec);
  std::uint64_t total = 0;
  std::size_t bad = 0;
  scan_counts(exec, counts.data(), nonfinite.data(), chunks, total, bad);
  const std::size_t budget = budget_for(total, bad);
  const auto position = KOKKOS_LAMBDA(const std::uint64_t before) {
    return strict_of(before) + (ties_of(before) < budget ? ties_of(before) : budget);
  };
  Kokkos::parallel_for(
      "dct_keep_emit", work, KOKKOS_LAMBDA(const std::int64_t c) {
        const std::uint64_t after = std::size_t(c) + 1 < chunks ? first(c + 1) : total;
        passes.emit(std::size_t(c), first(c), position(after), budget);
      });
  fence(exec);
  return position(total);
}

/// Backend::trim_candidates on `exec`: every buffer in its memory space. Long lists on the
/// host take trim_in_window (trim.hpp); the rest, ranks (kth_largest.hpp) then keep_top.
static_assert(kShortList >= kTrimSample, "the window's sample must not outnumber its list");
template <typename T, typename Exec>
Trimmed<T> trim(const Exec &exec, const WireIndex *idx, const T *val, std::size_t m, std::size_t k,
                std::size_t aim, ValueCoding coding, WireIndex *out_idx, T *out_val,
                T *remainders) {
  Trimmed<T> trimmed;
  if constexpr (kHostAccessible<Exec>) {
    if (m > kShortList &&
        trim_in_window(exec, idx, val, m, k, aim, coding, out_idx, out_val, remainders, trimmed))
      return trimmed;
  }
  const CandidateRanks<T> ranks = rank_list<T>(exec, val, m, k, aim);
  trimmed = Trimmed<T>{ranks.finite, ranks.kth, ranks.aimth, 0};
  if (ranks.finite > k)
    trimmed.kept =
        keep_top<T>(exec, idx, val, m, ranks.kth, k, coding, out_idx, out_val, remainders);
  return trimmed;
}

/// Elements of the result per work item of sum_lists.
constexpr std::size_t kSumStripe = std::size_t(1) << 16;

/// One stripe [from, to) of sum_lists, portable: zeroed, then every list's entries added in
/// list order while the stripe stays in the core's cache.
template <typename T>
KOKKOS_INLINE_FUNCTION void sum_stripe(const SparseList<T> *lists, std::size_t count, T *out,
                                       std::size_t from, std::size_t to, bool first) {
  for (std::size_t i = from; i < to; ++i) out[i] = T(0);
  for (std::size_t l = 0; l < count; ++l) {
    const WireIndex *const idx = lists[l].idx;
    const T *const val = lists[l].val;
    const std::size_t size = lists[l].size;
    std::size_t j = first ? 0 : count_below(idx, size, from);
    for (; j < size && std::size_t(idx[j]) < to; ++j) out[idx[j]] += val[j];
  }
}

#if defined(DCT_KOKKOS_HOST_SSE2)
/// Results from this size on are written with non-temporal stores (sum_stripe_lines): past the
/// caches they save the read of each line, and smaller ones stay in cache for the optimiser
/// that reads them next (docs/kernels.md has the measurements).
constexpr std::size_t kStreamedResultBytes = std::size_t(8) << 20;

/// One 64-byte line of `out`: `source`'s, or zeros where it is null; streamed or plain.
inline void store_line(void *out, const void *source, bool stream) {
  auto *const target = static_cast<__m128i *>(out);
  for (int q = 0; q < 4; ++q) {
    const __m128i value = source != nullptr
                              ? _mm_load_si128(static_cast<const __m128i *>(source) + q)
                              : _mm_setzero_si128();
    if (stream)
      _mm_stream_si128(target + q, value);
    else
      _mm_store_si128(target + q, value);
  }
}

/// The same stripe on the host, one 64-byte cache line at a time: each line is built in
/// registers (zeros, then the lists' entries in list order, so the bits are sum_stripe's) and
/// written whole, with non-temporal stores where `stream`, which skip the read of the line a
/// plain store (or memset) makes first: faster than a memset followed by the entries' adds
/// (measured: docs/internals.md, measured reasons). The lines that are not whole (the stripe's
/// ends, an unaligned start) go through sum_stripe.
template <typename T>
inline void sum_stripe_lines(const SparseList<T> *lists, std::size_t count, T *out,
                             std::size_t from, std::size_t to, bool first, bool stream) {
  constexpr std::size_t kLine = 64 / sizeof(T);
  const std::size_t misaligned = (reinterpret_cast<std::uintptr_t>(out + from) % 64) / sizeof(T);
  const std::size_t lines_from = misaligned == 0 ? from : from + (kLine - misaligned);
  if (reinterpret_cast<std::uintptr_t>(out) % sizeof(T) != 0 || lines_from + kLine > to) {
    sum_stripe(lists, count, out, from, to, first);
    return;
  }
  const std::size_t lines_to = lines_from + (to - lines_from) / kLine * kLine;
  sum_stripe(lists, count, out, from, lines_from, first);
  constexpr std::size_t kMaxLists = 64;  // cursors on the stack; more lists: in groups
  std::size_t cursor[kMaxLists];
  for (std::size_t group = 0; group < count; group += kMaxLists) {
    const std::size_t lists_here = count - group < kMaxLists ? count - group : kMaxLists;
    for (std::size_t l = 0; l < lists_here; ++l)
      cursor[l] = count_below(lists[group + l].idx, lists[group + l].size, lines_from);
    std::size_t line = lines_from;
    if (count <= kMaxLists) {
      // The lines before the lists' next entry are zeros, streamed as they are: at density
      // 0.01 six lines in seven (a quarter of sum_lists' time at 1M floats).
      for (;;) {
        std::size_t next = lines_to;
        for (std::size_t l = 0; l < lists_here; ++l)
          if (cursor[l] < lists[l].size && std::size_t(lists[l].idx[cursor[l]]) < next)
            next = lists[l].idx[cursor[l]];
        for (; line + kLine <= next && line < lines_to; line += kLine)
          store_line(out + line, nullptr, stream);
        if (line >= lines_to) break;
        alignas(64) T values[kLine] = {};
        const std::size_t end = line + kLine;
        for (std::size_t l = 0; l < lists_here; ++l) {
          const SparseList<T> &list = lists[l];
          std::size_t j = cursor[l];
          for (; j < list.size && std::size_t(list.idx[j]) < end; ++j)
            values[list.idx[j] - line] += list.val[j];
          cursor[l] = j;
        }
        store_line(out + line, values, stream);
        line += kLine;
      }
      break;  // one group
    }
    for (; line < lines_to; line += kLine) {
      alignas(64) T values[kLine];
      if (group == 0) {
        for (std::size_t e = 0; e < kLine; ++e) values[e] = T(0);
      } else {
        std::memcpy(values, out + line, sizeof values);  // earlier groups' sums
      }
      const std::size_t end = line + kLine;
      for (std::size_t l = 0; l < lists_here; ++l) {
        const SparseList<T> &list = lists[group + l];
        std::size_t j = cursor[l];
        for (; j < list.size && std::size_t(list.idx[j]) < end; ++j)
          values[list.idx[j] - line] += list.val[j];
        cursor[l] = j;
      }
      store_line(out + line, values, stream && count <= kMaxLists);
    }
  }
  if (stream) _mm_sfence();  // the streamed lines are visible before the stripe is written
  sum_stripe(lists, count, out, lines_to, to, false);
}
#endif

/// One stripe of sum_lists on Exec: in lines, large results with non-temporal stores, on the
/// host (SSE2); element by element elsewhere. (A function of its own: nvcc refuses an extended
/// lambda whose first use of a captured variable is inside an if constexpr.)
template <typename Exec, typename T>
KOKKOS_INLINE_FUNCTION void sum_stripe_on(const SparseList<T> *lists, std::size_t count, T *out,
                                          std::size_t from, std::size_t to, bool first,
                                          [[maybe_unused]] bool stream) {
#if defined(DCT_KOKKOS_HOST_SSE2)
  if constexpr (kHostAccessible<Exec>) {
    sum_stripe_lines(lists, count, out, from, to, first, stream);
    return;
  }
#endif
  sum_stripe(lists, count, out, from, to, first);
}

/// Backend::sum_lists on `exec`: `lists` in host memory, their arrays and `out` in Exec's.
template <typename T, typename Exec>
void sum_lists(const Exec &exec, const SparseList<T> *lists, std::size_t count, T *out,
               std::size_t begin, std::size_t end) {
  if (end <= begin) return;
  const SparseList<T> *in = lists;
  Kokkos::View<SparseList<T> *, typename Exec::memory_space> device_lists;
  if constexpr (!kHostAccessible<Exec>) {  // the descriptors where the kernel can read them
    device_lists = Kokkos::View<SparseList<T> *, typename Exec::memory_space>(
        Kokkos::view_alloc(Kokkos::WithoutInitializing, "dct::lists"), count);
    Kokkos::deep_copy(exec, device_lists,
                      Kokkos::View<const SparseList<T> *, Kokkos::HostSpace,
                                   Kokkos::MemoryTraits<Kokkos::Unmanaged>>(lists, count));
    in = device_lists.data();
  }
  const std::size_t stripes = (end - begin + kSumStripe - 1) / kSumStripe;
#if defined(DCT_KOKKOS_HOST_SSE2)
  const bool stream = (end - begin) * sizeof(T) >= kStreamedResultBytes;
#else
  const bool stream = false;
#endif
  const auto stripe = KOKKOS_LAMBDA(const std::size_t s) {
    const std::size_t from = begin + s * kSumStripe;
    const std::size_t to = from + kSumStripe < end ? from + kSumStripe : end;
    sum_stripe_on<Exec>(in, count, out, from, to, s == 0, stream);
  };
  if constexpr (kHostAccessible<Exec>) {
    if (stripes == 1) {
      stripe(0);
      return;
    }
  }
  Kokkos::parallel_for(
      "dct_sum_lists", range(exec, stripes),
      KOKKOS_LAMBDA(const std::int64_t s) { stripe(std::size_t(s)); });
  fence(exec);
}

}  // namespace dct::detail::backends::kokkos
