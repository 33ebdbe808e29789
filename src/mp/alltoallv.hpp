// DCT-MP: the compressed alltoallv of model-parallel activations (forward) and of their
// gradients (backward, reusing the forward's masks). Both are persistent requests on the
// request lifecycle every kind shares (RequestEngine), so DCT_Start/Wait/Test/Waitall/
// Request_free work unchanged.
//
// A call is one blocking exchange: it runs, in start order, in the first completion call
// (DCT_Wait, DCT_Test, DCT_Waitall) once every call started before it is complete (see
// progress.hpp). Its messages go over the communicator's private duplicate.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/config.hpp"
#include "core/request_engine.hpp"

namespace dct::detail {

/// Arguments of DCT_Alltoallv_init_c / DCT_Alltoallv_backward_init_c as the user gave them
/// (the int entry points widen theirs to these first). Counts and displacements are in
/// elements, one per rank of `comm`.
struct AlltoallvArgs {
  const void *sendbuf;
  const MPI_Count *sendcounts;
  const MPI_Aint *sdispls;
  void *recvbuf;
  const MPI_Count *recvcounts;
  const MPI_Aint *rdispls;
  MPI_Datatype datatype;
  MPI_Comm comm;
};

/// Counts and displacements (elements), one per rank, copied at init: MPI-style requests
/// must not depend on the caller keeping its arrays alive.
struct AlltoallvLayout {
  std::vector<MPI_Count> sendcounts, recvcounts;
  std::vector<MPI_Aint> sdispls, rdispls;
  AlltoallvLayout(const AlltoallvArgs &args, int ranks)
      : sendcounts(args.sendcounts, args.sendcounts + ranks),
        recvcounts(args.recvcounts, args.recvcounts + ranks),
        sdispls(args.sdispls, args.sdispls + ranks),
        rdispls(args.rdispls, args.rdispls + ranks) {}
};

/// Per-rank message sizes and their offsets in a packed message buffer, in 8-byte units.
/// Any size: the exchange (alltoallv_exchange.hpp) decides how they travel.
struct MessageUnits {
  std::vector<std::size_t> counts, displs;
  std::size_t total = 0;

  explicit MessageUnits(const std::vector<std::size_t> &units);
  std::byte *at(std::vector<std::uint64_t> &buffer, std::size_t j) const {
    return reinterpret_cast<std::byte *>(buffer.data() + displs[j]);
  }
  /// 8-byte units holding `bytes` bytes.
  static std::size_t of(std::size_t bytes);
};

struct ExchangePlan;

/// A forward request (collective: may duplicate `comm` on first use). `args` validated.
/// `plan`: how its messages and those of its backward requests travel, set by the init once
/// the ranks agreed on it (before any call).
std::unique_ptr<RequestEngine> make_alltoallv_engine(const AlltoallvArgs &args,
                                                     const Config &config,
                                                     std::shared_ptr<const ExchangePlan> plan);

/// The backward request paired with `forward`: `args.comm` and `args.datatype` are ignored
/// (the forward's are used). Throws DCT_ERR_REQUEST if `forward` is not a DCT-MP forward
/// request, DCT_ERR_COUNT if the shapes are not the forward's reversed, DCT_ERR_BUFFER,
/// DCT_ERR_ARG as the forward's validation.
std::unique_ptr<RequestEngine> make_alltoallv_backward(const RequestEngine &forward,
                                                       const AlltoallvArgs &args);

/// Whether `engine` is a DCT-MP request (forward or backward): it keeps no residual.
bool is_alltoallv(const RequestEngine &engine);

}  // namespace dct::detail
