// The checks of what peers announce in the fixed-size header words exchanged before every
// payload: the allreduce's per-call header (kept count, length, type, re-balance flag), the
// entry counts and sizes the sparse exchanges announce to each other, and the per-peer headers
// of DCT-MP's forward (top-k and error-bounded) messages. Nothing is sized, received or decoded
// from a peer's word before it passes here.
//
// Pure functions of the words, so that a fuzz harness reaches them without MPI
// (tests/fuzz/fuzz_peer_headers.cpp). Every rank of a collective check reads the same words,
// so every rank reaches the same verdict.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "internal_api.hpp"
#include "row_codec.hpp"

namespace dct::detail::peer {

// --- the sparse allreduce -------------------------------------------------------------------

namespace allreduce {
/// The words every rank allgathers at the start of every call.
enum Word { kKept, kCount, kValueBytes, kRebalance, kWords };
}  // namespace allreduce

/// What the ranks' allreduce headers add up to.
struct AllreduceAnnouncements {
  double total_kept = 0;   ///< entries sent by all ranks together
  bool rebalance = false;  ///< some rank asks for split's segments to be recomputed
};

/// Checks the `ranks` headers (allreduce::kWords words each, rank by rank) against this
/// rank's tensor of `count` elements of `value_bytes` bytes and writes each rank's kept count
/// to `kept[rank]`. Throws DCT_ERR_MISMATCH for a rank reducing a tensor of another length or
/// type, DCT_ERR_PEER for a kept count outside [0, count]. `rank`: this rank, for messages.
DCT_INTERNAL_API AllreduceAnnouncements read_allreduce_headers(const std::int64_t *headers,
                                                               int ranks, int rank,
                                                               std::int64_t count,
                                                               std::int64_t value_bytes,
                                                               std::int64_t *kept);

/// A number of entries peer `peer` announced, before anything is sized from it: returned if
/// it lies in [0, bound], else DCT_ERR_PEER, "rank <peer> announced <n> <in_what> <bound>"
/// (`in_what`: e.g. "entries for a tensor of").
DCT_INTERNAL_API std::size_t announced_entries(std::int64_t announced, std::uint64_t bound,
                                               int peer, const char *in_what);

/// The bytes to receive of a message whose sender announced `announced` bytes: what it
/// announced, but never more than `max_bytes`, what the rows this rank expects could take (a
/// liar is rejected after the transfer, so that no rank is left waiting); 0 if negative.
DCT_INTERNAL_API std::size_t receive_bytes(std::int64_t announced, std::size_t max_bytes);

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
