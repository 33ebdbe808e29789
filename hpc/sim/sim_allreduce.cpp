// Over 450 lines: one SimGrid program, its measurement, its model and their comparison.
// sim_allreduce: dct's compressed allreduce and MPI_Allreduce, timed under SimGrid's SMPI
// (MPI_Wtime is simulated time there). hpc/sim/run.sh builds and runs it; see
// docs/simulation.md for the method.
//
//   smpirun -np P ... sim_allreduce --count N --runs mpi,auto:0.01,allgather:0.05,...
//       [--scale F] [--calls 2] [--interval 1000] [--check] [--shared-recv] [--no-control]
//       [--index-sets independent|shared|classes:W:X,...]
//
// Every rank reduces a gradient of N fp32 values, roughly N(0,1). Each run is ALGORITHM:DENSITY
// (`dct_algorithm` and `dct_density` info keys; ALGORITHM_r: that algorithm with
// `dct_result_density` = DENSITY, the result bounded as Ok-Topk's) or "mpi" (MPI_Allreduce). A
// persistent request with `dct_interval` = --interval (default 1000, the library's) is called
// `calls` times and the last call is the one reported; the first call is reported too (first_*).
// The first call re-balances split's segments (an allreduce of a histogram of the kept indices,
// whose size depends on P, not on N): it selects tau over the whole tensor, and segments are
// re-balanced whenever tau is (dct_tau_control=adaptive, the default: on the first call and
// when fewer than k candidates pass the floor; fixed: every `dct_interval` calls). The later
// calls reuse the segments, as in training. An algorithm that DCT_Allreduce_init refuses
// with DCT_ERR_INFO (a name this build of dct does not know) is reported as n/a without
// allocating anything. Rank 0 prints one RESULT line per run:
//   time       simulated seconds of the call, max over ranks of (end - start) after a barrier
//   bytes_*    DCT_Status bytes_received / bytes_sent, max and mean over ranks
//   kept_mean  kept entries per rank (nnz_sent), mean over ranks
//   bound      2 k (P-1) / P with k = kept_mean * 8 bytes (fp32 value + 32-bit index)
//   rebalanced 1 if some rank re-selected tau over the tensor on the reported call (which
//              then re-balanced split's segments), else 0
//   first_*    time, bytes_received_max and rebalanced of the first call (which re-balances)
//   result_nnz non-zero entries of rank 0's result after the reported call: with an unbounded
//              result, the union of the ranks' kept indices (how much they overlap)
//   predicted  the seconds dct's cost model (src/core/cost_model.hpp) predicts for the reported
//              call's algorithm, from what auto sees (P, N, every rank's kept entries, the
//              result's nonzeros as union hint, DCT_ALPHA_US / DCT_BETA_GBPS, groups of one
//              rank per host); for mpi its prediction for dense
//   fixed_*    the same call on a 1-element all-zero tensor: the per-call control traffic and
//              time that do not scale with the tensor (run.sh needs it to undo --scale);
//              --no-control leaves this measurement out
// --scale F is only recorded: run.sh simulates N/F elements on links of bandwidth/F.
// --shared-recv allocates the receive buffer with SMPI_SHARED_MALLOC (one garbage buffer for all
// ranks, as SMPI folds it): only for the verification runs of algorithms whose timing does not
// depend on what the receive buffer holds (MPI_Allreduce, allgather); it excludes --check.
//
// Memory: all simulated ranks live in one process, so the gradients share one buffer: rank 0
// fills a memory file with random values and every rank maps it at its own random rotation
// (element offset), which makes the kept indices of different ranks independent while the
// gradient costs its memory once. --index-sets shared maps it unrotated on every rank (identical
// kept sets); classes gives every rank a private copy with the large entries chosen per class
// (index_sets.hpp: one more tensor of memory per rank). --check verifies the results (identical on
// every rank, and the error-feedback conservation: results delivered + residuals left = gradients
// put in).
#include <mpi.h>

#include <sys/mman.h>
#include <unistd.h>

