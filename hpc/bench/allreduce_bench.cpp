// Over 450 lines: every allreduce baseline is timed beside dct in this one program.
// dct-bench allreduce: dct's compressed allreduce against MPI_Allreduce, in the same run.
//
//   mpiexec -n 4 dct-bench allreduce [--sizes 1M,4M,16M,64M] [--density 0.01[,0.1,...]]
//       [--algorithm auto[,allgather,split,hierarchical,recursive_doubling,dense,...]]
//       [--interval 1000] [--input cycle|fresh|slow]
//       [--type float|double] [--iters 20] [--warmup 3] [--stat mean|median] [--json]
//
// One row per size x density x algorithm (in that nesting order). --sizes takes a comma list of
// sizes in bytes (suffix K, M or G: powers of 1024) and of ranges A-B, which stand for the
// powers of 4 from A up to B: `--sizes 4K-256M` is 4K,16K,...,64M,256M.
// OSU-style: a barrier, then one call alone is timed; the mean over `iters` calls (after
// `warmup` calls), then the mean over ranks. MPI_Allreduce is timed once per size, on the same
// gradients, and that figure is reused by every density and algorithm of the size. dct is a
// persistent request (DCT_Start + DCT_Wait) created for each row. `--stat median` is for the
// per-call overhead of small tensors (microseconds, on a machine other jobs share): each row
// times MPI_Allreduce again, alternating with dct call for call so that both see the same
// load, and takes each rank's median instead of its mean (then the mean over ranks). Columns:
//   mpi_us, dct_us  time per call of MPI_Allreduce and of dct
//   overhead_us     dct_us - mpi_us (the columns after it are newer: scripts that read the
//                   others by position still work)
//   time_ratio      mpi_us / dct_us (>1: dct faster)
//   triad_us        a STREAM triad (recv = send + 3 aux) over arrays of the tensor's length,
//                   timed like MPI_Allreduce on every rank at once: one pass over memory, what
//                   DCT-DP's call is designed to cost (read send and residual, write residual)
//   triad_x         dct_us / triad_us
//   first_x         the request's first call (cold: its buffers, the first exact selection)
//                   over dct_us, max over ranks
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
// Inputs (--input): per rank, gradients g = s + noise with a fixed signal s and noise both
// N(0,1). `fresh` (the default) never repeats a gradient: call c reads its noise from the
// vector v below at an offset drawn for the call. `cycle` cycles through 4 of them; up to 64 MiB
// tensors the 4 are stored (256 MiB per rank at most); above, to fit 256 MiB tensors at 8 ranks on
// a 24 GiB machine, one N(0,1) vector v is stored and gradient c is v[j] + v[(j + (c+1)n/5) mod n]:
// the signal v[j], plus noise taken from other positions. `slow` is s + 0.1 noise (fresh offsets
// too): the gradient changes slowly between calls, so the entries that error feedback holds back
// grow steadily and the threshold must follow them. The bench then holds 5 tensors per rank (v,
// send, recv, and the two sums of the errors, kept in the tensor's type) plus dct's residual and
// buffers: measured 2.17 GiB per rank at 256 MiB float, 8 ranks, density 0.1, allgather (17.4 GiB
// in all).
//
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.hpp"
#include "dct/dct.hpp"

