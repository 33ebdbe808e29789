! A plain Fortran MPI program that knows nothing of dct: big REAL and in-place DOUBLE PRECISION
! sums (compressible) and an INTEGER sum (never compressed). Built twice: with `use mpi`, and
! with `use mpi_f08` (-DUSE_F08), which reach MPI through different entry points.
program plain_allreduce
#ifdef USE_F08
  use mpi_f08
#else
  use mpi
#endif
  implicit none
  integer, parameter :: n = 100000
  real :: x(n), s(n)
  double precision :: d(n), total
  integer :: k(10), ks(10), rank, ierr, i, step
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  total = 0
  do step = 1, 4
    x = [(real(mod(i * 7 + rank + step, 101)) - 50.0, i = 1, n)]
    call MPI_Allreduce(x, s, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (ierr /= MPI_SUCCESS) stop 1
    total = total + sum(dble(s))
  end do
  d = [(dble(mod(i + rank, 17)), i = 1, n)]
  call MPI_Allreduce(MPI_IN_PLACE, d, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS) stop 2
  k = [(i * (rank + 1), i = 1, 10)]
  call MPI_Allreduce(k, ks, 10, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    print '(a, es24.16)', 'real_sums ', total
    print '(a, es24.16)', 'double_inplace_sum ', sum(d)
    print '(a, 10i8)', 'integer_sum ', ks
  end if
  call MPI_Finalize(ierr)
end program plain_allreduce
