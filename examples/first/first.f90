! The README's first program in Fortran (use dct): a call without ierror stops the program with
! dct's message when it fails. README.md shows it whole, from the marker below (ctest
! readme.snippets keeps them equal; example.first.fortran runs it).
!
!   mpiexec -n 2 ./dct_first_fortran
! README begin
program first
  use mpi_f08
  use dct
  implicit none
  integer, parameter :: n = 2**20
  real, allocatable :: grad(:), grad_sum(:)
  type(dct_request) :: request
  type(dct_status) :: status
  type(MPI_Info) :: info
  integer :: rank, step, i

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  allocate (grad(n), grad_sum(n))
  call MPI_Info_create(info)
  call MPI_Info_set(info, 'dct_density', '0.01')
  call dct_allreduce_init(grad, grad_sum, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, info, request)
  call MPI_Info_free(info)
  do step = 0, 19
    grad = [(real(mod(i * 79 + step * 1049 + rank, 2001) - 1000), i = 0, n - 1)]  ! backward
    call dct_start(request)           ! was: call MPI_Allreduce(grad, grad_sum, n, ...)
    call dct_wait(request, status)
    ! your optimiser applies grad_sum
  end do
  if (rank == 0) print '(a, i0, a, f0.1, a, f6.4)', 'dct: ', status%calls, ' calls, ', &
    real(status%total_dense_bytes) / real(status%total_bytes_sent), &
    'x fewer bytes than MPI_Allreduce, density ', status%density
  call dct_request_free(request)
  call MPI_Finalize()
end program first
! README end
