// The error-bounded codec of DCT-MP's second compressor (Feng et al., SC'24): every value of a
// block quantised within an absolute bound, the codes packed losslessly by LZ4 or zstd. Host
// code only, independent of MPI: the engine (error_bounded.cpp) moves the messages.
//
// One message (all rows one rank sends to one peer) is laid out as
//   [message header, 16 bytes: coder (u8), 0 (u8), 0 (u16), tables (u32), body bytes (u64)]
//   [one table header per table, 24 bytes: offset (f64), step (f64), levels (u32),
//    outliers (u32)]
//   [payload: the body, as it is (coder none) or compressed by LZ4 or zstd]
// The body holds, table after table (a table is a block of `table_columns` columns of every
// row), either the table's values in their own type (levels 0: sent exactly) or its codes,
// row-major, 8-bit when levels <= 255 and 16-bit otherwise, followed by its outliers in the
// order they occur. A code c < levels stands for T(offset + c * step); the largest code of the
// width (255 or 65535) marks an outlier, sent in its own type. All numbers are little-endian
// (the host's order: dct targets little-endian machines).
//
// Guarantee: a value x of a table with relative bound r arrives as x' with
// |x' - x| <= r * (max - min) (over the table's finite values, computed in double precision);
// NaN, infinities and every value whose reconstruction would miss the bound (rounding to the
// datatype, denormals) are outliers and arrive bit for bit; r = 0 sends the table exactly.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/host_simd.hpp"
#include "core/internal_api.hpp"

namespace dct::detail::eb {

/// The best tier (core/host_simd.hpp) this CPU runs for the quantiser's passes: AVX-512F for
/// float tables (the same bits).
DCT_INTERNAL_API HostSimd best_simd();
/// The tier the quantiser runs: the best, unless lowered (tests run every tier this CPU has).
DCT_INTERNAL_API extern HostSimd simd;

/// The lossless stage of one message.
enum class Coder : std::uint8_t { none = 0, lz4 = 1, zstd = 2 };
constexpr int kCoders = 3;
const char *coder_name(Coder coder);

constexpr std::size_t kMessageHeaderBytes = 16;
constexpr std::size_t kTableHeaderBytes = 24;
/// Levels above this need more than 16-bit codes: such a table is sent exactly.
constexpr std::uint32_t kMaxLevels = 65535;

/// The largest message the encoder writes for `rows` rows of `d` values of `value_bytes`
/// bytes in `tables` tables (a receiver never accepts more).
DCT_INTERNAL_API std::size_t max_message_bytes(std::size_t rows, std::size_t d, std::size_t tables,
                                               std::size_t value_bytes);

/// The table layout of a row: `tables` blocks of `d / tables` columns.
struct Tables {
  std::size_t d = 1;
  std::size_t columns = 1;  ///< columns per table, dividing d
  std::size_t count() const { return d / columns; }
};

/// What quantise() did to one message.
struct QuantizeReport {
  double max_error = 0.0;        ///< largest |x' - x| over the values (0 for exact tables)
  std::size_t outliers = 0;      ///< values sent in their own type inside quantised tables
  std::size_t exact_tables = 0;  ///< tables sent exactly (bound 0, too tight, or no gain)
};

/// Reusable state of one side of a request: the body being built or read, the coders'
/// contexts (created once).
class DCT_INTERNAL_API Workspace {
 public:
  Workspace();
  ~Workspace();
  Workspace(const Workspace &) = delete;
  Workspace &operator=(const Workspace &) = delete;

  /// Compresses `bytes` bytes at `source` with `coder` into `target` (at most `capacity`
  /// bytes); returns the compressed size, or 0 when it would not fit in `capacity`.
  std::size_t compress(Coder coder, const std::byte *source, std::size_t bytes, std::byte *target,
                       std::size_t capacity);
  /// Decompresses exactly `expected` bytes; false on any decoder error or other length.
  bool decompress(Coder coder, const std::byte *source, std::size_t bytes, std::byte *target,
                  std::size_t expected);

  std::vector<std::byte> body;     ///< the body of the message being encoded / decoded
  std::vector<std::byte> headers;  ///< the table headers of the message being encoded

 private:
  struct Contexts;
  std::unique_ptr<Contexts> contexts_;
};

/// Quantises `nrows` rows of `tables.d` values (row-major) into `ws.body` and `ws.headers`,
/// table t with the relative bound `bounds[t]` (>= 0; 0: exactly).
template <typename T>
DCT_INTERNAL_API QuantizeReport quantize(const T *rows, std::size_t nrows, const Tables &tables,
                                         const double *bounds, Workspace &ws);

/// Writes the message of the last quantize() to `out` (capacity: max_message_bytes), the body
/// compressed by `coder` if that makes it smaller (else as it is); returns the bytes written
/// and sets `coder` to what was used.
DCT_INTERNAL_API std::size_t pack(Coder &coder, Workspace &ws, std::byte *out);

/// Reads one message of `bytes` bytes holding `nrows` rows with `tables` into `rows`,
/// validating everything first (header values, sizes, the decompressor's result, every code
/// below its table's levels, the outlier counts); returns "" or why the message is invalid.
/// `rows` is written only when the message is valid.
template <typename T>
DCT_INTERNAL_API std::string decode(const std::byte *message, std::size_t bytes, std::size_t nrows,
                                    const Tables &tables, T *rows, Workspace &ws);

/// The table-wise sensitivity statistic: of the distinct rows of one table block (columns
/// [first, first + columns) of `nrows` rows), how many stay distinct once quantised with the
/// relative bound `bound`. Adds to `distinct` and `surviving`.
template <typename T>
void count_distinct(const T *rows, std::size_t nrows, std::size_t d, std::size_t first,
                    std::size_t columns, double bound, std::size_t &distinct,
                    std::size_t &surviving);

}  // namespace dct::detail::eb
