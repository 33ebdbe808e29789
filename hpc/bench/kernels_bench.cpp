// dct-bench kernels: the compression kernels of one backend against a plain copy on the same
// backend and against std::nth_element, in the same run. One process; no communication.
//
//   dct-bench kernels [--sizes 1M-1G] [--density 0.01] [--sample 65536] [--type float|double]
//       [--values native|fp16|bf16] [--backend kokkos|cuda|hip] [--seconds 0.3]
//
// Per size (bytes of the tensor, n = bytes / sizeof(type)), on N(0,1) send and residual:
//   copy      STREAM-like copy of n elements (Backend::copy): GB/s = 2 n s / t (read + write)
//   filter    the selection pass at tau for the density (Backend::select) and keep_top on what
//             it selected: it must read send and residual, write residual and the k kept
//             (index, value) pairs: GB/s = (3 n s + k (4 + s)) / t; filter/copy = the fraction
//             of copy bandwidth it reaches on the bytes it touches
//   exact     exact k-th largest |send + residual| (radix select), ms
//   sampled   what dct_threshold=sampled costs with dct_sample_size=`sample`, ms (the exact
//             selection where the sample would be 1/8 of the tensor or more), and the density
//             it achieves / the target: mean of 8 seeds, and the worst |achieved/target - 1|
//   nth       std::nth_element on |send + residual| computed into a scratch vector (host),
//             the naive baseline, ms; exact_x and sampled_x = nth / exact and nth / sampled
//   decode    sum_lists of the k kept entries into n (one rank's allgather result):
//             GB/s = (n s + k (4 + 2 s)) / t, and decode/copy
// Times: the best of repetitions that fill `seconds` (at least 2), after one warm-up; inputs
// are restored (untimed) before each filter repetition.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "core/compute_backend.hpp"
#include "core/config.hpp"
#include "dp/threshold.hpp"

namespace dct::bench {
namespace {

using namespace dct::detail;

struct KernelOptions {
  std::vector<long long> sizes;
  double density = 0.01;
  std::size_t sample = 65536;
  bool is_double = false;
  ValueCoding values = ValueCoding::native;
  DCT_Backend backend = DCT_BACKEND_KOKKOS;
  double seconds = 0.3;
};

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Best time of `body` over repetitions filling `budget` seconds (at least 2), after a warm-up,
/// each until `backend` finished it (a GPU backend's kernels that only write device memory
/// return before they ran). `reset` runs untimed before each repetition.
double best_time(
    Backend &backend, double budget, const std::function<void()> &body,
    const std::function<void()> &reset = [] {}) {
  const auto finished = [&](const std::function<void()> &work) {
    work();
    backend.synchronize(nullptr);
  };
  finished(reset);
  finished(body);
  double best = 1e300, spent = 0;
  for (int rep = 0; rep < 2 || spent < budget; ++rep) {
    finished(reset);
    const double start = seconds_now();
    finished(body);
    const double elapsed = seconds_now() - start;
    best = std::min(best, elapsed);
    spent += elapsed;
    if (rep > 1000) break;
  }
  return best;
}

template <typename T>
void run(const KernelOptions &o, Backend &backend, long long bytes) {
  const std::size_t n = static_cast<std::size_t>(bytes) / sizeof(T);
  const std::size_t k = std::max<std::size_t>(1, std::ceil(o.density * double(n)));
  const double s = sizeof(T);
  std::vector<T> send_host(n), residual_host(n);
  {
    std::mt19937_64 engine(1);
    std::normal_distribution<T> normal;
    for (std::size_t i = 0; i < n; ++i) {
      send_host[i] = normal(engine);
      residual_host[i] = normal(engine);
    }
  }
  BackendArray<T> send(backend, n), residual(backend, n), pristine(backend, n), out(backend, n);
  backend.copy(send.data(), send_host.data(), n * sizeof(T), nullptr);
  backend.copy(pristine.data(), residual_host.data(), n * sizeof(T), nullptr);
  backend.copy(residual.data(), pristine.data(), n * sizeof(T), nullptr);
  const std::size_t capacity = k + k / 4 + 16;
  BackendArray<WireIndex> idx(backend, capacity), candidate_idx(backend, capacity);
  BackendArray<T> val(backend, capacity), candidate_val(backend, capacity),
      remainders(backend, capacity);

  const double copy_s = best_time(
      backend, o.seconds, [&] { backend.copy(out.data(), send.data(), n * sizeof(T), nullptr); });
  T tau = T(0);
  const double exact_s = best_time(backend, o.seconds, [&] {
    tau = backend.kth_largest_abs(send.data(), residual.data(), n, k, nullptr);
  });
  std::vector<T> scratch;
  const std::size_t m = std::min(o.sample, n);
  const double sampled_s = best_time(backend, o.seconds, [&] {
    estimate_threshold(backend, send.data(), residual.data(), n, k, true, m, 7, scratch, nullptr);
  });
  // Accuracy of the sampled estimate: achieved density / target, mean and worst of 8 seeds.
  double achieved = 0, worst = 0;
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    const T estimate = estimate_threshold(backend, send.data(), residual.data(), n, k, true, m,
                                          seed, scratch, nullptr);
    std::size_t above = 0;
    for (std::size_t i = 0; i < n; ++i)
      above += keep_entry(T(send_host[i] + residual_host[i]), estimate);
    achieved += double(above) / double(k) / 8;
    worst = std::max(worst, std::fabs(double(above) / double(k) - 1));
  }
  std::vector<T> magnitudes(n);
  const double nth_s = best_time(backend, o.seconds, [&] {
    for (std::size_t i = 0; i < n; ++i) magnitudes[i] = std::fabs(send_host[i] + residual_host[i]);
    std::nth_element(magnitudes.begin(), magnitudes.begin() + (k - 1), magnitudes.end(),
                     std::greater<T>());
  });
  if (magnitudes[k - 1] != tau) throw std::runtime_error("exact tau differs from nth_element");

