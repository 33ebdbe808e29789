// libFuzzer harness of the checks of what peers announce in header words (peer_headers.hpp),
// followed as far as the library goes with what passes them: the algorithm decision and the
// buffer sizes it implies, the receive sizes, and the decoders reading exactly the bytes that
// would have arrived. Any words must be rejected with a dct error or lead to sizes bounded by
// this rank's own shape, and to decoders that read nothing outside the received message
// (ASan/UBSan).
//
// Input: [mode u8] then, by mode % 4,
//   0 the allreduce header: [ranks-1 u8] [rank u8] [count u32] [flags u8] [union hint u32]
//     [result density u8], then per rank [valid-word mask u8] and 3 words (int64); a word
//     whose mask bit is set is replaced by the value a well-behaved rank would send;
//   1 a count announced to split or recursive doubling: [bound u64] [announced int64]
//     [flags u8];
//   2 a DCT-MP top-k forward header: [d-1 u16] [expected rows u8] [flags u8] [mask u8]
//     [6 words], then the message;
//   3 an error-bounded header: [d-1 u8] [expected rows u8] [flags u8] [mask u8] [5 words],
//     then the message.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/cost_model.hpp"
#include "core/error.hpp"
#include "core/peer_headers.hpp"
#include "core/wire.hpp"
#include "fuzz_input.hpp"
#include "mp/error_bounded_codec.hpp"
#include "mp/forward_headers.hpp"
#include "mp/row_codec.hpp"

namespace {

namespace dd = dct::detail;
namespace peer = dct::detail::peer;

std::int64_t word(dct::fuzz::Input &in, bool valid, std::int64_t valid_value) {
  const std::int64_t raw = static_cast<std::int64_t>(in.take<std::uint64_t>());
  return valid ? valid_value : raw;
}

/// The bytes word of a message header: as valid, the length of the rest of the input.
std::int64_t message_word(dct::fuzz::Input &in, bool valid) {
  const std::int64_t raw = static_cast<std::int64_t>(in.take<std::uint64_t>());
  return valid ? std::int64_t(in.rest().size()) : raw;
}

/// The received bytes of a message of `receive` bytes: whole 8-byte units, as MPI delivers.
std::size_t received_bytes(std::size_t receive) {
  return (receive + dd::wire::kUnitBytes - 1) / dd::wire::kUnitBytes * dd::wire::kUnitBytes;
}

/// The rest of the input as a message of exactly `bytes` bytes (cut or zero-padded).
std::vector<std::byte> message_of(const dct::fuzz::Input &in, std::size_t bytes) {
  std::vector<std::byte> message = in.rest();
  message.resize(bytes);
  return message;
}

void allreduce_header(dct::fuzz::Input &in) {
  const int ranks = 1 + in.take<std::uint8_t>() % 64;
  const int rank = in.take<std::uint8_t>() % ranks;
  const std::int64_t count = in.take<std::uint32_t>() % (std::int64_t(1) << 30);
  const unsigned flags = in.take<std::uint8_t>();
  const std::int64_t value_bytes = flags & 1 ? 8 : 4;
  const double result_nonzeros = double(in.take<std::uint32_t>());
  dd::Config config;
  constexpr DCT_Algorithm kConfigured[] = {DCT_ALGORITHM_AUTO, DCT_ALGORITHM_ALLGATHER,
                                           DCT_ALGORITHM_DENSE, DCT_ALGORITHM_SPLIT,
                                           DCT_ALGORITHM_RECURSIVE_DOUBLING};
  config.algorithm = kConfigured[(flags >> 1) % 5];
  config.result_density = (1 + in.take<std::uint8_t>()) / 256.0;
  std::vector<std::int64_t> headers(std::size_t(ranks) * peer::allreduce::kWords);
  for (int r = 0; r < ranks; ++r) {
    const unsigned valid = in.take<std::uint8_t>();
    std::int64_t *h = &headers[std::size_t(r) * peer::allreduce::kWords];
    h[peer::allreduce::kKept] = word(in, valid & 1, count > 0 ? (r * 7919) % (count + 1) : 0);
    h[peer::allreduce::kCount] = word(in, valid & 2, count);
    h[peer::allreduce::kValueBytes] = word(in, valid & 4, value_bytes);
    h[peer::allreduce::kRebalance] = valid >> 3 & 1;
  }
  std::vector<std::int64_t> kept(std::size_t(ranks), -1);
  peer::AllreduceAnnouncements announced;
  try {
    announced =
        peer::read_allreduce_headers(headers.data(), ranks, rank, count, value_bytes, kept.data());
  } catch (const dd::Error &e) {
    if (e.code() != DCT_ERR_MISMATCH && e.code() != DCT_ERR_PEER) std::abort();
    return;
  }
  double total = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t k = kept[std::size_t(r)];
    if (k < 0 || k > count || k != headers[std::size_t(r) * peer::allreduce::kWords]) std::abort();
    total += double(k);
    // What every rank allocates to receive rank r's list (allgather), whatever it announced:
    // no more than its entries in the tensor's type plus 32-bit offsets.
    const dd::wire::BlockFormat format =
        value_bytes == 8 ? dd::wire::block_format<double>(std::size_t(k), std::size_t(count),
                                                          dd::ValueCoding::native)
                         : dd::wire::block_format<float>(std::size_t(k), std::size_t(count),
                                                         dd::ValueCoding::native);
    if (format.bytes() > std::size_t(k) * std::size_t(value_bytes + 4) + 16) std::abort();
  }
  if (total != announced.total_kept) std::abort();
  const DCT_Algorithm algorithm =
      dd::decide_algorithm(config, ranks, double(count), int(value_bytes), total, result_nonzeros,
                           static_cast<dd::Staging>((flags >> 6) % 4));
  if (algorithm != DCT_ALGORITHM_DENSE && algorithm != DCT_ALGORITHM_ALLGATHER &&
      algorithm != DCT_ALGORITHM_SPLIT && algorithm != DCT_ALGORITHM_RECURSIVE_DOUBLING)
    std::abort();
}

