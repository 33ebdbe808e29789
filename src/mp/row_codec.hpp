// DCT-MP's per-row masks: which columns of each row of an activation block are kept, how
// they are chosen, and how (mask, values) travel on the wire. Host code only, independent of
// the allreduce kernels.
//
// One message (all rows one rank sends to one peer) is laid out as
//   [values: nnz values, row by row, columns ascending; native type or 16-bit]
//   [row counts: one per row, 16-bit (32-bit when d > 65535); absent when every row keeps
//    the same number of entries, which the header then announces]
//   [masks: per row, either a list of 16-bit column indices (32-bit when d > 65536) or a
//    bitmap of ceil(d/8) bytes, whichever is smaller for that row's count]
// Both sides derive each row's encoding from its count, so no flag travels. A backward
// message is the values part alone: both sides know the masks from the forward call.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/float16.hpp"
#include "core/host_simd.hpp"
#include "core/internal_api.hpp"

namespace dct::detail::mp {

/// Kept columns of consecutive rows, as compressed sparse rows.
struct RowMasks {
  std::vector<std::size_t> offsets{0};  ///< rows + 1 entries; row r is columns[offsets[r]..]
  std::vector<std::uint32_t> columns;   ///< strictly increasing within a row

  std::size_t rows() const { return offsets.size() - 1; }
  std::size_t kept() const { return columns.size(); }
  std::size_t kept(std::size_t row) const { return offsets[row + 1] - offsets[row]; }
  void clear() {
    offsets.assign(1, 0);
    columns.clear();
  }
};

/// The wire sizes of a row length d with a value coding.
struct RowFormat {
  std::size_t d = 1;
  std::size_t value_bytes = 4;  ///< bytes of one value on the wire

  std::size_t index_bytes() const { return d <= 65536 ? 2 : 4; }
  std::size_t count_bytes() const { return d <= 65535 ? 2 : 4; }
  std::size_t bitmap_bytes() const { return (d + 7) / 8; }
  /// The bitmap is used only when strictly smaller than the index list.
  bool uses_bitmap(std::size_t kept) const { return bitmap_bytes() < kept * index_bytes(); }
  std::size_t mask_bytes(std::size_t kept) const {
    return uses_bitmap(kept) ? bitmap_bytes() : kept * index_bytes();
  }
  /// The longest forward message of `rows` rows: what a receiver accepts at most.
  std::size_t max_message_bytes(std::size_t rows) const {
    return rows * (count_bytes() + d * value_bytes + bitmap_bytes());
  }
};

/// What a sender announces for one message (validated by the receiver).
struct MessageShape {
  std::size_t rows = 0;
  std::size_t nnz = 0;
  std::int64_t uniform = -1;  ///< the count of every row, or -1 when counts are sent per row
  std::size_t bytes = 0;      ///< exact payload bytes, before padding
};

/// The shape of the forward message carrying `masks` (uniform when all rows keep the same).
DCT_INTERNAL_API MessageShape forward_shape(const RowMasks &masks, const RowFormat &format);

/// forward_shape of `rows` rows that each keep `kept` entries.
DCT_INTERNAL_API MessageShape uniform_shape(std::size_t rows, std::size_t kept,
                                            const RowFormat &format);

/// Writes the forward message of `masks` over the dense rows `rows` (row-major, d columns)
/// to `out` (forward_shape(...).bytes bytes).
template <typename T>
DCT_INTERNAL_API void encode_forward(const T *rows, const RowMasks &masks, const RowFormat &format,
                                     const MessageShape &shape, ValueCoding coding, std::byte *out);

/// Reads the masks of a forward message into `masks`, validating everything: every count
/// <= d and their sum == nnz, indices < d and strictly increasing, bitmap popcounts equal the
/// counts with no bit past d, and exactly `shape.bytes` bytes consumed. Returns "" or why the
/// message is invalid (then `masks` is unspecified).
DCT_INTERNAL_API std::string decode_masks(const std::byte *message, const MessageShape &shape,
                                          const RowFormat &format, RowMasks &masks);

/// Writes the kept values of `masks` from the dense rows `rows` to `out` (the values part of
/// a message: masks.kept() values of format.value_bytes each).
template <typename T>
void gather_values(const T *rows, const RowMasks &masks, const RowFormat &format,
                   ValueCoding coding, std::byte *out);

/// Writes dense rows: zeros everywhere, then the values at `values` at the kept columns.
template <typename T>
DCT_INTERNAL_API void scatter_values(const std::byte *values, const RowMasks &masks,
                                     const RowFormat &format, ValueCoding coding, T *rows);

// --- Selection ----------------------------------------------------------------------------

/// The best tier (core/host_simd.hpp) this CPU runs for select_top_k: AVX-512F for float rows.
DCT_INTERNAL_API HostSimd best_row_simd();
/// The tier select_top_k runs: the best, unless lowered (tests run every tier this CPU has).
DCT_INTERNAL_API extern HostSimd row_simd;

/// Appends to `masks` the k columns of largest |x| of each of `nrows` rows; on equal |x| the
/// lower column wins; NaN counts as larger than every number.
template <typename T>
DCT_INTERNAL_API void select_top_k(const T *rows, std::size_t nrows, std::size_t d, std::size_t k,
                                   RowMasks &masks);

/// Appends to `masks` the columns with |x| >= tau and x != 0 (NaN always) of each row.
template <typename T>
void select_above(const T *rows, std::size_t nrows, std::size_t d, double tau, RowMasks &masks);

/// The number of entries exact selection keeps per row: ceil(keep * d), at least 1, computed
/// so that products like 0.1 * 30 that land a rounding error above an integer give it.
DCT_INTERNAL_API std::size_t kept_per_row(double keep, std::size_t d);

}  // namespace dct::detail::mp