// smpicxx force-includes smpi_helpers.h, whose exit(x) macro (SMPI's exit of one simulated
// rank) breaks CLI11's App::exit member; this driver never calls exit().
#ifdef exit
#undef exit
#endif
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/cost_model.hpp"
#include "dct/dct.h"
#include "index_sets.hpp"

namespace {

struct Run {
  std::string algorithm;  // "mpi" or a dct_algorithm value
  std::string density;    // dct_density value ("1" for mpi)
};

struct Options {
  long long count = 1 << 20;
  double scale = 1.0;
  std::vector<Run> runs;
  int calls = 2;
  long long interval = 1000;
  bool check = false;
  bool control = true;
  bool shared_recv = false;
  unsigned seed = 12345;
  std::string index_sets = "independent";  // independent, shared or classes:W:X,W:X,...
};

/// One run from "mpi" or "ALGORITHM:DENSITY"; false if `text` is neither.
bool parse_run(const std::string &text, Run &run) {
  const std::size_t colon = text.find(':');
  if (text == "mpi") {
    run = {"mpi", "1"};
    return true;
  }
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size() ||
      text.find(':', colon + 1) != std::string::npos)
    return false;
  run = {text.substr(0, colon), text.substr(colon + 1)};
  return true;
}

/// Options from the command line; a CLI::ParseError when they are bad (every rank parses).
Options parse(CLI::App &app, int argc, char **argv) {
  Options options;
  std::vector<std::string> runs;
  app.add_option("--count", options.count, "elements per rank")
      ->check(CLI::Range(1LL, 1LL << 40))
      ->capture_default_str();
  app.add_option("--runs", runs, "mpi and ALGORITHM:DENSITY, a comma list")
      ->required()
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string &text) -> std::string {
            Run run;
            return parse_run(text, run) ? ""
                                        : "'" + text + "' is neither mpi nor ALGORITHM:DENSITY";
          },
          "RUN"));
  app.add_option("--scale", options.scale, "recorded only: run.sh's tensor and bandwidth scale")
      ->check(CLI::Range(1.0, 1e12))
      ->capture_default_str();
  app.add_option("--calls", options.calls, "calls per run; the last is reported")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--interval", options.interval, "dct_interval of every request")
      ->check(CLI::Range(1LL, 1LL << 40))
      ->capture_default_str();
  app.add_option("--seed", options.seed, "seed of the gradients")->capture_default_str();
  app.add_option("--index-sets", options.index_sets,
                 "independent, shared, or classes:W:X,W:X,... (see IndexClasses)")
      ->check(CLI::Validator(
          [](std::string &text) -> std::string {
            IndexClasses classes;
            return classes.parse(text) ? "" : "'" + text + "': " + classes.error;
          },
          "SETS"))
      ->capture_default_str();
  CLI::Option *check = app.add_flag("--check", options.check, "verify the results");
  app.add_flag("--shared-recv", options.shared_recv,
               "receive buffer from SMPI_SHARED_MALLOC (timing runs only)")
      ->excludes(check);
  bool no_control = false;
  app.add_flag("--no-control", no_control, "skip the 1-element control measurement (fixed_*)");
  app.parse(argc, argv);
  options.control = !no_control;
  for (const std::string &text : runs) {
    options.runs.emplace_back();
    parse_run(text, options.runs.back());
  }
  return options;
}

