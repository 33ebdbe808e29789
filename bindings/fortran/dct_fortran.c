/* The C side of the Fortran module: C descriptors of assumed-rank arrays to addresses,
   Fortran MPI handles to C handles. Compiled against the Fortran compiler's own
   ISO_Fortran_binding.h (the descriptor layout is the compiler's). */
#include <ISO_Fortran_binding.h>
#include <stdint.h>
#include <string.h>

#include "dct/dct.h"

/* Open MPI's Fortran MPI_IN_PLACE; absent with other MPIs (then it is never recognised). */
extern int mpi_fortran_in_place_ __attribute__((weak));

static _Thread_local const char *shim_error = NULL;

/* The address of a contiguous array (MPI_IN_PLACE for Fortran's), or NULL with shim_error. */
static int address_of(const CFI_cdesc_t *array, const void **address) {
  if (array->base_addr != NULL && !CFI_is_contiguous(array)) {
    shim_error =
        "dct (Fortran): arrays must be contiguous (a persistent request keeps the "
        "address; pass a whole array or a contiguous section)";
    return DCT_ERR_BUFFER;
  }
  *address = array->base_addr;
  if (&mpi_fortran_in_place_ != NULL && *address == (const void *)&mpi_fortran_in_place_)
    *address = MPI_IN_PLACE;
  return DCT_SUCCESS;
}

int dct_f_allreduce_init(const CFI_cdesc_t *sendbuf, CFI_cdesc_t *recvbuf, int64_t count,
                         MPI_Fint datatype, MPI_Fint op, MPI_Fint comm, MPI_Fint info,
                         DCT_Request *request) {
  const void *send, *recv;
  int code;
  shim_error = NULL;
  if ((code = address_of(sendbuf, &send)) != DCT_SUCCESS) return code;
  if ((code = address_of(recvbuf, &recv)) != DCT_SUCCESS) return code;
  return DCT_Allreduce_init(send, (void *)recv, count, MPI_Type_f2c(datatype), MPI_Op_f2c(op),
                            MPI_Comm_f2c(comm), MPI_Info_f2c(info), request);
}

int dct_f_alltoallv_init_c(const CFI_cdesc_t *sendbuf, const MPI_Count *sendcounts,
                           const MPI_Aint *sdispls, CFI_cdesc_t *recvbuf,
                           const MPI_Count *recvcounts, const MPI_Aint *rdispls, MPI_Fint datatype,
                           MPI_Fint comm, MPI_Fint info, DCT_Request *request) {
  const void *send, *recv;
  int code;
  shim_error = NULL;
  if ((code = address_of(sendbuf, &send)) != DCT_SUCCESS) return code;
  if ((code = address_of(recvbuf, &recv)) != DCT_SUCCESS) return code;
  return DCT_Alltoallv_init_c(send, sendcounts, sdispls, (void *)recv, recvcounts, rdispls,
                              MPI_Type_f2c(datatype), MPI_Comm_f2c(comm), MPI_Info_f2c(info),
                              request);
}

int dct_f_alltoallv_backward_init_c(DCT_Request forward, const CFI_cdesc_t *sendbuf,
                                    const MPI_Count *sendcounts, const MPI_Aint *sdispls,
                                    CFI_cdesc_t *recvbuf, const MPI_Count *recvcounts,
                                    const MPI_Aint *rdispls, DCT_Request *request) {
  const void *send, *recv;
  int code;
  shim_error = NULL;
  if ((code = address_of(sendbuf, &send)) != DCT_SUCCESS) return code;
  if ((code = address_of(recvbuf, &recv)) != DCT_SUCCESS) return code;
  return DCT_Alltoallv_backward_init_c(forward, send, sendcounts, sdispls, (void *)recv, recvcounts,
                                       rdispls, request);
}

int dct_f_allreduce(const CFI_cdesc_t *sendbuf, CFI_cdesc_t *recvbuf, int64_t count,
                    MPI_Fint datatype, MPI_Fint op, MPI_Fint comm) {
  const void *send, *recv;
  int code;
  shim_error = NULL;
  if ((code = address_of(sendbuf, &send)) != DCT_SUCCESS) return code;
  if ((code = address_of(recvbuf, &recv)) != DCT_SUCCESS) return code;
  return DCT_Allreduce(send, (void *)recv, count, MPI_Type_f2c(datatype), MPI_Op_f2c(op),
                       MPI_Comm_f2c(comm));
}

