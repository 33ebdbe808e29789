// The Kokkos core's filter: the kept entries of acc = send + residual compacted to (index,
// value) lists, the rest left in the residual (error feedback). One source for every execution
// space.
//
// Private header of backends/kokkos/.
#pragma once

#include <algorithm>

#include "portable.hpp"

namespace dct::detail::kernels::kokkos {

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

// On a device every work item is one thread that walks its 4,096 entries: the layout is the
// host's, tuned there; it has not been measured on a GPU (docs/kernels.md).

/// One filter call's work items: pass 1 (stage) and pass 2 (emit) of work item c.
template <typename T, bool kHasSend>
struct FilterPasses {
  const T *send;
  T *residual;
  std::size_t n;
  T tau;
  ValueCoding coding;
  WireIndex *idx;
  T *val;
  std::size_t capacity;
  std::size_t chunks;
  std::size_t slot;
  WireIndex *staged_index;
  T *staged_acc;

  /// Pass 1: acc into the residual, the kept entries staged in the work item's slot; returns
  /// the work item's count of kept entries (past its slot too).
  KOKKOS_INLINE_FUNCTION std::size_t stage(std::size_t c) const {
    const std::size_t begin = c * kFilterChunk;
    const std::size_t end = begin + kFilterChunk < n ? begin + kFilterChunk : n;
    WireIndex *const slot_index = staged_index + c * slot;
    T *const slot_acc = staged_acc + c * slot;
    std::size_t count = 0;
    auto stage_block = [&](std::size_t block, unsigned mask) {
      for (; mask != 0 && count < slot; mask &= mask - 1, ++count) {
        const std::size_t i = block + static_cast<std::size_t>(lowest_set_bit(mask));
        const T acc = residual[i];
        slot_index[count] = static_cast<WireIndex>(i);
        slot_acc[count] = acc;
        residual[i] = wire_remainder(acc, wire_value(acc, coding));
      }
      count += static_cast<std::size_t>(set_bits(mask));  // past the slot
    };
    std::size_t block = begin;
    for (; block + kFilterBlock <= end; block += kFilterBlock)
      stage_block(block,
                  block_mask<BlockPass::filter, kHasSend, T>(
                      kHasSend ? send + block : nullptr, residual + block, residual + block, tau));
    if (block < end) {  // the last, partial block
      unsigned mask = 0;
      for (std::size_t i = block; i < end; ++i) {
        residual[i] = (kHasSend ? send[i] : T(0)) + residual[i];
        mask |= unsigned(keep_entry(residual[i], tau)) << (i - block);
      }
      stage_block(block, mask);
    }
    return count;
  }

  /// Pass 2: work item c's `count` kept entries to positions begin, ... (while the capacity
  /// lasts; the others get acc back in the residual).
  KOKKOS_INLINE_FUNCTION void emit(std::size_t c, std::size_t begin, std::size_t count) const {
    const WireIndex *const slot_index = staged_index + c * slot;
    const T *const slot_acc = staged_acc + c * slot;
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
    const std::size_t stop = c * kFilterChunk + kFilterChunk;
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
  }
};

struct FilterSlots;  // Scratch tags
struct FilterIndex;
struct FilterFirst;

template <typename T, bool kHasSend, typename Exec>
std::size_t filter_chunks(const Exec &exec, const T *send, T *residual, std::size_t n, T tau,
                          ValueCoding coding, WireIndex *idx, T *val, std::size_t capacity) {
  const std::size_t chunks = (n + kFilterChunk - 1) / kFilterChunk;
  if (chunks == 0) return 0;
  // A slot holds twice a work item's share of the capacity: overflowing it is rare, and costs
  // the work item only a second look at its own blocks.
  const std::size_t share = (2 * capacity + chunks - 1) / chunks + 32;
  const std::size_t slot = std::min<std::size_t>(kFilterChunk, share);
  const Scratch<FilterIndex, WireIndex, Exec> staged_index(chunks * slot);
  const Scratch<FilterSlots, T, Exec> staged_acc(chunks * slot);
  const FilterPasses<T, kHasSend> passes{send,
                                         residual,
                                         n,
                                         tau,
                                         coding,
                                         idx,
                                         val,
                                         capacity,
                                         chunks,
                                         slot,
                                         staged_index.data(),
                                         staged_acc.data()};
  if constexpr (kHostAccessible<Exec>) {
    if (chunks == 1) {
      // One work item (n <= kFilterChunk): both passes here, on the calling thread. Three
      // kernel launches and a scan cost more than the work on such tensors (about 1 us of a
      // call of 1,000 floats); the passes are the kernels' own, so the bits are theirs.
      const std::size_t kept = passes.stage(0);
      passes.emit(0, 0, kept);
      return kept;
    }
  }
  const Scratch<FilterFirst, std::size_t, Exec> first_scratch(chunks);
  const Buffer<std::size_t, Exec> first(first_scratch.data(), chunks);
  const Range<Exec> work = range(exec, chunks);
  Kokkos::parallel_for(
      "dct::filter_stage", work,
      KOKKOS_LAMBDA(const std::int64_t c) { first(c) = passes.stage(std::size_t(c)); });
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
        passes.emit(std::size_t(c), begin, count);
      });
  exec.fence();
  return kept;
}

/// Backend::filter on `exec`: buffers in its memory space, `send` may be empty (zeros).
template <typename T, typename Exec>
std::size_t filter(const Exec &exec, const Buffer<const T, Exec> &send,
                   const Buffer<T, Exec> &residual, T tau, ValueCoding coding,
                   const Buffer<WireIndex, Exec> &idx, const Buffer<T, Exec> &val,
                   std::size_t capacity) {
  const std::size_t n = residual.extent(0);
  return send.data() != nullptr
             ? filter_chunks<T, true>(exec, send.data(), residual.data(), n, tau, coding,
                                      idx.data(), val.data(), capacity)
             : filter_chunks<T, false>(exec, send.data(), residual.data(), n, tau, coding,
                                       idx.data(), val.data(), capacity);
}

}  // namespace dct::detail::kernels::kokkos