/// The gradient of this rank: `count` floats. Under SMPI every rank maps one shared buffer of
/// random values at its own rotation; elsewhere (a real MPI) each rank fills its own.
class Gradient {
 public:
  Gradient(long long count, unsigned seed, const IndexClasses &sets, MPI_Comm comm)
      : count_(count) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    // shared: every rank at rank 0's rotation (the same values).
    const int view = sets.kind == IndexClasses::kShared ? 0 : rank;
    std::mt19937_64 rotation(seed + 7919u * static_cast<unsigned>(view));
#ifdef SMPI_SHARED_MALLOC
    // One process: a file descriptor opened by rank 0 is valid in every simulated rank.
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    const std::size_t floats_per_page = page / sizeof(float);
    pages_ = (static_cast<std::size_t>(count) * sizeof(float) + page - 1) / page;
    int fd = -1;
    if (rank == 0) {
      fd = memfd_create("dct_sim_gradient", 0);
      if (fd < 0 || ftruncate(fd, static_cast<off_t>(pages_ * page)) != 0) fd = -1;
      if (fd >= 0) {
        void *base = mmap(nullptr, pages_ * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED) {
          close(fd);
          fd = -1;
        } else {
          fill(static_cast<float *>(base), pages_ * floats_per_page, seed);
          munmap(base, pages_ * page);
        }
      }
    }
    MPI_Bcast(&fd, 1, MPI_INT, 0, comm);
    if (fd < 0) return;
    // View = file pages [s, N) followed by pages [0, N), starting `e` floats in: a rotation of
    // the shared values by s * floats_per_page + e elements.
    const std::size_t s = static_cast<std::size_t>(rotation() % pages_);
    const std::size_t e = static_cast<std::size_t>(rotation() % floats_per_page);
    mapped_bytes_ = (2 * pages_ - s) * page;
    void *region = mmap(nullptr, mapped_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return;
    char *bytes = static_cast<char *>(region);
    const bool ok = mmap(bytes, (pages_ - s) * page, PROT_READ, MAP_SHARED | MAP_FIXED, fd,
                         static_cast<off_t>(s * page)) != MAP_FAILED &&
                    mmap(bytes + (pages_ - s) * page, pages_ * page, PROT_READ,
                         MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
    region_ = region;
    MPI_Barrier(comm);  // every rank has mapped the file: rank 0 may close it
    if (rank == 0) close(fd);
    if (ok) data_ = reinterpret_cast<const float *>(bytes) + e;
    if (data_ && sets.kind == IndexClasses::kClasses) choose(sets, seed, rank);
#else
    (void)comm;
    private_.resize(static_cast<std::size_t>(count));
    fill(private_.data(), private_.size(), static_cast<unsigned>(rotation()));
    data_ = private_.data();
    if (sets.kind == IndexClasses::kClasses) choose(sets, seed, rank);
#endif
  }
  ~Gradient() {
    if (region_) munmap(region_, mapped_bytes_);
  }
  Gradient(const Gradient &) = delete;
  Gradient &operator=(const Gradient &) = delete;

  const float *data() const {
    return data_;
  }
  long long count() const {
    return count_;
  }

 private:
  /// classes: a private copy of this rank's values, the class-chosen entries large.
  void choose(const IndexClasses &sets, unsigned seed, int rank) {
    if (data_ != private_.data()) private_.assign(data_, data_ + count_);
    sets.apply(seed, rank, private_.data(), count_);
    data_ = private_.data();
  }

  static void fill(float *values, std::size_t n, unsigned seed) {
    std::mt19937 generator(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < n; ++i) values[i] = normal(generator);
  }

  long long count_;
  const float *data_ = nullptr;
  void *region_ = nullptr;
  std::size_t mapped_bytes_ = 0;
  std::size_t pages_ = 0;
  std::vector<float> private_;
};

/// What one reported call measured, reduced over ranks.
struct Measurement {
  double time = 0.0;
  double bytes_received_max = 0.0, bytes_received_mean = 0.0;
  double bytes_sent_max = 0.0, bytes_sent_mean = 0.0;
  double kept_mean = 0.0;
  int algorithm_min = 0, algorithm_max = 0;
  int rebalanced = 0;  // some rank re-selected tau (and so split's segments) on this call
};

Measurement reduce_measurement(double elapsed, const DCT_Status &status, MPI_Comm comm) {
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  Measurement m;
  double local_max[3] = {elapsed, double(status.bytes_received), double(status.bytes_sent)};
  double global_max[3] = {};
  MPI_Allreduce(local_max, global_max, 3, MPI_DOUBLE, MPI_MAX, comm);
  double local_sum[3] = {double(status.bytes_received), double(status.bytes_sent),
                         double(status.nnz_sent)};
  double global_sum[3] = {};
  MPI_Allreduce(local_sum, global_sum, 3, MPI_DOUBLE, MPI_SUM, comm);
  int algorithm[3] = {-status.algorithm, status.algorithm, status.tau_reestimated ? 1 : 0},
      extremes[3] = {};
  MPI_Allreduce(algorithm, extremes, 3, MPI_INT, MPI_MAX, comm);
  m.time = global_max[0];
  m.bytes_received_max = global_max[1];
  m.bytes_sent_max = global_max[2];
  m.bytes_received_mean = global_sum[0] / ranks;
  m.bytes_sent_mean = global_sum[1] / ranks;
  m.kept_mean = global_sum[2] / ranks;
  m.algorithm_min = -extremes[0];
  m.algorithm_max = extremes[1];
  m.rebalanced = extremes[2];
  return m;
}

/// Collective: true on every rank iff `ok` on every rank.
bool all_ok(bool ok, MPI_Comm comm) {
  int local = ok ? 1 : 0, global = 0;
  MPI_Allreduce(&local, &global, 1, MPI_INT, MPI_MIN, comm);
  return global == 1;
}

double sum_of(const float *values, long long n) {
  double sum = 0.0;
  for (long long i = 0; i < n; ++i) sum += values[i];
  return sum;
}

double abs_sum_of(const float *values, long long n) {
  double sum = 0.0;
  for (long long i = 0; i < n; ++i) sum += std::fabs(values[i]);
  return sum;
}

struct Outcome {
  bool ok = false;
  int code = DCT_SUCCESS;
  std::string error;
  Measurement measurement;
  Measurement first;          // the first call's (the one that re-balances split's segments)
  std::string check;          // "" (not checked), "ok" or what failed
  long long result_nnz = -1;  // non-zero entries of rank 0's result (the union of kept indices)
  double predicted = -1;      // the cost model's seconds for the reported call
};

/// What dct's cost model predicts for one call of `algorithm` (see the RESULT fields above).
double predicted_seconds(int algorithm, const Measurement &m, int ranks, long long count,
                         long long result_nnz, double result_density) {
  const dct::detail::Config config = dct::detail::Config::from(MPI_INFO_NULL);
  dct::detail::ExchangeSize size;
  size.ranks = ranks;
  size.count = double(count);
  size.value_bytes = 4;
  size.total_kept = m.kept_mean * ranks;
  size.result_nonzeros = double(result_nnz);
  if (result_density < 1) size.result_budget = std::ceil(result_density * double(count));
  size.group_size = dct::detail::hierarchy_group_size(ranks, 1, 0);  // one rank per host
  return dct::detail::predicted_seconds(static_cast<DCT_Algorithm>(algorithm), size,
                                        config.network);
}

long long nonzeros(const float *values, long long n) {
  long long count = 0;
  for (long long i = 0; i < n; ++i) count += values[i] != 0.0f ? 1 : 0;
  return count;
}

/// `calls` calls of one persistent dct request on `send`; measures the first and the last one.
Outcome run_dct(const std::string &algorithm, const std::string &density, const float *send,
                float *recv, long long count, int calls, long long interval, bool check,
                MPI_Comm comm) {
  Outcome outcome;
  MPI_Info info;
  MPI_Info_create(&info);
  // "X_r": X with the result bounded to the same density (dct_result_density).
  const bool bounded =
      algorithm.size() > 2 && algorithm.compare(algorithm.size() - 2, 2, "_r") == 0;
  const std::string name = bounded ? algorithm.substr(0, algorithm.size() - 2) : algorithm;
  MPI_Info_set(info, "dct_algorithm", name.c_str());
  if (bounded) MPI_Info_set(info, "dct_result_density", density.c_str());
  MPI_Info_set(info, "dct_density", density.c_str());
  MPI_Info_set(info, "dct_interval", std::to_string(interval).c_str());
  DCT_Request request = DCT_REQUEST_NULL;
  int rc = DCT_Allreduce_init(send, recv, count, MPI_FLOAT, MPI_SUM, comm, info, &request);
  MPI_Info_free(&info);
  if (!all_ok(rc == DCT_SUCCESS, comm)) {
    outcome.code = rc;
    outcome.error = rc == DCT_SUCCESS ? "refused on another rank" : DCT_Get_last_error();
    if (request != DCT_REQUEST_NULL) DCT_Request_free(&request);
    return outcome;
  }
  DCT_Status status{};
  double elapsed = 0.0, delivered = 0.0;
  for (int call = 0; call < calls; ++call) {
    MPI_Barrier(comm);
    const double start = MPI_Wtime();
    rc = DCT_Start(&request);
    if (rc == DCT_SUCCESS) rc = DCT_Wait(&request, &status);
    elapsed = MPI_Wtime() - start;
    if (!all_ok(rc == DCT_SUCCESS, comm)) {
      outcome.code = rc;
      outcome.error = rc == DCT_SUCCESS ? "failed on another rank" : DCT_Get_last_error();
      DCT_Request_free(&request);
      return outcome;
    }
    if (check) delivered += sum_of(recv, count);
    if (call == 0) {
      outcome.first = reduce_measurement(elapsed, status, comm);
      // The first call re-balances whatever dct's status says (its segments are empty).
      outcome.first.rebalanced = 1;
    }
  }
  outcome.measurement = reduce_measurement(elapsed, status, comm);
  outcome.result_nnz = nonzeros(recv, count);
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  outcome.predicted =
      predicted_seconds(status.algorithm, outcome.measurement, ranks, count, outcome.result_nnz,
                        bounded ? std::atof(density.c_str()) : 1);
  if (check) {
    // The result is the same on every rank...
    double extremes[2] = {-delivered, delivered}, global[2] = {};
    MPI_Allreduce(extremes, global, 2, MPI_DOUBLE, MPI_MAX, comm);
    // ...and error feedback loses nothing: sum of results = sum of inputs - sum of residuals.
    std::vector<float> residual(static_cast<std::size_t>(count));
    DCT_Request_get_residual(request, residual.data());
    double local[2] = {calls * sum_of(send, count) - sum_of(residual.data(), count),
                       calls * abs_sum_of(send, count)},
           total[2] = {};
    MPI_Allreduce(local, total, 2, MPI_DOUBLE, MPI_SUM, comm);
    const double tolerance = 1e-5 * total[1] + 1e-3;
    if (-global[0] != global[1])
      outcome.check = "results differ between ranks";
    else if (std::fabs(delivered - total[0]) > tolerance)
      outcome.check = "conservation violated: delivered " + std::to_string(delivered) +
                      ", inputs - residuals " + std::to_string(total[0]);
    else
      outcome.check = "ok";
  }
  DCT_Request_free(&request);
  outcome.ok = true;
  return outcome;
}

/// The baseline: MPI_Allreduce of the dense gradient, `calls` times; measures the last one.
Outcome run_mpi(const float *send, float *recv, long long count, int calls, MPI_Comm comm) {
  Outcome outcome;
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  double elapsed = 0.0;
  for (int call = 0; call < calls; ++call) {
    MPI_Barrier(comm);
    const double start = MPI_Wtime();
    const int rc = MPI_Allreduce(send, recv, static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm);
    elapsed = MPI_Wtime() - start;
    if (!all_ok(rc == MPI_SUCCESS, comm)) {
      outcome.code = DCT_ERR_MPI;
      outcome.error = "MPI_Allreduce failed";
      return outcome;
    }
  }
  // Logical bytes as dct counts a dense allreduce: the ring volume 2 (P-1)/P * count * 4.
  DCT_Status status{};
  status.bytes_received = status.bytes_sent =
      ranks > 1 ? 2 * static_cast<MPI_Count>(ranks - 1) * count * 4 / ranks : 0;
  status.nnz_sent = count;
  status.algorithm = -1;
  outcome.measurement = reduce_measurement(elapsed, status, comm);
  outcome.first = outcome.measurement;
  outcome.predicted =
      predicted_seconds(DCT_ALGORITHM_DENSE, outcome.measurement, ranks, count, count, 1);
  outcome.ok = true;
  return outcome;
}

std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) out += (c == '"' || c == '\n') ? '\'' : c;
  return out + "\"";
}

