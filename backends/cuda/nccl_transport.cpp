// The NCCL transport of CUDA requests (core/device_transport.hpp): the allgather's blocks and
// split's reduced segments move device to device as one NCCL group of broadcasts, rank r's
// block from rank r (NCCL has no allgatherv; grouped broadcasts of unequal sizes are one), and
// split's blocks to their owners as one group of ncclSend / ncclRecv (an alltoallv; my own block
// a device copy), recursive doubling's partial sums between partners as a group of one send
// and one receive, and dense's sum as a group of reduces (block r onto rank r) and one of
// broadcasts (block r from rank r): the same bits on every rank, as dense promises. Each is queued
// on the stream of the request's kernels (the application's, or the backend's own), so that it
// follows the encode and precedes the decode without the host waiting in between. The communicator
// is made once per user communicator: rank 0's ncclUniqueId broadcast over MPI, ncclCommInitRank on
// every rank, and the outcome agreed on so that every rank keeps the communicator or none does
// (NCCL refuses two ranks on one GPU).
//
// Compiled by the C++ compiler against the toolkit's nccl.h and cuda_runtime.h (no kernels).
// Not yet run on a GPU: the logic around it runs in tests/mpi (mpi.device_buffers.emulated)
// with an MPI stand-in for these calls.
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "core/device_transport.hpp"
#include "core/error.hpp"
#include "core/wire.hpp"

namespace dct::detail::backends {
namespace {

void check_nccl(ncclResult_t result, const char *what) {
  if (result == ncclSuccess) return;
  fail(result == ncclSystemError ? DCT_ERR_NO_MEMORY : DCT_ERR_INTERNAL,
       std::string("NCCL ") + what + " failed: " + ncclGetErrorString(result) + " (" +
           ncclGetLastError(nullptr) + ")");
}

void check_cuda(cudaError_t error, const char *what) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();
  fail(error == cudaErrorMemoryAllocation ? DCT_ERR_NO_MEMORY : DCT_ERR_INTERNAL,
       std::string("CUDA ") + what + " failed: " + cudaGetErrorName(error) + ": " +
           cudaGetErrorString(error));
}

std::size_t bytes_of(const int *units, int r) {
  return std::size_t(units[r]) * wire::kUnitBytes;
}

class NcclTransport final : public DeviceTransport {
 public:
  NcclTransport(ncclComm_t comm, int ranks, int me) : comm_(comm), ranks_(ranks), me_(me) {}
  ~NcclTransport() override { ncclCommDestroy(comm_); }
  NcclTransport(const NcclTransport &) = delete;
  NcclTransport &operator=(const NcclTransport &) = delete;

  const char *name() const override { return "nccl"; }