int dct_f_allreduce_status(const CFI_cdesc_t *recvbuf, int64_t count, MPI_Fint datatype,
                           MPI_Fint comm, DCT_Status *status) {
  const void *recv;
  int code;
  shim_error = NULL;
  if ((code = address_of(recvbuf, &recv)) != DCT_SUCCESS) return code;
  return DCT_Allreduce_status(recv, count, MPI_Type_f2c(datatype), MPI_Comm_f2c(comm), status);
}

int dct_f_request_get_residual(DCT_Request request, CFI_cdesc_t *residual) {
  const void *address;
  int code;
  shim_error = NULL;
  if ((code = address_of(residual, &address)) != DCT_SUCCESS) return code;
  return DCT_Request_get_residual(request, (void *)address);
}

int dct_f_start(DCT_Request *request) {
  shim_error = NULL;
  return DCT_Start(request);
}

int dct_f_wait(DCT_Request *request, DCT_Status *status) {
  shim_error = NULL;
  return DCT_Wait(request, status);
}

int dct_f_test(DCT_Request *request, int *flag, DCT_Status *status) {
  shim_error = NULL;
  return DCT_Test(request, flag, status);
}

int dct_f_waitall(int count, DCT_Request *requests, DCT_Status *statuses) {
  shim_error = NULL;
  return DCT_Waitall(count, requests, statuses);
}

int dct_f_request_get_info(DCT_Request request, MPI_Fint *info) {
  MPI_Info used = MPI_INFO_NULL;
  shim_error = NULL;
  const int code = DCT_Request_get_info(request, &used);
  if (code == DCT_SUCCESS) *info = MPI_Info_c2f(used);
  return code;
}

int dct_f_comm_get_info(MPI_Fint comm, MPI_Fint *info) {
  MPI_Info used = MPI_INFO_NULL;
  shim_error = NULL;
  const int code = DCT_Comm_get_info(MPI_Comm_f2c(comm), &used);
  if (code == DCT_SUCCESS) *info = MPI_Info_c2f(used);
  return code;
}

int dct_f_request_free(DCT_Request *request) {
  shim_error = NULL;
  return DCT_Request_free(request);
}

/* A Fortran path (not NUL-terminated) as a C string in `buffer`; false if too long. */
static int c_path(const char *path, int64_t length, char (*buffer)[4096]) {
  if (length < 0 || length >= (int64_t)sizeof *buffer) {
    shim_error = "dct (Fortran): checkpoint path longer than 4095 characters";
    return 0;
  }
  memcpy(*buffer, path, (size_t)length);
  (*buffer)[length] = '\0';
  return 1;
}

int dct_f_checkpoint(MPI_Fint comm, const char *path, int64_t length, int load) {
  char buffer[4096];
  shim_error = NULL;
  if (!c_path(path, length, &buffer)) return DCT_ERR_ARG;
  return load ? DCT_Checkpoint_load(MPI_Comm_f2c(comm), buffer)
              : DCT_Checkpoint_save(MPI_Comm_f2c(comm), buffer);
}

int dct_f_checkpoint_isave(MPI_Fint comm, const char *path, int64_t length,
                           DCT_Checkpoint *checkpoint) {
  char buffer[4096];
  shim_error = NULL;
  if (!c_path(path, length, &buffer)) return DCT_ERR_ARG;
  return DCT_Checkpoint_isave(MPI_Comm_f2c(comm), buffer, checkpoint);
}

int dct_f_checkpoint_wait(DCT_Checkpoint *checkpoint) {
  shim_error = NULL;
  return DCT_Checkpoint_wait(checkpoint);
}

/* The message of the last failure on this thread: the shim's own, or dct's. */
const char *dct_f_last_error(void) {
  return shim_error ? shim_error : DCT_Get_last_error();
}