std::string algorithm_used(const Measurement &m) {
  if (m.algorithm_min == -1) return "mpi";
  if (m.algorithm_min != m.algorithm_max) return "mixed";
  return DCT_Algorithm_name(m.algorithm_min);
}

long long peak_resident_kib() {
  FILE *file = std::fopen("/proc/self/status", "r");
  if (!file) return -1;
  char line[256];
  long long kib = -1;
  while (std::fgets(line, sizeof line, file))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kib = std::atoll(line + 6);
  std::fclose(file);
  return kib;
}

/// Prints rank 0's RESULT line for one run; false if it failed (n/a is not a failure).
bool report(const Run &run, const Outcome &outcome, const Outcome &fixed, int ranks,
            const Options &options) {
  std::printf("RESULT algorithm=%s density=%s ranks=%d count=%lld scale=%g", run.algorithm.c_str(),
              run.density.c_str(), ranks, options.count, options.scale);
  if (!outcome.ok) {
    // DCT_ERR_INFO from init: an algorithm name this build of dct does not know (yet).
    std::printf(" status=%s code=%d error=%s\n", outcome.code == DCT_ERR_INFO ? "n/a" : "failed",
                outcome.code, quoted(outcome.error).c_str());
    std::fflush(stdout);
    return outcome.code == DCT_ERR_INFO;
  }
  const Measurement &m = outcome.measurement;
  std::printf(
      " status=ok used=%s time=%.9g bytes_received_max=%.0f bytes_received_mean=%.1f "
      "bytes_sent_max=%.0f bytes_sent_mean=%.1f kept_mean=%.1f",
      algorithm_used(m).c_str(), m.time, m.bytes_received_max, m.bytes_received_mean,
      m.bytes_sent_max, m.bytes_sent_mean, m.kept_mean);
  const Measurement &first = outcome.first;
  std::printf(" rebalanced=%d first_time=%.9g first_bytes_received_max=%.0f first_rebalanced=%d",
              m.rebalanced, first.time, first.bytes_received_max, first.rebalanced);
  if (run.algorithm != "mpi")  // 2 k (P-1) / P, k = kept entries * (4-byte value + 4-byte index)
    std::printf(" bound=%.1f", ranks > 1 ? 2.0 * m.kept_mean * 8.0 * (ranks - 1) / ranks : 0.0);
  if (fixed.ok)
    std::printf(" fixed_time=%.9g fixed_bytes_received_max=%.0f", fixed.measurement.time,
                fixed.measurement.bytes_received_max);
  if (outcome.result_nnz >= 0) std::printf(" result_nnz=%lld", outcome.result_nnz);
  if (outcome.predicted >= 0) std::printf(" predicted=%.9g", outcome.predicted);
  if (!outcome.check.empty()) std::printf(" check=%s", quoted(outcome.check).c_str());
  std::printf("\n");
  std::fflush(stdout);
  return outcome.check.empty() || outcome.check == "ok";
}

