// How DCT-MP's requests move their per-peer blocks (both compressors, forward and backward):
// one MPI_Alltoallv while every count and displacement fits the int that MPI-3's v-collectives
// take, else nonblocking point-to-point messages (MPI_Irecv/MPI_Isend) of at most INT_MAX items
// each, so that large-count requests (DCT_Alltoallv_init_c) work without MPI-4's
// MPI_Alltoallv_c, which Open MPI 4.1 lacks.
//
// Every rank of a collective must take the same path, while only each rank knows its own
// sizes: the path is agreed once per forward request, at its init (one allreduce over what each
// rank's layout may need at most), and shared by its backward requests. The uncompressed
// backward of an error-bounded request sends the user's blocks at the user's displacements,
// which its (non-collective) init alone knows: it agrees once more, on its first call.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <vector>

#include "core/config.hpp"
#include "mp/alltoallv.hpp"

namespace dct::detail {

/// The path every rank of a request's exchanges takes.
struct ExchangePlan {
  bool point_to_point = false;  ///< some rank's sizes may pass `limit`
  std::size_t limit = INT_MAX;  ///< most items one MPI call's count or displacement takes
  /// Top-k forward messages with exactly this many entries per row from every rank, whose
  /// sizes then follow from the layout: no header travels before them (0: headers travel).
  std::size_t uniform_kept = 0;
};

/// The most items one count or displacement of an MPI call may take here: INT_MAX (a test
/// lowers it: test_hooks.hpp, max_mpi_count).
std::size_t max_mpi_count();

/// Whether this rank's messages of a forward request (and of its backward requests, never
/// longer) may pass max_mpi_count(): the longest message (8-byte units) the configured
/// compressor could make of a block, to or from one rank or all together in one buffer.
bool may_pass_int_counts(const AlltoallvLayout &layout, const Config &config, int element_size);

/// Whether a dense exchange of `layout`'s blocks (elements at the user's displacements)
/// passes max_mpi_count() on this rank.
bool dense_passes_int_counts(const AlltoallvLayout &layout);

/// Collective over `comm` (one MPI_Allreduce of two words): point to point if any rank
/// `needs` it, in pieces no larger than any rank's max_mpi_count().
ExchangePlan agree_exchange_plan(MPI_Comm comm, bool needs);

/// Collective over `comm` (an MPI_Alltoall of the counts and an MPI_Allreduce of three words):
/// `kept` when every rank selects exactly `kept` entries per row (0: not this rank) and every
/// rank's sendcounts to each peer are that peer's recvcounts from it, else 0 (every rank gets
/// the same answer). ExchangePlan::uniform_kept.
std::size_t agree_uniform_kept(MPI_Comm comm, const AlltoallvLayout &layout, std::size_t kept);

/// One side of an exchange: per rank, `counts[j]` items at item offset `displs[j]` of `base`.
struct Blocks {
  const void *base;
  std::vector<std::size_t> counts, displs;
};

/// Sends `out.counts[j]` items of `type` (`item_bytes` bytes each) to every rank j and
/// receives `in.counts[j]` from it, the block of this rank to itself included: one
/// MPI_Alltoallv, or point to point as `plan` says. Throws DCT_ERR_MPI on an MPI failure, and
/// DCT_ERR_INTERNAL rather than truncate a size the plan did not foresee.
void exchange_blocks(const ExchangePlan &plan, const Blocks &out, const Blocks &in,
                     MPI_Datatype type, std::size_t item_bytes, MPI_Comm comm);

/// The layout's counts and displacements on one side (elements) as Blocks over `base`.
Blocks send_blocks(const AlltoallvLayout &layout, const void *base);
Blocks receive_blocks(const AlltoallvLayout &layout, void *base);

}  // namespace dct::detail
