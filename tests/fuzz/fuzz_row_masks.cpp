// libFuzzer harness of DCT-MP's forward-message decoder (mp::decode_masks), which reads the
// masks a peer announced in its header (rows, nnz, uniform count, bytes) and sent. Any bytes
// and any announced shape must be rejected or decoded into masks that hold exactly nnz
// columns, each < d and strictly increasing within its row, without touching memory outside
// the message (ASan/UBSan).
//
// Input: [flags u8] [d u32] [rows u8] [nnz u32] [uniform u16] [rest].
//   flags bit 0: 16-bit values (else 4-byte); bit 1: d in [65530, 67577] (across the switch to
//   32-bit counts past 65535 and indices past 65536), else in [1, 1024]; bit 2: counts per row
//   (uniform = -1); bit 3: round trip: the rest seeds random rows, whose top-k masks are encoded,
//   decoded and compared, then one bit of the message (chosen by the seed) is flipped and the
//   result decoded once more. Otherwise the rest is the message, and its length the announced
//   bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "mp/row_codec.hpp"

namespace {

namespace mp = dct::detail::mp;

/// Decodes `message`; if accepted, the masks must match the announced shape.
bool decode_checked(const std::vector<std::byte> &message, const mp::MessageShape &shape,
                    const mp::RowFormat &format, mp::RowMasks &masks) {
  if (!mp::decode_masks(message.data(), shape, format, masks).empty()) return false;
  if (masks.rows() != shape.rows || masks.kept() != shape.nnz) std::abort();
  for (std::size_t r = 0; r < masks.rows(); ++r) {
    if (shape.uniform >= 0 && masks.kept(r) != std::size_t(shape.uniform)) std::abort();
    for (std::size_t j = masks.offsets[r]; j < masks.offsets[r + 1]; ++j)
      if (masks.columns[j] >= format.d ||
          (j > masks.offsets[r] && masks.columns[j] <= masks.columns[j - 1]))
        std::abort();  // accepted, yet a column out of range or out of order
  }
  return true;
}

void round_trip(const mp::RowFormat &format, std::size_t rows, std::size_t k, bool ragged,
                std::uint64_t seed) {
  rows = std::min(rows, std::max<std::size_t>(1, (1u << 14) / format.d));  // fast executions
  std::mt19937_64 engine(seed);
  std::vector<float> block(rows * format.d);  // distinct magnitudes, cheap to draw
  for (std::size_t i = 0; i < block.size(); i += 2) {
    const std::uint64_t bits = engine();
    block[i] = float(std::int32_t(bits));
    if (i + 1 < block.size()) block[i + 1] = float(std::int32_t(bits >> 32));
  }
  mp::RowMasks masks;
  for (std::size_t r = 0; r < rows; ++r)  // ragged: every row its own k, as threshold selection
    mp::select_top_k(block.data() + r * format.d, 1, format.d,
                     ragged ? std::size_t(engine() % (format.d + 1)) : k, masks);
  const mp::MessageShape shape = mp::forward_shape(masks, format);
  std::vector<std::byte> message(shape.bytes);
  const dct::detail::ValueCoding coding =
      format.value_bytes == 2 ? dct::detail::ValueCoding::fp16 : dct::detail::ValueCoding::native;
  mp::encode_forward(block.data(), masks, format, shape, coding, message.data());
  mp::RowMasks got;
  if (!decode_checked(message, shape, format, got) || got.offsets != masks.offsets ||
      got.columns != masks.columns)
    std::abort();  // a valid message did not come back as it was
  if (message.empty()) return;
  const std::size_t bit = std::size_t(engine() % (message.size() * 8));
  message[bit / 8] ^= std::byte(1u << (bit % 8));
  decode_checked(message, shape, format, got);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  dct::fuzz::Input in(data, size);
  const unsigned flags = in.take<std::uint8_t>();
  mp::RowFormat format;
  format.value_bytes = flags & 1 ? 2 : 4;
  const std::uint32_t d_word = in.take<std::uint32_t>();
  format.d = flags & 2 ? 65530 + d_word % 2048 : 1 + d_word % 1024;
  const std::size_t rows = in.take<std::uint8_t>() % 16;
  const std::size_t nnz_word = in.take<std::uint32_t>();
  const std::size_t uniform_word = in.take<std::uint16_t>();
  if (flags & 8) {
    round_trip(format, rows, uniform_word % (format.d + 1), flags & 4, in.take<std::uint64_t>());
    return 0;
  }
  const std::vector<std::byte> message = in.rest();
  mp::MessageShape shape;
  shape.rows = rows;
  shape.nnz = nnz_word % (rows * format.d + 2);  // one past the most the rows hold, too
  shape.uniform = flags & 4 ? -1 : std::int64_t(uniform_word % (format.d + 2)) - 1;
  shape.bytes = message.size();
  mp::RowMasks masks;
  decode_checked(message, shape, format, masks);
  return 0;
}
