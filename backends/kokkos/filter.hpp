// The Kokkos backend's selection pass (Backend::select): acc = send + residual stored into the
// residual, and the entries the keep rule selects at tau compacted to (index, acc) lists in index
// order, with ties at tau broken by index when a `limit` asks for an exact top k. One source for
// every execution space.
//
// Private header of backends/kokkos/.
#pragma once

#include <algorithm>

#include "portable.hpp"
#include "simd.hpp"

namespace dct::detail::backends::kokkos {

// Two passes over work items of kFilterChunk entries, reading send and residual once. Pass 1
// (stage), in blocks of 16: acc is computed and stored with no branch while a 16-bit mask of the
// block's selected entries is built (SSE2 where the host has it: compare + movemask; a plain loop
// elsewhere); only the set bits of four blocks' masks are then visited, on data still in L1, and
// each selected entry is classified (above tau, a tie at tau, NaN/Inf) and staged as (index, acc)
// in the work item's slot; with AVX-512 the block's entries are compress-stored there instead,
// with no branch (simd.hpp). An exclusive scan of the work items' counts, packed as (entries above
// or non-finite) << 32 | ties, gives each its output position and the ties before it; pass 2 (emit)
// copies the staged entries there (a few percent of the tensor's bytes), skipping the ties past the
// limit. A work item with more selected entries than its slot holds finds the rest again in pass 2,
// after its last staged entry (the residual holds acc there). A parallel_scan over the data read
// send and residual twice on threaded backends, far slower than Serial (measured: docs/kernels.md,
// "The fused filter").
//
// The pass writes nothing but acc into the residual: which of the entries are finally sent, and
// what stays home of them, is keep_top's work on the short list (lists.hpp). With momentum
// correction (select_with_momentum) the pass also writes the call's velocity, which it takes as
// its send: each 4,096 entries of it are updated just before the stage reads them, still in L1,
// so the velocity costs the pass the reads of the gradient and the old velocity and the write of
// the new one, not a pass of its own whose output the selection then reads back from memory.
//
// On a device every work item is one thread that walks its 4,096 entries: the layout is the
// host's, tuned there; it has not been measured on a GPU (docs/kernels.md).

/// A work item's selected entries as the scan adds them: (above or non-finite) << 32 | ties.
/// Each count is at most n <= DCT_MAX_COUNT < 2^32, so the halves never carry into each other.
KOKKOS_INLINE_FUNCTION std::uint64_t pack_counts(std::size_t strict, std::size_t ties) {
  return (static_cast<std::uint64_t>(strict) << 32) | static_cast<std::uint64_t>(ties);
}
KOKKOS_INLINE_FUNCTION std::size_t strict_of(std::uint64_t packed) {
  return static_cast<std::size_t>(packed >> 32);
}
KOKKOS_INLINE_FUNCTION std::size_t ties_of(std::uint64_t packed) {
  return static_cast<std::size_t>(packed & 0xffffffffu);
}

/// The work items' packed counts turned into their exclusive prefix, in place; `total` their
/// sum, `bad` the sum of their NaN/Inf counts. On the calling thread where the memory is the
/// host's (a few items per thread; Kokkos' scans and reductions into a value fence with a
/// label, an allocation per call), with kernels on a device.
template <typename Exec>
void scan_counts(const Exec &exec, std::uint64_t *counts, const std::uint32_t *nonfinite,
                 std::size_t items, std::uint64_t &total, std::size_t &bad) {
  total = 0;
  bad = 0;
  if constexpr (kHostAccessible<Exec>) {
    for (std::size_t c = 0; c < items; ++c) {
      const std::uint64_t count = counts[c];
      counts[c] = total;
      total += count;
      bad += nonfinite[c];
    }
  } else {
    const Buffer<std::uint64_t, Exec> first(counts, items);
    const Buffer<const std::uint32_t, Exec> bad_counts(nonfinite, items);
    const Range<Exec> work = range(exec, items);
    Kokkos::parallel_scan(
        "dct_scan", work,
        KOKKOS_LAMBDA(const std::int64_t c, std::uint64_t &position, const bool final) {
          const std::uint64_t count = first(c);
          if (final) first(c) = position;
          position += count;
        },
        total);
    Kokkos::parallel_reduce(
        "dct_bad", work,
        KOKKOS_LAMBDA(const std::int64_t c, std::size_t &sum) { sum += bad_counts(c); }, bad);
  }
}

using kernel_logic::classify;
using kernel_logic::Selection;

/// Emits selected entries in index order from `position` on: every one but the ties whose rank
/// (counted from `tie`) reaches `budget`; writes while `position < capacity`.
template <typename T>
struct Emitter {
  T tau;
  std::size_t budget;
  WireIndex *idx;
  T *val;
  std::size_t capacity;
  std::size_t position;
  std::size_t tie;

