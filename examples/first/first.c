/* The README's first program in C: one gradient allreduce per step through dct, every return
 * code checked. README.md shows it whole, from the marker below (ctest readme.snippets keeps
 * them equal; example.first.c runs it).
 *
 *   mpiexec -n 2 ./dct_first_c
 */
/* README begin */
#include <dct/dct.h>
#include <stdio.h>
#include <stdlib.h>

/* Every dct call returns DCT_SUCCESS or an error code; DCT_Get_last_error() says why. */
#define CHECK(call)                                             \
  do {                                                          \
    int code_ = (call);                                         \
    if (code_ != DCT_SUCCESS) {                                 \
      fprintf(stderr, "%s: %s\n", #call, DCT_Get_last_error()); \
      MPI_Abort(MPI_COMM_WORLD, code_);                         \
    }                                                           \
  } while (0)

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv); /* MPI's own errors abort (MPI_ERRORS_ARE_FATAL) */
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int n = 1 << 20, steps = 20;
  float *grad = malloc(n * sizeof(float)), *grad_sum = malloc(n * sizeof(float));

  /* Once, next to the model: a persistent request owns this tensor's residual. */
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "dct_density", "0.01"); /* send 1% of the entries per call */
  DCT_Request request;
  CHECK(DCT_Allreduce_init(grad, grad_sum, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, info, &request));
  MPI_Info_free(&info);

  DCT_Status status = DCT_STATUS_INITIALIZER; /* versioned: see dct.h */
  for (int step = 0; step < steps; ++step) {
    for (int i = 0; i < n; ++i) /* your backward pass writes grad */
      grad[i] = (float)((i * 79 + step * 1049 + rank) % 2001) - 1000;
    CHECK(DCT_Start(&request)); /* was: MPI_Allreduce(grad, grad_sum, n, ...) */
    CHECK(DCT_Wait(&request, &status));
    /* your optimiser applies grad_sum */
  }
  if (rank == 0)
    printf("dct: %lld calls, %.1fx fewer bytes than MPI_Allreduce, density %.4f\n",
           (long long)status.calls, /* MPI_Count: long in MPICH, long long in Open MPI */
           (double)status.total_dense_bytes / (double)status.total_bytes_sent, status.density);
  CHECK(DCT_Request_free(&request));
  free(grad);
  free(grad_sum);
  MPI_Finalize();
  return 0;
}
/* README end */