void announced_count(dct::fuzz::Input &in) {
  const std::uint64_t bound = in.take<std::uint64_t>() % (std::uint64_t(DCT_MAX_COUNT) + 1);
  const std::int64_t announced = static_cast<std::int64_t>(in.take<std::uint64_t>());
  const dd::ValueCoding coding = static_cast<dd::ValueCoding>(in.take<std::uint8_t>() % 4);
  std::size_t entries = 0;
  try {
    entries = peer::announced_entries(announced, bound, 3, "entries for a tensor of");
  } catch (const dd::Error &e) {
    if (e.code() != DCT_ERR_PEER || (announced >= 0 && std::uint64_t(announced) <= bound))
      std::abort();  // rejected a count in range, or with another code
    return;
  }
  if (announced < 0 || entries != std::uint64_t(announced) || entries > bound) std::abort();
  // What split and recursive doubling then size their receive buffers from.
  const dd::wire::BlockFormat format =
      dd::wire::block_format<double>(entries, std::size_t(bound), coding);
  if (format.bytes() > entries * 12 + 16) std::abort();
}

void forward_header(dct::fuzz::Input &in) {
  dd::mp::RowFormat format;
  format.d = 1 + in.take<std::uint16_t>() % 1024;
  const std::size_t expected_rows = in.take<std::uint8_t>() % 32;
  const unsigned flags = in.take<std::uint8_t>();
  const dd::ValueCoding coding = flags & 1 ? dd::ValueCoding::fp16 : dd::ValueCoding::native;
  format.value_bytes = flags & 1 ? 2 : 4;
  const std::int64_t format_word = peer::forward_format_word(4, coding);
  const unsigned valid = in.take<std::uint8_t>();
  std::int64_t words[peer::forward::kWords];
  words[peer::forward::kRows] = word(in, valid & 1, std::int64_t(expected_rows));
  words[peer::forward::kRowLength] = word(in, valid & 2, std::int64_t(format.d));
  words[peer::forward::kFormat] = word(in, valid & 4, format_word);
  words[peer::forward::kNnz] = word(in, valid & 8, std::int64_t(expected_rows));
  words[peer::forward::kUniform] = word(in, valid & 16, expected_rows > 0 ? 1 : -1);
  words[peer::forward::kBytes] = message_word(in, valid & 32);
  const std::size_t max_bytes = format.max_message_bytes(expected_rows);
  const peer::ForwardAnnouncement announced =
      peer::read_forward_header(words, format.d, format_word, max_bytes);
  if (announced.receive > max_bytes) std::abort();  // would receive more than the rows take
  const std::size_t received = received_bytes(announced.receive);
  std::string why;
  const int code = peer::check_forward_header(announced, expected_rows, received, why);
  if (code != DCT_SUCCESS) {
    if ((code != DCT_ERR_MISMATCH && code != DCT_ERR_PEER) || why.empty()) std::abort();
    return;
  }
  if (announced.shape.rows != expected_rows || announced.shape.bytes > received) std::abort();
  const std::vector<std::byte> message = message_of(in, received);
  dd::mp::RowMasks masks;
  if (!dd::mp::decode_masks(message.data(), announced.shape, format, masks).empty()) return;
  if (masks.rows() != expected_rows) std::abort();
  for (const std::uint32_t column : masks.columns)
    if (column >= format.d) std::abort();
}

