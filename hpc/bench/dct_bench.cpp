// dct-bench: measures dct against MPI in the same run. One subcommand per file:
//
//   mpiexec -n 4 dct-bench allreduce [--sizes 1M,4M,16M,64M] [--density 0.01[,0.1,...]]
//       [--algorithm auto[,allgather,split,hierarchical,recursive_doubling,dense,...]]
//       [--interval 1000]
//       [--type float|double] [--iters 20] [--warmup 3] [--json]         (allreduce_bench.cpp)
//   mpiexec -n 4 dct-bench alltoallv [--rows 512,2048,8192] [--d 64,256,1024] [--keep ...]
//       [--values fp16,...] [--select exact|laplace|threshold]  (alltoallv_bench.cpp: DCT-MP)
//   mpiexec -n 2 dct-bench calibrate [--reps 1000] [--mib 64] [--beta-reps 10]
//                                                                        (calibrate_bench.cpp)
//   mpiexec -n 4 dct-bench checkpoint [--mib 256] [--iters 3] [--dir .] (checkpoint_bench.cpp)
//   mpiexec -n 4 dct-bench device [--sizes 4M,64M,256M] [--density 0.01] [--no-nccl]
//                                          (device_bench.cpp, CUDA builds: GPU buffers, NCCL)
//   dct-bench kernels [--sizes 1M-1G] [--density 0.01] [--sample 65536] ... (kernels_bench.cpp)
//   dct-bench model [--ranks 2,4,...] [--sizes 256K,4M,100M] [--density 0.001,...]
//       [--type float|double] [--result-density 1]                          (model_bench.cpp)
//
// `dct-bench SUBCOMMAND --help` lists the options with their defaults. Exit codes: 0, 2 for a
// bad command line (the message names the option), 1 when a run fails, and allreduce's 2 when
// density 1 did not reproduce MPI_Allreduce exactly.
#include <mpi.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "core/config.hpp"
#include "dct/dct_config.h"

namespace dct::bench {
namespace {

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
  if (end == text.c_str() || !(value > 0) || value * double(scale) > 0x1p62)
    throw std::invalid_argument("bad size: " + text);
  return static_cast<long long>(value * double(scale));
}

/// A CLI11 check from a predicate on the number, with `message` when it fails.
template <typename Predicate>
CLI::Validator number_check(const std::string &name, const std::string &message, Predicate accept) {
  return CLI::Validator(
      [message, accept](std::string &text) -> std::string {
        double value = 0;
        return CLI::detail::lexical_cast(text, value) && accept(value)
                   ? std::string()
                   : "'" + text + "' " + message;
      },
      name);
}

}  // namespace

const CLI::Validator kPositive =
    number_check("POSITIVE", "is not a number > 0", [](double v) { return v > 0; });
const CLI::Validator kNonNegative =
    number_check("NONNEGATIVE", "is not a number >= 0", [](double v) { return v >= 0; });
const CLI::Validator kUnitInterval =
    number_check("(0,1]", "is not a number in (0, 1]", [](double v) { return v > 0 && v <= 1; });

detail::Config config_with(const char *key, const std::string &value) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, key, value.c_str());
  try {
    const detail::Config config = detail::Config::from(info);
    MPI_Info_free(&info);
    return config;
  } catch (...) {
    MPI_Info_free(&info);
    throw;
  }
}

CLI::Validator knob(const char *key) {
  return CLI::Validator(
      [key](std::string &value) -> std::string {
        try {
          config_with(key, value);
        } catch (const std::exception &e) {
          return e.what();
        }
        return {};
      },
      key);
}

std::vector<long long> parse_sizes(const std::string &list) {
  std::vector<long long> sizes;
  std::stringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    const std::size_t dash = item.find('-');
    if (dash == std::string::npos) {
      sizes.push_back(parse_size(item));
      continue;
    }
    const long long first = parse_size(item.substr(0, dash));
    const long long last = parse_size(item.substr(dash + 1));
    if (last < first) throw std::invalid_argument("bad size range: " + item);
    for (long long size = first; size <= last; size *= 4) sizes.push_back(size);
  }
  if (sizes.empty()) throw std::invalid_argument("no size in '" + list + "'");
  return sizes;
}

void add_timing_options(CLI::App &command, std::string &type, int &iters, int &warmup) {
  command.add_option("--type", type, "element type")
      ->check(CLI::IsMember({"float", "double"}))
      ->capture_default_str();
  command.add_option("--iters", iters, "timed calls per row")
      ->check(CLI::Range(1, INT_MAX))
      ->capture_default_str();
  command.add_option("--warmup", warmup, "untimed calls before them")
      ->check(CLI::Range(0, INT_MAX))
      ->capture_default_str();
}

CLI::Option *add_sizes_option(CLI::App &command, std::vector<long long> &sizes,
                              const std::string &help) {
  const CLI::Validator valid(
      [](std::string &list) -> std::string {
        try {
          parse_sizes(list);
        } catch (const std::invalid_argument &e) {
          return e.what();
        }
        return {};
      },
      "SIZES");
  return command
      .add_option_function<std::string>(
          "--sizes", [&sizes](const std::string &list) { sizes = parse_sizes(list); },
          help + " (bytes, suffix K/M/G; A-B: the powers of 4 from A to B)")
      ->check(valid);
}

}  // namespace dct::bench

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CLI::App app{"dct-bench: dct's collectives and kernels against MPI and the baselines"};
  app.require_subcommand(1);
  std::map<std::string, dct::bench::Run> runs = {
    {"allreduce", dct::bench::add_allreduce(app)},
    {"alltoallv", dct::bench::add_alltoallv(app)},
    {"calibrate", dct::bench::add_calibrate(app)},
    {"kernels", dct::bench::add_kernels(app)},
    {"model", dct::bench::add_model(app)},
#if DCT_HAVE_CUDA
    {"device", dct::bench::add_device(app)},
#endif
#if DCT_HAVE_HDF5
    {"checkpoint", dct::bench::add_checkpoint(app)},
#else
    {"checkpoint",
     [&app] {
       app.add_subcommand("checkpoint", "(not in this build: dct was built without HDF5)")
           ->allow_extras();
       return dct::bench::Run([]() -> int {
         throw std::runtime_error("this dct was built without HDF5 checkpoints");
       });
     }()},
#endif
  };
  int exit_code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    // Every rank sees the same argv and stops here; one message.
    std::ostringstream quiet;
    const int code = rank == 0 ? app.exit(e) : app.exit(e, quiet, quiet);
    MPI_Finalize();
    return code == static_cast<int>(CLI::ExitCodes::Success) ? 0 : 2;
  }
  const std::string mode = app.get_subcommands().front()->get_name();
  try {
    exit_code = runs.at(mode)();
  } catch (const std::exception &e) {
    if (rank == 0) std::fprintf(stderr, "dct-bench %s: %s\n", mode.c_str(), e.what());
    exit_code = 1;
  }
  MPI_Finalize();
  return exit_code;
}
