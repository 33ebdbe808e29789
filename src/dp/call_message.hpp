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
// GPU requests whose ranks' MPI all read device memory (agreed at init) keep their blocks there:
// the headers are gathered in host memory and, posted with them, the blocks in a device buffer
// (two collectives in one round), so a block never crosses to the host.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/compute_backend.hpp"

namespace dct::detail {

class CallMessage {
 public:
  /// Sizes this call's slots: `header_words` words and room for a block of `block_bytes`
  /// (a multiple of 8; 0: the header alone). Returns where this rank's block goes, to be
  /// written before post(): in `device`'s memory where one is given (every rank's MPI reads
  /// it), else in host memory behind the header.
  std::byte *prepare(int ranks, int rank, std::size_t header_words, std::size_t block_bytes,
                     Backend *device = nullptr);
  /// This rank's header words (header_words of them), copied into its slot; posts the gather
  /// (and the blocks' gather, where they lie on the device).
  void post(const std::int64_t *header, MPI_Comm comm);
  /// Whether the gather completed (with `block`, waits for it).
  bool complete(bool block);

  /// Every rank's header words, rank after rank (valid once complete).
  const std::int64_t *headers();
  /// Rank r's block bytes in its slot (valid once complete, when block_bytes() > 0), at
  /// block(0) + r * stride_bytes(); in device memory where blocks_on_device().
  const std::byte *block(int r) const {
    if (blocks_on_device_) return device_blocks_.data() + std::size_t(r) * block_bytes_;
    return reinterpret_cast<const std::byte *>(slots_.data() + std::size_t(r) * slot_words_ +
                                               header_words_);
  }
  std::size_t block_bytes() const { return block_bytes_; }
  std::size_t stride_bytes() const {
    return blocks_on_device_ ? block_bytes_ : slot_words_ * sizeof(std::uint64_t);
  }
  bool blocks_on_device() const { return blocks_on_device_; }

 private:
  std::size_t header_words_ = 0, block_bytes_ = 0, slot_words_ = 0;
  int ranks_ = 0, rank_ = 0;
  std::vector<std::uint64_t> slots_;  // kept from call to call: no allocation in steady state
  std::vector<std::int64_t> headers_;
  bool blocks_on_device_ = false;
  BackendArray<std::byte> device_blocks_;  // every rank's block, where blocks_on_device_
  MPI_Request requests_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};  // headers, device blocks
};

}  // namespace dct::detail
