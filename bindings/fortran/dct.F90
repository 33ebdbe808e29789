! Over 450 lines: the whole Fortran ABI is one module, as mpi_f08 is.
!> @file dct.F90
!> @brief Fortran module `dct`: the C ABI of dct for Fortran codes, in the style of mpi_f08.
!>
!> Handles are `type(MPI_Comm)`, `type(MPI_Datatype)`, `type(MPI_Op)`, `type(MPI_Info)`, or the
!> legacy integers of `use mpi` (every routine is generic over both). Buffers are arrays of any
!> rank of `real(4)` or `real(8)` (assumed-rank, contiguous). `ierror` is optional as in MPI:
!> when it is absent, a failure stops the program with dct's message, like MPI's default error
!> handler; when present it receives `DCT_SUCCESS` or a `DCT_ERR_*` code (the same codes as C).
!> `MPI_IN_PLACE` is recognised with Open MPI.
#include "dct/dct_config.h"
module dct
  use, intrinsic :: iso_c_binding, only : c_int, c_int64_t, c_long_long, c_double, c_ptr, &
                                           c_null_ptr, c_char, c_f_pointer, c_loc, c_size_t, &
                                           c_intptr_t, c_associated
  use mpi_f08, only : MPI_Comm, MPI_Datatype, MPI_Op, MPI_Info, MPI_COUNT_KIND, MPI_ADDRESS_KIND
  implicit none
  private

  integer, parameter, public :: DCT_SUCCESS = 0, DCT_ERR_ARG = 1, DCT_ERR_BUFFER = 2, &
    DCT_ERR_COUNT = 3, DCT_ERR_DATATYPE = 4, DCT_ERR_OP = 5, DCT_ERR_COMM = 6, &
    DCT_ERR_INFO = 7, DCT_ERR_REQUEST = 8, DCT_ERR_ACTIVE = 9, DCT_ERR_MPI = 10, &
    DCT_ERR_PEER = 11, DCT_ERR_MISMATCH = 12, DCT_ERR_NO_MEMORY = 13, &
    DCT_ERR_NOT_INITIALIZED = 14, DCT_ERR_NOT_COMPILED = 15, DCT_ERR_INTERNAL = 16, &
    DCT_ERR_CKPT_NOT_FOUND = 17, DCT_ERR_CKPT_FORMAT = 18, DCT_ERR_CKPT_VERSION = 19, &
    DCT_ERR_CKPT_MISMATCH = 20, DCT_ERR_CKPT_CHECKSUM = 21, DCT_ERR_CKPT_TRUNCATED = 22, &
    DCT_ERR_CKPT_IO = 23, DCT_ERR_THREAD = 24
  integer, parameter, public :: DCT_ALGORITHM_AUTO = 0, DCT_ALGORITHM_ALLGATHER = 1, &
    DCT_ALGORITHM_DENSE = 2, DCT_ALGORITHM_PASSTHROUGH = 3, DCT_ALGORITHM_SPLIT = 4, &
    DCT_ALGORITHM_RECURSIVE_DOUBLING = 5, DCT_ALGORITHM_HIERARCHICAL = 6
  integer, parameter, public :: DCT_BACKEND_AUTO = 0, DCT_BACKEND_KOKKOS = 1, &
    DCT_BACKEND_CUDA = 2, DCT_BACKEND_HIP = 3

  !> A persistent compressed allreduce (DCT_Request); null until dct_allreduce_init.
  type, public, bind(C) :: dct_request
    type(c_ptr) :: handle = c_null_ptr
  end type dct_request

  !> An asynchronous checkpoint save (DCT_Checkpoint); null until dct_checkpoint_isave and
  !> after dct_checkpoint_wait.
  type, public, bind(C) :: dct_checkpoint
    type(c_ptr) :: handle = c_null_ptr
  end type dct_checkpoint

  !> DCT_Status's header (dct.h): every type(dct_status) sets it by default initialisation
  !> (intent(out) arguments included), so the library knows the layout compiled here.
  integer(c_size_t), parameter, public :: DCT_STATUS_SIZE = 136
  integer(c_int), parameter, public :: DCT_STATUS_MAGIC = int(z'44435453', c_int)
  integer(c_int), parameter, public :: DCT_VERSION_CODE_F = DCT_VERSION_CODE

  !> What one call did (DCT_Status; the fields are documented in dct.h).
  type, public, bind(C) :: dct_status
    integer(c_size_t) :: size = DCT_STATUS_SIZE
    integer(c_int) :: magic = DCT_STATUS_MAGIC, version = DCT_VERSION_CODE_F
    integer(c_long_long) :: count, nnz_sent, nnz_received, bytes_sent, bytes_received, &
                            dense_bytes
    real(c_double) :: tau, density
    integer(c_int) :: tau_reestimated, algorithm
    integer(c_long_long) :: calls, total_bytes_sent, total_dense_bytes
    real(c_double) :: compression_ratio, max_abs_error
    integer(c_long_long) :: nonfinite
  end type dct_status

  public :: dct_alltoallv_init, dct_alltoallv_backward_init
  public :: dct_alltoallv_init_c, dct_alltoallv_backward_init_c
  public :: dct_allreduce_init, dct_start, dct_wait, dct_test, dct_waitall, &
            dct_request_free, dct_allreduce, &
            dct_allreduce_status, dct_request_get_residual, dct_checkpoint_save, &
            dct_checkpoint_load, dct_checkpoint_isave, dct_checkpoint_wait, dct_error_string, dct_get_last_error, dct_get_version, &
            dct_request_get_info, dct_comm_get_info, dct_request_set_stream, &
            dct_algorithm_name, dct_backend_name, dct_backend_compiled

  ! Every routine taking handles comes as a pair: the mpi_f08 one delegates to the integer one.
  interface dct_allreduce_init
    module procedure allreduce_init_f08, allreduce_init_int
  end interface
  interface dct_allreduce
    module procedure allreduce_f08, allreduce_int
  end interface
  interface dct_alltoallv_init
    module procedure alltoallv_init_f08, alltoallv_init_int
  end interface
  interface dct_alltoallv_init_c
    module procedure alltoallv_init_c_f08, alltoallv_init_c_int
  end interface
  interface dct_allreduce_status
    module procedure allreduce_status_f08, allreduce_status_int
  end interface
  interface dct_checkpoint_save
    module procedure checkpoint_save_f08, checkpoint_save_int
  end interface
  interface dct_checkpoint_load
    module procedure checkpoint_load_f08, checkpoint_load_int
  end interface
  interface dct_checkpoint_isave
    module procedure checkpoint_isave_f08, checkpoint_isave_int
  end interface
  interface dct_request_get_info
    module procedure request_get_info_f08, request_get_info_int
  end interface
  interface dct_comm_get_info
    module procedure comm_get_info_f08, comm_get_info_int
  end interface

  interface  ! the C side: bindings/fortran/dct_fortran.c and dct.h
    integer(c_int) function c_allreduce_init(sendbuf, recvbuf, count, datatype, op, comm, &
                                             info, request) bind(C, name='dct_f_allreduce_init')
      import :: c_int, c_int64_t, dct_request
      type(*), dimension(..), intent(in), asynchronous :: sendbuf
      type(*), dimension(..), asynchronous :: recvbuf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, op, comm, info
      type(dct_request) :: request
    end function
    integer(c_int) function c_alltoallv_init_c(sendbuf, sendcounts, sdispls, recvbuf, &
                                               recvcounts, rdispls, datatype, comm, info, &
                                               request) bind(C, name='dct_f_alltoallv_init_c')
      import :: c_int, c_long_long, c_intptr_t, dct_request
      type(*), dimension(..), intent(in), asynchronous :: sendbuf
      integer(c_long_long), intent(in) :: sendcounts(*), recvcounts(*)  ! MPI_Count
      integer(c_intptr_t), intent(in) :: sdispls(*), rdispls(*)          ! MPI_Aint
      type(*), dimension(..), asynchronous :: recvbuf
      integer(c_int), value :: datatype, comm, info
      type(dct_request) :: request
    end function
    integer(c_int) function c_alltoallv_backward_init_c(forward, sendbuf, sendcounts, sdispls, &
                                                        recvbuf, recvcounts, rdispls, request) &
        bind(C, name='dct_f_alltoallv_backward_init_c')
      import :: c_int, c_long_long, c_intptr_t, c_ptr, dct_request
      type(c_ptr), value :: forward
      type(*), dimension(..), intent(in), asynchronous :: sendbuf
      integer(c_long_long), intent(in) :: sendcounts(*), recvcounts(*)  ! MPI_Count
      integer(c_intptr_t), intent(in) :: sdispls(*), rdispls(*)          ! MPI_Aint
      type(*), dimension(..), asynchronous :: recvbuf
      type(dct_request) :: request
    end function
    integer(c_int) function c_allreduce(sendbuf, recvbuf, count, datatype, op, comm) &
        bind(C, name='dct_f_allreduce')
      import :: c_int, c_int64_t
      type(*), dimension(..), intent(in) :: sendbuf
      type(*), dimension(..) :: recvbuf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, op, comm
    end function
    integer(c_int) function c_allreduce_status(recvbuf, count, datatype, comm, status) &
        bind(C, name='dct_f_allreduce_status')
      import :: c_int, c_int64_t, dct_status
      type(*), dimension(..), intent(in) :: recvbuf
      integer(c_int64_t), value :: count
      integer(c_int), value :: datatype, comm
      type(dct_status) :: status
    end function
    integer(c_int) function c_get_residual(request, residual) &
        bind(C, name='dct_f_request_get_residual')
      import :: c_int, c_ptr
      type(c_ptr), value :: request
      type(*), dimension(..) :: residual
    end function
    integer(c_int) function c_start(request) bind(C, name='dct_f_start')
      import :: c_int, dct_request
      type(dct_request) :: request
    end function
    integer(c_int) function c_wait(request, status) bind(C, name='dct_f_wait')
      import :: c_int, c_ptr, dct_request
      type(dct_request) :: request
      type(c_ptr), value :: status
    end function
    integer(c_int) function c_test(request, flag, status) bind(C, name='dct_f_test')
      import :: c_int, c_ptr, dct_request
      type(dct_request) :: request
      integer(c_int) :: flag
      type(c_ptr), value :: status
    end function
    integer(c_int) function c_waitall(count, requests, statuses) bind(C, name='dct_f_waitall')
      import :: c_int, c_ptr, dct_request
      integer(c_int), value :: count
      type(dct_request) :: requests(*)
      type(c_ptr), value :: statuses
    end function
    integer(c_int) function c_request_get_info(request, info) &
        bind(C, name='dct_f_request_get_info')
      import :: c_int, c_ptr
      type(c_ptr), value :: request
      integer(c_int) :: info
    end function
    integer(c_int) function c_comm_get_info(comm, info) bind(C, name='dct_f_comm_get_info')
      import :: c_int
      integer(c_int), value :: comm
      integer(c_int) :: info
    end function
    integer(c_int) function c_request_free(request) bind(C, name='dct_f_request_free')
      import :: c_int, dct_request
      type(dct_request) :: request
    end function
    integer(c_int) function c_checkpoint(comm, path, length, load) bind(C, name='dct_f_checkpoint')
      import :: c_int, c_int64_t, c_char
      integer(c_int), value :: comm
      character(kind=c_char), dimension(*), intent(in) :: path
      integer(c_int64_t), value :: length
      integer(c_int), value :: load
    end function
    integer(c_int) function c_checkpoint_isave(comm, path, length, checkpoint) &
        bind(C, name='dct_f_checkpoint_isave')
      import :: c_int, c_int64_t, c_char, dct_checkpoint
      integer(c_int), value :: comm
      character(kind=c_char), dimension(*), intent(in) :: path
      integer(c_int64_t), value :: length
      type(dct_checkpoint) :: checkpoint
    end function
    integer(c_int) function c_checkpoint_wait(checkpoint) bind(C, name='dct_f_checkpoint_wait')
      import :: c_int, dct_checkpoint
      type(dct_checkpoint) :: checkpoint
    end function
    type(c_ptr) function c_last_error() bind(C, name='dct_f_last_error')
      import :: c_ptr
    end function
    integer(c_int) function c_error_string(code, string, length) bind(C, name='DCT_Error_string')
      import :: c_int, c_char
      integer(c_int), value :: code
      character(kind=c_char), dimension(*) :: string
      integer(c_int) :: length
    end function
    integer(c_int) function c_get_version(major, minor, patch) bind(C, name='DCT_Get_version')
      import :: c_int
      integer(c_int) :: major, minor, patch
    end function
    type(c_ptr) function c_algorithm_name(algorithm) bind(C, name='DCT_Algorithm_name')
      import :: c_ptr, c_int
      integer(c_int), value :: algorithm
    end function
    type(c_ptr) function c_backend_name(backend) bind(C, name='DCT_Backend_name')
      import :: c_ptr, c_int
      integer(c_int), value :: backend
    end function
    integer(c_int) function c_backend_compiled(backend, compiled) &
        bind(C, name='DCT_Backend_compiled')
      import :: c_int
      integer(c_int), value :: backend
      integer(c_int) :: compiled
    end function
    integer(c_int) function c_set_stream(request, stream) bind(C, name='DCT_Request_set_stream')
      import :: c_int, c_ptr
      type(c_ptr), value :: request, stream
    end function
  end interface

