// The DCT-MP codecs alone, on one core (dct-bench alltoallv prints these beside the collective):
// top-k (select_top_k + encode_forward, decode_masks + scatter_values) and error-bounded
// (quantize + pack, decode), timed on the same block. Throughputs are GB/s of the dense input
// (rows x d values) per core; the ratio is dense bytes over the message's bytes.
#include "codec_bench.hpp"

#include <mpi.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/float16.hpp"
#include "mp/error_bounded_codec.hpp"
#include "mp/row_codec.hpp"

namespace dct::bench {
namespace eb = detail::eb;
namespace {

/// Seconds per run of `body`, repeated until `seconds` have passed (at least 3 runs).
template <typename Body>
double per_run(double seconds, Body &&body) {
  int runs = 0;
  const double start = MPI_Wtime();
  double elapsed = 0;
  while (runs < 3 || elapsed < seconds) {
    body();
    ++runs;
    elapsed = MPI_Wtime() - start;
  }
  return elapsed / runs;
}

eb::Coder coder_of(const std::string &lossless) {
  if (lossless == "lz4") return eb::Coder::lz4;
  if (lossless == "zstd") return eb::Coder::zstd;
  if (lossless == "none") return eb::Coder::none;
  throw std::invalid_argument("codec figures need --lossless none, lz4 or zstd, not " + lossless);
}

}  // namespace

template <typename T>
CodecFigures topk_figures(const T *rows, std::size_t nrows, std::size_t d, double keep,
                          double seconds) {
  using namespace detail::mp;
  RowFormat format;
  format.d = d;
  format.value_bytes = sizeof(T);
  RowMasks masks, decoded;
  std::vector<std::byte> message;
  MessageShape shape;
  std::vector<T> out(nrows * d);
  const std::size_t k = kept_per_row(keep, d);
  const double encode = per_run(seconds, [&] {
    masks.clear();
    select_top_k(rows, nrows, d, k, masks);
    shape = forward_shape(masks, format);
    message.resize(shape.bytes);
    encode_forward(rows, masks, format, shape, detail::ValueCoding::native, message.data());
  });
  const double decode = per_run(seconds, [&] {
    if (!decode_masks(message.data(), shape, format, decoded).empty())
      throw std::runtime_error("top-k message does not decode");
    scatter_values(message.data(), decoded, format, detail::ValueCoding::native, out.data());
  });
  const double bytes = double(nrows * d * sizeof(T));
  return {bytes / encode / 1e9, bytes / decode / 1e9, bytes / double(shape.bytes)};
}

template <typename T>
CodecFigures error_bounded_figures(const T *rows, std::size_t nrows, std::size_t d,
                                   std::size_t table_columns, double bound,
                                   const std::string &lossless, double seconds) {
  eb::Workspace encoder, decoder;
  const eb::Tables tables{d, table_columns};
  const std::vector<double> bounds(tables.count(), bound);
  std::vector<std::byte> message(eb::max_message_bytes(nrows, d, tables.count(), sizeof(T)));
  std::size_t bytes_out = 0;
  std::vector<T> out(nrows * d);
  const double encode = per_run(seconds, [&] {
    eb::quantize(rows, nrows, tables, bounds.data(), encoder);
    eb::Coder coder = coder_of(lossless);
    bytes_out = eb::pack(coder, encoder, message.data());
  });
  const double decode = per_run(seconds, [&] {
    const std::string error =
        eb::decode(message.data(), bytes_out, nrows, tables, out.data(), decoder);
    if (!error.empty()) throw std::runtime_error("error-bounded message does not decode: " + error);
  });
  const double bytes = double(nrows * d * sizeof(T));
  return {bytes / encode / 1e9, bytes / decode / 1e9, bytes / double(bytes_out)};
}

template CodecFigures topk_figures<float>(const float *, std::size_t, std::size_t, double, double);
template CodecFigures topk_figures<double>(const double *, std::size_t, std::size_t, double,
                                           double);
template CodecFigures error_bounded_figures<float>(const float *, std::size_t, std::size_t,
                                                   std::size_t, double, const std::string &,
                                                   double);
template CodecFigures error_bounded_figures<double>(const double *, std::size_t, std::size_t,
                                                    std::size_t, double, const std::string &,
                                                    double);

}  // namespace dct::bench
