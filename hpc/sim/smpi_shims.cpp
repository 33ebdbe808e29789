// Simulation-speed shims for SMPI, linked into the simulator binary with -Bsymbolic-functions
// so that dct's calls bind to them (a link-time interposition, like a PMPI tool's). Setting
// DCT_SIM_NO_SHIMS=1 turns them off (hpc/sim/run.sh --verify uses that).
//
// SMPI 3.32 spends host time quadratic in the number of requests a rank has outstanding: every
// completed communication is removed from its actor's std::list of activities by a full scan,
// and MPI_Waitall (and the wait of a nonblocking collective) calls waitany once per request,
// each scanning all of them. dct posts its header exchange (3 integers per rank) as
// MPI_Iallgather, which SMPI implements linearly, 2 (P-1) requests per rank: at P = 1024 one
// such exchange took over 7 minutes of host time, for microseconds of simulated time.
//
// - MPI_Iallgather runs as the blocking MPI_Allgather that SMPI's coll-selector picks (ompi:
//   recursive doubling or Bruck for these small blocks, log2(P) rounds) and completes before
//   it returns (request = MPI_REQUEST_NULL). With smpi/simulate-computation:no the work dct
//   does between posting and waiting takes no simulated time, so only the algorithm of this
//   small exchange changes: log2(P) latencies instead of one round of P-1 concurrent messages.
//   run.sh --verify measures the difference at 64 ranks.
// - The same for every other nonblocking collective dct posts (MPI_Iallgatherv, MPI_Ialltoall,
//   MPI_Ialltoallv, MPI_Ireduce_scatter, MPI_Iallreduce): SMPI implements them as P-1
//   point-to-point pairs and waits on them quadratically (a split call at 1024 ranks did not
//   finish in 20 minutes of host time). dct's stages wait for each collective before posting
//   the next, and the driver has one call in flight, so with simulate-computation:no the
//   blocking collective (algorithm chosen by the ompi selector, as for MPI_Allreduce) takes
//   the simulated time the nonblocking one would.
// - MPI_Waitall waits for the requests one by one: the same simulated time (SMPI progresses
//   every posted communication whether or not its rank is waiting on it), O(R) waits instead
//   of O(R^2). For algorithms that post many point-to-point requests (split, SparCML).
#include <mpi.h>

#include <cstdlib>

namespace {

bool shims_disabled() {
  static const bool disabled = [] {
    const char *value = std::getenv("DCT_SIM_NO_SHIMS");
    return value != nullptr && value[0] != '\0' && value[0] != '0';
  }();
  return disabled;
}

int wait_in_order(int count, MPI_Request *requests, MPI_Status *statuses) {
  int result = MPI_SUCCESS;
  for (int i = 0; i < count; ++i) {
    const int rc =
        MPI_Wait(&requests[i], statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i]);
    if (rc != MPI_SUCCESS) result = rc;
  }
  return result;
}

}  // namespace

extern "C" {

int MPI_Waitall(int count, MPI_Request *requests, MPI_Status *statuses) {
  if (shims_disabled()) return PMPI_Waitall(count, requests, statuses);
  return wait_in_order(count, requests, statuses);
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
  if (shims_disabled())
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                           request);
  *request = MPI_REQUEST_NULL;
  return MPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int *recvcounts, const int *displs, MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request *request) {
  if (shims_disabled())
    return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                            comm, request);
  *request = MPI_REQUEST_NULL;
  return MPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
  if (shims_disabled())
    return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                          request);
  *request = MPI_REQUEST_NULL;
  return MPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Ialltoallv(const void *sendbuf, const int *sendcounts, const int *sdispls,
                   MPI_Datatype sendtype, void *recvbuf, const int *recvcounts, const int *rdispls,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
  if (shims_disabled())
    return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                           recvtype, comm, request);
  *request = MPI_REQUEST_NULL;
  return MPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                       recvtype, comm);
}

int MPI_Ireduce_scatter(const void *sendbuf, void *recvbuf, const int *recvcounts,
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request) {
  if (shims_disabled())
    return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
  *request = MPI_REQUEST_NULL;
  return MPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request) {
  if (shims_disabled())
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  *request = MPI_REQUEST_NULL;
  return MPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

}  // extern "C"
