// The DCT-MP codecs alone, on one core: what dct-bench alltoallv prints beside the collective.
#pragma once

#include <cstddef>
#include <string>

namespace dct::bench {

struct CodecFigures {
  double encode_gbps = 0;  ///< GB/s of dense input per core
  double decode_gbps = 0;  ///< idem, for the decoder writing the dense block
  double ratio = 0;        ///< dense bytes / message bytes
};

/// Top-k per row (exact selection, native values), keeping `keep` of each row.
template <typename T>
CodecFigures topk_figures(const T *rows, std::size_t nrows, std::size_t d, double keep,
                          double seconds);

/// The error-bounded codec with relative bound `bound` on every table of `table_columns`
/// columns (dividing d; d: the whole row one table), the lossless stage `lossless` (none, lz4,
/// zstd).
template <typename T>
CodecFigures error_bounded_figures(const T *rows, std::size_t nrows, std::size_t d,
                                   std::size_t table_columns, double bound,
                                   const std::string &lossless, double seconds);

}  // namespace dct::bench
