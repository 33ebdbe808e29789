// Moving a GPU request's compressed blocks between ranks device to device, and summing dense's
// tensor there (dct_transport):
// NCCL where dct was built with it (backends/cuda/nccl_transport.cpp), so that the blocks never
// pass through host memory. MPI stays the default elsewhere: host buffers, HIP (RCCL is not
// wired in), builds without NCCL, and ranks whose NCCL communicator cannot be made (NCCL
// refuses two ranks on one GPU).
//
// One transport per user communicator (CommContext), shared by its requests, made at the init
// of the first request that asks for it. A call that uses it is a blocking call in dct's sense
// (progress.hpp): it runs in the calls' start order, once every rank started it, so that every
// rank issues the communicator's NCCL operations in the same order.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>

#include "core/compute_backend.hpp"

namespace dct::detail {

/// Elements of rank r's block when dense cuts `count` elements into one block per rank (its
/// reduce-scatter, and DeviceTransport::sum_blocks): count / ranks, one more for r < count % ranks.
inline std::size_t dense_block(std::size_t count, std::size_t ranks, std::size_t r) {
  return count / ranks + (r < count % ranks ? 1 : 0);
}

class DeviceTransport {
 public:
  virtual ~DeviceTransport() = default;
  /// "nccl" (or a test's emulation).
  virtual const char *name() const = 0;
  /// In place, an allgatherv of 8-byte units: rank r's units[r] units at
  /// buffer + 8 * offsets[r] (device memory, the same layout on every rank) reach every rank.
  /// Queued on `stream` (the backend's resolved stream: Backend::queue_of, never nullptr) after
  /// the work queued there before it and before the work queued after it; it returns once
  /// queued, and the caller's next wait on the stream covers it. Throws dct::detail::Error
  /// (DCT_ERR_INTERNAL, or DCT_ERR_NO_MEMORY) with the library's message.
  virtual void allgatherv(std::byte *buffer, const int *units, const int *offsets,
                          Stream stream) = 0;
  /// An alltoallv of 8-byte units, device memory to device memory: send_units[r] units from
  /// send + 8 * send_offsets[r] reach rank r at its recv + 8 * recv_offsets[me]. Queued on
  /// `stream` as allgatherv is; the buffers must not overlap.
  virtual void alltoallv(const std::byte *send, const int *send_units, const int *send_offsets,
                         std::byte *recv, const int *recv_units, const int *recv_offsets,
                         Stream stream) = 0;
  /// With one peer (a pairwise step, as recursive doubling's): send_units units from `send`
  /// reach `peer` at its `recv`, and recv_units units from it arrive at mine; either count may
  /// be 0 (that direction is then skipped, and the peer's matching count must be 0 too). Only
  /// the two ranks take part. Queued on `stream` as allgatherv is; the buffers must not
  /// overlap, and `peer` is not this rank.
  virtual void sendrecv(const std::byte *send, int send_units, std::byte *recv, int recv_units,
                        int peer, Stream stream) = 0;
  /// In place, the sum over ranks of `count` values of `value_bytes` bytes each (4: float, 8:
  /// double) at `buffer` (device memory), the same bits on every rank: cut into one block per
  /// rank as dense's reduce-scatter cuts it (dense_block), block r summed once, on rank r, and
  /// then sent from there to every rank.
  /// Queued on `stream` as allgatherv is.
  virtual void sum_blocks(void *buffer, std::size_t count, std::size_t value_bytes,
                          Stream stream) = 0;
};

namespace backends {

/// Whether this build has NCCL.
DCT_INTERNAL_API bool nccl_compiled();

/// An NCCL communicator over `comm` (collective: every rank calls it): nullptr on every rank
/// when NCCL was not compiled in or any rank could not make its communicator (`why` then says
/// why, on every rank). The current CUDA device is the rank's.
DCT_INTERNAL_API std::unique_ptr<DeviceTransport> nccl_transport(MPI_Comm comm, std::string &why);

/// nccl_compiled(), or in the test build a test's transport is set.
bool device_transport_compiled();

/// nccl_transport, or in the test build the transport a test put in its place
/// (testing::make_device_transport).
std::unique_ptr<DeviceTransport> make_device_transport(MPI_Comm comm, std::string &why);

}  // namespace backends
}  // namespace dct::detail
