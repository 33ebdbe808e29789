// dct-bench: measures dct against MPI in the same run.
//
//   mpiexec -n 4 dct-bench checkpoint [--mib 256] [--iters 3] [--dir .]   (checkpoint_bench.cpp)
//   mpiexec -n 4 dct-bench allreduce [--sizes 1M,4M,16M,64M] [--density 0.01]
//       [--algorithm auto|allgather|dense] [--interval 1000] [--type float|double]
//       [--iters 20] [--warmup 3] [--json]
//
// Per size (bytes of the tensor), OSU-style: average time per call of MPI_Allreduce and of a
// persistent DCT allreduce (DCT_Start + DCT_Wait) on the same gradient, their ratio, the
// traffic reduction (ring MPI_Allreduce bytes per rank / bytes dct reports it sent), the
// density achieved in the last timed call, and two errors against MPI_Allreduce of the same
// inputs:
//   call_err: max |dct - mpi| / max |mpi| of one call (large by design: most entries wait)
//   cum_err:  the same over the sums of `iters` calls (what error feedback makes small)
// The inputs cycle through 4 gradients per rank: a fixed N(0,1) signal plus N(0,1) noise.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dct/dct.hpp"

namespace {

struct Options {
  std::vector<long long> sizes = {1 << 20, 4 << 20, 16 << 20, 64 << 20};
  std::string density = "0.01";
  std::string algorithm = "auto";
  std::string interval = "1000";
  std::string type = "float";
  int iters = 20;
  int warmup = 3;
  bool json = false;
};

long long parse_size(const std::string &text) {
  char *end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  long long scale = 1;
  const std::string suffix = end;
  if (suffix == "K" || suffix == "k")
    scale = 1LL << 10;
  else if (suffix == "M" || suffix == "m")
    scale = 1LL << 20;
  else if (suffix == "G" || suffix == "g")
    scale = 1LL << 30;
  else if (!suffix.empty())
    throw std::invalid_argument("bad size: " + text);
  if (end == text.c_str() || value <= 0) throw std::invalid_argument("bad size: " + text);
  return static_cast<long long>(value * scale);
}

Options parse(int argc, char **argv) {
  Options o;
  if (argc < 2 || std::strcmp(argv[1], "allreduce") != 0)
    throw std::invalid_argument("usage: dct-bench allreduce|checkpoint [options]");
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--sizes") {
      o.sizes.clear();
      std::string list = value();
      for (std::size_t start = 0; start <= list.size();) {
        const std::size_t comma = std::min(list.find(',', start), list.size());
        o.sizes.push_back(parse_size(list.substr(start, comma - start)));
        start = comma + 1;
      }
    } else if (arg == "--density")
      o.density = value();
    else if (arg == "--algorithm")
      o.algorithm = value();
    else if (arg == "--interval")
      o.interval = value();
    else if (arg == "--type")
      o.type = value();
    else if (arg == "--iters")
      o.iters = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--warmup")
      o.warmup = std::max(0, std::atoi(value().c_str()));
    else if (arg == "--json")
      o.json = true;
    else
      throw std::invalid_argument("unknown option " + arg);
  }
  if (o.type != "float" && o.type != "double")
    throw std::invalid_argument("--type must be float or double");
  return o;
}

struct Row {
  long long bytes;
  double mpi_us, dct_us, bytes_ratio, density, call_err, cum_err;
  int algorithm;
};

constexpr int kGradientPool = 4;

