/*
 * The model-parallel all-to-all of a DLRM-style model through DCT-MP: every rank computes a
 * B x d block of activations (its embedding tables' outputs for the whole batch), sends B/P
 * rows to every rank, and gets the gradients of those rows back in the backward pass. Only
 * the largest `keep` fraction of every row travels, in fp16, and its gradient comes back on
 * the same entries. The program checks what arrived against MPI_Alltoallv of the dense blocks
 * and prints the bytes saved.
 *
 *   mpiexec -n 4 ./dct_example_model_parallel [--rows B] [--d D] [--keep K]
 */
#include <dct/dct.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                    \
  do {                                                                 \
    int code_ = (call);                                                \
    if (code_ != DCT_SUCCESS) {                                        \
      fprintf(stderr, "%s failed: %s\n", #call, DCT_Get_last_error()); \
      MPI_Abort(MPI_COMM_WORLD, 1);                                    \
    }                                                                  \
  } while (0)

int main(int argc, char **argv) {
  int rows = 1024, d = 128, rank, ranks, failures = 0, any = 0;
  const char *keep = "0.05";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--rows") == 0) rows = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--d") == 0) d = atoi(argv[i + 1]);
    if (strcmp(argv[i], "--keep") == 0) keep = argv[i + 1];
  }
  const int per_peer = rows / ranks, n = per_peer * ranks * d;
  int *counts = malloc(sizeof(int) * ranks), *displs = malloc(sizeof(int) * ranks);
  for (int j = 0; j < ranks; ++j) counts[j] = per_peer * d, displs[j] = j * per_peer * d;
  float *act = malloc(sizeof(float) * n), *act_in = malloc(sizeof(float) * n);
  float *dense_in = malloc(sizeof(float) * n), *grad_in = malloc(sizeof(float) * n);
  float *grad = malloc(sizeof(float) * n);
  for (int i = 0; i < n; ++i) act[i] = sinf(0.37f * (float)i + (float)rank) * (float)(1 + i % 7);

  MPI_Info info;
  MPI_Info_create(&info);
  char length[32];
  snprintf(length, sizeof length, "%d", d);
  MPI_Info_set(info, "dct_row_length", length);
  MPI_Info_set(info, "dct_keep", keep);
  MPI_Info_set(info, "dct_values", "fp16");
  DCT_Request forward, backward;
  CHECK(DCT_Alltoallv_init(act, counts, displs, act_in, counts, displs, MPI_FLOAT, MPI_COMM_WORLD,
                           info, &forward));
  MPI_Info_free(&info);
  /* Square blocks here, so the backward's shapes are the forward's. */
  CHECK(DCT_Alltoallv_backward_init(forward, grad_in, counts, displs, grad, counts, displs,
                                    &backward));

  DCT_Status fs = DCT_STATUS_INITIALIZER, bs = DCT_STATUS_INITIALIZER;
  CHECK(DCT_Start(&forward));
  CHECK(DCT_Wait(&forward, &fs));
  MPI_Alltoallv(act, counts, displs, MPI_FLOAT, dense_in, counts, displs, MPI_FLOAT,
                MPI_COMM_WORLD);
  /* Every received entry is either dropped (0) or the sent value rounded to fp16. */
  for (int i = 0; i < n; ++i)
    if (act_in[i] != 0 && fabsf(act_in[i] - dense_in[i]) > 1e-3f * fabsf(dense_in[i])) ++failures;
  /* The layers above would compute these gradients; here: 1 for every received activation. */
  for (int i = 0; i < n; ++i) grad_in[i] = 1.0f;
  CHECK(DCT_Start(&backward));
  CHECK(DCT_Wait(&backward, &bs));
  /* The gradient comes back exactly on the entries this rank's forward kept. */
  long long kept_here = 0;
  for (int i = 0; i < n; ++i) kept_here += grad[i] == 1.0f;
  if (kept_here != fs.nnz_sent) ++failures;

  MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0)
    printf(
        "DCT-MP, %d ranks, B=%d d=%d keep=%s fp16: kept %.4f of the entries; forward %lld "
        "bytes (MPI_Alltoallv %lld), backward %lld (%lld): %.1fx fewer together; %s\n",
        ranks, rows, d, keep, fs.density, (long long)fs.bytes_sent, (long long)fs.dense_bytes,
        (long long)bs.bytes_sent, (long long)bs.dense_bytes,
        (double)(fs.dense_bytes + bs.dense_bytes) /
            (double)(fs.bytes_sent + bs.bytes_sent > 0 ? fs.bytes_sent + bs.bytes_sent : 1),
        any ? "CHECK FAILED" : "checks passed");
  DCT_Request_free(&backward);
  DCT_Request_free(&forward);
  free(counts), free(displs), free(act), free(act_in), free(dense_in), free(grad_in), free(grad);
  MPI_Finalize();
  return any ? 1 : 0;
}
