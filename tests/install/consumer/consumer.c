/* Links the installed libdct from C and checks one compressed sum at density 1. */
#include <dct/dct.h>
#include <stdio.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, major, minor, patch;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  DCT_Get_version(&major, &minor, &patch);
  double x[3] = {1.0, 2.0, rank}, sum[3];
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "dct_density", "1");
  DCT_Request request;
  int rc = DCT_Allreduce_init(x, sum, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, info, &request);
  if (rc == DCT_SUCCESS) rc = DCT_Start(&request);
  if (rc == DCT_SUCCESS) rc = DCT_Wait(&request, DCT_STATUS_IGNORE);
  DCT_Request_free(&request);
  MPI_Info_free(&info);
  const int ok = rc == DCT_SUCCESS && sum[0] == size && sum[1] == 2.0 * size &&
                 sum[2] == size * (size - 1) / 2.0 && major == DCT_VERSION_MAJOR;
  if (rank == 0) printf("dct %d.%d.%d consumer: %s\n", major, minor, patch, ok ? "ok" : "FAILED");
  MPI_Finalize();
  return ok ? 0 : 1;
}
