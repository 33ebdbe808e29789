/* netem_check: what the network between rank 0 and rank 1 delivers, to check the shaping that
 * hpc/netem/dct-netem sets up.
 *
 *   dct-netem --rate 100mbit --delay 1ms -- mpiexec -n 2 netem_check [--mib 8] [--seconds 2]
 *       [--reps 20] [--expect-mbit 100] [--expect-delay-us 1000]
 *
 * bandwidth  rank 0 sends `mib` MiB messages to rank 1 back to back for about `seconds`
 *            (after one untimed message), rank 1 answers the last with one byte; bytes sent /
 *            time to that answer, in Mbit/s (1e6 bit/s, as tc's "mbit")
 * latency    round trip of an 8-byte ping-pong: median and min of `reps` (after 3 untimed)
 *
 * With --expect-mbit R the exit code is 1 unless 0.3 R <= bandwidth <= 1.2 R; with
 * --expect-delay-us D, unless the median round trip >= 2 D (the delay applies to each one-way
 * trip). Other ranks (if any) only take part in the barriers. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double option(int argc, char **argv, const char *name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (strcmp(argv[i], name) == 0) return atof(argv[i + 1]);
  return fallback;
}

/* Seconds for `count` messages of `bytes` from rank 0 to rank 1 and a 1-byte answer (on 0). */
static double stream(int rank, char *buffer, int bytes, int count) {
  char ack = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < count; ++i) {
    if (rank == 0)
      MPI_Send(buffer, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
    else if (rank == 1)
      MPI_Recv(buffer, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (rank == 0)
    MPI_Recv(&ack, 1, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  else if (rank == 1)
    MPI_Send(&ack, 1, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
  return MPI_Wtime() - start;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int mib = (int)option(argc, argv, "--mib", 8);
  const double seconds = option(argc, argv, "--seconds", 2);
  const int reps = (int)option(argc, argv, "--reps", 20);
  const double expect_mbit = option(argc, argv, "--expect-mbit", 0);
  const double expect_delay_us = option(argc, argv, "--expect-delay-us", 0);
  if (ranks < 2 || mib < 1 || mib > 1024 || reps < 1 || seconds <= 0) {
    if (rank == 0)
      fprintf(stderr,
              "netem_check: needs 2 ranks or more, 1 <= --mib <= 1024, --reps >= 1, "
              "--seconds > 0\n");
    MPI_Finalize();
    return 2;
  }

  /* Latency first, on an idle link. */
  double *round_trips = malloc(sizeof(double) * (size_t)reps);
  char small[8] = {0};
  for (int i = -3; i < reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    if (rank == 0) {
      MPI_Send(small, 8, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
      MPI_Recv(small, 8, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(small, 8, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(small, 8, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
    }
    if (i >= 0) round_trips[i] = MPI_Wtime() - start;
  }
  qsort(round_trips, (size_t)reps, sizeof(double), compare_double);
  const double rtt_median_us =
      1e6 * (reps % 2 ? round_trips[reps / 2]
                      : 0.5 * (round_trips[reps / 2 - 1] + round_trips[reps / 2]));
  const double rtt_min_us = 1e6 * round_trips[0];

  /* Bandwidth: one untimed message sizes the run to about `seconds`. */
  const int bytes = mib << 20;
  char *buffer = calloc((size_t)bytes, 1);
  const double once = stream(rank, buffer, bytes, 1);
  int count = once > 0 ? (int)(seconds / once + 0.5) : 1;
  count = count < 2 ? 2 : count > 10000 ? 10000 : count;
  MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const double elapsed = stream(rank, buffer, bytes, count);
  const double mbit = 8.0 * bytes * count / elapsed / 1e6;

  int failed = 0;
  if (rank == 0) {
    printf("netem_check: %d ranks, rank 0 <-> rank 1\n", ranks);
    printf("bandwidth  %.1f Mbit/s  (%d x %d MiB in %.3f s)\n", mbit, count, mib, elapsed);
    printf("latency    round trip median %.1f us, min %.1f us  (8 bytes, %d reps)\n", rtt_median_us,
           rtt_min_us, reps);
    if (expect_mbit > 0) {
      const int ok = mbit >= 0.3 * expect_mbit && mbit <= 1.2 * expect_mbit;
      printf("check      bandwidth %.1f in [%.1f, %.1f] Mbit/s (0.3x..1.2x of %g): %s\n", mbit,
             0.3 * expect_mbit, 1.2 * expect_mbit, expect_mbit, ok ? "ok" : "FAILED");
      failed |= !ok;
    }
    if (expect_delay_us > 0) {
      const int ok = rtt_median_us >= 2 * expect_delay_us;
      printf("check      round trip %.1f >= %.1f us (2 x delay): %s\n", rtt_median_us,
             2 * expect_delay_us, ok ? "ok" : "FAILED");
      failed |= !ok;
    }
    fflush(stdout);
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  free(buffer);
  free(round_trips);
  MPI_Finalize();
  return failed ? 1 : 0;
}