/// The receive buffer: private to each rank, or (--shared-recv) one buffer that SMPI maps into
/// every rank, whose contents are then meaningless.
class ReceiveBuffer {
 public:
  ReceiveBuffer(long long count, bool shared) {
    const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(float);
#ifdef SMPI_SHARED_MALLOC
    if (shared) {
      shared_ = static_cast<float *>(SMPI_SHARED_MALLOC(bytes));
      return;
    }
#else
    (void)shared;
#endif
    private_.resize(bytes / sizeof(float));
  }
  ~ReceiveBuffer() {
#ifdef SMPI_SHARED_MALLOC
    if (shared_) SMPI_SHARED_FREE(shared_);
#endif
  }
  ReceiveBuffer(const ReceiveBuffer &) = delete;
  ReceiveBuffer &operator=(const ReceiveBuffer &) = delete;

  float *data() {
    return shared_ ? shared_ : private_.data();
  }

 private:
  float *shared_ = nullptr;
  std::vector<float> private_;
};

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  // SMPI marks a rank finalized before it deletes MPI_COMM_SELF's attributes, so MPI calls made
  // by dct's finalize hook fail there, and the default fatal handler would abort the simulation.
  // dct therefore works on a duplicate that is freed before MPI_Finalize (dct then releases its
  // state on that communicator while MPI is fully up), and errors only return.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  Options options;
  CLI::App app{"sim_allreduce: dct's allreduce and MPI_Allreduce under SimGrid's SMPI"};
  try {
    options = parse(app, argc, argv);
  } catch (const CLI::ParseError &e) {
    std::ostringstream quiet;
    const int code = rank == 0 ? app.exit(e) : app.exit(e, quiet, quiet);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return code == static_cast<int>(CLI::ExitCodes::Success) ? 0 : 2;
  }
  if (rank == 0)
    std::printf(
        "CONFIG ranks=%d count=%lld scale=%g calls=%d interval=%lld shared_recv=%d "
        "index_sets=%s\n",
        ranks, options.count, options.scale, options.calls, options.interval,
        options.shared_recv ? 1 : 0, options.index_sets.c_str());

  // Which runs this build of dct has: DCT_Allreduce_init on a 1-element tensor.
  const float zero_send[1] = {0.0f};
  float zero_recv[1] = {0.0f};
  std::vector<Outcome> refused(options.runs.size());
  bool any_available = false;
  for (std::size_t i = 0; i < options.runs.size(); ++i) {
    const Run &run = options.runs[i];
    if (run.algorithm != "mpi") {
      refused[i] = run_dct(run.algorithm, run.density, zero_send, zero_recv, 1, 0, options.interval,
                           false, comm);
      if (refused[i].ok) refused[i] = Outcome{};
    }
    any_available = any_available || refused[i].code == DCT_SUCCESS;
  }

  int failures = 0;
  if (any_available) {
    IndexClasses sets;
    sets.parse(options.index_sets);  // validated by the parser
    Gradient gradient(options.count, options.seed, sets, comm);
    ReceiveBuffer recv(options.count, options.shared_recv);
    if (!all_ok(gradient.data() != nullptr && recv.data() != nullptr, comm)) {
      if (rank == 0) std::fprintf(stderr, "sim_allreduce: cannot allocate the buffers\n");
      MPI_Comm_free(&comm);
      MPI_Finalize();
      return 1;
    }
    for (std::size_t i = 0; i < options.runs.size(); ++i) {
      const Run &run = options.runs[i];
      const bool mpi = run.algorithm == "mpi";
      Outcome fixed, outcome = refused[i];
      if (outcome.code != DCT_SUCCESS) {
        // refused by init: nothing to run
      } else if (mpi) {
        if (options.control) fixed = run_mpi(zero_send, zero_recv, 1, options.calls, comm);
        outcome = run_mpi(gradient.data(), recv.data(), options.count, options.calls, comm);
      } else {
        if (options.control)
          fixed = run_dct(run.algorithm, run.density, zero_send, zero_recv, 1, options.calls,
                          options.interval, false, comm);
        outcome = run_dct(run.algorithm, run.density, gradient.data(), recv.data(), options.count,
                          options.calls, options.interval, options.check, comm);
      }
      if (rank == 0 && !report(run, outcome, fixed, ranks, options)) ++failures;
    }
  } else if (rank == 0) {
    for (std::size_t i = 0; i < options.runs.size(); ++i)
      if (!report(options.runs[i], refused[i], Outcome{}, ranks, options)) ++failures;
  }
  MPI_Bcast(&failures, 1, MPI_INT, 0, comm);
  if (rank == 0) std::printf("MEMORY peak_resident_kib=%lld\n", peak_resident_kib());
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
