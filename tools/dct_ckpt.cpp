// dct-ckpt: look into dct checkpoints without a training job.
//
//   dct-ckpt info FILE        format, version, ranks, and every request's metadata
//   dct-ckpt verify FILE      checks every rank's residual against its checksum
//   dct-ckpt diff FILE FILE   max |a - b| of every request's residuals and thresholds
//
// Exit status: 0 on success (verify: all checksums match; diff: files comparable), 1 when a
// check fails, 2 on usage or read errors.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"

namespace {

using dct::detail::CheckpointReader;
using dct::detail::SavedRequest;

std::vector<double> residual_row(const CheckpointReader &file, const SavedRequest &request,
                                 int rank) {
  const std::size_t n = static_cast<std::size_t>(request.count);
  std::vector<double> values(n, 0.0);
  if (!request.has_residual) {
    // Nothing to show; a velocity's, state's or last update's row is still read, which checks
    // it against the checksum.
    if (request.has_row_data()) file.read_row(request, rank, nullptr, nullptr);
    return values;
  }
  if (request.element_size == 4) {
    std::vector<float> row(n);
    file.read_residual(request, rank, row.data());
    std::copy(row.begin(), row.end(), values.begin());
  } else {
    file.read_residual(request, rank, values.data());
  }
  return values;
}

int info(const std::string &path) {
  CheckpointReader file(path, MPI_COMM_SELF);
  std::printf("%s: dct checkpoint, format version %d, written by dct %s on %d ranks\n",
              path.c_str(), file.format_version(), file.dct_version().c_str(), file.ranks());
  // kind: up to "alltoallv_backward"
  std::printf("%-24s %-18s %12s %-6s %8s %9s %8s %-9s %s\n", "request", "kind", "count", "type",
              "calls", "density", "interval", "algorithm", "tau (per rank)");
  for (const SavedRequest &r : file.requests()) {
    std::string taus;
    for (double tau : r.tau) taus += (taus.empty() ? "" : " ") + std::to_string(tau);
    std::printf("%-24s %-18s %12lld %-6s %8lld %9g %8lld %-9s %s%s%s%s%s\n", r.name.c_str(),
                r.kind.c_str(), static_cast<long long>(r.count),
                r.element_size == 4 ? "float" : "double", static_cast<long long>(r.calls),
                r.density, static_cast<long long>(r.interval), r.algorithm.c_str(), taus.c_str(),
                r.has_residual ? "" : "  (no residual)", r.has_velocity ? "  (+velocity)" : "",
                r.state_words > 0 ? "  (+state)" : "", r.has_last_update ? "  (+last update)" : "");
  }
  return 0;
}

int verify(const std::string &path) {
  CheckpointReader file(path, MPI_COMM_SELF);
  int bad = 0;
  for (const SavedRequest &r : file.requests()) {
    for (int rank = 0; rank < file.ranks() && r.has_row_data(); ++rank) {
      try {
        residual_row(file, r, rank);
      } catch (const dct::detail::Error &e) {
        std::printf("FAIL %s rank %d: %s\n", r.name.c_str(), rank, e.what());
        ++bad;
      }
    }
  }
  std::printf("%s: %zu request(s), %d checksum failure(s)\n", path.c_str(), file.requests().size(),
              bad);
  return bad == 0 ? 0 : 1;
}

int diff(const std::string &a_path, const std::string &b_path) {
  CheckpointReader a(a_path, MPI_COMM_SELF), b(b_path, MPI_COMM_SELF);
  int incomparable = 0;
  std::printf("%-24s %14s %14s\n", "request", "max|residual|", "max|tau|");
  for (const SavedRequest &ra : a.requests()) {
    const SavedRequest *rb = b.find(ra.name);
    if (!rb || rb->count != ra.count || a.ranks() != b.ranks()) {
      std::printf("%-24s only in %s, or of another size or rank count\n", ra.name.c_str(),
                  a_path.c_str());
      ++incomparable;
      continue;
    }
    double residual = 0, tau = 0;
    for (int rank = 0; rank < a.ranks(); ++rank) {
      const std::vector<double> x = residual_row(a, ra, rank), y = residual_row(b, *rb, rank);
      for (std::size_t i = 0; i < x.size(); ++i)
        residual = std::max(residual, std::abs(x[i] - y[i]));
      tau = std::max(tau, std::abs(ra.tau[rank] - rb->tau[rank]));
    }
    std::printf("%-24s %14.6g %14.6g\n", ra.name.c_str(), residual, tau);
  }
  for (const SavedRequest &rb : b.requests())
    if (!a.find(rb.name)) {
      std::printf("%-24s only in %s\n", rb.name.c_str(), b_path.c_str());
      ++incomparable;
    }
  return incomparable == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  CLI::App app{"dct-ckpt: look into dct checkpoints without a training job"};
  app.require_subcommand(1);
  std::string path, other;
  CLI::App *info_command =
      app.add_subcommand("info", "format, version, ranks, and every request's metadata");
  info_command->add_option("FILE", path, "checkpoint")->required()->check(CLI::ExistingFile);
  CLI::App *verify_command =
      app.add_subcommand("verify", "checks every rank's residual against its checksum");
  verify_command->add_option("FILE", path, "checkpoint")->required()->check(CLI::ExistingFile);
  CLI::App *diff_command =
      app.add_subcommand("diff", "max |a - b| of every request's residuals and thresholds");
  diff_command->add_option("FILE", path, "checkpoint")->required()->check(CLI::ExistingFile);
  diff_command->add_option("OTHER", other, "checkpoint")->required()->check(CLI::ExistingFile);
  int status = 2;
  try {
    app.parse(argc, argv);
    if (info_command->parsed())
      status = info(path);
    else if (verify_command->parsed())
      status = verify(path);
    else
      status = diff(path, other);
  } catch (const CLI::ParseError &e) {
    status = app.exit(e) == static_cast<int>(CLI::ExitCodes::Success) ? 0 : 2;
  } catch (const dct::detail::Error &e) {
    char text[DCT_MAX_ERROR_STRING];
    int length = 0;
    DCT_Error_string(e.code(), text, &length);
    std::fprintf(stderr, "dct-ckpt: %s (%s)\n", e.what(), text);
  }
  MPI_Finalize();
  return status;
}
