// dct-bench: measures dct against MPI in the same run.
//
//   mpiexec -n 4 dct-bench checkpoint [--mib 256] [--iters 3] [--dir .]   (checkpoint_bench.cpp)
//   mpiexec -n 4 dct-bench allreduce [--sizes 1M,4M,16M,64M] [--density 0.01[,0.1,...]]
//       [--algorithm auto[,allgather,split,recursive_doubling,dense,...]] [--interval 1000]
//       [--type float|double] [--result-density 1] [--iters 20] [--warmup 3] [--json]
//   mpiexec -n 4 dct-bench alltoallv [--rows 512,2048,8192] [--d 64,256,1024] [--keep ...]
//       [--values fp16,...] [--select exact|laplace|threshold]   (alltoallv_bench.cpp: DCT-MP)
//   mpiexec -n 2 dct-bench calibrate [--reps 1000] [--mib 64] [--beta-reps 10]
//   dct-bench kernels [--sizes 1M-1G] [--density 0.01] [--sample 65536] ... (kernels_bench.cpp)
//   dct-bench model [--ranks 2,4,...] [--sizes 256K,4M,100M] [--density 0.001,...]
//       [--type float|double]
//
// allreduce: one row per size x density x algorithm (in that nesting order). --sizes takes a
// comma list of sizes in bytes (suffix K, M or G: powers of 1024) and of ranges A-B, which
// stand for the powers of 4 from A up to B: `--sizes 4K-256M` is 4K,16K,...,64M,256M.
// OSU-style: a barrier, then one call alone is timed; the mean over `iters` calls (after
// `warmup` calls), then the mean over ranks. MPI_Allreduce is timed once per size, on the same
// gradients, and that figure is reused by every density and algorithm of the size. dct is a
// persistent request (DCT_Start + DCT_Wait) created for each row. Columns:
//   mpi_us, dct_us  time per call of MPI_Allreduce and of dct
//   time_ratio      mpi_us / dct_us (>1: dct faster)
//   rx_max, rx_mean max and mean over ranks of DCT_Status.bytes_received of the last timed
//                   call (logical payload bytes; per-rank volumes differ between algorithms)
//   bytes_ratio     DCT_Status.dense_bytes (a ring MPI_Allreduce's bytes per rank) / rx_max
//   density         achieved density of the last timed call, mean over ranks
//   worst_dev       worst relative deviation of the achieved density (DCT_Status.density)
//                   from the target, over the timed calls and the ranks: the signed
//                   (density - target) / target of largest magnitude, e.g. +46% or -12%
//   algorithm       requested, and used (DCT_Status.algorithm of the last timed call: with
//                   auto it may change from call to call)
//   call_err        max |dct - mpi| / max |mpi| of one call (large by design: most entries wait)
//   cum_err         the same over the sums of `iters` calls (what error feedback makes small)
// The errors come from a second, fresh request (untimed), against MPI_Allreduce of the same
// inputs; the sums are kept in the tensor's type. An algorithm that this build refuses
// (DCT_ERR_INFO for dct_algorithm alone) gives a row "n/a (not supported by this build)".
// With density 1 a row must reproduce MPI_Allreduce exactly: otherwise the exit code is 2.
//
// Inputs: per rank, calls cycle through 4 gradients g = s + noise, with a fixed s and noise
// both N(0,1). Up to 64 MiB tensors the 4 gradients are stored (256 MiB per rank at most).
// Above, to fit 256 MiB tensors at 8 ranks on a 24 GiB machine, one N(0,1) vector v is
// stored and gradient c is v[j] + v[(j + (c+1)n/5) mod n]: the signal v[j], plus noise taken
// from other positions. The bench then holds 5 tensors per rank (v, send, recv, and the two
// sums of the errors, kept in the tensor's type) plus dct's residual and buffers: measured
// 2.17 GiB per rank at 256 MiB float, 8 ranks, density 0.1, allgather (17.4 GiB in all).
//
// calibrate: the two parameters of an alpha-beta model (time = alpha + bytes / beta) of the
// network between the ranks of this job, for dct's `auto` cost model:
//   alpha  latency in microseconds: half the round trip of an 8-byte ping-pong, the median of
//          `reps` (after 100 warm-up), between rank 0 and rank P-1, and the mean, min and max
//          over the pairs 0<->r, r = 1..P-1 (measured one pair at a time)
//   beta   bandwidth in GB/s (1e9 bytes/s): `mib` MiB ping-pong between rank 0 and rank P-1,
//          bytes / (best one-way time of `beta-reps` round trips - alpha)
// and prints, ready to paste, `export DCT_ALPHA_US=<a> DCT_BETA_GBPS=<b>` with the 0<->P-1
// figures: with ranks placed on nodes in blocks (mpiexec's default) that pair spans the most
// hardware, e.g. two nodes, which is what a collective's slowest steps cross.
// model: what `auto` would choose, from the library's own cost model (src/cost_model.cpp,
// compiled in) with the alpha and beta of the DCT_ALPHA_US / DCT_BETA_GBPS environment (read
// through the library's own knob table), for P ranks x tensor sizes x densities, assuming
// every rank keeps density * n entries placed independently. Each cell is the algorithm and
// its predicted speedup over dense. Runs on one process; no communication.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.hpp"
#include "cost_model.hpp"
#include "dct/dct.hpp"