template <typename T>
Row measure(const Options &o, long long bytes) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::size_t n = static_cast<std::size_t>(bytes) / sizeof(T);
  // Calls cycle through a few gradients g = signal + noise (both N(0,1), signal fixed per
  // rank), as SGD steps do; one static gradient would pile up in the residual and cross any
  // fixed tau, and pure noise has no signal for error feedback to deliver.
  std::vector<std::vector<T>> pool(kGradientPool, std::vector<T>(n));
  std::mt19937_64 engine(1234567u + 7919u * static_cast<unsigned>(rank));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> signal(n);
  for (double &x : signal) x = normal(engine);
  for (auto &gradient : pool)
    for (std::size_t j = 0; j < n; ++j) gradient[j] = static_cast<T>(signal[j] + normal(engine));
  std::vector<T> send(n), expected(n), recv(n);
  auto load = [&](int call) {
    const std::vector<T> &gradient = pool[static_cast<std::size_t>(call) % pool.size()];
    std::copy(gradient.begin(), gradient.end(), send.begin());
  };
  const MPI_Datatype type = dct::mpi_datatype<T>();

  // OSU's method: a barrier, then the call alone is timed; mean over calls, then over ranks.
  auto time_calls = [&](auto &&call) {
    double total = 0;
    for (int i = 0; i < o.warmup + o.iters; ++i) {
      load(i);
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      call();
      if (i >= o.warmup) total += MPI_Wtime() - start;
    }
    const double mine = total / o.iters * 1e6;
    double sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / ranks;
  };

  Row row{};
  row.bytes = bytes;
  row.mpi_us = time_calls([&] {
    MPI_Allreduce(send.data(), expected.data(), static_cast<int>(n), type, MPI_SUM, MPI_COMM_WORLD);
  });

  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "dct_density", o.density.c_str());
  MPI_Info_set(info, "dct_algorithm", o.algorithm.c_str());
  MPI_Info_set(info, "dct_interval", o.interval.c_str());
  DCT_Status status{};
  {
    dct::AllreduceRequest request(send.data(), recv.data(), n, MPI_COMM_WORLD, info);
    row.dct_us = time_calls([&] { status = request(); });
  }

  // Errors of a fresh request against MPI_Allreduce of the same inputs, untimed.
  dct::AllreduceRequest request(send.data(), recv.data(), n, MPI_COMM_WORLD, info);
  MPI_Info_free(&info);
  std::vector<double> dct_sum(n, 0.0), mpi_sum(n, 0.0);
  for (int i = 0; i < o.iters; ++i) {
    load(i);
    MPI_Allreduce(send.data(), expected.data(), static_cast<int>(n), type, MPI_SUM, MPI_COMM_WORLD);
    request();
    double diff = 0, scale = 0;
    for (std::size_t j = 0; j < n; ++j) {
      dct_sum[j] += recv[j];
      mpi_sum[j] += expected[j];
      diff = std::max(diff, std::abs(double(recv[j]) - double(expected[j])));
      scale = std::max(scale, std::abs(double(expected[j])));
    }
    if (i == 0) row.call_err = diff / std::max(scale, 1e-300);
  }
  double diff = 0, scale = 0;
  for (std::size_t j = 0; j < n; ++j) {
    diff = std::max(diff, std::abs(dct_sum[j] - mpi_sum[j]));
    scale = std::max(scale, std::abs(mpi_sum[j]));
  }
  row.cum_err = diff / std::max(scale, 1e-300);
  // Errors are the worst over ranks (all ranks hold the same sums, up to dct's own bits).
  MPI_Allreduce(MPI_IN_PLACE, &row.call_err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &row.cum_err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

  long long mine[2] = {status.dense_bytes, status.bytes_sent}, all[2] = {0, 0};
  MPI_Allreduce(mine, all, 2, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  row.bytes_ratio = all[1] > 0 ? double(all[0]) / double(all[1]) : 0.0;
  MPI_Allreduce(&status.density, &row.density, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  row.density /= ranks;
  row.algorithm = status.algorithm;
  return row;
}

}  // namespace

#if DCT_HAVE_HDF5
int bench_checkpoint(int argc, char **argv);  // checkpoint_bench.cpp
#endif

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1, exit_code = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (argc > 1 && std::strcmp(argv[1], "checkpoint") == 0) {
    try {
#if DCT_HAVE_HDF5
      exit_code = bench_checkpoint(argc, argv);
#else
      throw std::runtime_error("this dct was built without HDF5 checkpoints");
#endif
    } catch (const std::exception &e) {
      if (rank == 0) std::fprintf(stderr, "dct-bench checkpoint: %s\n", e.what());
      exit_code = 1;
    }
    MPI_Finalize();
    return exit_code;
  }
  try {
    const Options o = parse(argc, argv);
    int major, minor, patch;
    DCT_Get_version(&major, &minor, &patch);
    if (rank == 0 && !o.json) {
      std::printf(
          "# dct-bench allreduce: dct %d.%d.%d, %d ranks, %s, density %s, algorithm %s, "
          "interval %s, %d iterations (+%d warm-up)\n",
          major, minor, patch, ranks, o.type.c_str(), o.density.c_str(), o.algorithm.c_str(),
          o.interval.c_str(), o.iters, o.warmup);
      std::printf(
          "# time_ratio = MPI us / dct us (>1: dct faster); bytes_ratio = ring "
          "MPI_Allreduce bytes / dct bytes sent, per rank\n");
      std::printf("%12s %12s %12s %10s %11s %9s %10s %10s %10s\n", "size(B)", "mpi_us", "dct_us",
                  "time_ratio", "bytes_ratio", "density", "algorithm", "call_err", "cum_err");
    }
    if (rank == 0 && o.json) std::printf("[\n");
    for (std::size_t s = 0; s < o.sizes.size(); ++s) {
      const Row r =
          o.type == "float" ? measure<float>(o, o.sizes[s]) : measure<double>(o, o.sizes[s]);
      // Density 1 promises MPI_Allreduce's exact result: check it on every run.
      if (std::atof(o.density.c_str()) >= 1.0 && r.cum_err != 0.0) exit_code = 2;
      if (rank != 0) continue;
      if (o.json) {
        std::printf(
            "  {\"size_bytes\": %lld, \"ranks\": %d, \"type\": \"%s\", \"mpi_us\": %.3f, "
            "\"dct_us\": %.3f, \"time_ratio\": %.4f, \"bytes_ratio\": %.4f, "
            "\"density\": %.6f, \"target_density\": %s, \"algorithm\": \"%s\", "
            "\"call_err\": %.4e, \"cum_err\": %.4e}%s\n",
            r.bytes, ranks, o.type.c_str(), r.mpi_us, r.dct_us, r.mpi_us / r.dct_us, r.bytes_ratio,
            r.density, o.density.c_str(), DCT_Algorithm_name(r.algorithm), r.call_err, r.cum_err,
            s + 1 < o.sizes.size() ? "," : "");
      } else {
        std::printf("%12lld %12.1f %12.1f %10.3f %11.2f %9.5f %10s %10.2e %10.2e\n", r.bytes,
                    r.mpi_us, r.dct_us, r.mpi_us / r.dct_us, r.bytes_ratio, r.density,
                    DCT_Algorithm_name(r.algorithm), r.call_err, r.cum_err);
      }
      std::fflush(stdout);
    }
    if (rank == 0 && o.json) std::printf("]\n");
    if (rank == 0 && exit_code != 0)
      std::fprintf(stderr, "dct-bench: density 1 did not reproduce MPI_Allreduce exactly\n");
  } catch (const std::exception &e) {
    if (rank == 0) std::fprintf(stderr, "dct-bench: %s\n", e.what());
    exit_code = 1;
  }
  MPI_Finalize();
  return exit_code;
}
