// The host path of Backend::trim_candidates (lists.hpp: trim): a call's candidates ranked and
// the top k of them kept in one pass over the list, around a window that a sample of their keys
// places at the k-th largest.
//
// The pass notes every candidate above the window (about a third of them, at random, so without
// a branch; compress stores with AVX-512, simd.hpp) and those inside it (a few percent of the
// list), and counts; a selection among the window's keys gives tau; a merge of the two notes
// (both in index order) writes the kept entries, rounded for the wire, to the output. Three
// passes over the list and their mispredicted branches (rank, count, emit) became one. The list
// is cut into work items, a few per thread: the pass and the merge run on all threads, the
// selection in the window (a few percent of the list) on the calling one.
//
// Private header of backends/kokkos/.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "portable.hpp"
#include "simd.hpp"

namespace dct::detail::backends::kokkos {

/// Where trim_in_window's window lies, from a stratified sample of the list's keys.
template <typename T>
struct TrimWindow {
  KeyBits<T> high = 0, low = 0;  // keys in [low, high] are noted; above high, kept
  KeyBits<T> aim = 0;            // the sample's estimate of the aim-th largest
  std::size_t room = 0;          // the window holds at most this many (twice the expected)
};

/// The keys place_window samples.
constexpr std::size_t kTrimSample = 2048;

/// Needs k < m (a share k/m in (0, 1)) and m >= kTrimSample.
template <typename T>
TrimWindow<T> place_window(const T *val, std::size_t m, std::size_t k, std::size_t aim,
                           KeyBits<T> infinity) {
  using Bits = KeyBits<T>;
  constexpr std::size_t kSample = kTrimSample;
  Bits sample[kSample];
  std::size_t sampled_bad = 0;
  for (std::size_t j = 0; j < kSample; ++j) {
    sample[j] = abs_key<T>(val[j * m / kSample]);
    sampled_bad += sample[j] >= infinity ? 1 : 0;
  }
  // The sample's keys at the places below, largest first (partial selections: a sort was a
  // large share of the trim; measured: docs/internals.md, measured reasons).
  const auto key_at = [&](std::size_t place) {
    std::nth_element(sample, sample + place, sample + kSample, std::greater<Bits>());
    return sample[place];
  };
  // 4 standard deviations of the sample quantile (and 2 more) on either side of the k-th's
  // estimated position among the finite keys.
  const auto at = [&](std::size_t rank) {
    return double(rank) / double(m) * kSample + double(sampled_bad);
  };
  const double q = double(k) / double(m), sigma = std::sqrt(kSample * q * (1 - q));
  const double top = at(k) - 4 * sigma - 2, bottom = at(k) + 4 * sigma + 2;
  TrimWindow<T> window;
  window.high = top <= double(sampled_bad) ? infinity - 1 : key_at(std::size_t(top));
  window.low = bottom >= double(kSample - 1) ? Bits(0) : key_at(std::size_t(bottom));
  // aim == m (the floor was the aim-th largest: a re-estimated call) places it past the
  // sample: the smallest sampled key. A 0 there made the next floor 0 and the next call's
  // list the whole tensor (measured: docs/internals.md, measured reasons).
  window.aim = key_at(std::min(std::size_t(at(aim)), kSample - 1));
  const std::size_t inside = static_cast<std::size_t>(std::count_if(
      sample, sample + kSample, [&](Bits key) { return key >= window.low && key <= window.high; }));
  window.room = 2 * (inside + 1) * (m / kSample + 1) + 1024;
  return window;
}

/// One work item's part of the pass: its slice of the list, and where its notes went.
struct TrimItem {
  std::size_t from = 0, to = 0;  // the slice
  std::size_t base = 0;          // its notes' first place in the scratch lists
  TrimPass pass;                 // its notes: kept above, window, and the counts
  std::size_t greater = 0;       // window entries above tau
  std::size_t ties = 0;          // window entries at tau it keeps
  std::size_t out = 0;           // its first place in the output
};

/// The pass of item `c` over its slice (simd.hpp's vectors, then the rest).
template <typename T>
void trim_pass(const T *val, const TrimWindow<T> &window, KeyBits<T> infinity, TrimItem &item,
               std::uint32_t *above_list, std::uint32_t *window_list, KeyBits<T> *keys) {
  using Bits = KeyBits<T>;
  std::uint32_t *const above_out = above_list + item.base;
  std::uint32_t *const window_out = window_list + item.base;
  Bits *const keys_out = keys + item.base;
  TrimPass &pass = item.pass;
  std::size_t j = item.from;
#if defined(DCT_KOKKOS_HOST_AVX512)
  if (host_simd == HostSimd::avx512)
    j = trim_pass_avx512(val, item.from, item.to, window.high, window.low, infinity, above_out,
                         window_out, keys_out, pass);
#endif
  for (; j < item.to; ++j) {
    const Bits key = abs_key<T>(val[j]);
    const bool over = key > window.high, finite = key < infinity;
    above_out[pass.sure] = static_cast<std::uint32_t>(j);  // written always, kept if it moves on
    pass.sure += std::size_t(over);
    window_out[pass.count] = static_cast<std::uint32_t>(j);
    keys_out[pass.count] = key;
    pass.count += std::size_t(!over & (key >= window.low));
    pass.above += std::size_t(over & finite);
    pass.bad += std::size_t(!finite);
  }
}

/// Item `c`'s kept entries, in index order, to its places of the output: its notes above the
/// window, and of its window entries those above tau and its first `ties` at it.
template <typename T>
void trim_merge(const WireIndex *idx, const T *val, KeyBits<T> tau, std::size_t m,
                ValueCoding coding, const TrimItem &item, std::uint32_t *above_list,
                std::uint32_t *window_list, const KeyBits<T> *keys, WireIndex *out_idx, T *out_val,
                T *remainders) {
  std::uint32_t *const above = above_list + item.base;
  std::uint32_t *const window = window_list + item.base;
  const KeyBits<T> *const key = keys + item.base;
  std::size_t kept = 0, ties = item.ties;
  for (std::size_t w = 0; w < item.pass.count; ++w) {
    const bool tie = key[w] == tau;
    const bool keep = (key[w] > tau) | (tie & (ties > 0));
    ties -= std::size_t(tie & (ties > 0));
    window[kept] = window[w];
    kept += std::size_t(keep);
  }
  // Both lists end with a place past every other (the notes have room for it), so the merge
  // needs no branch on which list comes next (they interleave at random).
  above[item.pass.sure] = static_cast<std::uint32_t>(m);
  window[kept] = static_cast<std::uint32_t>(m);
  std::size_t from_above = 0, from_window = 0;
  const std::size_t total = item.pass.sure + kept;
  for (std::size_t to = item.out; to < item.out + total; ++to) {
    const std::uint32_t a = above[from_above], b = window[from_window];
    const bool take_above = a < b;
    const std::size_t place = take_above ? a : b;
    from_above += std::size_t(take_above);
    from_window += std::size_t(!take_above);
    out_idx[to] = idx[place];
    out_val[to] = val[place];
  }
  round_for_the_wire(out_val, remainders, item.out, item.out + total, coding);
}

/// The window trim on `exec` (host memory). Returns false, having written nothing the caller
/// reads, when the window missed the k-th (the sample misrepresented the list, or ties crowd
/// its edge), when the list has exactly k finite entries or when it is no longer than k (no
/// window to place: the share k/m is past 1): the caller takes the general path.
template <typename T, typename Exec>
bool trim_in_window(const Exec &exec, const WireIndex *idx, const T *val, std::size_t m,
                    std::size_t k, std::size_t aim, ValueCoding coding, WireIndex *out_idx,
                    T *out_val, T *remainders, Trimmed<T> &trimmed) {
  using Bits = KeyBits<T>;
  constexpr Bits kInfinity =
      static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
  if (m <= k) return false;
  const TrimWindow<T> window = place_window(val, m, k, aim, kInfinity);
  // Work items of whole vectors, a few per thread; each item's notes get its slice's length
  // and two vectors more (a vector's whole store past its last note, the merge's end mark).
  static const std::size_t threads = static_cast<std::size_t>(exec.concurrency());
  const std::size_t items = threads > 1 ? std::min<std::size_t>(8 * threads, m / 4096 + 1) : 1;
  const std::size_t span = (m / items + 16) / 16 * 16;
  // This thread's scratch, kept between calls, sized with room to spare: the candidates' count
  // moves from call to call, and lists sized to each new largest one allocated again and again
  // (tests/mpi/test_steady_state.cpp).
  static thread_local std::vector<TrimItem> work;
  static thread_local std::vector<std::uint32_t> above_list, window_list;
  static thread_local std::vector<Bits> keys, selection;
  if (work.size() < items) work.resize(items);
  const std::size_t notes = items * (span + 32);
  if (above_list.size() < notes) {
    above_list.resize(notes + notes / 4);
    window_list.resize(above_list.size());
    keys.resize(above_list.size());
  }
  for (std::size_t c = 0; c < items; ++c) {
    work[c] = TrimItem{};
    work[c].from = std::min(m, c * span);
    work[c].to = std::min(m, (c + 1) * span);
    work[c].base = c * (span + 32);
  }
  TrimItem *const item = work.data();
  std::uint32_t *const above_data = above_list.data();
  std::uint32_t *const window_data = window_list.data();
  Bits *const keys_data = keys.data();
  const auto each_item = [&](auto &&body) {
    if (items == 1) {
      body(std::size_t(0));
    } else {
      Kokkos::parallel_for("dct_trim", range(exec, items),
                           [&](const std::int64_t c) { body(std::size_t(c)); });
      fence(exec);
    }
  };
  each_item([&](std::size_t c) {
    trim_pass(val, window, kInfinity, item[c], above_data, window_data, keys_data);
  });
  std::size_t above = 0, bad = 0, count = 0;
  for (std::size_t c = 0; c < items; ++c) {
    above += item[c].pass.above;
    bad += item[c].pass.bad;
    count += item[c].pass.count;
  }
  trimmed.finite = m - bad;
  trimmed.kth = trimmed.aimth = T(0);
  trimmed.kept = 0;
  if (trimmed.finite < k) return true;    // nothing to cut: the caller decides
  if (trimmed.finite == k) return false;  // nothing to cut, but the k-th is asked for
  if (count > window.room || above >= k || above + count < k) return false;
  // tau, among the window's keys (gathered, in a copy the selection may reorder); then each
  // item's share of the ties at it, the lowest indices first.
  const std::size_t rank = k - above;
  if (selection.size() < count) selection.resize(count + count / 4);
  for (std::size_t c = 0, at = 0; c < items; at += item[c].pass.count, ++c)
    std::copy(keys_data + item[c].base, keys_data + item[c].base + item[c].pass.count,
              selection.begin() + long(at));
  std::nth_element(selection.data(), selection.data() + (rank - 1), selection.data() + count,
                   std::greater<Bits>());
  const Bits tau = selection[rank - 1];
  std::size_t ties_left = rank;
  for (std::size_t c = 0; c < items; ++c) {
    const Bits *const key = keys_data + item[c].base;
    for (std::size_t w = 0; w < item[c].pass.count; ++w) item[c].greater += key[w] > tau ? 1 : 0;
    ties_left -= item[c].greater;
  }
  std::size_t out = 0;
  for (std::size_t c = 0; c < items; ++c) {
    const Bits *const key = keys_data + item[c].base;
    std::size_t at_tau = 0;
    for (std::size_t w = 0; w < item[c].pass.count; ++w) at_tau += key[w] == tau ? 1 : 0;
    item[c].ties = std::min(at_tau, ties_left);
    ties_left -= item[c].ties;
    item[c].out = out;
    out += item[c].pass.sure + item[c].greater + item[c].ties;
  }
  each_item([&](std::size_t c) {
    trim_merge(idx, val, tau, m, coding, item[c], above_data, window_data, keys_data, out_idx,
               out_val, remainders);
  });
  trimmed.kth = value_of_key<T>(tau);
  trimmed.aimth = aim <= trimmed.finite ? value_of_key<T>(window.aim) : T(0);
  trimmed.kept = out;
  return true;
}

}  // namespace dct::detail::backends::kokkos
