// dct-bench calibrate: the two parameters of an alpha-beta model (time = alpha + bytes / beta)
// of the network between the ranks of this job, for dct's `auto` cost model.
//
//   mpiexec -n 2 dct-bench calibrate [--reps 1000] [--mib 64] [--beta-reps 10]
//
//   alpha  latency in microseconds: half the round trip of an 8-byte ping-pong, the median of
//          `reps` (after 100 warm-up), between rank 0 and rank P-1, and the mean, min and max
//          over the pairs 0<->r, r = 1..P-1 (measured one pair at a time)
//   beta   bandwidth in GB/s (1e9 bytes/s): `mib` MiB ping-pong between rank 0 and rank P-1,
//          bytes / (best one-way time of `beta-reps` round trips - alpha)
// and prints, ready to paste, `export DCT_ALPHA_US=<a> DCT_BETA_GBPS=<b>` with the 0<->P-1
// figures: with ranks placed on nodes in blocks (mpiexec's default) that pair spans the most
// hardware, e.g. two nodes, which is what a collective's slowest steps cross.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include "bench.hpp"

namespace dct::bench {
namespace {

struct CalibrateOptions {
  int reps = 1000;
  int warmup = 100;
  long long beta_mib = 64;
  int beta_reps = 10;
};

// Round-trip times (seconds) of `bytes`-byte ping-pongs between rank 0, which times them, and
// `peer`; empty on the other ranks, which only pass through.
std::vector<double> ping_pong(int rank, int peer, std::vector<char> &buffer, int bytes, int warmup,
                              int reps) {
  std::vector<double> times;
  const int tag = 7;
  for (int i = 0; i < warmup + reps; ++i) {
    if (rank == 0) {
      const double start = MPI_Wtime();
      MPI_Send(buffer.data(), bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD);
      MPI_Recv(buffer.data(), bytes, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (i >= warmup) times.push_back(MPI_Wtime() - start);
    } else if (rank == peer) {
      MPI_Recv(buffer.data(), bytes, MPI_BYTE, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buffer.data(), bytes, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
    }
  }
  return times;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

int run(const CalibrateOptions &o) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) throw std::invalid_argument("calibrate needs at least 2 ranks");
  // Pairs 0<->r one at a time, so that no other traffic shares the link.
  std::vector<char> small(8, 1);
  std::vector<double> alpha_us;  // per pair, on rank 0
  for (int peer = 1; peer < ranks; ++peer) {
    MPI_Barrier(MPI_COMM_WORLD);
    const std::vector<double> times = ping_pong(rank, peer, small, 8, o.warmup, o.reps);
    if (rank == 0) alpha_us.push_back(median(times) / 2 * 1e6);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const int last = ranks - 1;
  const long long beta_bytes = o.beta_mib << 20;
  std::vector<char> large(rank == 0 || rank == last ? static_cast<std::size_t>(beta_bytes) : 0, 1);
  const std::vector<double> times =
      ping_pong(rank, last, large, static_cast<int>(beta_bytes), 1, o.beta_reps);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) return 0;

  const double alpha = alpha_us.back();
  double mean = 0;
  for (double a : alpha_us) mean += a;
  mean /= double(alpha_us.size());
  const auto [lowest, highest] = std::minmax_element(alpha_us.begin(), alpha_us.end());
  const double one_way_us = *std::min_element(times.begin(), times.end()) / 2 * 1e6;
  const double transfer_us = one_way_us > alpha ? one_way_us - alpha : one_way_us;
  const double beta = double(beta_bytes) / transfer_us * 1e-3;  // bytes/us -> GB/s
  std::printf(
      "# dct-bench calibrate: %d ranks; alpha = median of %d 8-byte round trips / 2; beta = %lld "
      "MiB / (best one-way time of %d round trips - alpha)\n",
      ranks, o.reps, o.beta_mib, o.beta_reps);
  std::printf("alpha_us   0<->%d: %.3f   mean over 0<->r, r=1..%d: %.3f   min %.3f   max %.3f\n",
              last, alpha, last, mean, *lowest, *highest);
  std::printf("beta_GBps  0<->%d: %.3f   (one-way %.1f us for %lld MiB)\n", last, beta, one_way_us,
              o.beta_mib);
  std::printf("export DCT_ALPHA_US=%.3f DCT_BETA_GBPS=%.3f\n", alpha, beta);
  return 0;
}

}  // namespace

Run add_calibrate(CLI::App &app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App *command = app.add_subcommand(
      "calibrate", "alpha and beta of the network between the ranks, for dct's cost model");
  command->add_option("--reps", o->reps, "8-byte round trips per pair (alpha)")
      ->check(CLI::Range(1, INT_MAX))
      ->capture_default_str();
  command->add_option("--mib", o->beta_mib, "MiB per message of the bandwidth ping-pong")
      ->check(CLI::Range(1LL, 1024LL))
      ->capture_default_str();
  command->add_option("--beta-reps", o->beta_reps, "round trips of that size (beta)")
      ->check(CLI::Range(1, INT_MAX))
      ->capture_default_str();
  return [o] { return run(*o); };
}

}  // namespace dct::bench
