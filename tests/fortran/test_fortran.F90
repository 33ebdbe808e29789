! The Fortran module against MPI_Allreduce and against error feedback's conservation law, with
! mpi_f08 handles and legacy integer handles, arrays of several ranks and kinds, and bad input.
! Run at 2 and 4 ranks; exits non-zero on every rank if a check failed on any.
program test_fortran
  use mpi_f08
  use dct
  use, intrinsic :: iso_c_binding, only : c_sizeof, c_associated
  implicit none
  integer, parameter :: n = 3000, calls = 20
  integer :: rank, failures, any_failures, ierror, major, minor, patch, length, step, i
  real(4) :: x(30, 100), y(30, 100), expected(30, 100)
  real(8) :: a(10, 20, 15), b(10, 20, 15), ref(10, 20, 15)
  real(8) :: g(n), s(n), residual(n), delivered(n), inputs(n), held(n), total_inputs(n)
  real(8) :: g2(n), s2(n), delivered2(n)
  type(dct_request) :: pair(2)
  type(dct_status) :: statuses(1)
  logical :: done
  type(MPI_Info) :: info, used
  logical :: found
  type(dct_request) :: request, freed
  type(dct_status) :: status
  type(dct_checkpoint) :: save
  character(len=256) :: text

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  failures = 0

  ! 1. Density 1 is MPI_Allreduce, bit for bit: a 2-D real(4) array, persistent request.
  call MPI_Info_create(info)
  call MPI_Info_set(info, 'dct_density', '1')
  x = reshape([(sin(real(i + 7 * rank)), i = 1, 3000)], shape(x))
  call dct_allreduce_init(x, y, size(x), MPI_REAL, MPI_SUM, MPI_COMM_WORLD, info, request)
  call dct_start(request)
  call dct_wait(request, status)
  call MPI_Allreduce(x, expected, size(x), MPI_REAL, MPI_SUM, MPI_COMM_WORLD)
  call check(all(transfer(y, [0]) == transfer(expected, [0])), &
             'density 1, real(4) 2-D, persistent')
  call check(status%nnz_sent == size(x) .and. status%density == 1d0, 'status at density 1')
  call dct_request_free(request)

  ! 2. The same with a 3-D real(8) array, the drop-in call and legacy integer handles.
  a = reshape([(cos(dble(i) * (rank + 1)), i = 1, size(a))], shape(a))
  call MPI_Allreduce(a, ref, size(a), MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call dct_allreduce_init(a, b, size(a), MPI_DOUBLE_PRECISION%MPI_VAL, MPI_SUM%MPI_VAL, &
                          MPI_COMM_WORLD%MPI_VAL, info%MPI_VAL, request, ierror)
  call check(ierror == DCT_SUCCESS, 'init with integer handles')
  call dct_start(request)
  call dct_wait(request)
  call check(all(b == ref), 'density 1, real(8) 3-D, integer handles')
  call dct_request_free(request)
  call MPI_Info_free(info)
  ! The drop-in (environment defaults: compressed) and its status query.
  call dct_allreduce(a, b, size(a), MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierror)
  call check(ierror == DCT_SUCCESS, 'drop-in call')
  call dct_allreduce_status(b, size(a), MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, status)
  call check(status%calls == 1 .and. status%nnz_sent >= 30, 'drop-in status')

  ! 3. Error feedback conserves everything at density 0.01 (dyadic data: exact sums).
  call MPI_Info_create(info)
  call MPI_Info_set(info, 'dct_density', '0.01')
  call MPI_Info_set(info, 'dct_interval', '5')
  call dct_allreduce_init(g, s, n, MPI_DOUBLE_PRECISION%MPI_VAL, MPI_SUM%MPI_VAL, &
                          MPI_COMM_WORLD%MPI_VAL, info%MPI_VAL, request)
  delivered = 0
  inputs = 0
  do step = 1, calls
    g = [(dble(mod(i * 37 + rank * 11 + step * 5, 4001) - 2000) / 1024d0, i = 1, n)]
    inputs = inputs + g
    call dct_start(request)
    call dct_wait(request)
    delivered = delivered + s
  end do
  call dct_request_get_residual(request, residual)
  call MPI_Allreduce(residual, held, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call MPI_Allreduce(inputs, total_inputs, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call check(all(delivered + held == total_inputs), 'conservation at density 0.01')
  ! The configuration in force reads back (DCT_Request_get_info), the defaults included.
  call dct_request_get_info(request, used, ierror)
  call check(ierror == DCT_SUCCESS, 'request_get_info')
  call MPI_Info_get(used, 'dct_interval', len(text), text, found)
  call check(found .and. text == '5', 'info in force: dct_interval')
  call MPI_Info_get(used, 'dct_algorithm', len(text), text, found)
  call check(found .and. text == 'auto', 'info in force: default dct_algorithm')
  call MPI_Info_free(used)
  call dct_comm_get_info(MPI_COMM_WORLD, used)
  call MPI_Info_get(used, 'dct_restart', len(text), text, found)
  call check(.not. found, 'drop-in info has no dct_restart (not checkpointed)')
  call MPI_Info_free(used)
  call dct_request_free(request)
  call MPI_Info_free(info)

  ! 3b. Nonblocking: split and recursive doubling in flight together, one completed by
  ! dct_test polling, the other by dct_waitall; conservation holds for both.
  call MPI_Info_create(info)
  call MPI_Info_set(info, 'dct_density', '0.05')
  call MPI_Info_set(info, 'dct_algorithm', 'split')
  call dct_allreduce_init(g, s, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, info, pair(1))
  call MPI_Info_set(info, 'dct_algorithm', 'recursive_doubling')
  call dct_allreduce_init(g2, s2, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, info, pair(2))
  call MPI_Info_free(info)
  delivered = 0
  delivered2 = 0
  inputs = 0
  do step = 1, 5
    g = [(dble(mod(i * 13 + rank * 7 + step * 3, 4001) - 2000) / 1024d0, i = 1, n)]
    g2 = 2 * g
    inputs = inputs + g
    call dct_start(pair(1))
    call dct_start(pair(2))
    done = .false.
    do while (.not. done)
      call dct_test(pair(1), done, status)
    end do
    call dct_waitall(pair(2:2), statuses)
    call check(status%size == c_sizeof(status) .and. status%magic == DCT_STATUS_MAGIC .and. &
               statuses(1)%size == DCT_STATUS_SIZE, 'status header set by the type')
    call check(status%algorithm == DCT_ALGORITHM_SPLIT .and. &
               statuses(1)%algorithm == DCT_ALGORITHM_RECURSIVE_DOUBLING, 'nonblocking status')
    delivered = delivered + s
    delivered2 = delivered2 + s2
  end do
  call MPI_Allreduce(inputs, total_inputs, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call dct_request_get_residual(pair(1), residual)
  call MPI_Allreduce(residual, held, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call check(all(delivered + held == total_inputs), 'conservation, split, dct_test')
  call dct_request_get_residual(pair(2), residual)
  call MPI_Allreduce(residual, held, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call check(all(delivered2 + held == 2 * total_inputs), &
             'conservation, recursive doubling, dct_waitall')
  call dct_request_free(pair(1))
  call dct_request_free(pair(2))

  ! 4. Bad input: the C codes, through ierror; nothing written.
  freed = request
  call dct_request_free(freed, ierror)
  call check(ierror == DCT_ERR_REQUEST, 'freeing twice')
  y = -1
  call dct_allreduce(x, y, -1, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierror)
  call check(ierror == DCT_ERR_COUNT .and. all(y == -1), 'negative count')
  call dct_allreduce_init(x(1, :), y(1, :), 100, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, &
                          MPI_INFO_NULL, request, ierror)
  call check(ierror == DCT_ERR_BUFFER, 'non-contiguous section refused')
  call dct_get_last_error(text)
  call check(index(text, 'contiguous') > 0, 'message names the problem')
  call dct_error_string(DCT_ERR_COUNT, text, length)
  call check(length > 0 .and. index(text, 'count') > 0, 'error string')
  call dct_get_version(major, minor, patch)
  call check(major == 0 .and. minor >= 1, 'version')
  call dct_algorithm_name(DCT_ALGORITHM_SPLIT, text)
  call check(trim(text) == 'split', 'algorithm name')
  call dct_backend_name(DCT_BACKEND_KOKKOS, text)
  call check(trim(text) == 'kokkos', 'backend name')
  call dct_backend_compiled(DCT_BACKEND_KOKKOS, found)
  call check(found, 'the kokkos backend is compiled')

  ! 5. DCT-MP: every rank sends 2 rows of d = 8 to every rank, keeping the top 2 per row.
  call alltoallv_checks()

  ! 6. Checkpoints (when built with HDF5): a missing file is reported as such.
  call dct_checkpoint_load(MPI_COMM_WORLD, 'no-such-checkpoint.h5', ierror)
  call check(ierror == DCT_ERR_CKPT_NOT_FOUND .or. ierror == DCT_ERR_NOT_COMPILED, &
             'checkpoint load of a missing file')
  ! An asynchronous save of the live requests, then its wait: the handle is null after.
  call dct_checkpoint_isave(MPI_COMM_WORLD, 'fortran-isave.h5', save, ierror)
  if (ierror == DCT_SUCCESS) then
    call check(c_associated(save%handle), 'isave gives a handle')
    call dct_checkpoint_wait(save, ierror)
    call check(ierror == DCT_SUCCESS, 'the wait of an asynchronous save')
    call check(.not. c_associated(save%handle), 'the wait nulls the handle')
    call dct_checkpoint_wait(save, ierror)
    call check(ierror == DCT_ERR_ARG, 'a second wait is refused')
  else
    call check(ierror == DCT_ERR_NOT_COMPILED, 'isave without HDF5')
  end if

  call MPI_Allreduce(failures, any_failures, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
  if (rank == 0 .and. any_failures == 0) print '(a)', 'fortran: all checks passed'
  call MPI_Finalize()
  if (any_failures /= 0) error stop 1

contains

  subroutine alltoallv_checks()
    integer, parameter :: d = 8, rows = 2
    integer :: ranks, j, r, c
    integer, allocatable :: counts(:), displs(:)
    integer(MPI_COUNT_KIND), allocatable :: counts_c(:)
    integer(MPI_ADDRESS_KIND), allocatable :: displs_c(:)
    real(4), allocatable :: act(:), got(:), grad(:), dact(:), got_c(:), dact_c(:)
    type(dct_request) :: forward, backward
    type(dct_status) :: fstatus
    type(MPI_Info) :: mp_info
    call MPI_Comm_size(MPI_COMM_WORLD, ranks)
    allocate(counts(ranks), displs(ranks))
    counts = rows * d
    displs = [(j * rows * d, j = 0, ranks - 1)]
    allocate(act(ranks * rows * d), got(ranks * rows * d), grad(ranks * rows * d), &
             dact(ranks * rows * d))
    ! Column c of every row holds +-c: the kept columns are 7 and 8 (1-based).
    act = [((real(1 + mod(i - 1, d)) * merge(1, -1, mod(i, 3) == 0)), i = 1, size(act))]
    call MPI_Info_create(mp_info)
    call MPI_Info_set(mp_info, 'dct_row_length', '8')
    call MPI_Info_set(mp_info, 'dct_keep', '0.25')
    call dct_alltoallv_init(act, counts, displs, got, counts, displs, MPI_REAL, MPI_COMM_WORLD, &
                            mp_info, forward)
    call MPI_Info_free(mp_info)
    call dct_alltoallv_backward_init(forward, grad, counts, displs, dact, counts, displs, backward)
    grad = 1
    call dct_start(backward, ierror)
    call check(ierror == DCT_ERR_ACTIVE, 'alltoallv backward before forward')
    call dct_start(forward)
    call dct_wait(forward, fstatus)
    call check(fstatus%nnz_sent == ranks * rows * 2, 'alltoallv keeps 2 per row')
    do r = 0, ranks * rows - 1
      do c = 1, d
        i = r * d + c
        if (c >= 7) then
          call check(abs(got(i)) == real(c), 'alltoallv kept value')
        else
          call check(got(i) == 0, 'alltoallv dropped value')
        end if
      end do
    end do
    call dct_start(backward)
    call dct_wait(backward)
    call check(all(dact == merge(1.0, 0.0, mod([(i - 1, i = 1, size(dact))], d) >= 6)), &
               'alltoallv backward at the kept entries only')
    call dct_request_free(backward)
    call dct_request_free(forward)

    ! The large-count forms (integer(MPI_COUNT_KIND) counts, integer(MPI_ADDRESS_KIND)
    ! displacements): the same request, the same results.
    allocate(counts_c(ranks), displs_c(ranks), got_c(size(got)), dact_c(size(dact)))
    counts_c = int(counts, MPI_COUNT_KIND)
    displs_c = int(displs, MPI_ADDRESS_KIND)
    call MPI_Info_create(mp_info)
    call MPI_Info_set(mp_info, 'dct_row_length', '8')
    call MPI_Info_set(mp_info, 'dct_keep', '0.25')
    call dct_alltoallv_init_c(act, counts_c, displs_c, got_c, counts_c, displs_c, MPI_REAL, &
                              MPI_COMM_WORLD, mp_info, forward, ierror)
    call check(ierror == DCT_SUCCESS, 'dct_alltoallv_init_c')
    call dct_alltoallv_backward_init_c(forward, grad, counts_c, displs_c, dact_c, counts_c, &
                                       displs_c, backward, ierror)
    call check(ierror == DCT_SUCCESS, 'dct_alltoallv_backward_init_c')
    call dct_start(forward)
    call dct_wait(forward)
    call dct_start(backward)
    call dct_wait(backward)
    call check(all(got_c == got), 'alltoallv _c forward as the int form')
    call check(all(dact_c == dact), 'alltoallv _c backward as the int form')
    call dct_request_free(backward)
    call dct_request_free(forward)
    displs_c(1) = -1
    call dct_alltoallv_init_c(act, counts_c, displs_c, got_c, counts_c, displs_c, MPI_REAL, &
                              MPI_COMM_WORLD, mp_info, forward, ierror)
    call check(ierror == DCT_ERR_ARG, 'alltoallv _c negative displacement')
    call MPI_Info_free(mp_info)
  end subroutine alltoallv_checks

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(a, i0, 2a)', 'rank ', rank, ': FAILED: ', what
      failures = failures + 1
    end if
  end subroutine check

end program test_fortran
