// The argument checks of DCT-MP's requests (both compressors), apart from the engines: what
// DCT_Alltoallv_init and DCT_Alltoallv_backward_init refuse, and with which code, before any
// state exists. Every check is local; DCT_Alltoallv_init agrees on the outcome across ranks.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "mp/alltoallv.hpp"

namespace dct::detail {

/// Checks the arguments of a backward request against its forward's layout (shapes reversed,
/// host buffers; `element_size` the forward's); returns the elements it sends. Throws the
/// documented codes.
MPI_Count check_backward_args(const AlltoallvArgs &args, const AlltoallvLayout &forward, int ranks,
                              std::int64_t d, int element_size);

/// Checks what a checkpoint saved per rank for a DCT-MP request (untrusted words): [count,
/// then for a forward its completed calls and `bounds` relative bounds in [0, 1]]. Throws
/// DCT_ERR_CKPT_MISMATCH when the count or the number of words is not this request's (another
/// layout or configuration), DCT_ERR_CKPT_FORMAT when a word is not a valid value.
void check_mp_state(const std::vector<double> &words, const std::string &name, MPI_Count count,
                    bool forward, std::size_t bounds = 0);

/// A backward call may start only once its forward completed a call and is not running, and
/// (`restored`) not between a checkpoint load and the forward's next call, whose masks a
/// checkpoint does not hold: throws DCT_ERR_ACTIVE otherwise (both compressors' backwards).
void require_backward_ready(bool forward_active, std::int64_t forward_calls, bool restored);

/// The ranks of an intra-communicator (how many entries the count arrays have); throws
/// DCT_ERR_COMM for MPI_COMM_NULL or an inter-communicator.
int alltoallv_comm_size(MPI_Comm comm);

/// Checks the arguments of a forward request (reads no buffer): throws the documented code.
void validate_alltoallv(const AlltoallvArgs &args, const Config &config);

/// 8-byte units of the longest message a block of `rows` rows can become with the configured
/// compressor (what receivers accept at most; a backward's messages are never longer). A
/// request whose messages could pass MPI's int counts, one or all together, on any rank,
/// exchanges point to point (alltoallv_exchange.hpp).
std::size_t longest_message_units(std::size_t rows, const Config &config, int element_size);

}  // namespace dct::detail