contains

  !> Hands `code` to the caller: into ierror when present, else a failure stops the program.
  subroutine finish(code, ierror)
    integer(c_int), intent(in) :: code
    integer, optional, intent(out) :: ierror
    character(len=1024) :: message
    if (present(ierror)) then
      ierror = code
    else if (code /= DCT_SUCCESS) then
      call dct_get_last_error(message)
      write (*, '(a)') trim(message)
      error stop 'dct: a call failed and no ierror argument was given'
    end if
  end subroutine finish

  subroutine allreduce_init_f08(sendbuf, recvbuf, count, datatype, op, comm, info, request, &
                                ierror)
    type(*), dimension(..), intent(in), asynchronous :: sendbuf
    type(*), dimension(..), asynchronous :: recvbuf
    integer, intent(in) :: count
    type(MPI_Datatype), intent(in) :: datatype
    type(MPI_Op), intent(in) :: op
    type(MPI_Comm), intent(in) :: comm
    type(MPI_Info), intent(in) :: info
    type(dct_request), intent(out) :: request
    integer, optional, intent(out) :: ierror
    call allreduce_init_int(sendbuf, recvbuf, count, datatype%MPI_VAL, op%MPI_VAL, comm%MPI_VAL, &
                            info%MPI_VAL, request, ierror)
  end subroutine allreduce_init_f08

  subroutine allreduce_init_int(sendbuf, recvbuf, count, datatype, op, comm, info, request, &
                                ierror)
    type(*), dimension(..), intent(in), asynchronous :: sendbuf
    type(*), dimension(..), asynchronous :: recvbuf
    integer, intent(in) :: count, datatype, op, comm, info
    type(dct_request), intent(out) :: request
    integer, optional, intent(out) :: ierror
    call finish(c_allreduce_init(sendbuf, recvbuf, int(count, c_int64_t), datatype, op, comm, &
                                 info, request), ierror)
  end subroutine allreduce_init_int

  !> DCT_Alltoallv_init (DCT-MP forward): counts and displacements in elements, one per rank
  !> (0-based displacements, as in MPI), multiples of the `dct_row_length` info key.
  subroutine alltoallv_init_f08(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, &
                                datatype, comm, info, request, ierror)
    type(*), dimension(..), intent(in), asynchronous :: sendbuf
    integer, intent(in) :: sendcounts(:), sdispls(:), recvcounts(:), rdispls(:)
    type(*), dimension(..), asynchronous :: recvbuf
    type(MPI_Datatype), intent(in) :: datatype
    type(MPI_Comm), intent(in) :: comm
    type(MPI_Info), intent(in) :: info
    type(dct_request), intent(out) :: request
    integer, optional, intent(out) :: ierror
    call alltoallv_init_int(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, &
                            datatype%MPI_VAL, comm%MPI_VAL, info%MPI_VAL, request, ierror)
  end subroutine alltoallv_init_f08

  subroutine alltoallv_init_int(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, &
                                datatype, comm, info, request, ierror)
    type(*), dimension(..), intent(in), asynchronous :: sendbuf
    integer, intent(in) :: sendcounts(:), sdispls(:), recvcounts(:), rdispls(:)
    type(*), dimension(..), asynchronous :: recvbuf
    integer, intent(in) :: datatype, comm, info
    type(dct_request), intent(out) :: request
    integer, optional, intent(out) :: ierror
    ! One path, as in C: the large-count form's, with the arrays widened.
    call alltoallv_init_c_int(sendbuf, int(sendcounts, MPI_COUNT_KIND), &
                              int(sdispls, MPI_ADDRESS_KIND), recvbuf, &
                              int(recvcounts, MPI_COUNT_KIND), int(rdispls, MPI_ADDRESS_KIND), &
                              datatype, comm, info, request, ierror)
  end subroutine alltoallv_init_int

  !> DCT_Alltoallv_backward_init: the gradients of the entries `forward` kept, the other way.
  subroutine dct_alltoallv_backward_init(forward, sendbuf, sendcounts, sdispls, recvbuf, &
                                         recvcounts, rdispls, request, ierror)
    type(dct_request), intent(in) :: forward
    type(*), dimension(..), intent(in), asynchronous :: sendbuf
    integer, intent(in) :: sendcounts(:), sdispls(:), recvcounts(:), rdispls(:)
    type(*), dimension(..), asynchronous :: recvbuf
    type(dct_request), intent(out) :: request
    integer, optional, intent(out) :: ierror
    call dct_alltoallv_backward_init_c(forward, sendbuf, int(sendcounts, MPI_COUNT_KIND), &
                                       int(sdispls, MPI_ADDRESS_KIND), recvbuf, &
                                       int(recvcounts, MPI_COUNT_KIND), &
                                       int(rdispls, MPI_ADDRESS_KIND), request, ierror)
  end subroutine dct_alltoallv_backward_init

  !> DCT_Alltoallv_init_c, the large-count form (MPI-4's): counts integer(MPI_COUNT_KIND),
  !> displacements integer(MPI_ADDRESS_KIND), in elements; otherwise as dct_alltoallv_init.
  subroutine alltoallv_init_c_f08(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, &
                                  datatype, comm, info, request, ierror)
    type(*), dimension(..), intent(in), asynchronous :: sendbuf
    integer(MPI_COUNT_KIND), intent(in) :: sendcounts(:), recvcounts(:)
    integer(MPI_ADDRESS_KIND), intent(in) :: sdispls(:), rdispls(:)
    type(*), dimension(..), asynchronous :: recvbuf
    type(MPI_Datatype), intent(in) :: datatype
    type(MPI_Comm), intent(in) :: comm
    type(MPI_Info), intent(in) :: info
    type(dct_request), intent(out) :: request
    integer, optional, intent(out) :: ierror
    call alltoallv_init_c_int(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, &
                              datatype%MPI_VAL, comm%MPI_VAL, info%MPI_VAL, request, ierror)
  end subroutine alltoallv_init_c_f08

  subroutine alltoallv_init_c_int(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, &
                                  datatype, comm, info, request, ierror)
    type(*), dimension(..), intent(in), asynchronous :: sendbuf
    integer(MPI_COUNT_KIND), intent(in) :: sendcounts(:), recvcounts(:)
    integer(MPI_ADDRESS_KIND), intent(in) :: sdispls(:), rdispls(:)
    type(*), dimension(..), asynchronous :: recvbuf
    integer, intent(in) :: datatype, comm, info
    type(dct_request), intent(out) :: request
    integer, optional, intent(out) :: ierror
    ! Copies of the C kinds, whatever MPI_COUNT_KIND and MPI_ADDRESS_KIND are.
    call finish(c_alltoallv_init_c(sendbuf, int(sendcounts, c_long_long), &
                                   int(sdispls, c_intptr_t), recvbuf, &
                                   int(recvcounts, c_long_long), int(rdispls, c_intptr_t), &
                                   datatype, comm, info, request), ierror)
  end subroutine alltoallv_init_c_int

  !> DCT_Alltoallv_backward_init_c: dct_alltoallv_backward_init with large-count arrays.
  subroutine dct_alltoallv_backward_init_c(forward, sendbuf, sendcounts, sdispls, recvbuf, &
                                           recvcounts, rdispls, request, ierror)
    type(dct_request), intent(in) :: forward
    type(*), dimension(..), intent(in), asynchronous :: sendbuf
    integer(MPI_COUNT_KIND), intent(in) :: sendcounts(:), recvcounts(:)
    integer(MPI_ADDRESS_KIND), intent(in) :: sdispls(:), rdispls(:)
    type(*), dimension(..), asynchronous :: recvbuf
    type(dct_request), intent(out) :: request
    integer, optional, intent(out) :: ierror
    call finish(c_alltoallv_backward_init_c(forward%handle, sendbuf, &
                                            int(sendcounts, c_long_long), &
                                            int(sdispls, c_intptr_t), recvbuf, &
                                            int(recvcounts, c_long_long), &
                                            int(rdispls, c_intptr_t), request), ierror)
  end subroutine dct_alltoallv_backward_init_c

  subroutine dct_start(request, ierror)
    type(dct_request), intent(inout) :: request
    integer, optional, intent(out) :: ierror
    call finish(c_start(request), ierror)
  end subroutine dct_start

  subroutine dct_wait(request, status, ierror)
    type(dct_request), intent(inout) :: request
    type(dct_status), optional, target, intent(out) :: status
    integer, optional, intent(out) :: ierror
    if (present(status)) then
      call finish(c_wait(request, c_loc(status)), ierror)
    else
      call finish(c_wait(request, c_null_ptr), ierror)
    end if
  end subroutine dct_wait

  !> Progresses every call in flight; flag = .true. once `request` completed (status filled).
  subroutine dct_test(request, flag, status, ierror)
    type(dct_request), intent(inout) :: request
    logical, intent(out) :: flag
    type(dct_status), optional, target, intent(out) :: status
    integer, optional, intent(out) :: ierror
    integer(c_int) :: cflag
    cflag = 0
    if (present(status)) then
      call finish(c_test(request, cflag, c_loc(status)), ierror)
    else
      call finish(c_test(request, cflag, c_null_ptr), ierror)
    end if
    flag = cflag /= 0
  end subroutine dct_test

  !> Completes every request of `requests`, in whatever order they finish.
  subroutine dct_waitall(requests, statuses, ierror)
    type(dct_request), intent(inout) :: requests(:)
    type(dct_status), optional, target, intent(out) :: statuses(size(requests))
    integer, optional, intent(out) :: ierror
    if (present(statuses)) then
      call finish(c_waitall(int(size(requests), c_int), requests, c_loc(statuses)), ierror)
    else
      call finish(c_waitall(int(size(requests), c_int), requests, c_null_ptr), ierror)
    end if
  end subroutine dct_waitall

  subroutine dct_request_free(request, ierror)
    type(dct_request), intent(inout) :: request
    integer, optional, intent(out) :: ierror
    call finish(c_request_free(request), ierror)
  end subroutine dct_request_free

  subroutine allreduce_f08(sendbuf, recvbuf, count, datatype, op, comm, ierror)
    type(*), dimension(..), intent(in) :: sendbuf
    type(*), dimension(..) :: recvbuf
    integer, intent(in) :: count
    type(MPI_Datatype), intent(in) :: datatype
    type(MPI_Op), intent(in) :: op
    type(MPI_Comm), intent(in) :: comm
    integer, optional, intent(out) :: ierror
    call allreduce_int(sendbuf, recvbuf, count, datatype%MPI_VAL, op%MPI_VAL, comm%MPI_VAL, ierror)
  end subroutine allreduce_f08

  subroutine allreduce_int(sendbuf, recvbuf, count, datatype, op, comm, ierror)
    type(*), dimension(..), intent(in) :: sendbuf
    type(*), dimension(..) :: recvbuf
    integer, intent(in) :: count, datatype, op, comm
    integer, optional, intent(out) :: ierror
    call finish(c_allreduce(sendbuf, recvbuf, int(count, c_int64_t), datatype, op, comm), ierror)
  end subroutine allreduce_int

  subroutine allreduce_status_f08(recvbuf, count, datatype, comm, status, ierror)
    type(*), dimension(..), intent(in) :: recvbuf
    integer, intent(in) :: count
    type(MPI_Datatype), intent(in) :: datatype
    type(MPI_Comm), intent(in) :: comm
    type(dct_status), intent(out) :: status
    integer, optional, intent(out) :: ierror
    call allreduce_status_int(recvbuf, count, datatype%MPI_VAL, comm%MPI_VAL, status, ierror)
  end subroutine allreduce_status_f08

  subroutine allreduce_status_int(recvbuf, count, datatype, comm, status, ierror)
    type(*), dimension(..), intent(in) :: recvbuf
    integer, intent(in) :: count, datatype, comm
    type(dct_status), intent(out) :: status
    integer, optional, intent(out) :: ierror
    call finish(c_allreduce_status(recvbuf, int(count, c_int64_t), datatype, comm, status), &
                ierror)
  end subroutine allreduce_status_int

  !> This rank's residual (DCT_Request_get_residual) into an array of the request's type.
  subroutine dct_request_get_residual(request, residual, ierror)
    type(dct_request), intent(in) :: request
    type(*), dimension(..) :: residual
    integer, optional, intent(out) :: ierror
    call finish(c_get_residual(request%handle, residual), ierror)
  end subroutine dct_request_get_residual

  subroutine checkpoint_save_f08(comm, path, ierror)
    type(MPI_Comm), intent(in) :: comm
    character(len=*), intent(in) :: path
    integer, optional, intent(out) :: ierror
    call checkpoint_save_int(comm%MPI_VAL, path, ierror)
  end subroutine checkpoint_save_f08

  subroutine checkpoint_save_int(comm, path, ierror)
    integer, intent(in) :: comm
    character(len=*), intent(in) :: path
    integer, optional, intent(out) :: ierror
    call finish(c_checkpoint(comm, path, int(len(path), c_int64_t), 0_c_int), ierror)
  end subroutine checkpoint_save_int

  !> DCT_Request_get_info: a new info (free it with MPI_Info_free) with every key in force.
  subroutine request_get_info_f08(request, info_used, ierror)
    type(dct_request), intent(in) :: request
    type(MPI_Info), intent(out) :: info_used
    integer, optional, intent(out) :: ierror
    call request_get_info_int(request, info_used%MPI_VAL, ierror)
  end subroutine request_get_info_f08

  subroutine request_get_info_int(request, info_used, ierror)
    type(dct_request), intent(in) :: request
    integer, intent(out) :: info_used
    integer, optional, intent(out) :: ierror
    integer(c_int) :: c_info
    c_info = 0
    call finish(c_request_get_info(request%handle, c_info), ierror)
    info_used = int(c_info)
  end subroutine request_get_info_int

  !> DCT_Comm_get_info: the drop-in dct_allreduce's configuration on `comm`.
  subroutine comm_get_info_f08(comm, info_used, ierror)
    type(MPI_Comm), intent(in) :: comm
    type(MPI_Info), intent(out) :: info_used
    integer, optional, intent(out) :: ierror
    call comm_get_info_int(comm%MPI_VAL, info_used%MPI_VAL, ierror)
  end subroutine comm_get_info_f08

  subroutine comm_get_info_int(comm, info_used, ierror)
    integer, intent(in) :: comm
    integer, intent(out) :: info_used
    integer, optional, intent(out) :: ierror
    integer(c_int) :: c_info
    c_info = 0
    call finish(c_comm_get_info(comm, c_info), ierror)
    info_used = int(c_info)
  end subroutine comm_get_info_int

  subroutine checkpoint_load_f08(comm, path, ierror)
    type(MPI_Comm), intent(in) :: comm
    character(len=*), intent(in) :: path
    integer, optional, intent(out) :: ierror
    call checkpoint_load_int(comm%MPI_VAL, path, ierror)
  end subroutine checkpoint_load_f08

  subroutine checkpoint_load_int(comm, path, ierror)
    integer, intent(in) :: comm
    character(len=*), intent(in) :: path
    integer, optional, intent(out) :: ierror
    call finish(c_checkpoint(comm, path, int(len(path), c_int64_t), 1_c_int), ierror)
  end subroutine checkpoint_load_int

  !> DCT_Checkpoint_isave: the save of this moment's state, written while training goes on;
  !> complete it with dct_checkpoint_wait (both collective).
  subroutine checkpoint_isave_f08(comm, path, checkpoint, ierror)
    type(MPI_Comm), intent(in) :: comm
    character(len=*), intent(in) :: path
    type(dct_checkpoint), intent(inout) :: checkpoint
    integer, optional, intent(out) :: ierror
    call checkpoint_isave_int(comm%MPI_VAL, path, checkpoint, ierror)
  end subroutine checkpoint_isave_f08

  subroutine checkpoint_isave_int(comm, path, checkpoint, ierror)
    integer, intent(in) :: comm
    character(len=*), intent(in) :: path
    type(dct_checkpoint), intent(inout) :: checkpoint
    integer, optional, intent(out) :: ierror
    call finish(c_checkpoint_isave(comm, path, int(len(path), c_int64_t), checkpoint), ierror)
  end subroutine checkpoint_isave_int

  !> DCT_Checkpoint_wait: the file takes its name; `checkpoint` is null afterwards.
  subroutine dct_checkpoint_wait(checkpoint, ierror)
    type(dct_checkpoint), intent(inout) :: checkpoint
    integer, optional, intent(out) :: ierror
    call finish(c_checkpoint_wait(checkpoint), ierror)
  end subroutine dct_checkpoint_wait

  !> The fixed sentence of a code (DCT_Error_string), blank-padded.
  subroutine dct_error_string(code, string, resultlen, ierror)
    integer, intent(in) :: code
    character(len=*), intent(out) :: string
    integer, intent(out) :: resultlen
    integer, optional, intent(out) :: ierror
    character(kind=c_char) :: buffer(256)
    integer(c_int) :: length, rc
    integer :: i
    rc = c_error_string(int(code, c_int), buffer, length)
    string = ' '
    resultlen = 0
    if (rc == DCT_SUCCESS) then
      resultlen = min(int(length), len(string))
      do i = 1, resultlen
        string(i:i) = buffer(i)
      end do
    end if
    call finish(rc, ierror)
  end subroutine dct_error_string

  !> A NUL-terminated C string into `text`, blank-padded (cut at len(text)).
  subroutine copy_c_string(pointer, text)
    type(c_ptr), intent(in) :: pointer
    character(len=*), intent(out) :: text
    character(kind=c_char), pointer :: chars(:)
    integer :: i
    text = ' '
    if (.not. c_associated(pointer)) return
    call c_f_pointer(pointer, chars, [len(text)])
    do i = 1, len(text)
      if (chars(i) == char(0)) exit
      text(i:i) = chars(i)
    end do
  end subroutine copy_c_string

  !> The detailed message of the last failure on this thread (DCT_Get_last_error).
  subroutine dct_get_last_error(message)
    character(len=*), intent(out) :: message
    call copy_c_string(c_last_error(), message)
  end subroutine dct_get_last_error

  !> The name of an algorithm as the dct_algorithm key spells it (DCT_Algorithm_name).
  subroutine dct_algorithm_name(algorithm, name)
    integer, intent(in) :: algorithm
    character(len=*), intent(out) :: name
    call copy_c_string(c_algorithm_name(int(algorithm, c_int)), name)
  end subroutine dct_algorithm_name

  !> The name of a backend as the dct_backend key spells it (DCT_Backend_name).
  subroutine dct_backend_name(backend, name)
    integer, intent(in) :: backend
    character(len=*), intent(out) :: name
    call copy_c_string(c_backend_name(int(backend, c_int)), name)
  end subroutine dct_backend_name

  !> Whether this build contains `backend` (DCT_Backend_compiled).
  subroutine dct_backend_compiled(backend, compiled, ierror)
    integer, intent(in) :: backend
    logical, intent(out) :: compiled
    integer, optional, intent(out) :: ierror
    integer(c_int) :: flag, rc
    flag = 0
    rc = c_backend_compiled(int(backend, c_int), flag)
    compiled = flag /= 0
    call finish(rc, ierror)
  end subroutine dct_backend_compiled

  !> The device stream of a request's calls (DCT_Request_set_stream): a cudaStream_t or
  !> hipStream_t as type(c_ptr); c_null_ptr: dct's own stream.
  subroutine dct_request_set_stream(request, stream, ierror)
    type(dct_request), intent(in) :: request
    type(c_ptr), intent(in) :: stream
    integer, optional, intent(out) :: ierror
    call finish(c_set_stream(request%handle, stream), ierror)
  end subroutine dct_request_set_stream

  subroutine dct_get_version(major, minor, patch, ierror)
    integer, intent(out) :: major, minor, patch
    integer, optional, intent(out) :: ierror
    integer(c_int) :: c_major, c_minor, c_patch
    call finish(c_get_version(c_major, c_minor, c_patch), ierror)
    major = c_major
    minor = c_minor
    patch = c_patch
  end subroutine dct_get_version

end module dct
