#include "row_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

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

template <typename T>
void gather_values(const T *rows, const RowMasks &masks, const RowFormat &format,
                   ValueCoding coding, std::byte *out) {
  for (std::size_t r = 0; r < masks.rows(); ++r) {
    const T *row = rows + r * format.d;
    for (std::size_t j = masks.offsets[r]; j < masks.offsets[r + 1]; ++j) {
      const T value = row[masks.columns[j]];
      if (coding == ValueCoding::native) {
        std::memcpy(out, &value, sizeof(T));
        out += sizeof(T);
      } else {
        const std::uint16_t bits = encode_value16(value, coding);
        std::memcpy(out, &bits, 2);
        out += 2;
      }
    }
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

/// An entry's rank in its row: larger magnitude first, then lower column. For float both fit
/// one 64-bit integer; for double a pair.
inline std::uint64_t rank_key(std::uint32_t bits, std::uint32_t column) {
  return (std::uint64_t(bits) << 32) | (0xffffffffu - column);
}
inline bool better(std::uint64_t a, std::uint64_t b) {
  return a > b;
}
inline std::uint32_t column_of(std::uint64_t key) {
  return 0xffffffffu - static_cast<std::uint32_t>(key);
}
struct WideKey {
  std::uint64_t bits;
  std::uint32_t column;
};
inline WideKey rank_key(std::uint64_t bits, std::uint32_t column) {
  return {bits, column};
}
inline bool better(const WideKey &a, const WideKey &b) {
  return a.bits > b.bits || (a.bits == b.bits && a.column < b.column);
}
inline std::uint32_t column_of(const WideKey &key) {
  return key.column;
}

/// Up to this k, a row's best k are kept in a small sorted buffer while scanning it once
/// (random data inserts only about k ln(d/k) times): several times faster than nth_element.
constexpr std::size_t kInsertionTopK = 32;

template <typename T>
void select_top_k(const T *rows, std::size_t nrows, std::size_t d, std::size_t k, RowMasks &masks) {
  k = std::min(k, d);
  using Bits = decltype(magnitude_bits(T(0)));
  using Key = decltype(rank_key(Bits(0), 0));
  const std::size_t first = masks.columns.size();
  masks.columns.resize(first + nrows * k);
  std::uint32_t *out = masks.columns.data() + first;
  std::vector<Bits> bits(d), candidates;
  candidates.reserve(d);
  // Buckets of the 11 bits below the sign: float's exponent and 3 mantissa bits, double's
  // exponent (NaN and infinities land in the highest buckets, above every number).
  constexpr int kShift = int(sizeof(Bits) * 8) - 1 - 11;
  std::vector<std::uint32_t> histogram(std::size_t(1) << 11, 0);
  Key top[kInsertionTopK];
  for (std::size_t r = 0; r < nrows; ++r, out += k) {
    const T *row = rows + r * d;
    masks.offsets.push_back(masks.offsets.back() + k);
    if (k == 0) continue;  // the insertion path below compares with top[k - 1]
    if (k <= kInsertionTopK && k < d) {
      std::size_t held = 0;
      for (std::size_t c = 0; c < d; ++c) {
        const Key key = rank_key(magnitude_bits(row[c]), static_cast<std::uint32_t>(c));
        if (held == k && !better(key, top[k - 1])) continue;
        std::size_t i = held < k ? held++ : k - 1;
        for (; i > 0 && better(key, top[i - 1]); --i) top[i] = top[i - 1];
        top[i] = key;
      }
      for (std::size_t j = 0; j < k; ++j) out[j] = column_of(top[j]);
      std::sort(out, out + k);
      continue;
    }
    // The k-th largest magnitude t, by a histogram of the top bits of |x| (finds the bucket
    // holding it in one pass) and a selection among that bucket's entries only; then, in
    // column order, everything above t and the first (lowest-column) entries equal to t until
    // k are taken: sorted output, deterministic ties.
    Bits t = 0;
    std::size_t ties = k;
    if (k < d) {
      std::uint32_t highest = 0;
      for (std::size_t c = 0; c < d; ++c) {
        bits[c] = magnitude_bits(row[c]);
        const auto bucket = static_cast<std::uint32_t>(bits[c] >> kShift);
        ++histogram[bucket];
        highest = std::max(highest, bucket);
      }
      std::size_t above = 0;
      std::uint32_t b = highest;
      while (above + histogram[b] < k) above += histogram[b--];
      candidates.clear();
      for (std::size_t c = 0; c < d; ++c) {
        if ((bits[c] >> kShift) == b) candidates.push_back(bits[c]);
        histogram[bits[c] >> kShift] = 0;  // cleared for the next row, touching only its buckets
      }
      const std::size_t rank = k - above - 1;  // within the bucket, 0-based from the largest
      std::nth_element(candidates.begin(), candidates.begin() + std::ptrdiff_t(rank),
                       candidates.end(), std::greater<Bits>());
      t = candidates[rank];
      for (Bits candidate : candidates) above += candidate > t;
      ties = k - above;
    } else {
      for (std::size_t c = 0; c < d; ++c) bits[c] = magnitude_bits(row[c]);
    }
    std::uint32_t *next = out;
    for (std::size_t c = 0; c < d; ++c) {
      if (bits[c] > t || (bits[c] == t && ties > 0)) {
        if (bits[c] == t) --ties;
        *next++ = static_cast<std::uint32_t>(c);
      }
    }
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
