! Links the installed dct::fortran and checks one sum at density 1 against MPI_Allreduce.
program consumer
  use mpi_f08
  use dct
  implicit none
  real(8) :: x(3), total(3), expected(3)
  integer :: rank, major, minor, patch
  type(MPI_Info) :: info
  type(dct_request) :: request
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  x = [1d0, 2d0, dble(rank)]
  call MPI_Info_create(info)
  call MPI_Info_set(info, 'dct_density', '1')
  call dct_allreduce_init(x, total, 3, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, info, request)
  call dct_start(request)
  call dct_wait(request)
  call dct_request_free(request)
  call MPI_Allreduce(x, expected, 3, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD)
  call dct_get_version(major, minor, patch)
  if (rank == 0) print '(a, 3(i0, a))', 'dct ', major, '.', minor, '.', patch, ' fortran consumer'
  call MPI_Finalize()
  if (any(total /= expected)) error stop 1
end program consumer
