// netem_check: what the network between rank 0 and rank 1 delivers, to check the shaping that
// hpc/netem/dct-netem sets up.
//
//   dct-netem --rate 100mbit --delay 1ms -- mpiexec -n 2 netem_check [--mib 8] [--seconds 2]
//       [--reps 20] [--expect-mbit 100] [--expect-delay-us 1000]
//
// bandwidth  rank 0 sends `mib` MiB messages to rank 1 back to back for about `seconds`
//            (after one untimed message), rank 1 answers the last with one byte; bytes sent /
//            time to that answer, in Mbit/s (1e6 bit/s, as tc's "mbit")
// latency    round trip of an 8-byte ping-pong: median and min of `reps` (after 3 untimed)
//
// With --expect-mbit R the exit code is 1 unless 0.3 R <= bandwidth <= 1.2 R; with
// --expect-delay-us D, unless the median round trip >= 2 D (the delay applies to each one-way
// trip). A bad command line or fewer than 2 ranks: exit code 2. Other ranks (if any) only take
// part in the barriers.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <climits>
#include <cstdio>
#include <sstream>
#include <vector>

namespace {

// Seconds for `count` messages of `bytes` from rank 0 to rank 1 and a 1-byte answer (on 0).
double stream(int rank, char *buffer, int bytes, int count) {
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

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int mib = 8, reps = 20;
  double seconds = 2, expect_mbit = 0, expect_delay_us = 0;
  CLI::App app{"netem_check: bandwidth and latency between rank 0 and rank 1"};
  app.add_option("--mib", mib, "MiB per message of the bandwidth stream")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--seconds", seconds, "length of the bandwidth stream")
      ->check(CLI::Range(1e-3, 3600.0))
      ->capture_default_str();
  app.add_option("--reps", reps, "8-byte round trips (latency)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--expect-mbit", expect_mbit, "fail unless 0.3x..1.2x of this bandwidth")
      ->check(CLI::Range(0.0, 1e9));
  app.add_option("--expect-delay-us", expect_delay_us,
                 "fail unless the median round trip is >= 2x this one-way delay")
      ->check(CLI::Range(0.0, 1e9));
  try {
    app.parse(argc, argv);
    if (ranks < 2) throw CLI::ValidationError("netem_check needs 2 ranks or more");
  } catch (const CLI::ParseError &e) {
    std::ostringstream quiet;
    const int code = rank == 0 ? app.exit(e) : app.exit(e, quiet, quiet);
    MPI_Finalize();
    return code == static_cast<int>(CLI::ExitCodes::Success) ? 0 : 2;
  }

  // Latency first, on an idle link.
  std::vector<double> round_trips(static_cast<std::size_t>(reps));
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
    if (i >= 0) round_trips[static_cast<std::size_t>(i)] = MPI_Wtime() - start;
  }
  std::sort(round_trips.begin(), round_trips.end());
  const double rtt_median_us = 1e6 * (reps % 2 ? round_trips[std::size_t(reps / 2)]
                                               : 0.5 * (round_trips[std::size_t(reps / 2 - 1)] +
                                                        round_trips[std::size_t(reps / 2)]));
  const double rtt_min_us = 1e6 * round_trips[0];

  // Bandwidth: one untimed message sizes the run to about `seconds`.
  const int bytes = mib << 20;
  std::vector<char> buffer(static_cast<std::size_t>(bytes));
  const double once = stream(rank, buffer.data(), bytes, 1);
  int count = once > 0 ? static_cast<int>(std::min(seconds / once + 0.5, 1e4)) : 1;
  count = std::clamp(count, 2, 10000);
  MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const double elapsed = stream(rank, buffer.data(), bytes, count);
  const double mbit = 8.0 * bytes * count / elapsed / 1e6;

  int failed = 0;
  if (rank == 0) {
    std::printf("netem_check: %d ranks, rank 0 <-> rank 1\n", ranks);
    std::printf("bandwidth  %.1f Mbit/s  (%d x %d MiB in %.3f s)\n", mbit, count, mib, elapsed);
    std::printf("latency    round trip median %.1f us, min %.1f us  (8 bytes, %d reps)\n",
                rtt_median_us, rtt_min_us, reps);
    if (expect_mbit > 0) {
      const bool ok = mbit >= 0.3 * expect_mbit && mbit <= 1.2 * expect_mbit;
      std::printf("check      bandwidth %.1f in [%.1f, %.1f] Mbit/s (0.3x..1.2x of %g): %s\n", mbit,
                  0.3 * expect_mbit, 1.2 * expect_mbit, expect_mbit, ok ? "ok" : "FAILED");
      failed |= !ok;
    }
    if (expect_delay_us > 0) {
      const bool ok = rtt_median_us >= 2 * expect_delay_us;
      std::printf("check      round trip %.1f >= %.1f us (2 x delay): %s\n", rtt_median_us,
                  2 * expect_delay_us, ok ? "ok" : "FAILED");
      failed |= !ok;
    }
    std::fflush(stdout);
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed ? 1 : 0;
}
