#include "mp/row_codec.hpp"
#include "mp/row_codec_avx512.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <type_traits>

namespace dct::detail::mp {
namespace {

// Messages are byte streams with no alignment guarantee past their start: every multi-byte
// field is read and written through memcpy (one unaligned load or store after optimisation).
void put(std::byte *&out, std::uint32_t value, std::size_t bytes) {
  if (bytes == 2) {
    const auto narrow = static_cast<std::uint16_t>(value);
    std::memcpy(out, &narrow, 2);
  } else {
    std::memcpy(out, &value, 4);
  }
  out += bytes;
}

std::uint32_t get(const std::byte *&in, std::size_t bytes) {
  std::uint32_t value = 0;
  if (bytes == 2) {
    std::uint16_t narrow = 0;
    std::memcpy(&narrow, in, 2);
    value = narrow;
  } else {
    std::memcpy(&value, in, 4);
  }
  in += bytes;
  return value;
}

/// |x| for ranking; NaN ranks above every number so that it is kept, as MPI would deliver it.
template <typename T>
double magnitude(T x) {
  return x != x ? std::numeric_limits<double>::infinity() : std::fabs(static_cast<double>(x));
}

}  // namespace

MessageShape forward_shape(const RowMasks &masks, const RowFormat &format) {
  MessageShape shape;
  shape.rows = masks.rows();
  shape.nnz = masks.kept();
  bool uniform = shape.rows > 0;
  for (std::size_t r = 1; r < shape.rows && uniform; ++r) uniform = masks.kept(r) == masks.kept(0);
  shape.uniform = uniform ? static_cast<std::int64_t>(masks.kept(0)) : -1;
  std::size_t bytes = shape.nnz * format.value_bytes;
  if (!uniform) bytes += shape.rows * format.count_bytes();
  for (std::size_t r = 0; r < shape.rows; ++r) bytes += format.mask_bytes(masks.kept(r));
  shape.bytes = bytes;
  return shape;
}

MessageShape uniform_shape(std::size_t rows, std::size_t kept, const RowFormat &format) {
  MessageShape shape;
  shape.rows = rows;
  shape.nnz = rows * kept;
  shape.uniform = rows > 0 ? static_cast<std::int64_t>(kept) : -1;
  shape.bytes = shape.nnz * format.value_bytes + rows * format.mask_bytes(kept);
  return shape;
}

/// One value as the wire carries it.
template <typename T>
void put_value(std::byte *&out, T value, ValueCoding coding) {
  if (coding == ValueCoding::native) {
    std::memcpy(out, &value, sizeof(T));
    out += sizeof(T);
  } else {
    const std::uint16_t bits = encode_value16(value, coding);
    std::memcpy(out, &bits, 2);
    out += 2;
  }
}

template <typename T>
void gather_values(const T *rows, const RowMasks &masks, const RowFormat &format,
                   ValueCoding coding, std::byte *out) {
  std::size_t r = 0;
#if defined(DCT_ROW_CODEC_AVX512)
  // The entries' places in `rows`, then 16 values at a time; the last rows' in the loop below.
  if constexpr (std::is_same_v<T, float>) {
    const std::size_t entries = masks.kept();
    if (row_simd == HostSimd::avx512 && entries >= 16 && masks.rows() * format.d <= INT32_MAX) {
      static thread_local std::vector<std::int32_t> at;
      if (at.size() < entries) at.resize(entries + entries / 4);
      for (std::size_t row = 0; row < masks.rows(); ++row)
        for (std::size_t j = masks.offsets[row]; j < masks.offsets[row + 1]; ++j)
          at[j] = static_cast<std::int32_t>(row * format.d + masks.columns[j]);
      const std::size_t done = avx512::gather(rows, at.data(), entries, coding, out);
      out += done * format.value_bytes;
      while (r < masks.rows() && masks.offsets[r + 1] <= done) ++r;  // the rows done whole
      if (r < masks.rows()) {
        for (std::size_t j = done; j < masks.offsets[r + 1]; ++j)  // the rest of row r
          put_value(out, rows[r * format.d + masks.columns[j]], coding);
        ++r;
      }
    }
  }
#endif
  for (; r < masks.rows(); ++r) {
    const T *row = rows + r * format.d;
    for (std::size_t j = masks.offsets[r]; j < masks.offsets[r + 1]; ++j)
      put_value(out, row[masks.columns[j]], coding);
  }
}

template <typename T>
void scatter_values(const std::byte *values, const RowMasks &masks, const RowFormat &format,
                    ValueCoding coding, T *rows) {
  std::fill(rows, rows + masks.rows() * format.d, T(0));
  for (std::size_t r = 0; r < masks.rows(); ++r) {
    T *row = rows + r * format.d;
    for (std::size_t j = masks.offsets[r]; j < masks.offsets[r + 1]; ++j) {
      T value;
      if (coding == ValueCoding::native) {
        std::memcpy(&value, values, sizeof(T));
        values += sizeof(T);
      } else {
        std::uint16_t bits = 0;
        std::memcpy(&bits, values, 2);
        values += 2;
        value = decode_value16<T>(bits, coding);
      }
      row[masks.columns[j]] = value;
    }
  }
}

template <typename T>
void encode_forward(const T *rows, const RowMasks &masks, const RowFormat &format,
                    const MessageShape &shape, ValueCoding coding, std::byte *out) {
  gather_values(rows, masks, format, coding, out);
  out += shape.nnz * format.value_bytes;
  if (shape.uniform < 0)
    for (std::size_t r = 0; r < shape.rows; ++r)
      put(out, static_cast<std::uint32_t>(masks.kept(r)), format.count_bytes());
  for (std::size_t r = 0; r < shape.rows; ++r) {
    const std::size_t kept = masks.kept(r);
    const std::uint32_t *columns = masks.columns.data() + masks.offsets[r];
    if (format.uses_bitmap(kept)) {
      std::memset(out, 0, format.bitmap_bytes());
      for (std::size_t j = 0; j < kept; ++j)
        out[columns[j] / 8] |= std::byte(1u << (columns[j] % 8));
      out += format.bitmap_bytes();
    } else {
      for (std::size_t j = 0; j < kept; ++j) put(out, columns[j], format.index_bytes());
    }
  }
}

std::string decode_masks(const std::byte *message, const MessageShape &shape,
                         const RowFormat &format, RowMasks &masks) {
  const std::size_t d = format.d;
  if (shape.nnz > shape.rows * d) return "more kept entries than the rows hold";
  if (shape.uniform < -1 || shape.uniform > static_cast<std::int64_t>(d))
    return "row count out of range";
  // Every read below stays within `shape.bytes`: sizes are checked before each section.
  std::size_t need = shape.nnz * format.value_bytes;
  if (shape.uniform < 0) need += shape.rows * format.count_bytes();
  if (need > shape.bytes) return "message shorter than its values and counts";
  const std::byte *in = message + shape.nnz * format.value_bytes;
  masks.offsets.resize(shape.rows + 1);
  masks.offsets[0] = 0;
  for (std::size_t r = 0; r < shape.rows; ++r) {
    const std::size_t kept = shape.uniform >= 0 ? static_cast<std::size_t>(shape.uniform)
                                                : get(in, format.count_bytes());
    if (kept > d) return "row " + std::to_string(r) + " keeps more than d entries";
    masks.offsets[r + 1] = masks.offsets[r] + kept;
    if (masks.offsets[r + 1] > shape.nnz) return "row counts exceed the announced entries";
  }
  if (masks.offsets[shape.rows] != shape.nnz) return "row counts do not add up to the entries";
  for (std::size_t r = 0; r < shape.rows; ++r) need += format.mask_bytes(masks.kept(r));
  if (need != shape.bytes) return "message length does not match its masks";
  masks.columns.resize(shape.nnz);
  for (std::size_t r = 0; r < shape.rows; ++r) {
    const std::size_t kept = masks.kept(r);
    std::uint32_t *columns = masks.columns.data() + masks.offsets[r];
    if (format.uses_bitmap(kept)) {
      std::size_t found = 0;
      for (std::size_t byte = 0; byte < format.bitmap_bytes(); ++byte) {
        auto bits = static_cast<unsigned>(in[byte]);
        for (; bits != 0; bits &= bits - 1) {
          const std::size_t column = byte * 8 + static_cast<std::size_t>(__builtin_ctz(bits));
          if (column >= d) return "row " + std::to_string(r) + ": bitmap bit past d";
          if (found == kept) return "row " + std::to_string(r) + ": bitmap holds more bits";
          columns[found++] = static_cast<std::uint32_t>(column);
        }
      }
      if (found != kept) return "row " + std::to_string(r) + ": bitmap holds fewer bits";
      in += format.bitmap_bytes();
    } else {
      for (std::size_t j = 0; j < kept; ++j) {
        columns[j] = get(in, format.index_bytes());
        if (columns[j] >= d) return "row " + std::to_string(r) + ": index past d";
        if (j > 0 && columns[j] <= columns[j - 1])
          return "row " + std::to_string(r) + ": indices not strictly increasing";
      }
    }
  }
  return "";
}

/// The bits of |x|: for IEEE floats their order is the order of the magnitudes, and NaN's
/// bits lie above infinity's, so selection runs on plain unsigned integers.
inline std::uint32_t magnitude_bits(float x) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, 4);
  return bits & 0x7fffffffu;
}
inline std::uint64_t magnitude_bits(double x) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, 8);
  return bits & 0x7fffffffffffffffull;
}

