/* A plain MPI program that knows nothing of dct. It prints one line per allreduce: a hash of
   the result's bytes, so that runs with and without libdct_pmpi can be compared line by line. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long hash(const void *data, size_t bytes) {
  const unsigned char *p = data;
  unsigned long long h = 1469598103934665603ULL;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  enum { N = 100000, SMALL = 100 };
  float *big = malloc(sizeof(float) * N), *big_sum = malloc(sizeof(float) * N);
  double *inplace = malloc(sizeof(double) * N);
  int ints[SMALL], int_sum[SMALL];
  double reals[SMALL], real_max[SMALL];
  float small[SMALL], small_sum[SMALL];
  for (int step = 0; step < 5; ++step) {
    for (int i = 0; i < N; ++i) big[i] = (float)((i * 7 + rank * 13 + step) % 101) - 50.0f;
    MPI_Allreduce(big, big_sum, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("float_sum step %d %016llx\n", step, hash(big_sum, sizeof(float) * N));
  }
  for (int i = 0; i < N; ++i) inplace[i] = (double)((i + rank) % 17);
  MPI_Allreduce(MPI_IN_PLACE, inplace, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("double_inplace_sum %016llx\n", hash(inplace, sizeof(double) * N));
  for (int i = 0; i < SMALL; ++i) {
    ints[i] = i * (rank + 1);
    reals[i] = i * 0.5 + rank;
    small[i] = (float)(i % 7) + (float)rank;
  }
  MPI_Allreduce(ints, int_sum, SMALL, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(reals, real_max, SMALL, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(small, small_sum, SMALL, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Request request;
  MPI_Iallreduce(big, big_sum, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  /* Error handling is MPI's: an erroneous call returns MPI's own error class. MPICH 4.0.2 does
     not check the count of MPI_Allreduce (a negative one crashes inside it), so there the
     erroneous argument is a null datatype. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
#ifdef MPICH_VERSION
  int error_class = 0,
      rc = MPI_Allreduce(big, big_sum, N, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD);
#else
  int error_class = 0, rc = MPI_Allreduce(big, big_sum, -1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
#endif
  MPI_Error_class(rc, &error_class);
  /* MPI_IN_PLACE as the receive buffer is erroneous: MPI's error, never a write through it. */
  int in_place_class = 0;
  rc = MPI_Allreduce(big, MPI_IN_PLACE, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Error_class(rc, &in_place_class);
  if (rank == 0) {
    printf("int_sum %016llx\n", hash(int_sum, sizeof int_sum));
    printf("double_max %016llx\n", hash(real_max, sizeof real_max));
    printf("small_float_sum %016llx\n", hash(small_sum, sizeof small_sum));
    printf("iallreduce_float_sum %016llx\n", hash(big_sum, sizeof(float) * N));
    printf("erroneous_call_error_class %d\n", error_class);
    printf("recv_in_place_error_class %d\n", in_place_class);
  }
  free(big), free(big_sum), free(inplace);
  MPI_Finalize();
  return 0;
}
