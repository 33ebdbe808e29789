// The first message of every compressed allreduce call: each rank's header words
// (peer_headers.hpp), and, when every rank can tell every block's size before it arrives, the
// rank's encoded block behind them, in one MPI_Iallgather of fixed-size slots. Under the
// adaptive control every rank keeps exactly k = ceil(density * n) entries (ties broken by
// index), so where the cost model picks allgather for P k entries the call is one message
// round instead of two (header, then blocks): the round trip that dominates small tensors and
// slow links. A rank that keeps another number (NaN or Inf entries add to k) sends its header
// alone in its slot, and every rank, reading the same headers, falls back to the exchange's
// own gather.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dct::detail {

class CallMessage {
 public:
  /// Sizes this call's slots: `header_words` words and room for a block of `block_bytes`
  /// (a multiple of 8; 0: the header alone). Returns where this rank's block goes, to be
  /// written before post().
  std::byte *prepare(int ranks, int rank, std::size_t header_words, std::size_t block_bytes);
  /// This rank's header words (header_words of them), copied into its slot; posts the gather.
  void post(const std::int64_t *header, MPI_Comm comm);
  /// Whether the gather completed (with `block`, waits for it).
  bool complete(bool block);

  /// Every rank's header words, rank after rank (valid once complete).
  const std::int64_t *headers();
  /// Rank r's block bytes in its slot (valid once complete, when block_bytes() > 0).
  const std::byte *block(int r) const {
    return reinterpret_cast<const std::byte *>(slots_.data() + std::size_t(r) * slot_words_ +
                                               header_words_);
  }
  std::size_t block_bytes() const { return block_bytes_; }
  std::size_t stride_bytes() const { return slot_words_ * sizeof(std::uint64_t); }

 private:
  std::size_t header_words_ = 0, block_bytes_ = 0, slot_words_ = 0;
  int ranks_ = 0, rank_ = 0;
  std::vector<std::uint64_t> slots_;  // kept from call to call: no allocation in steady state
  std::vector<std::int64_t> headers_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

}  // namespace dct::detail