template <typename T>
void error_bounded_header(dct::fuzz::Input &in, std::size_t d, std::size_t expected_rows,
                          std::int64_t *words) {
  namespace eb = dd::eb;
  const std::size_t cap = eb::max_message_bytes(expected_rows, d, d, sizeof(T));
  const std::size_t receive = peer::receive_bytes(words[peer::error_bounded::kBytes], cap);
  if (receive > cap) std::abort();
  const std::size_t received = received_bytes(receive);
  std::string why;
  const int code =
      peer::check_error_bounded_header(words, d, sizeof(T), expected_rows, received, why);
  if (code != DCT_SUCCESS) {
    if ((code != DCT_ERR_MISMATCH && code != DCT_ERR_PEER) || why.empty()) std::abort();
    return;
  }
  const std::int64_t columns = words[peer::error_bounded::kTableColumns];
  if (columns < 1 || d % std::size_t(columns) != 0 ||
      std::size_t(words[peer::error_bounded::kBytes]) > received)
    std::abort();
  const std::vector<std::byte> message = message_of(in, received);
  static eb::Workspace ws;
  std::vector<T> rows(expected_rows * d, T(42));
  const std::string error =
      eb::decode(message.data(), std::size_t(words[peer::error_bounded::kBytes]), expected_rows,
                 eb::Tables{d, std::size_t(columns)}, rows.data(), ws);
  if (!error.empty())
    for (const T &x : rows)
      if (!(x == T(42))) std::abort();  // rejected, yet written
}

void error_bounded_header(dct::fuzz::Input &in) {
  const std::size_t d = 1 + in.take<std::uint8_t>() % 64;
  const std::size_t expected_rows = in.take<std::uint8_t>() % 16;
  const unsigned flags = in.take<std::uint8_t>();
  const std::size_t value_bytes = flags & 1 ? 8 : 4;
  const unsigned valid = in.take<std::uint8_t>();
  std::int64_t words[peer::error_bounded::kWords];
  words[peer::error_bounded::kRows] = word(in, valid & 1, std::int64_t(expected_rows));
  words[peer::error_bounded::kRowLength] = word(in, valid & 2, std::int64_t(d));
  words[peer::error_bounded::kValueBytes] = word(in, valid & 4, std::int64_t(value_bytes));
  words[peer::error_bounded::kTableColumns] = word(in, valid & 8, std::int64_t(d));
  words[peer::error_bounded::kBytes] = message_word(in, valid & 16);
  if (value_bytes == 8)
    error_bounded_header<double>(in, d, expected_rows, words);
  else
    error_bounded_header<float>(in, d, expected_rows, words);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  dct::fuzz::Input in(data, size);
  switch (in.take<std::uint8_t>() % 4) {
    case 0:
      allreduce_header(in);
      break;
    case 1:
      announced_count(in);
      break;
    case 2:
      forward_header(in);
      break;
    default:
      error_bounded_header(in);
  }
  return 0;
}
