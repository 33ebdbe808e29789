/* What issue 35's agreements and barriers cost per call, each against its baseline in the same
   run (median of 7 repetitions of 2,000 calls, after 200 warm-up calls):
     passthrough drop-in: DCT_Allreduce(MPI_INT)   vs MPI_Allreduce(MPI_INT)   (+ one agreement)
     density-1 request:   DCT_Start/DCT_Wait        vs MPI_Allreduce(MPI_FLOAT) (+ one barrier)
     compressed drop-in:  DCT_Allreduce(MPI_FLOAT)  vs a persistent request    (+ one agreement)
   usage: mpiexec -n P ./overhead COUNT */
#include <dct/dct.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { CALLS = 2000, WARM = 200, REPS = 7 };
static int compare(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int n = argc > 1 ? atoi(argv[1]) : 1024;
  float *fs = malloc(sizeof(float) * n), *fr = malloc(sizeof(float) * n);
  int *is = malloc(sizeof(int) * n), *ir = malloc(sizeof(int) * n);
  for (int i = 0; i < n; ++i) fs[i] = (float)((i * 7 + rank) % 13) - 6, is[i] = i % 5;
  MPI_Info exact, sparse;
  MPI_Info_create(&exact);
  MPI_Info_set(exact, "dct_density", "1");
  MPI_Info_create(&sparse);
  MPI_Info_set(sparse, "dct_density", "0.01");
  DCT_Request dense, compressed;
  DCT_Allreduce_init(fs, fr, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, exact, &dense);
  DCT_Allreduce_init(fs, fr, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, sparse, &compressed);
  const char *names[6] = {"MPI_Allreduce int",     "DCT_Allreduce int (passthrough)",
                          "MPI_Allreduce float",   "density-1 request",
                          "persistent compressed", "DCT_Allreduce float (compressed)"};
  double median[6];
  for (int kind = 0; kind < 6; ++kind) {
    double us[REPS];
    for (int rep = 0; rep < REPS; ++rep) {
      double begin = 0;
      for (int call = 0; call < WARM + CALLS; ++call) {
        if (call == WARM) {
          MPI_Barrier(MPI_COMM_WORLD);
          begin = MPI_Wtime();
        }
        switch (kind) {
          case 0:
            MPI_Allreduce(is, ir, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            break;
          case 1:
            DCT_Allreduce(is, ir, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            break;
          case 2:
            MPI_Allreduce(fs, fr, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            break;
          case 3:
            DCT_Start(&dense);
            DCT_Wait(&dense, DCT_STATUS_IGNORE);
            break;
          case 4:
            DCT_Start(&compressed);
            DCT_Wait(&compressed, DCT_STATUS_IGNORE);
            break;
          default:
            DCT_Allreduce(fs, fr, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            break;
        }
      }
      double mine = (MPI_Wtime() - begin) / CALLS * 1e6, slowest = 0;
      MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      us[rep] = slowest;
    }
    qsort(us, REPS, sizeof(double), compare);
    median[kind] = us[REPS / 2];
  }
  if (rank == 0) {
    printf("ranks %d, count %d (us per call, median of %d x %d calls, slowest rank)\n", ranks, n,
           REPS, CALLS);
    for (int kind = 0; kind < 6; kind += 2)
      printf("  %-34s %8.2f  vs %-34s %8.2f  (+%.2f us, %.2fx)\n", names[kind + 1],
             median[kind + 1], names[kind], median[kind], median[kind + 1] - median[kind],
             median[kind + 1] / median[kind]);
  }
  DCT_Request_free(&dense);
  DCT_Request_free(&compressed);
  MPI_Info_free(&exact);
  MPI_Info_free(&sparse);
  MPI_Finalize();
  return 0;
}