/// Candidate lists up to this long are ranked by counting (every candidate against every
/// other: compares the compiler vectorises); longer ones (a row's first, when the floor knows
/// nothing yet) by nth_element.
constexpr std::size_t kCountedCandidates = 96;

/// One row's candidates: the columns whose |x| is at or above the floor, in column order, and
/// their magnitude bits. Scratch of the calling thread, kept between calls.
template <typename Bits>
struct RowCandidates {
  std::vector<std::uint32_t> columns;
  std::vector<Bits> keys, ranked;
  std::size_t size = 0;

  void collect(const Bits *row_keys, std::size_t d, Bits floor) {
    std::size_t m = 0;
    for (std::size_t c = 0; c < d; ++c) {  // branch-free: the floor passes ~2k of d
      columns[m] = static_cast<std::uint32_t>(c);
      keys[m] = row_keys[c];
      m += row_keys[c] >= floor ? 1 : 0;
    }
    size = m;
  }
};

/// The top k of a row's m >= k candidates (larger |x| first, then lower column) appended to
/// `out` in column order; returns the (2k)-th largest key (the next row's floor), or 0 when
/// fewer than 2k came.
template <typename Bits>
Bits keep_top_candidates(RowCandidates<Bits> &c, std::size_t k, std::uint32_t *out) {
  const std::size_t m = c.size;
  const std::size_t aim = 3 * k;
  Bits next_floor = 0;
  if (m <= kCountedCandidates) {
    // rank[i] = how many candidates go before i: the larger, and the equal at lower columns.
    for (std::size_t i = 0; i < m; ++i) {
      const Bits key = c.keys[i];
      std::uint32_t rank = 0;  // two loops without a branch on j: both vectorise
      for (std::size_t j = 0; j < i; ++j) rank += c.keys[j] >= key ? 1u : 0u;
      for (std::size_t j = i + 1; j < m; ++j) rank += c.keys[j] > key ? 1u : 0u;
      if (rank < k) *out++ = c.columns[i];
      if (rank == aim - 1) next_floor = key;
    }
    return next_floor;
  }
  // The k-th largest key t, then in column order everything above t and the first
  // (lowest-column) entries equal to t until k are taken.
  Bits *const ranked = c.ranked.data();
  std::copy(c.keys.begin(), c.keys.begin() + std::ptrdiff_t(m), ranked);
  std::nth_element(ranked, ranked + (k - 1), ranked + m, std::greater<Bits>());
  const Bits t = ranked[k - 1];
  std::size_t ties = k - static_cast<std::size_t>(std::count_if(ranked, ranked + (k - 1),
                                                                [t](Bits key) { return key > t; }));
  for (std::size_t i = 0; i < m; ++i) {
    const Bits key = c.keys[i];
    if (key > t || (key == t && ties > 0)) {
      ties -= key == t ? 1 : 0;
      *out++ = c.columns[i];
    }
  }
  if (m >= aim) {  // past position k - 1 everything is <= t: the aim-th is among them
    std::nth_element(ranked + k, ranked + (aim - 1), ranked + m, std::greater<Bits>());
    next_floor = ranked[aim - 1];
  }
  return next_floor;
}

