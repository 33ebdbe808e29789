! A data-parallel training loop in Fortran whose MPI_Allreduce became dct_allreduce.
! Least squares, w <- w - lr * grad, each rank with its own rows; the loop runs twice on the
! same data (MPI_Allreduce, then dct_allreduce) and prints both losses and the bytes saved.
! Compression from the environment: DCT_DENSITY (default 0.01), DCT_INTERVAL, DCT_ALGORITHM.
program train_loop
  use mpi_f08
  use dct
  implicit none
  integer, parameter :: d = 1000, rows = 500, steps = 200
  real :: a(rows, d), b(rows), w(d), w_true(d), grad(d), total(d)
  real :: loss_start, loss_plain, loss_dct
  integer :: rank, ranks, i, seeds
  type(dct_status) :: status

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, ranks)
  ! Zero-mean data (uniform in [-1, 1]), different on every rank: the Hessian's largest
  ! eigenvalue is about 1, so the step 0.5 is stable for plain gradient descent.
  call random_seed(size=seeds)
  call random_seed(put=[(1234 + 7919 * rank + i, i = 1, seeds)])
  call random_number(a)
  a = 2 * a - 1
  w_true = [(sin(0.37 * i), i = 1, d)]
  b = matmul(a, w_true)

  w = 0
  loss_start = loss()
  call train(.false.)
  loss_plain = loss()
  call train(.true.)
  loss_dct = loss()
  call dct_allreduce_status(total, d, MPI_REAL, MPI_COMM_WORLD, status)
  if (rank == 0) then
    print '(a, i0, a, i0, a, i0, a)', 'least squares, ', ranks, ' ranks x ', rows, ' rows, ', &
      d, ' features'
    print '(a, es12.4)', '  loss at start            ', loss_start
    print '(a, es12.4)', '  loss with MPI_Allreduce  ', loss_plain
    print '(a, es12.4)', '  loss with dct_allreduce  ', loss_dct
    if (status%total_bytes_sent > 0) print '(a, i0, a, i0, a, f6.1, a)', &
      '  bytes sent per rank: ', status%total_bytes_sent, ' with dct, ', &
      status%total_dense_bytes, ' for ring MPI_Allreduce (', &
      real(status%total_dense_bytes) / real(status%total_bytes_sent), 'x less)'
  end if
  call MPI_Finalize()
  if (.not. loss_dct < loss_start) error stop 1

contains

  subroutine train(compressed)
    logical, intent(in) :: compressed
    integer :: step
    w = 0
    do step = 1, steps
      grad = matmul(matmul(a, w) - b, a) / (rows * ranks)
      if (compressed) then
        call dct_allreduce(grad, total, d, MPI_REAL, MPI_SUM, MPI_COMM_WORLD)  ! was MPI_Allreduce
      else
        call MPI_Allreduce(grad, total, d, MPI_REAL, MPI_SUM, MPI_COMM_WORLD)
      end if
      w = w - 0.25 * total  ! compressed steps lag (error feedback): 0.5, at dense's limit, diverges
    end do
  end subroutine train

  real function loss()
    real :: mine
    mine = sum((matmul(a, w) - b)**2) / (2.0 * rows * ranks)
    call MPI_Allreduce(mine, loss, 1, MPI_REAL, MPI_SUM, MPI_COMM_WORLD)
  end function loss

end program train_loop