namespace {

constexpr long long kMiB = 1LL << 20;

struct Options {
  std::vector<long long> sizes = {1 * kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB};
  std::vector<std::string> densities = {"0.01"};
  std::vector<std::string> algorithms = {"auto"};
  std::string interval = "1000";
  std::string type = "float";
  int iters = 20;
  int warmup = 3;
  bool json = false;
};

std::vector<std::string> split(const std::string &list, const std::string &option) {
  std::vector<std::string> items;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    items.push_back(list.substr(start, comma - start));
    if (items.back().empty()) throw std::invalid_argument(option + ": empty item in " + list);
    start = comma + 1;
  }
  return items;
}

std::string join(const std::vector<std::string> &items) {
  std::string text;
  for (const std::string &item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

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

// "A" is one size; "A-B" the powers of 4 from A up to B (A, 4A, 16A, ... <= B).
void add_sizes(std::vector<long long> &sizes, const std::string &item) {
  const std::size_t dash = item.find('-');
  if (dash == std::string::npos) {
    sizes.push_back(parse_size(item));
    return;
  }
  const long long first = parse_size(item.substr(0, dash));
  const long long last = parse_size(item.substr(dash + 1));
  if (last < first) throw std::invalid_argument("bad size range: " + item);
  for (long long size = first; size <= last; size *= 4) sizes.push_back(size);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--sizes") {
      o.sizes.clear();
      for (const std::string &item : split(value(), arg)) add_sizes(o.sizes, item);
    } else if (arg == "--density")
      o.densities = split(value(), arg);
    else if (arg == "--algorithm")
      o.algorithms = split(value(), arg);
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
  bool supported = true;
  double mpi_us = 0, dct_us = 0, bytes_ratio = 0, rx_mean = 0, density = 0;
  double worst_dev = 0;  // signed (density - target) / target of largest magnitude
  double call_err = 0, cum_err = 0;
  long long rx_max = 0;
  int algorithm = DCT_ALGORITHM_AUTO;
};

// Calls cycle through kCycle gradients g = signal + noise (both N(0,1), signal fixed per rank),
// as SGD steps do; one static gradient would pile up in the residual and cross any fixed tau,
// and pure noise has no signal for error feedback to deliver.
constexpr std::size_t kCycle = 4;
// Up to this many bytes per rank the kCycle gradients are stored. Above, one N(0,1) vector v
// is: gradient c is g[j] = v[j] + v[(j + (c+1) n/5) mod n], i.e. signal v[j] at every j and,
// as noise, entries of v at other positions (independent of v[j] and of each other's calls).
constexpr long long kPoolBytes = 256 * kMiB;

template <typename T>
class Gradients {
 public:
  Gradients(std::size_t n, int rank) : n_(n) {
    std::mt19937_64 engine(1234567u + 7919u * static_cast<unsigned>(rank));
    std::normal_distribution<double> normal(0.0, 1.0);
    if (static_cast<long long>(n * sizeof(T) * kCycle) <= kPoolBytes) {
      std::vector<double> signal(n);
      for (double &x : signal) x = normal(engine);
      pool_.assign(kCycle, std::vector<T>(n));
      for (auto &gradient : pool_)
        for (std::size_t j = 0; j < n; ++j)
          gradient[j] = static_cast<T>(signal[j] + normal(engine));
    } else {
      values_.resize(n);
      for (T &x : values_) x = static_cast<T>(normal(engine));
    }
  }

  // Gradient number `call` into out[0, n).
  void load(int call, T *out) const {
    const std::size_t c = static_cast<std::size_t>(call) % kCycle;
    if (!pool_.empty()) {
      std::copy(pool_[c].begin(), pool_[c].end(), out);
      return;
    }
    const std::size_t shift = (c + 1) * (n_ / (kCycle + 1)), head = n_ - shift;
    for (std::size_t j = 0; j < head; ++j) out[j] = values_[j] + values_[j + shift];
    for (std::size_t j = head; j < n_; ++j) out[j] = values_[j] + values_[j - head];
  }

 private:
  std::size_t n_;
  std::vector<std::vector<T>> pool_;
  std::vector<T> values_;
};

class Info {
 public:
  Info() { MPI_Info_create(&info_); }
  ~Info() { MPI_Info_free(&info_); }
  Info(const Info &) = delete;
  Info &operator=(const Info &) = delete;
  void set(const char *key, const std::string &value) { MPI_Info_set(info_, key, value.c_str()); }
  MPI_Info get() const { return info_; }

 private:
  MPI_Info info_;
};

// One tensor size: its gradients, buffers and MPI_Allreduce baseline, shared by the rows.
template <typename T>
class SizeBench {
 public:
  SizeBench(const Options &o, long long bytes)
      : o_(o),
        n_(elements(bytes)),
        rank_(world_rank()),
        ranks_(world_size()),
        gradients_(n_, rank_),
        send_(n_),
        recv_(n_) {
    mpi_us_ = time_calls([&] { mpi_allreduce(); }, [] {});
    // The reference for cum_err: the sum of MPI_Allreduce over the calls the error pass makes.
    mpi_sum_.assign(n_, T(0));
    for (int i = 0; i < o_.iters; ++i) {
      gradients_.load(i, send_.data());
      mpi_allreduce();
      for (std::size_t j = 0; j < n_; ++j) mpi_sum_[j] += recv_[j];
    }
    dct_sum_.resize(n_);
  }

  Row run(const std::string &density, const std::string &algorithm) {
    Row row;
    row.mpi_us = mpi_us_;
    DCT_Status status{};
    // Per timed call, outside the timing: the extremes of (density - target) / target.
    const double target = std::atof(density.c_str());
    double deviation[2] = {-HUGE_VAL, -HUGE_VAL};  // max, -min
    {
      std::optional<dct::AllreduceRequest> request = open_request(density, algorithm);
      if (!request) {
        row.supported = false;
        return row;
      }
      row.dct_us = time_calls([&] { status = (*request)(); },
                              [&] {
                                const double dev = (status.density - target) / target;
                                deviation[0] = std::max(deviation[0], dev);
                                deviation[1] = std::max(deviation[1], -dev);
                              });
    }
    MPI_Allreduce(MPI_IN_PLACE, deviation, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    row.worst_dev = deviation[0] >= deviation[1] ? deviation[0] : -deviation[1];

    // Errors of a fresh request against MPI_Allreduce of the same inputs, untimed.
    std::optional<dct::AllreduceRequest> request = open_request(density, algorithm);
    for (int i = 0; i < o_.iters; ++i) {
      gradients_.load(i, send_.data());
      (*request)();
      if (i > 0) {
        for (std::size_t j = 0; j < n_; ++j) dct_sum_[j] += recv_[j];
        continue;
      }
      std::copy(recv_.begin(), recv_.end(), dct_sum_.begin());
      mpi_allreduce();
      row.call_err = relative_error(dct_sum_, recv_);
    }
    row.cum_err = relative_error(dct_sum_, mpi_sum_);
    // Errors are the worst over ranks (all ranks hold the same sums, up to dct's own bits).
    MPI_Allreduce(MPI_IN_PLACE, &row.call_err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &row.cum_err, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    const long long received = status.bytes_received;
    long long received_sum = 0;
    MPI_Allreduce(&received, &row.rx_max, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&received, &received_sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    row.rx_mean = double(received_sum) / ranks_;
    row.bytes_ratio = row.rx_max > 0 ? double(status.dense_bytes) / double(row.rx_max) : 0.0;
    MPI_Allreduce(&status.density, &row.density, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    row.density /= ranks_;
    row.algorithm = status.algorithm;
    return row;
  }

 private:
  static std::size_t elements(long long bytes) {
    if (bytes / static_cast<long long>(sizeof(T)) > INT_MAX)
      throw std::invalid_argument("size too large for MPI_Allreduce's int count");
    return static_cast<std::size_t>(bytes) / sizeof(T);
  }
  static int world_rank() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
  }
  static int world_size() {
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    return ranks;
  }

  void mpi_allreduce() {
    MPI_Allreduce(send_.data(), recv_.data(), static_cast<int>(n_), dct::mpi_datatype<T>(), MPI_SUM,
                  MPI_COMM_WORLD);
  }

  // OSU's method: a barrier, then the call alone is timed; mean over calls, then over ranks.
  // `after` runs after each timed (not warm-up) call, outside the timing.
  template <typename Call, typename After>
  double time_calls(Call &&call, After &&after) {
    double total = 0;
    for (int i = 0; i < o_.warmup + o_.iters; ++i) {
      gradients_.load(i, send_.data());
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      call();
      if (i < o_.warmup) continue;
      total += MPI_Wtime() - start;
      after();
    }
    const double mine = total / o_.iters * 1e6;
    double sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / ranks_;
  }

  // max |a - b| / max |b| on this rank.
  static double relative_error(const std::vector<T> &a, const std::vector<T> &b) {
    double diff = 0, scale = 0;
    for (std::size_t j = 0; j < a.size(); ++j) {
      diff = std::max(diff, std::abs(double(a[j]) - double(b[j])));
      scale = std::max(scale, std::abs(double(b[j])));
    }
    return diff / std::max(scale, 1e-300);
  }

  dct::AllreduceRequest make_request(const std::string &density, const std::string &algorithm,
                                     std::size_t count) {
    Info info;
    info.set("dct_density", density);
    info.set("dct_algorithm", algorithm);
    info.set("dct_interval", o_.interval);
    return dct::AllreduceRequest(send_.data(), recv_.data(), count, MPI_COMM_WORLD, info.get());
  }

  // The request, or nullopt when this build does not know `algorithm`. Every rank takes the
  // same branch: the configuration is parsed locally from the same keys.
  std::optional<dct::AllreduceRequest> open_request(const std::string &density,
                                                    const std::string &algorithm) {
    try {
      return make_request(density, algorithm, n_);
    } catch (const dct::Error &e) {
      if (e.code() != DCT_ERR_INFO || algorithm == "auto") throw;
      // Refused: if the same keys with algorithm auto pass, the algorithm alone was the cause;
      // otherwise this throws the error of the other key. Count 0: no residual is allocated.
      make_request(density, "auto", 0);
      return std::nullopt;
    }
  }

  const Options &o_;
  std::size_t n_;
  int rank_, ranks_;
  Gradients<T> gradients_;
  std::vector<T> send_, recv_, mpi_sum_, dct_sum_;
  double mpi_us_ = 0;
};

template <typename T>
int bench_sizes(const Options &o, int rank, int ranks) {
  int exit_code = 0;
  bool first = true;
  for (long long bytes : o.sizes) {
    SizeBench<T> bench(o, bytes);
    for (const std::string &density : o.densities) {
      for (const std::string &algorithm : o.algorithms) {
        const Row r = bench.run(density, algorithm);
        // Density 1 promises MPI_Allreduce's exact result: check it on every run.
        if (r.supported && std::atof(density.c_str()) >= 1.0 && r.cum_err != 0.0) exit_code = 2;
        if (rank != 0) continue;
        const double target = std::atof(density.c_str());
        if (o.json) {
          std::printf(
              "%s  {\"size_bytes\": %lld, \"ranks\": %d, \"type\": \"%s\", "
              "\"target_density\": %g, \"algorithm_requested\": \"%s\", \"supported\": %s, "
              "\"mpi_us\": %.3f",
              first ? "" : ",\n", bytes, ranks, o.type.c_str(), target, algorithm.c_str(),
              r.supported ? "true" : "false", r.mpi_us);
          if (r.supported)
            std::printf(
                ", \"dct_us\": %.3f, \"time_ratio\": %.4f, \"bytes_ratio\": %.4f, "
                "\"rx_max_bytes\": %lld, \"rx_mean_bytes\": %.1f, \"density\": %.6f, "
                "\"worst_density_dev\": %.4f, \"algorithm\": \"%s\", \"call_err\": %.4e, "
                "\"cum_err\": %.4e}",
                r.dct_us, r.mpi_us / r.dct_us, r.bytes_ratio, r.rx_max, r.rx_mean, r.density,
                r.worst_dev, DCT_Algorithm_name(r.algorithm), r.call_err, r.cum_err);
          else
            std::printf(
                ", \"dct_us\": null, \"time_ratio\": null, \"bytes_ratio\": null, "
                "\"rx_max_bytes\": null, \"rx_mean_bytes\": null, \"density\": null, "
                "\"worst_density_dev\": null, \"algorithm\": null, \"call_err\": null, "
                "\"cum_err\": null}");
        } else if (r.supported) {
          std::printf(
              "%12lld %8s %-18s %-18s %12.1f %12.1f %10.3f %11.2f %12lld %12.1f %9.5f %+9.0f%% "
              "%10.2e %10.2e\n",
              bytes, density.c_str(), algorithm.c_str(), DCT_Algorithm_name(r.algorithm), r.mpi_us,
              r.dct_us, r.mpi_us / r.dct_us, r.bytes_ratio, r.rx_max, r.rx_mean, r.density,
              100 * r.worst_dev, r.call_err, r.cum_err);
        } else {
          std::printf("%12lld %8s %-18s n/a (not supported by this build)\n", bytes,
                      density.c_str(), algorithm.c_str());
        }
        first = false;
        std::fflush(stdout);
      }
    }
  }
  return exit_code;
}

int bench_allreduce(int argc, char **argv, int rank, int ranks) {
  const Options o = parse(argc, argv);
  int major, minor, patch;
  DCT_Get_version(&major, &minor, &patch);
  if (rank == 0 && !o.json) {
    std::printf(
        "# dct-bench allreduce: dct %d.%d.%d, %d ranks, %s, interval %s, %d iterations (+%d "
        "warm-up), densities %s, algorithms %s\n",
        major, minor, patch, ranks, o.type.c_str(), o.interval.c_str(), o.iters, o.warmup,
        join(o.densities).c_str(), join(o.algorithms).c_str());
    std::printf(
        "# time_ratio = mpi_us / dct_us (>1: dct faster); rx = bytes dct received per rank "
        "(max, mean over ranks);\n# bytes_ratio = ring MPI_Allreduce bytes per rank / rx_max; "
        "used = algorithm of the last timed call;\n# worst_dev = worst (density - target) / "
        "target of one timed call on any rank\n");
    std::printf("%12s %8s %-18s %-18s %12s %12s %10s %11s %12s %12s %9s %10s %10s %10s\n",
                "size(B)", "target", "algorithm", "used", "mpi_us", "dct_us", "time_ratio",
                "bytes_ratio", "rx_max(B)", "rx_mean(B)", "density", "worst_dev", "call_err",
                "cum_err");
  }
  if (rank == 0 && o.json) std::printf("[\n");
  const int exit_code =
      o.type == "float" ? bench_sizes<float>(o, rank, ranks) : bench_sizes<double>(o, rank, ranks);
  if (rank == 0 && o.json) std::printf("\n]\n");
  if (rank == 0 && exit_code != 0)
    std::fprintf(stderr, "dct-bench: density 1 did not reproduce MPI_Allreduce exactly\n");
  return exit_code;
}

// ---- calibrate ------------------------------------------------------------------------------

struct CalibrateOptions {
  int reps = 1000;
  int warmup = 100;
  long long beta_bytes = 64 * kMiB;
  int beta_reps = 10;
};

CalibrateOptions parse_calibrate(int argc, char **argv) {
  CalibrateOptions o;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> int {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return std::max(1, std::atoi(argv[++i]));
    };
    if (arg == "--reps")
      o.reps = value();
    else if (arg == "--mib")
      o.beta_bytes = std::min(value(), 1024) * kMiB;
    else if (arg == "--beta-reps")
      o.beta_reps = value();
    else
      throw std::invalid_argument("unknown option " + arg);
  }
  return o;
}

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

int calibrate(int argc, char **argv, int rank, int ranks) {
  const CalibrateOptions o = parse_calibrate(argc, argv);
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
  std::vector<char> large(rank == 0 || rank == last ? static_cast<std::size_t>(o.beta_bytes) : 0,
                          1);
  const std::vector<double> times =
      ping_pong(rank, last, large, static_cast<int>(o.beta_bytes), 1, o.beta_reps);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) return 0;

  const double alpha = alpha_us.back();
  double mean = 0;
  for (double a : alpha_us) mean += a;
  mean /= double(alpha_us.size());
  const auto [lowest, highest] = std::minmax_element(alpha_us.begin(), alpha_us.end());
  const double one_way_us = *std::min_element(times.begin(), times.end()) / 2 * 1e6;
  const double transfer_us = one_way_us > alpha ? one_way_us - alpha : one_way_us;
  const double beta = double(o.beta_bytes) / transfer_us * 1e-3;  // bytes/us -> GB/s
  std::printf(
      "# dct-bench calibrate: %d ranks; alpha = median of %d 8-byte round trips / 2; beta = %lld "
      "MiB / (best one-way time of %d round trips - alpha)\n",
      ranks, o.reps, o.beta_bytes / kMiB, o.beta_reps);
  std::printf("alpha_us   0<->%d: %.3f   mean over 0<->r, r=1..%d: %.3f   min %.3f   max %.3f\n",
              last, alpha, last, mean, *lowest, *highest);
  std::printf("beta_GBps  0<->%d: %.3f   (one-way %.1f us for %lld MiB)\n", last, beta, one_way_us,
              o.beta_bytes / kMiB);
  std::printf("export DCT_ALPHA_US=%.3f DCT_BETA_GBPS=%.3f\n", alpha, beta);
  return 0;
}

}  // namespace

#if DCT_HAVE_HDF5
int bench_checkpoint(int argc, char **argv);  // checkpoint_bench.cpp
#endif
int bench_alltoallv(int argc, char **argv);  // alltoallv_bench.cpp
namespace dct::bench {
int bench_kernels(  // kernels_bench.cpp
    int argc, char **argv,
    const std::function<void(std::vector<long long> &, const std::string &)> &add_sizes);
}

// ---- model ----------------------------------------------------------------------------------

int model(int argc, char **argv) {
  std::vector<int> ranks = {2, 4, 8, 16, 64, 256, 1024};
  std::vector<long long> sizes = {256 << 10, 4 * kMiB, 100 * kMiB};
  std::vector<std::string> densities = {"0.001", "0.01", "0.05", "0.1", "0.3"};
  int value_bytes = 4;
  double result_density = 1.0;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
    const std::string value = argv[++i];
    if (arg == "--ranks") {
      ranks.clear();
      for (const std::string &item : split(value, arg)) ranks.push_back(std::stoi(item));
    } else if (arg == "--sizes") {
      sizes.clear();
      for (const std::string &item : split(value, arg)) add_sizes(sizes, item);
    } else if (arg == "--density") {
      densities = split(value, arg);
    } else if (arg == "--type") {
      if (value != "float" && value != "double") throw std::invalid_argument("bad --type");
      value_bytes = value == "float" ? 4 : 8;
    } else if (arg == "--result-density") {
      result_density = std::stod(value);
    } else {
      throw std::invalid_argument("unknown option " + arg);
    }
  }
  const dct::detail::NetworkModel network = dct::detail::Config::from(MPI_INFO_NULL).network;
  std::printf(
      "# dct-bench model: alpha %.3g us, beta %.3g GB/s (DCT_ALPHA_US, DCT_BETA_GBPS); "
      "cell = algorithm auto picks (predicted speedup over dense)\n",
      network.alpha_us, network.beta_gbps);
  for (long long bytes : sizes) {
    std::printf("\ntensor %lld bytes, %s\n%8s", bytes, value_bytes == 4 ? "float" : "double",
                "P \\ d");
    for (const std::string &d : densities) std::printf(" %24s", d.c_str());
    std::printf("\n");
    for (int p : ranks) {
      std::printf("%8d", p);
      for (const std::string &d : densities) {
        dct::detail::ExchangeSize size;
        size.ranks = p;
        size.count = double(bytes / value_bytes);
        size.value_bytes = value_bytes;
        size.total_kept = std::ceil(std::stod(d) * size.count) * p;
        // As the library does: a bounded result means split.
        size.result_budget = result_density < 1 ? result_density * size.count : 0;
        const DCT_Algorithm best = result_density < 1
                                       ? DCT_ALGORITHM_SPLIT
                                       : dct::detail::cheapest_algorithm(size, network);
        const double dense = dct::detail::predicted_seconds(DCT_ALGORITHM_DENSE, size, network);
        const double chosen = dct::detail::predicted_seconds(best, size, network);
        char cell[64];
        std::snprintf(cell, sizeof(cell), "%s (%.1fx)", DCT_Algorithm_name(best),
                      chosen > 0 ? dense / chosen : 1.0);
        std::printf(" %24s", cell);
      }
      std::printf("\n");
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1, exit_code = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "checkpoint") {
#if DCT_HAVE_HDF5
      exit_code = bench_checkpoint(argc, argv);
#else
      throw std::runtime_error("this dct was built without HDF5 checkpoints");
#endif
    } else if (mode == "alltoallv") {
      exit_code = bench_alltoallv(argc, argv);
    } else if (mode == "allreduce") {
      exit_code = bench_allreduce(argc, argv, rank, ranks);
    } else if (mode == "calibrate") {
      exit_code = calibrate(argc, argv, rank, ranks);
    } else if (mode == "model") {
      if (rank == 0) exit_code = model(argc, argv);
    } else if (mode == "kernels") {
      auto add_list = [](std::vector<long long> &sizes, const std::string &list) {
        for (const std::string &item : split(list, "--sizes")) add_sizes(sizes, item);
      };
      if (rank == 0) exit_code = dct::bench::bench_kernels(argc, argv, add_list);
    } else {
      throw std::invalid_argument(
          "usage: dct-bench allreduce|alltoallv|calibrate|model|kernels|checkpoint [options]");
    }
  } catch (const std::exception &e) {
    if (rank == 0) std::fprintf(stderr, "dct-bench %s: %s\n", mode.c_str(), e.what());
    exit_code = 1;
  }
  MPI_Finalize();
  return exit_code;
}