#if defined(DCT_ROW_CODEC_AVX512)
/// select_top_k's rows with AVX-512F (float only; 0 < k < d): see row_codec_avx512.hpp.
void select_rows_avx512(const float *rows, std::size_t nrows, std::size_t d, std::size_t k,
                        std::uint32_t *out) {
  static thread_local std::vector<std::uint32_t> keys, columns;
  if (keys.size() < d + 16) {
    keys.resize(d + 16);
    columns.resize(d + 16);
  }
  avx512::Candidates candidates{keys.data(), columns.data()};
  constexpr std::uint32_t kFloorSlack = 1u << 15;  // the floor within 2^-8 of its magnitude
  std::uint32_t floor = 0;
  for (std::size_t r = 0; r < nrows; ++r, out += k) {
    avx512::collect(rows + r * d, d, floor, candidates);
    if (candidates.m < k) avx512::collect(rows + r * d, d, floor = 0, candidates);
    const std::uint32_t next = avx512::keep_top(candidates, k, 2 * k, floor, kFloorSlack, out);
    if (next != 0) floor = next;
  }
}
#endif

HostSimd best_row_simd() {
#if defined(DCT_ROW_CODEC_AVX512)
  return best_host_simd(true);
#else
  return best_host_simd(false);
#endif
}
HostSimd row_simd = best_row_simd();

