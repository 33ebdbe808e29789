// The checks of what peers announce in the fixed-size header words exchanged before every
// payload: the allreduce's per-call header (kept count, length, type, re-balance flag) and the
// entry counts and sizes the sparse exchanges announce to each other (DCT-MP's forward headers:
// mp/forward_headers.hpp). Nothing is sized, received or decoded from a peer's word before it
// passes here.
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

#include "core/internal_api.hpp"

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

}  // namespace dct::detail::peer
