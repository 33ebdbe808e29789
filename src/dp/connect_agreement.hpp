// What every rank's compressed allreduce request learns about the others' when it connects
// (allreduce.cpp): one MPI_Allreduce, so that every rank's cost model charges the same
// staging and every rank sizes its call messages alike.
#pragma once

#include <mpi.h>

#include <cstddef>

namespace dct::detail {

/// This rank's side of the agreement.
struct ConnectOffer {
  std::size_t predicted_kept;  ///< the entries this rank will keep per call, 0: cannot tell
  bool staged;                 ///< its buffers are device memory, exchanged through host copies
  bool mpi_reads_device;       ///< its MPI accepts device memory (staged only)
};

/// What every rank offered, the same on every rank.
struct ConnectAgreement {
  /// Every rank's predicted_kept where all are alike (call messages may then carry blocks of
  /// that size: call_message.hpp), else 0.
  std::size_t predicted_kept = 0;
  bool any_staged = false;      ///< staged on some rank
  bool any_mpi_stages = false;  ///< staged, and its MPI not GPU-aware, on some rank
  /// Every rank staged and its MPI GPU-aware: blocks may be gathered in device memory.
  bool all_blocks_on_device = false;

  /// Collective over `comm`.
  static ConnectAgreement reach(const ConnectOffer &mine, MPI_Comm comm);
};

}  // namespace dct::detail