namespace dct::bench {
namespace {

constexpr long long kMiB = 1LL << 20;

struct Options {
  std::vector<long long> sizes = {1 * kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB};
  std::vector<std::string> densities = {"0.01"};
  std::vector<std::string> algorithms = {"auto"};
  int interval = 1000;
  std::string input = "fresh";  // or "cycle", "slow" (Gradients)
  std::string type = "float";
  int iters = 20;
  int warmup = 3;
  std::string stat = "mean";  // or "median" (MPI_Allreduce timed again in each row, alternating)
  bool json = false;
  bool median() const { return stat == "median"; }
};

std::string join(const std::vector<std::string> &items) {
  std::string text;
  for (const std::string &item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

struct Row {
  bool supported = true;
  double mpi_us = 0, dct_us = 0, bytes_ratio = 0, rx_mean = 0, density = 0;
  double triad_us = 0, first_us = 0;  // first_us: max over ranks
  double worst_dev = 0;               // signed (density - target) / target of largest magnitude
  double call_err = 0, cum_err = 0;
  long long rx_max = 0;
  int algorithm = DCT_ALGORITHM_AUTO;
};

// `cycle` runs through kCycle gradients g = signal + noise (both N(0,1), signal fixed per
// rank), as SGD steps do; one static gradient would pile up in the residual and cross any fixed
// tau, and pure noise has no signal for error feedback to deliver.
constexpr std::size_t kCycle = 4;
// Up to this many bytes per rank the kCycle gradients are stored. Above, and for `fresh` and
// `slow`, one N(0,1) vector v is: gradient c is g[j] = v[j] + w v[(j + shift_c) mod n], i.e.
// signal v[j] at every j and, as noise, entries of v at other positions (independent of v[j]
// and of each other's calls): shift_c = (c+1) n/5 for `cycle`, drawn per call otherwise.
constexpr long long kPoolBytes = 256 * kMiB;

template <typename T>
class Gradients {
 public:
  Gradients(std::size_t n, int rank, const std::string &input) : n_(n), input_(input) {
    std::mt19937_64 engine(1234567u + 7919u * static_cast<unsigned>(rank));
    std::normal_distribution<double> normal(0.0, 1.0);
    if (input == "cycle" && static_cast<long long>(n * sizeof(T) * kCycle) <= kPoolBytes) {
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
    std::size_t shift = (c + 1) * (n_ / (kCycle + 1));
    if (input_ != "cycle" && n_ > 1) {  // splitmix64 of the call number: an offset in [1, n)
      std::uint64_t z = 0x9e3779b97f4a7c15ull * (static_cast<std::uint64_t>(call) + 1);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      shift = 1 + static_cast<std::size_t>((z ^ (z >> 31)) % (n_ - 1));
    }
    const T weight = input_ == "slow" ? T(0.1) : T(1);
    const std::size_t head = n_ - shift % n_;
    for (std::size_t j = 0; j < head; ++j) out[j] = values_[j] + weight * values_[j + n_ - head];
    for (std::size_t j = head; j < n_; ++j) out[j] = values_[j] + weight * values_[j - head];
  }

 private:
  std::size_t n_;
  std::string input_;
  std::vector<std::vector<T>> pool_;
  std::vector<T> values_;
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
        gradients_(n_, rank_, o.input),
        send_(n_),
        recv_(n_) {
    if (!o_.median()) mpi_us_ = time_calls({[&] { mpi_allreduce(); }}, [](std::size_t) {})[0];
    // The triad's third array: dct_sum_, which run() overwrites before it reads it.
    dct_sum_.assign(n_, T(1));
    triad_us_ = time_calls({[&] { triad(); }}, [](std::size_t) {})[0];
    // The reference for cum_err: the sum of MPI_Allreduce over the calls the error pass makes.
    mpi_sum_.assign(n_, T(0));
    for (int i = 0; i < o_.iters; ++i) {
      gradients_.load(i, send_.data());
      mpi_allreduce();
      for (std::size_t j = 0; j < n_; ++j) mpi_sum_[j] += recv_[j];
    }
  }

  Row run(const std::string &density, const std::string &algorithm) {
    Row row;
    row.mpi_us = mpi_us_;
    row.triad_us = triad_us_;
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
      std::vector<std::function<void()>> calls = {[&] { status = (*request)(); }};
      if (o_.median()) calls.push_back([&] { mpi_allreduce(); });
      double first = 0;
      const std::vector<double> us = time_calls(
          calls,
          [&](std::size_t which) {
            if (which != 0) return;
            const double dev = (status.density - target) / target;
            deviation[0] = std::max(deviation[0], dev);
            deviation[1] = std::max(deviation[1], -dev);
          },
          &first);
      MPI_Allreduce(&first, &row.first_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      row.dct_us = us[0];
      if (o_.median()) row.mpi_us = us[1];
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

  // STREAM's triad over arrays of the tensor's length (the compiler vectorises it).
  void triad() {
    const T scalar = T(3);
    T *a = recv_.data();
    const T *b = send_.data(), *c = dct_sum_.data();
    for (std::size_t j = 0; j < n_; ++j) a[j] = b[j] + scalar * c[j];
  }

  void mpi_allreduce() {
    MPI_Allreduce(send_.data(), recv_.data(), static_cast<int>(n_), dct::mpi_datatype<T>(), MPI_SUM,
                  MPI_COMM_WORLD);
  }

  // OSU's method: a barrier, then the call alone is timed; the mean (--stat median: the median)
  // over calls, then the mean over ranks. Several calls are timed alternately, one of each per
  // iteration; `after(i)` runs after each timed (not warm-up) call of calls[i], untimed.
  // `first_us`: the very first call of calls[0] (warm-up or not), in microseconds.
  template <typename After>
  std::vector<double> time_calls(const std::vector<std::function<void()>> &calls, After &&after,
                                 double *first_us = nullptr) {
    std::vector<std::vector<double>> seconds(calls.size());
    for (auto &each : seconds) each.reserve(static_cast<std::size_t>(o_.iters));
    for (int i = 0; i < o_.warmup + o_.iters; ++i) {
      gradients_.load(i, send_.data());
      for (std::size_t c = 0; c < calls.size(); ++c) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = MPI_Wtime();
        calls[c]();
        const double elapsed = MPI_Wtime() - start;
        if (i == 0 && c == 0 && first_us != nullptr) *first_us = elapsed * 1e6;
        if (i < o_.warmup) continue;
        seconds[c].push_back(elapsed);
        after(c);
      }
    }
    std::vector<double> us(calls.size());
    for (std::size_t c = 0; c < calls.size(); ++c) {
      std::vector<double> &s = seconds[c];
      double mine = 0;
      if (o_.median()) {
        std::sort(s.begin(), s.end());
        const std::size_t half = s.size() / 2;
        mine = s.size() % 2 ? s[half] : (s[half - 1] + s[half]) / 2;
      } else {
        for (double t : s) mine += t;
        mine /= double(s.size());
      }
      mine *= 1e6;
      MPI_Allreduce(&mine, &us[c], 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      us[c] /= ranks_;
    }
    return us;
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
    dct::Info info;
    info.set("dct_density", density);
    info.set("dct_algorithm", algorithm);
    info.set("dct_interval", std::to_string(o_.interval));
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
  double mpi_us_ = 0, triad_us_ = 0;
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
          // One object per row as it is measured, so that a long run can be followed.
          nlohmann::ordered_json row = {{"size_bytes", bytes},
                                        {"ranks", ranks},
                                        {"type", o.type},
                                        {"stat", o.stat},
                                        {"input", o.input},
                                        {"target_density", target},
                                        {"algorithm_requested", algorithm},
                                        {"supported", r.supported}};
          // --stat median times MPI_Allreduce in the row itself: none in a refused one
          row["mpi_us"] = r.supported || !o.median() ? nlohmann::ordered_json(r.mpi_us)
                                                     : nlohmann::ordered_json();
          row["triad_us"] = r.triad_us;
          const nlohmann::ordered_json measured = {{"dct_us", r.dct_us},
                                                   {"triad_x", r.dct_us / r.triad_us},
                                                   {"first_us", r.first_us},
                                                   {"first_x", r.first_us / r.dct_us},
                                                   {"overhead_us", r.dct_us - r.mpi_us},
                                                   {"time_ratio", r.mpi_us / r.dct_us},
                                                   {"bytes_ratio", r.bytes_ratio},
                                                   {"rx_max_bytes", r.rx_max},
                                                   {"rx_mean_bytes", r.rx_mean},
                                                   {"density", r.density},
                                                   {"worst_density_dev", r.worst_dev},
                                                   {"algorithm", DCT_Algorithm_name(r.algorithm)},
                                                   {"call_err", r.call_err},
                                                   {"cum_err", r.cum_err}};
          // null where this build refused the algorithm
          for (const auto &field : measured.items())
            row[field.key()] = r.supported ? field.value() : nlohmann::ordered_json();
          std::printf("%s  %s", first ? "" : ",\n", row.dump().c_str());
        } else if (r.supported) {
          std::printf(
              "%12lld %8s %-18s %-18s %12.1f %12.1f %10.3f %11.2f %12lld %12.1f %9.5f %+9.0f%% "
              "%10.2e %10.2e %11.2f %12.1f %8.2f %8.2f\n",
              bytes, density.c_str(), algorithm.c_str(), DCT_Algorithm_name(r.algorithm), r.mpi_us,
              r.dct_us, r.mpi_us / r.dct_us, r.bytes_ratio, r.rx_max, r.rx_mean, r.density,
              100 * r.worst_dev, r.call_err, r.cum_err, r.dct_us - r.mpi_us, r.triad_us,
              r.dct_us / r.triad_us, r.first_us / r.dct_us);
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

int run(const Options &o) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int major, minor, patch;
  DCT_Get_version(&major, &minor, &patch);
  if (rank == 0 && !o.json) {
    std::printf(
        "# dct-bench allreduce: dct %d.%d.%d, %d ranks, %s, interval %d, %d iterations (+%d "
        "warm-up, %s per call), densities %s, algorithms %s, input %s\n",
        major, minor, patch, ranks, o.type.c_str(), o.interval, o.iters, o.warmup, o.stat.c_str(),
        join(o.densities).c_str(), join(o.algorithms).c_str(), o.input.c_str());
    std::printf(
        "# time_ratio = mpi_us / dct_us (>1: dct faster); rx = bytes dct received per rank "
        "(max, mean over ranks);\n# bytes_ratio = ring MPI_Allreduce bytes per rank / rx_max; "
        "used = algorithm of the last timed call;\n# worst_dev = worst (density - target) / "
        "target of one timed call on any rank;\n# triad_x = dct_us / triad_us (a STREAM triad "
        "over arrays of the tensor's length); first_x = first call / dct_us\n");
    std::printf(
        "%12s %8s %-18s %-18s %12s %12s %10s %11s %12s %12s %9s %10s %10s %10s %11s %12s %8s "
        "%8s\n",
        "size(B)", "target", "algorithm", "used", "mpi_us", "dct_us", "time_ratio", "bytes_ratio",
        "rx_max(B)", "rx_mean(B)", "density", "worst_dev", "call_err", "cum_err", "overhead_us",
        "triad_us", "triad_x", "first_x");
  }
  if (rank == 0 && o.json) std::printf("[\n");
  const int exit_code =
      o.type == "float" ? bench_sizes<float>(o, rank, ranks) : bench_sizes<double>(o, rank, ranks);
  if (rank == 0 && o.json) std::printf("\n]\n");
  if (rank == 0 && exit_code != 0)
    std::fprintf(stderr, "dct-bench: density 1 did not reproduce MPI_Allreduce exactly\n");
  return exit_code;
}

}  // namespace

Run add_allreduce(CLI::App &app) {
  auto o = std::make_shared<Options>();
  CLI::App *command =
      app.add_subcommand("allreduce", "dct's allreduce against MPI_Allreduce (time, bytes, error)");
  add_sizes_option(*command, o->sizes, "tensor sizes")->default_str("1M,4M,16M,64M");
  command->add_option("--density", o->densities, "dct_density targets, a comma list")
      ->delimiter(',')
      ->check(kUnitInterval)
      ->capture_default_str();
  command
      ->add_option("--algorithm", o->algorithms,
                   "dct_algorithm values, a comma list (one this build refuses gives an n/a row)")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--interval", o->interval, "dct_interval")
      ->check(CLI::Range(1, INT_MAX))
      ->capture_default_str();
  command
      ->add_option("--input", o->input,
                   "gradients: fresh (a new one every call), cycle (4, cycled) or slow (changing "
                   "slowly between calls)")
      ->check(CLI::IsMember({"fresh", "cycle", "slow"}))
      ->capture_default_str();
  add_timing_options(*command, o->type, o->iters, o->warmup);
  command
      ->add_option("--stat", o->stat,
                   "per-call statistic of each rank: mean, or median (MPI_Allreduce then timed "
                   "again in each row, alternating with dct call for call)")
      ->check(CLI::IsMember({"mean", "median"}))
      ->capture_default_str();
  command->add_flag("--json", o->json, "one JSON array of rows instead of the table");
  return [o] { return run(*o); };
}

}  // namespace dct::bench
