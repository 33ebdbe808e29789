/* The C side of python.c_api: runs compressed allreduces through the C ABI on inputs that
 * tests/python/test_c_api.py computes the same way, and writes every result and the final
 * residual to <dir>/c-np<P>-rank<r>.bin for the Python side to compare bit for bit.
 *   mpiexec -n P dct_python_c_reference DIR */
#include <dct/dct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { COUNT = 5000, CALLS = 4 };

/* Input of (rank, call, i): multiples of 1/64 with many ties, as test_c_api.py's. */
static double input(int rank, int call, long i) {
  return (double)((i * 7919 + call * 104729 + rank * 15485863L) % 4001 - 2000) / 64.0;
}

static void check(int code, const char *what) {
  if (code != DCT_SUCCESS) {
    fprintf(stderr, "c_reference: %s: %s\n", what, DCT_Get_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* One configuration: `calls` calls, each result then the residual appended to `out`. */
static void run(FILE *out, int rank, MPI_Datatype type, const char *density, const char *values,
                const char *momentum) {
  const int is_float = type == MPI_FLOAT;
  const size_t size = is_float ? sizeof(float) : sizeof(double);
  char *send = malloc(COUNT * size), *recv = malloc(COUNT * size);
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "dct_density", density);
  MPI_Info_set(info, "dct_values", values);
  MPI_Info_set(info, "dct_momentum", momentum);
  DCT_Request request;
  check(DCT_Allreduce_init(send, recv, COUNT, type, MPI_SUM, MPI_COMM_WORLD, info, &request),
        "DCT_Allreduce_init");
  MPI_Info_free(&info);
  for (int call = 0; call < CALLS; ++call) {
    for (long i = 0; i < COUNT; ++i) {
      if (is_float)
        ((float *)send)[i] = (float)input(rank, call, i);
      else
        ((double *)send)[i] = input(rank, call, i);
    }
    check(DCT_Start(&request), "DCT_Start");
    check(DCT_Wait(&request, DCT_STATUS_IGNORE), "DCT_Wait");
    fwrite(recv, size, COUNT, out);
  }
  check(DCT_Request_get_residual(request, recv), "DCT_Request_get_residual");
  fwrite(recv, size, COUNT, out);
  check(DCT_Request_free(&request), "DCT_Request_free");
  free(send);
  free(recv);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/c-np%d-rank%d.bin", argv[1], ranks, rank);
  FILE *out = fopen(path, "wb");
  if (!out) {
    perror(path);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  /* The configurations of test_c_api.py, in the same order. */
  run(out, rank, MPI_FLOAT, "0.05", "native", "0");
  run(out, rank, MPI_DOUBLE, "0.02", "fp16", "0.9");
  run(out, rank, MPI_FLOAT, "0.01", "sign", "0.5");
  run(out, rank, MPI_DOUBLE, "1", "native", "0");
  fclose(out);
  MPI_Finalize();
  return 0;
}