  KOKKOS_INLINE_FUNCTION void operator()(std::size_t i, T acc) {
    if (classify(acc, tau) == Selection::tie && tie++ >= budget) return;
    if (position < capacity) {
      idx[position] = static_cast<WireIndex>(i);
      val[position] = acc;
    }
    ++position;
  }
};

/// select_with_momentum's velocity update, whose `out` is the selection's send (its `send`, the
/// gradient, nullptr: the send is given).
template <typename T>
using VelocityPass = kernel_logic::MomentumUpdate<T>;

/// One selection call's work items: pass 1 (stage) and pass 2 (emit) of work item c.
template <typename T, bool kHasSend>
struct SelectPasses {
  const T *send;  // with a velocity pass: its output
  T *residual;
  std::size_t n;
  T tau;
  WireIndex *idx;
  T *val;
  std::size_t capacity;
  std::size_t slot;
  WireIndex *staged_index;
  T *staged_acc;
  std::uint64_t *counts_out;  // per work item: packed, then (after the scan) the packed prefix
  std::uint32_t *nonfinite;
  std::size_t span;       // entries per work item, a multiple of kFilterChunk
  SparseList<T> pending;  // the previous call's writes into the residual (val nullptr: zeros)
  VelocityPass<T> velocity;

  KOKKOS_INLINE_FUNCTION std::size_t end_of(std::size_t c) const {
    const std::size_t end = (c + 1) * span;
    return end < n ? end : n;
  }

  /// Pass 1: the previous call's pending writes, acc into the residual, the selected entries
  /// staged in the work item's slot and counted (past its slot too). The pending writes go in
  /// 4,096 entries at a time, just before the pass reads them: they land on lines the pass loads
  /// anyway, where a scatter of their own after the previous call missed the cache on each
  /// (measured: docs/kernels.md, "The trim").
  KOKKOS_INLINE_FUNCTION void stage(std::size_t c) const {
    const std::size_t begin = c * span, end = end_of(c);
    WireIndex *const slot_index = staged_index + c * slot;
    T *const slot_acc = staged_acc + c * slot;
    StageCounts counts;
    std::size_t p = pending.size > 0 ? count_below(pending.idx, pending.size, begin) : 0;
    for (std::size_t from = begin; from < end; from += kFilterChunk) {
      const std::size_t to = from + kFilterChunk < end ? from + kFilterChunk : end;
      for (; p < pending.size && std::size_t(pending.idx[p]) < to; ++p)
        residual[pending.idx[p]] = pending.val != nullptr ? pending.val[p] : T(0);
      if (kHasSend && velocity.send != nullptr) velocity.run(from, to);
      stage_range(from, to, slot_index, slot_acc, counts);
    }
    counts_out[c] = pack_counts(counts.strict, counts.ties);
    nonfinite[c] = static_cast<std::uint32_t>(counts.bad);
  }

