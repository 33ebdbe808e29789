// The C ABI of DCT-MP's inits and of the checkpoints, every entry point inside guarded().
#include "api/guarded.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/comm_context.hpp"
#include "core/error.hpp"
#include "dct/dct.h"
#include "mp/alltoallv_init.hpp"
#include "mp/alltoallv_validate.hpp"

using namespace dct::detail;

extern "C" {

// DCT-MP's inits: one path, the large-count one; the int forms widen their arrays into it.
int DCT_Alltoallv_init_c(const void *sendbuf, const MPI_Count sendcounts[],
                         const MPI_Aint sdispls[], void *recvbuf, const MPI_Count recvcounts[],
                         const MPI_Aint rdispls[], MPI_Datatype datatype, MPI_Comm comm,
                         MPI_Info info, DCT_Request *request) {
  return guarded(__func__, [&] {
    ensure_library_ready();
    const std::shared_ptr<CommContext> context = comm_context(comm);
    const ContextEntry entry(*context);
    alltoallv_init({sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, datatype, comm},
                   info, request, nullptr);
  });
}

int DCT_Alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[],
                       void *recvbuf, const int recvcounts[], const int rdispls[],
                       MPI_Datatype datatype, MPI_Comm comm, MPI_Info info, DCT_Request *request) {
  return guarded(__func__, [&] {
    ensure_library_ready();
    const std::shared_ptr<CommContext> context = comm_context(comm);
    const ContextEntry entry(*context);
    const WidenedArrays wide(sendcounts, sdispls, recvcounts, rdispls, alltoallv_comm_size(comm));
    alltoallv_init(wide.args(sendbuf, recvbuf, datatype, comm), info, request, nullptr);
  });
}

int DCT_Alltoallv_backward_init_c(DCT_Request forward, const void *sendbuf,
                                  const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                                  void *recvbuf, const MPI_Count recvcounts[],
                                  const MPI_Aint rdispls[], DCT_Request *request) {
  return guarded(__func__, [&] {
    ensure_library_ready();
    const RequestEntry entry(&forward);
    alltoallv_backward_init(forward,
                            {sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls,
                             MPI_DATATYPE_NULL, MPI_COMM_NULL},
                            request);
  });
}

int DCT_Alltoallv_backward_init(DCT_Request forward, const void *sendbuf, const int sendcounts[],
                                const int sdispls[], void *recvbuf, const int recvcounts[],
                                const int rdispls[], DCT_Request *request) {
  return guarded(__func__, [&] {
    require(request != nullptr, DCT_ERR_ARG, "request is NULL");
    ensure_library_ready();
    const RequestEntry entry(&forward);
    const WidenedArrays wide(sendcounts, sdispls, recvcounts, rdispls,
                             alltoallv_forward_size(forward));
    alltoallv_backward_init(forward, wide.args(sendbuf, recvbuf, MPI_DATATYPE_NULL, MPI_COMM_NULL),
                            request);
  });
}

int DCT_Checkpoint_save(MPI_Comm comm, const char *path) {
  return guarded(__func__, [&] {
    require(path != nullptr && *path != '\0', DCT_ERR_ARG, "path is NULL or empty");
    ensure_library_ready();
    const std::shared_ptr<CommContext> context = comm_context(comm);
    const ContextEntry entry(*context);
    checkpoint_save(comm, path);
  });
}

int DCT_Checkpoint_load(MPI_Comm comm, const char *path) {
  return guarded(__func__, [&] {
    require(path != nullptr && *path != '\0', DCT_ERR_ARG, "path is NULL or empty");
    ensure_library_ready();
    const std::shared_ptr<CommContext> context = comm_context(comm);
    const ContextEntry entry(*context);
    checkpoint_load(comm, path);
  });
}

int DCT_Checkpoint_isave(MPI_Comm comm, const char *path, DCT_Checkpoint *checkpoint) {
  return guarded(__func__, [&] {
    require(checkpoint != nullptr, DCT_ERR_ARG, "checkpoint is NULL");
    *checkpoint = DCT_CHECKPOINT_NULL;
    require(path != nullptr && *path != '\0', DCT_ERR_ARG, "path is NULL or empty");
    ensure_library_ready();
    const std::shared_ptr<CommContext> context = comm_context(comm);
    const ContextEntry entry(*context);
    *checkpoint = reinterpret_cast<DCT_Checkpoint>(checkpoint_isave(comm, path));
  });
}

int DCT_Checkpoint_wait(DCT_Checkpoint *checkpoint) {
  return guarded(__func__, [&] {
    require(checkpoint != nullptr, DCT_ERR_ARG, "checkpoint is NULL");
    auto *save = reinterpret_cast<PendingSave *>(*checkpoint);
    require(is_pending_save(save), DCT_ERR_ARG,
            "not a pending save of this process (DCT_CHECKPOINT_NULL, or already waited)");
    ensure_library_ready();  // MPI finalized: refused, the save stays pending
    const std::shared_ptr<CommContext> context = pending_save_context(save);
    const ContextEntry entry(*context);  // refused (DCT_ERR_THREAD): the save stays pending
    *checkpoint = DCT_CHECKPOINT_NULL;
    checkpoint_wait(save);
  });
}

}  // extern "C"