// Rows of one block are alike (activations of one layer, lookups of one table): the floor
// that let about 2k of one row's entries through is the next row's, so each row costs one
// pass over its d keys plus work on ~2k candidates, not a selection among d. A row where
// fewer than k pass is selected again over all its entries, which resets the floor; one where
// k to 2k pass leaves it as it is. The portable code about matches the single-pass insertion
// it replaced, the AVX-512F tier is far faster (measured: docs/internals.md, measured reasons).
template <typename T>
void select_top_k(const T *rows, std::size_t nrows, std::size_t d, std::size_t k, RowMasks &masks) {
  k = std::min(k, d);
  using Bits = decltype(magnitude_bits(T(0)));
  const std::size_t first = masks.columns.size();
  masks.columns.resize(first + nrows * k);
  masks.offsets.reserve(masks.offsets.size() + nrows);
  for (std::size_t r = 0; r < nrows; ++r) masks.offsets.push_back(masks.offsets.back() + k);
  std::uint32_t *out = masks.columns.data() + first;
  if (k == 0) return;
  if (k == d) {
    for (std::size_t r = 0; r < nrows; ++r)
      for (std::size_t c = 0; c < d; ++c) *out++ = static_cast<std::uint32_t>(c);
    return;
  }
#if defined(DCT_ROW_CODEC_AVX512)
  if constexpr (std::is_same_v<T, float>) {
    if (row_simd == HostSimd::avx512) {
      select_rows_avx512(rows, nrows, d, k, out);
      return;
    }
  }
#endif
  static thread_local RowCandidates<Bits> candidates;
  static thread_local std::vector<Bits> row_keys;
  if (row_keys.size() < d) {
    row_keys.resize(d);
    candidates.columns.resize(d);
    candidates.keys.resize(d);
    candidates.ranked.resize(d);
  }
  Bits floor = 0;
  for (std::size_t r = 0; r < nrows; ++r, out += k) {
    const T *row = rows + r * d;
    for (std::size_t c = 0; c < d; ++c) row_keys[c] = magnitude_bits(row[c]);
    candidates.collect(row_keys.data(), d, floor);
    if (candidates.size < k) candidates.collect(row_keys.data(), d, floor = 0);
    const Bits next = keep_top_candidates(candidates, k, out);
    if (next != 0) floor = next;
  }
}

template <typename T>
void select_above(const T *rows, std::size_t nrows, std::size_t d, double tau, RowMasks &masks) {
  for (std::size_t r = 0; r < nrows; ++r) {
    const T *row = rows + r * d;
    for (std::size_t c = 0; c < d; ++c)
      if (row[c] != T(0) && magnitude(row[c]) >= tau)
        masks.columns.push_back(static_cast<std::uint32_t>(c));
    masks.offsets.push_back(masks.columns.size());
  }
}

std::size_t kept_per_row(double keep, std::size_t d) {
  const double product = keep * static_cast<double>(d);
  // keep is a decimal the user typed: a product within a few ulps of an integer is that integer.
  const double nearest = std::round(product);
  double k =
      std::fabs(product - nearest) <= 1e-9 * std::max(1.0, product) ? nearest : std::ceil(product);
  k = std::max(1.0, std::min(k, static_cast<double>(d)));
  return static_cast<std::size_t>(k);
}

#define DCT_ROW_CODEC_INSTANTIATE(T)                                                           \
  template void encode_forward<T>(const T *, const RowMasks &, const RowFormat &,              \
                                  const MessageShape &, ValueCoding, std::byte *);             \
  template void gather_values<T>(const T *, const RowMasks &, const RowFormat &, ValueCoding,  \
                                 std::byte *);                                                 \
  template void scatter_values<T>(const std::byte *, const RowMasks &, const RowFormat &,      \
                                  ValueCoding, T *);                                           \
  template void select_top_k<T>(const T *, std::size_t, std::size_t, std::size_t, RowMasks &); \
  template void select_above<T>(const T *, std::size_t, std::size_t, double, RowMasks &);

DCT_ROW_CODEC_INSTANTIATE(float)
DCT_ROW_CODEC_INSTANTIATE(double)
#undef DCT_ROW_CODEC_INSTANTIATE

}  // namespace dct::detail::mp