  void allgatherv(std::byte *buffer, const int *units, const int *offsets, Stream stream) override {
    const auto s = static_cast<cudaStream_t>(stream);
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < ranks_; ++r) {
      std::byte *block = buffer + bytes_of(offsets, r);
      if (bytes_of(units, r) > 0)
        check_nccl(ncclBroadcast(block, block, bytes_of(units, r), ncclUint8, r, comm_, s),
                   "ncclBroadcast");
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

  void alltoallv(const std::byte *send, const int *send_units, const int *send_offsets,
                 std::byte *recv, const int *recv_units, const int *recv_offsets,
                 Stream stream) override {
    const auto s = static_cast<cudaStream_t>(stream);
    const int me = me_;
    if (bytes_of(send_units, me) > 0)
      check_cuda(
          cudaMemcpyAsync(recv + bytes_of(recv_offsets, me), send + bytes_of(send_offsets, me),
                          bytes_of(send_units, me), cudaMemcpyDeviceToDevice, s),
          "cudaMemcpyAsync (my own block)");
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < ranks_; ++r) {
      if (r == me) continue;
      if (bytes_of(send_units, r) > 0)
        check_nccl(ncclSend(send + bytes_of(send_offsets, r), bytes_of(send_units, r), ncclUint8, r,
                            comm_, s),
                   "ncclSend");
      if (bytes_of(recv_units, r) > 0)
        check_nccl(ncclRecv(recv + bytes_of(recv_offsets, r), bytes_of(recv_units, r), ncclUint8, r,
                            comm_, s),
                   "ncclRecv");
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

  void sendrecv(const std::byte *send, int send_units, std::byte *recv, int recv_units, int peer,
                Stream stream) override {
    const auto s = static_cast<cudaStream_t>(stream);
    const std::size_t out = std::size_t(send_units) * wire::kUnitBytes;
    const std::size_t in = std::size_t(recv_units) * wire::kUnitBytes;
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    if (out > 0) check_nccl(ncclSend(send, out, ncclUint8, peer, comm_, s), "ncclSend");
    if (in > 0) check_nccl(ncclRecv(recv, in, ncclUint8, peer, comm_, s), "ncclRecv");
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }

  void sum_blocks(void *buffer, std::size_t count, std::size_t value_bytes,
                  Stream stream) override {
    const auto s = static_cast<cudaStream_t>(stream);
    const ncclDataType_t type = value_bytes == 8 ? ncclDouble : ncclFloat;
    auto *values = static_cast<std::byte *>(buffer);
    // Two groups: every block reduced onto its rank (in place there), then every block
    // broadcast from it; the stream orders the second after the first.
    for (const bool reduce : {true, false}) {
      check_nccl(ncclGroupStart(), "ncclGroupStart");
      const std::size_t ranks = static_cast<std::size_t>(ranks_);
      for (std::size_t r = 0, start = 0; r < ranks; ++r) {
        const std::size_t size = dense_block(count, ranks, r);
        std::byte *block = values + start * value_bytes;
        start += size;
        if (size == 0) continue;
        if (reduce)
          check_nccl(ncclReduce(block, block, size, type, ncclSum, int(r), comm_, s), "ncclReduce");
        else
          check_nccl(ncclBroadcast(block, block, size, type, int(r), comm_, s), "ncclBroadcast");
      }
      check_nccl(ncclGroupEnd(), "ncclGroupEnd");
    }
  }

 private:
  ncclComm_t comm_;
  int ranks_, me_;  // of comm_, which never changes
};

}  // namespace

bool nccl_compiled() {
  return true;
}

std::unique_ptr<DeviceTransport> nccl_transport(MPI_Comm comm, std::string &why) {
  int rank = 0, ranks = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &ranks), "MPI_Comm_size");
  struct {
    ncclUniqueId id;
    int ok;
  } root{};
  if (rank == 0) root.ok = ncclGetUniqueId(&root.id) == ncclSuccess ? 1 : 0;
  check_mpi(MPI_Bcast(&root, sizeof root, MPI_BYTE, 0, comm), "MPI_Bcast");
  if (root.ok == 0) {
    why = "ncclGetUniqueId failed on rank 0";
    return nullptr;
  }
  ncclComm_t nccl = nullptr;
  std::string mine;
  ncclResult_t result = ncclCommInitRank(&nccl, ranks, root.id, rank);
  if (result != ncclSuccess)
    mine = std::string("ncclCommInitRank: ") + ncclGetErrorString(result) + " (" +
           ncclGetLastError(nullptr) + ")";
  int ok = mine.empty() ? 1 : 0, everyone = 0;
  check_mpi(MPI_Allreduce(&ok, &everyone, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (everyone == 1) return std::make_unique<NcclTransport>(nccl, ranks, rank);
  // Someone failed: nobody keeps a communicator, and every rank says why (the lowest failing
  // rank's reason).
  if (nccl != nullptr) ncclCommDestroy(nccl);
  int first = ok ? ranks : rank;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  char reason[256] = {};
  if (rank == first) mine.copy(reason, sizeof reason - 1);
  check_mpi(MPI_Bcast(reason, sizeof reason, MPI_CHAR, first, comm), "MPI_Bcast");
  why = std::string("NCCL cannot run on these ranks (rank ") + std::to_string(first) + ": " +
        reason + ")";
  return nullptr;
}

}  // namespace dct::detail::backends
