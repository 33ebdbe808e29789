// AllreduceArgs (allreduce.hpp): which calls dct compresses, and the checks of the arguments.
#include <climits>
#include <string>

#include "core/datatypes.hpp"
#include "core/error.hpp"
#include "dp/allreduce.hpp"

namespace dct::detail {

int AllreduceArgs::compressed_element_size() const {
  return op == MPI_SUM ? floating_element_size(datatype) : 0;
}

bool AllreduceArgs::compressed() const {
  return compressed_element_size() != 0;
}

namespace {

/// MPI has no query for whether a datatype is committed, but checks it wherever a communication
/// names the type (Open MPI and MPICH 4.0 also for MPI_PROC_NULL, where nothing is read; MPICH
/// not for count 0), so a send of one element to no one on `probe_comm`, whose errors return,
/// tells: an uncommitted type passed through to MPI would otherwise fail in MPI_Allreduce,
/// through the user communicator's handler.
void require_committed(MPI_Datatype datatype, MPI_Comm probe_comm) {
  int integers = 0, addresses = 0, datatypes = 0, combiner = MPI_COMBINER_NAMED;
  check_mpi(MPI_Type_get_envelope(datatype, &integers, &addresses, &datatypes, &combiner),
            "MPI_Type_get_envelope");
  if (combiner == MPI_COMBINER_NAMED) return;  // predefined: always committed
  const char nothing = 0;
  require(MPI_Send(&nothing, 1, datatype, MPI_PROC_NULL, 0, probe_comm) == MPI_SUCCESS,
          DCT_ERR_DATATYPE, "datatype is not committed (MPI_Type_commit) or not valid");
}

}  // namespace

void AllreduceArgs::validate(MPI_Comm probe_comm) const {
  require(comm != MPI_COMM_NULL, DCT_ERR_COMM, "communicator is MPI_COMM_NULL");
  require(datatype != MPI_DATATYPE_NULL, DCT_ERR_DATATYPE, "datatype is MPI_DATATYPE_NULL");
  require_committed(datatype, probe_comm);
  require(op != MPI_OP_NULL, DCT_ERR_OP, "op is MPI_OP_NULL");
  require(count >= 0, DCT_ERR_COUNT, "count is negative: " + std::to_string(count));
  if (compressed()) {
    require(count <= DCT_MAX_COUNT, DCT_ERR_COUNT,
            "count " + std::to_string(count) + " exceeds DCT_MAX_COUNT (32-bit wire indices)");
  } else {
    require(count <= INT_MAX, DCT_ERR_COUNT,
            "count " + std::to_string(count) + " exceeds INT_MAX for a call passed to MPI");
  }
  // MPI defines MPI_IN_PLACE for the send buffer only; as recvbuf it is no address to write.
  require(recvbuf != MPI_IN_PLACE, DCT_ERR_BUFFER,
          "recvbuf is MPI_IN_PLACE: pass MPI_IN_PLACE as sendbuf, the data in recvbuf");
  if (count > 0) {
    require(recvbuf != nullptr, DCT_ERR_BUFFER, "recvbuf is NULL with count > 0");
    require(sendbuf != nullptr, DCT_ERR_BUFFER, "sendbuf is NULL with count > 0");
  }
}

}  // namespace dct::detail
