// dct-bench model: what `auto` would choose, from the library's own cost model
// (src/core/cost_model.cpp, compiled in) with the alpha and beta of the DCT_ALPHA_US /
// DCT_BETA_GBPS environment (read through the library's own knob table), for P ranks x tensor sizes
// x densities, assuming every rank keeps density * n entries placed independently. Each cell is the
// algorithm and its predicted speedup over dense. Runs on one process; no communication.
//
//   dct-bench model [--ranks 2,4,...] [--sizes 256K,4M,100M] [--density 0.001,...]
//       [--type float|double] [--result-density 1]
#include <mpi.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench.hpp"
#include "core/config.hpp"
#include "core/cost_model.hpp"

namespace dct::bench {
namespace {

struct ModelOptions {
  std::vector<int> ranks = {2, 4, 8, 16, 64, 256, 1024};
  std::vector<long long> sizes = {256 << 10, 4 << 20, 100 << 20};
  std::vector<std::string> densities = {"0.001", "0.01", "0.05", "0.1", "0.3"};
  std::string type = "float";
  double result_density = 1.0;
};

int run(const ModelOptions &o) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return 0;
  const int value_bytes = o.type == "float" ? 4 : 8;
  const double result_density = o.result_density;
  const dct::detail::NetworkModel network = dct::detail::Config::from(MPI_INFO_NULL).network;
  std::printf(
      "# dct-bench model: alpha %.3g us, beta %.3g GB/s (DCT_ALPHA_US, DCT_BETA_GBPS); "
      "cell = algorithm auto picks (predicted speedup over dense)\n",
      network.alpha_us, network.beta_gbps);
  for (long long bytes : o.sizes) {
    std::printf("\ntensor %lld bytes, %s\n%8s", bytes, value_bytes == 4 ? "float" : "double",
                "P \\ d");
    for (const std::string &d : o.densities) std::printf(" %24s", d.c_str());
    std::printf("\n");
    for (int p : o.ranks) {
      std::printf("%8d", p);
      for (const std::string &d : o.densities) {
        dct::detail::ExchangeSize size;
        size.ranks = p;
        size.count = double(bytes / value_bytes);
        size.value_bytes = value_bytes;
        size.total_kept = std::ceil(std::stod(d) * size.count) * p;
        // As the library does: a bounded result means split or hierarchical; groups of about
        // sqrt(P) consecutive ranks (no node information here).
        size.result_budget = result_density < 1 ? std::ceil(result_density * size.count) : 0;
        size.group_size =
            p >= dct::detail::kHierarchyMinRanks ? dct::detail::hierarchy_group_size(p, 0, 0) : 0;
        const DCT_Algorithm best = dct::detail::cheapest_algorithm(size, network);
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

}  // namespace

Run add_model(CLI::App &app) {
  auto o = std::make_shared<ModelOptions>();
  CLI::App *command =
      app.add_subcommand("model", "what dct_algorithm=auto picks, from the library's cost model");
  command->add_option("--ranks", o->ranks, "rank counts, a comma list")
      ->delimiter(',')
      ->check(CLI::Range(1, INT_MAX))
      ->capture_default_str();
  add_sizes_option(*command, o->sizes, "tensor sizes")->default_str("256K,4M,100M");
  command->add_option("--density", o->densities, "densities, a comma list")
      ->delimiter(',')
      ->check(kUnitInterval)
      ->capture_default_str();
  command->add_option("--type", o->type, "element type")
      ->check(CLI::IsMember({"float", "double"}))
      ->capture_default_str();
  command
      ->add_option("--result-density", o->result_density,
                   "dct_result_density (< 1: a bounded result: split or hierarchical)")
      ->check(kUnitInterval)
      ->capture_default_str();
  return [o] { return run(*o); };
}

}  // namespace dct::bench