  /// Pass 1 over [from, to) (whole blocks but at the tensor's end).
  KOKKOS_INLINE_FUNCTION void stage_range(std::size_t from, std::size_t to, WireIndex *slot_index,
                                          T *slot_acc, StageCounts &counts) const {
    std::size_t i = from;
#if defined(DCT_KOKKOS_HOST_AVX512)
    if (host_simd == HostSimd::avx512)
      i = stage_avx512<kHasSend>(send, residual, from, to, tau, slot_index, slot_acc, slot, counts);
#endif
    const auto stage_bits = [&](std::size_t first, std::uint64_t mask) {
      for (; mask != 0; mask &= mask - 1) {
        const std::size_t at = first + static_cast<std::size_t>(lowest_set_bit(mask));
        const T acc = residual[at];
        const Selection kind = classify(acc, tau);
        counts.ties += kind == Selection::tie ? 1 : 0;
        counts.strict += kind == Selection::tie ? 0 : 1;
        counts.bad += kind == Selection::nonfinite ? 1 : 0;
        if (counts.staged < slot) {
          slot_index[counts.staged] = static_cast<WireIndex>(at);
          slot_acc[counts.staged] = acc;
          ++counts.staged;
        }
      }
    };
    constexpr BlockPass kPass = kHasSend ? BlockPass::filter : BlockPass::keep;
    const auto block = [&](std::size_t at) {
      return block_mask<kPass, kHasSend, T>(kHasSend ? send + at : nullptr, residual + at,
                                            residual + at, tau);
    };
    // Four blocks' masks at a time: a loop over the set bits of 64 entries, whose branches
    // mispredict less often than one per 16-entry block (simd.hpp).
    for (; i + 4 * kFilterBlock <= to; i += 4 * kFilterBlock) {
      const std::uint64_t mask = std::uint64_t(block(i)) |
                                 std::uint64_t(block(i + kFilterBlock)) << 16 |
                                 std::uint64_t(block(i + 2 * kFilterBlock)) << 32 |
                                 std::uint64_t(block(i + 3 * kFilterBlock)) << 48;
      stage_bits(i, mask);
    }
    for (; i + kFilterBlock <= to; i += kFilterBlock) stage_bits(i, block(i));
    if (i < to) {  // the last, partial block
      std::uint64_t mask = 0;
      for (std::size_t at = i; at < to; ++at) {
        if constexpr (kHasSend) residual[at] = send[at] + residual[at];
        mask |= std::uint64_t(keep_entry(residual[at], tau)) << (at - i);
      }
      stage_bits(i, mask);
    }
  }

