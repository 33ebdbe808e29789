// The bodies of DCT-MP's init entry points: DCT_Alltoallv_init_c and
// DCT_Alltoallv_backward_init_c (MPI-4's large-count conventions: MPI_Count counts, MPI_Aint
// displacements, in elements). The int entry points of MPI-3's style widen their arrays and
// take the same path: one validation, one agreement, one engine. c_api.cpp puts them behind
// the C boundary.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <vector>

#include "dct/dct.h"
#include "mp/alltoallv.hpp"

namespace dct::detail {

/// int counts and displacements widened to the _c variants' types. A NULL array stays NULL,
/// for the validation to report as the _c variant would.
class WidenedArrays {
 public:
  WidenedArrays(const int *sendcounts, const int *sdispls, const int *recvcounts,
                const int *rdispls, int ranks);
  AlltoallvArgs args(const void *sendbuf, void *recvbuf, MPI_Datatype datatype,
                     MPI_Comm comm) const;

 private:
  std::vector<MPI_Count> sendcounts_, recvcounts_;
  std::vector<MPI_Aint> sdispls_, rdispls_;
  bool given_[4];  // which of the four arrays were not NULL
};

/// The ranks of `forward`'s communicator; DCT_ERR_REQUEST if it is no live request.
int alltoallv_forward_size(DCT_Request forward);

/// Collective over `args.comm`: validates, agrees with every rank (the same error everywhere)
/// on the arguments and on how the messages travel, then stores the new request in `*request`.
/// `function` names the entry point in messages.
void alltoallv_init(const AlltoallvArgs &args, MPI_Info info, DCT_Request *request,
                    const char *function);

/// The backward request of `forward` (`args.datatype` and `args.comm` unused), in `*request`.
void alltoallv_backward_init(DCT_Request forward, const AlltoallvArgs &args, DCT_Request *request);

}  // namespace dct::detail