  std::size_t kept = 0;
  const double filter_s = best_time(
      backend, o.seconds,
      [&] {
        const Selected found =
            backend.select(send.data(), residual.data(), n, tau, k, candidate_idx.data(),
                           candidate_val.data(), capacity, SparseList<T>{}, nullptr);
        kept = backend.keep_top(candidate_idx.data(), candidate_val.data(),
                                std::min(found.count, capacity), tau, kEveryTie, o.values,
                                idx.data(), val.data(), remainders.data(), nullptr);
      },
      [&] { backend.copy(residual.data(), pristine.data(), n * sizeof(T), nullptr); });
  const SparseList<T> list{idx.data(), val.data(), kept};
  const double decode_s = best_time(
      backend, o.seconds, [&] { backend.sum_lists(&list, 1, out.data(), 0, n, nullptr); });

  const double copy_gbs = 2 * n * s / copy_s * 1e-9;
  const double filter_gbs = (3 * n * s + double(kept) * (4 + s)) / filter_s * 1e-9;
  const double decode_gbs = (n * s + double(kept) * (4 + 2 * s)) / decode_s * 1e-9;
  std::printf("%9lld %9.2f %9.2f %7.2f %9.3f %9.3f %9.3f %8.1f %9.1f %8.3f %6.3f %9.2f %7.2f\n",
              bytes, copy_gbs, filter_gbs, filter_gbs / copy_gbs, exact_s * 1e3, sampled_s * 1e3,
              nth_s * 1e3, nth_s / exact_s, nth_s / sampled_s, achieved, worst, decode_gbs,
              decode_gbs / copy_gbs);
  std::fflush(stdout);
}

// One process: the other ranks of an mpiexec only wait.
int run(const KernelOptions &o) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return 0;
  const bool started = backends::initialize_runtime();
  Backend *chosen = o.backend == DCT_BACKEND_CUDA  ? backends::cuda_backend()
                    : o.backend == DCT_BACKEND_HIP ? backends::hip_backend()
                                                   : backends::kokkos_backend();
  if (chosen == nullptr || !chosen->available())
    throw std::invalid_argument(std::string("backend ") + DCT_Backend_name(o.backend) +
                                (chosen ? " has no device here" : " is not compiled in"));
  Backend &backend = *chosen;
  std::printf(
      "# dct-bench kernels: backend %s, %s, density %g, values %s, sample %zu; GB/s = 1e9 "
      "bytes/s; times are the best of repetitions over %.2g s\n",
      DCT_Backend_name(backend.kind()), o.is_double ? "double" : "float", o.density,
      value_coding_name(o.values), o.sample, o.seconds);
  std::printf("%9s %9s %9s %7s %9s %9s %9s %8s %9s %8s %6s %9s %7s\n", "bytes", "copy_GBs",
              "filt_GBs", "filt/cp", "exact_ms", "sampl_ms", "nth_ms", "exact_x", "sampled_x",
              "achieved", "worst", "decod_GBs", "dec/cp");
  for (long long bytes : o.sizes) {
    if (o.is_double)
      run<double>(o, backend, bytes);
    else
      run<float>(o, backend, bytes);
  }
  if (started) backends::finalize_runtime();
  return 0;
}

}  // namespace

Run add_kernels(CLI::App &app) {
  auto o = std::make_shared<KernelOptions>();
  o->sizes = parse_sizes("1M-1G");
  CLI::App *command = app.add_subcommand(
      "kernels", "the compression kernels of one backend against a copy and nth_element");
  add_sizes_option(*command, o->sizes, "tensor sizes")->default_str("1M-1G");
  command->add_option("--density", o->density, "kept fraction")
      ->check(kUnitInterval)
      ->capture_default_str();
  command->add_option("--sample", o->sample, "dct_sample_size of the sampled threshold")
      ->check(CLI::Range(std::size_t(1), std::size_t(1) << 40))
      ->capture_default_str();
  command
      ->add_option_function<std::string>(
          "--type", [o](const std::string &type) { o->is_double = type == "double"; },
          "element type (default float)")
      ->check(CLI::IsMember({"float", "double"}));
  // Spelled and checked by the library's own knob table.
  command
      ->add_option_function<std::string>(
          "--values",
          [o](const std::string &v) { o->values = config_with("dct_values", v).values; },
          "dct_values: native, fp16 or bf16 (default native)")
      ->check(knob("dct_values"));
  command
      ->add_option_function<std::string>(
          "--backend",
          [o](const std::string &v) { o->backend = config_with("dct_backend", v).backend; },
          "dct_backend: kokkos, cuda or hip (default kokkos)")
      ->check(knob("dct_backend"));
  command->add_option("--seconds", o->seconds, "time budget of each measurement")
      ->check(kPositive)
      ->capture_default_str();
  return [o] { return run(*o); };
}

}  // namespace dct::bench
