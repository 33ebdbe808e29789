/* A plain MPI program in which only rank 0 calls MPI_Allreduce, and only on MPI_COMM_SELF: the
   interposer's report at MPI_Finalize must still find every rank in its reduction (issue 35:
   only ranks that had called MPI_Allreduce armed it, and the job hung in MPI_Finalize). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  enum { N = 10000 };
  static float values[N], sum[N];
  for (int i = 0; i < N; ++i) values[i] = (float)(i % 7);
  if (rank == 0) MPI_Allreduce(values, sum, N, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) printf("self_only done\n");
  MPI_Finalize();
  return 0;
}