  /// Pass 2: work item c's `count` selected entries, from the packed prefix `before` on.
  KOKKOS_INLINE_FUNCTION void emit(std::size_t c, std::uint64_t before, std::size_t count,
                                   std::size_t budget) const {
    const std::size_t ties_before = ties_of(before);
    Emitter<T> out{tau,        budget,
                   idx,        val,
                   capacity,   strict_of(before) + (ties_before < budget ? ties_before : budget),
                   ties_before};
    if (out.position >= capacity) return;
    const WireIndex *const slot_index = staged_index + c * slot;
    const T *const slot_acc = staged_acc + c * slot;
    const std::size_t staged = count < slot ? count : slot;
    for (std::size_t j = 0; j < staged && out.position < capacity; ++j)
      out(slot_index[j], slot_acc[j]);
    if (count == staged) return;
    // The slot overflowed: the selected entries after the last staged one, found again.
    const std::size_t from = staged > 0 ? std::size_t(slot_index[staged - 1]) + 1 : c * span;
    for (std::size_t i = from, end = end_of(c); i < end && out.position < capacity; ++i)
      if (keep_entry(residual[i], tau)) out(i, residual[i]);
  }
};

struct SelectIndex;  // Scratch tags
struct SelectValues;
struct SelectCounts;
struct SelectNonfinite;

template <typename T, bool kHasSend, typename Exec>
Selected select_chunks(const Exec &exec, const T *send, T *residual, std::size_t n, T tau,
                       std::size_t limit, WireIndex *idx, T *val, std::size_t capacity,
                       const SparseList<T> &pending, const VelocityPass<T> &velocity) {
  const std::size_t chunks = (n + kFilterChunk - 1) / kFilterChunk;
  if (chunks == 0) return Selected{};
  // Work items of whole chunks: on the host a few per thread (each stages into one contiguous
  // slot: a slot per 4,096-entry chunk scattered the staging over far more memory and cost more;
  // measured: docs/internals.md, measured reasons), one per chunk on a device.
  std::size_t items = chunks;
  if constexpr (kHostAccessible<Exec>) {
    // Asked once: Kokkos 4's OpenMP answers through a default-constructed instance, an
    // allocation per call.
    static const std::size_t threads = static_cast<std::size_t>(exec.concurrency());
    items = std::min(chunks, threads > 1 ? 8 * threads : std::size_t(1));
  }
  const std::size_t span = (chunks + items - 1) / items * kFilterChunk;
  items = (n + span - 1) / span;
  // The limit's budget of ties: what is left of it after every finite entry above tau.
  const auto budget_for = [limit](std::uint64_t total, std::size_t bad) {
    if (limit == kEveryTie) return kEveryTie;
    const std::size_t above = strict_of(total) - bad;
    return limit > above ? limit - above : std::size_t(0);
  };
  const auto selected = [](std::uint64_t total, std::size_t budget) {
    return strict_of(total) + (ties_of(total) < budget ? ties_of(total) : budget);
  };
  if constexpr (kHostAccessible<Exec>) {
    if (items == 1 && limit == kEveryTie) {
      // One work item and no limit (Serial, one thread, small tensors: every call at the
      // defaults): staged straight into the output, the first `capacity` in index order, on the
      // calling thread. Without a limit staging is emitting.
      std::uint64_t total = 0;
      std::uint32_t bad = 0;
      const SelectPasses<T, kHasSend> direct{send,   residual, n,        tau,     idx,
                                             val,    capacity, capacity, idx,     val,
                                             &total, &bad,     span,     pending, velocity};
      direct.stage(0);
      return Selected{strict_of(total) + ties_of(total), bad};
    }
  }
  // A slot holds a quarter more than a work item's share of the capacity (which is itself
  // about twice what a call selects): overflowing it is rare, and costs the work item only a
  // second look at its own blocks.
  const std::size_t share = (capacity + capacity / 4 + items - 1) / items + 32;
  const std::size_t slot = capacity == 0 ? 0 : std::min<std::size_t>(span, share);
  const Scratch<SelectIndex, WireIndex, Exec> staged_index(items * slot);
  const Scratch<SelectValues, T, Exec> staged_acc(items * slot);
  const Scratch<SelectCounts, std::uint64_t, Exec> counts(items);
  const Scratch<SelectNonfinite, std::uint32_t, Exec> nonfinite(items);
  const SelectPasses<T, kHasSend> passes{send,
                                         residual,
                                         n,
                                         tau,
                                         idx,
                                         val,
                                         capacity,
                                         slot,
                                         staged_index.data(),
                                         staged_acc.data(),
                                         counts.data(),
                                         nonfinite.data(),
                                         span,
                                         pending,
                                         velocity};
  if constexpr (kHostAccessible<Exec>) {
    if (items == 1) {  // both passes here, on the calling thread
      passes.stage(0);
      const std::uint64_t total = counts.data()[0];
      const std::size_t bad = nonfinite.data()[0], budget = budget_for(total, bad);
      passes.emit(0, 0, strict_of(total) + ties_of(total), budget);
      return Selected{selected(total, budget), bad};
    }
  }
  const Buffer<std::uint64_t, Exec> first(counts.data(), items);
  const Range<Exec> work = range(exec, items);
  Kokkos::parallel_for(
      "dct_select", work, KOKKOS_LAMBDA(const std::int64_t c) { passes.stage(std::size_t(c)); });
  fence(exec);
  std::uint64_t total = 0;
  std::size_t bad = 0;
  scan_counts(exec, counts.data(), nonfinite.data(), items, total, bad);
  const std::size_t budget = budget_for(total, bad);
  if (capacity > 0) {
    Kokkos::parallel_for(
        "dct_select_emit", work, KOKKOS_LAMBDA(const std::int64_t c) {
          const std::uint64_t before = first(c);
          const std::uint64_t after = std::size_t(c) + 1 < items ? first(c + 1) : total;
          const std::uint64_t count = after - before;
          passes.emit(std::size_t(c), before, strict_of(count) + ties_of(count), budget);
        });
  }
  fence(exec);
  return Selected{selected(total, budget), bad};
}

/// Backend::select on `exec`: buffers in its memory space, `send` may be empty (residual = acc).
/// With `velocity.send` (select_with_momentum) the send is velocity.out, written by the pass.
template <typename T, typename Exec>
Selected select(const Exec &exec, const Buffer<const T, Exec> &send,
                const Buffer<T, Exec> &residual, T tau, std::size_t limit,
                const Buffer<WireIndex, Exec> &idx, const Buffer<T, Exec> &val,
                std::size_t capacity, const SparseList<T> &pending,
                const VelocityPass<T> &velocity = {nullptr, nullptr, T(0), nullptr}) {
  const std::size_t n = residual.extent(0);
  return send.data() != nullptr
             ? select_chunks<T, true>(exec, send.data(), residual.data(), n, tau, limit, idx.data(),
                                      val.data(), capacity, pending, velocity)
             : select_chunks<T, false>(exec, send.data(), residual.data(), n, tau, limit,
                                       idx.data(), val.data(), capacity, pending, velocity);
}

}  // namespace dct::detail::backends::kokkos
