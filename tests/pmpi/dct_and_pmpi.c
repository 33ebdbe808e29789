/* A program that calls dct itself, run with libdct_pmpi preloaded and on: dct's own
   MPI_Allreduce (a density-1 request is exactly MPI_Allreduce) must reach MPI, not be
   compressed a second time by the interposer (issue 35: all 8,192 elements differed from MPI's
   while the status said every one was sent). Exits non-zero on any difference. */
#include <dct/dct.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  enum { N = 8192 };
  static float send[N], recv[N], expected[N];
  for (int i = 0; i < N; ++i) send[i] = (float)((i * 31 + rank * 17) % 257) / 64.0f - 2.0f;
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "dct_density", "1");
  DCT_Request request;
  int failed = DCT_Allreduce_init(send, recv, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, info,
                                  &request) != DCT_SUCCESS;
  MPI_Info_free(&info);
  for (int call = 0; call < 3 && !failed; ++call) {
    DCT_Status status = DCT_STATUS_INITIALIZER;
    failed = DCT_Start(&request) != DCT_SUCCESS || DCT_Wait(&request, &status) != DCT_SUCCESS;
    /* PMPI_Allreduce: MPI's own result, past the interposer. */
    PMPI_Allreduce(send, expected, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    int differ = 0;
    for (int i = 0; i < N; ++i) differ += memcmp(&recv[i], &expected[i], sizeof(float)) != 0;
    if (differ || status.nnz_sent != N) {
      fprintf(stderr, "rank %d call %d: %d of %d elements differ from MPI_Allreduce\n", rank, call,
              differ, N);
      failed = 1;
    }
  }
  if (!failed) DCT_Request_free(&request);
  int any = 0;
  PMPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf(any ? "dct_and_pmpi FAILED\n" : "dct_and_pmpi passed\n");
  MPI_Finalize();
  return any;
}
