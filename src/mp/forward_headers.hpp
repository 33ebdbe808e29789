// The checks of what peers announce in the header words of DCT-MP's forward messages (top-k
// and error-bounded), before anything is received or decoded from them. Pure functions of the
// words, so that a fuzz harness reaches them without MPI (tests/fuzz/fuzz_peer_headers.cpp);
// every rank of a collective check reads the same words and reaches the same verdict. The
// allreduce's headers: core/peer_headers.hpp.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/internal_api.hpp"
#include "core/peer_headers.hpp"
#include "mp/row_codec.hpp"

namespace dct::detail::peer {

// --- DCT-MP top-k forward messages ----------------------------------------------------------

namespace forward {
/// The words each rank announces to each peer before a forward message.
enum Word { kRows, kRowLength, kFormat, kNnz, kUniform, kBytes, kWords };
}  // namespace forward

/// The kFormat word: the element size and the value coding, which both sides must share.
DCT_INTERNAL_API std::int64_t forward_format_word(std::size_t element_size, ValueCoding coding);

/// One peer's forward header, as read.
struct ForwardAnnouncement {
  mp::MessageShape shape;    ///< negative words read as SIZE_MAX (rejected by the check)
  bool same_format = false;  ///< row length and format word are this rank's
  std::size_t receive = 0;   ///< bytes to receive (receive_bytes of its kBytes word)
};

/// Reads forward::kWords words; `row_length` and `format` are this rank's, `max_bytes` what
/// the rows this rank expects from that peer could take at most.
DCT_INTERNAL_API ForwardAnnouncement read_forward_header(const std::int64_t *words,
                                                         std::size_t row_length,
                                                         std::int64_t format,
                                                         std::size_t max_bytes);

/// DCT_SUCCESS if the announced message can be decoded from the `received_bytes` bytes that
/// arrived for `expected_rows` rows; otherwise DCT_ERR_MISMATCH (another row length, format
/// or number of rows) or DCT_ERR_PEER, with the reason in `why`. No exception: the caller
/// agrees with the other ranks before it fails.
DCT_INTERNAL_API int check_forward_header(const ForwardAnnouncement &announced,
                                          std::size_t expected_rows, std::size_t received_bytes,
                                          std::string &why);

// --- DCT-MP error-bounded messages ----------------------------------------------------------

namespace error_bounded {
/// The words each rank announces to each peer before an error-bounded message.
enum Word { kRows, kRowLength, kValueBytes, kTableColumns, kBytes, kWords };
}  // namespace error_bounded

/// As check_forward_header, for error_bounded::kWords words: rows of `row_length` values of
/// `value_bytes` bytes, tables of a column count that divides the row, and no more bytes than
/// arrived.
DCT_INTERNAL_API int check_error_bounded_header(const std::int64_t *words, std::size_t row_length,
                                                std::size_t value_bytes, std::size_t expected_rows,
                                                std::size_t received_bytes, std::string &why);

}  // namespace dct::detail::peer
