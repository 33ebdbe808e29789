// Over 450 lines: the demo's whole training loop and its command line, read top to bottom.
// dct-dlrm: DLRM (or a plain MLP) on Fashion-MNIST, trained with dense MPI collectives and with
// dct's compressed ones from the same initial values, and compared.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "dct/dct.hpp"
#include "train.hpp"

#if __has_include(<cblas.h>)
#include <cblas.h>
#endif
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace {

using nlohmann::json;

/// Subnormal results and operands as zero on this thread (x86's FTZ and DAZ bits). With sparse
/// sums, the momentum of parameters that get no update for a while decays geometrically
/// (0.9 per step) into subnormals after ~800 steps, and each of those costs a microcode assist:
/// from epoch 3 the dct run's optimiser took twice as long, and every rank waited for the
/// slowest (0.41 -> 0.62 s an epoch). The results here were the same bits either way.
void flush_denormals() {
#if defined(__SSE__) || defined(__x86_64__)
  _mm_setcsr(_mm_getcsr() | 0x8040u);  // FTZ (bit 15) and DAZ (bit 6)
#endif
}

/// Exit codes: bad command line as CLI11 tools do, data errors and runtime failures.
constexpr int kExitUsage = 2;
constexpr int kExitData = 1;

/// Value checks with the messages CLI11 prints for bad flags.
std::string in_unit_interval(const std::string &text) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v > 0.0 && v <= 1.0) return {};
  } catch (const std::exception &) {
  }
  return "must be a number in (0, 1]";
}

std::vector<std::string> split_list(const std::string &text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

/// Every rank loads the data itself; they agree on success before anyone goes on, so a bad
/// dataset ends every rank cleanly with the message instead of a hang or an abort.
bool load_data(const std::string &dir, int train_limit, int test_limit, dlrm::Split &train,
               dlrm::Split &test, int rank) {
  std::string error;
  try {
    train = dlrm::load_split(dir, "train", train_limit);
    test = dlrm::load_split(dir, "t10k", test_limit);
  } catch (const std::exception &e) {
    error = e.what();
  }
  int ok = error.empty() ? 1 : 0, all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  int first_failing = ok ? 1 << 30 : rank;
  MPI_Allreduce(MPI_IN_PLACE, &first_failing, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!ok && rank == first_failing)
    std::fprintf(stderr, "dct-dlrm: dataset error: %s\n", error.c_str());
  return all_ok == 1;
}

/// Writes `--dump-lookups` (format: examples/dlrm/README.md, "Dumping the lookups"): a 40-byte
/// header of an 8-byte magic and eight little-endian u32, then the float32 values.
bool write_lookups(const std::string &path, const dlrm::LookupDump &dump, int table_columns) {
  const uint16_t probe = 1;
  unsigned char low = 0;
  std::memcpy(&low, &probe, 1);
  if (low != 1) {
    std::fprintf(stderr, "dct-dlrm: --dump-lookups writes little-endian files only\n");
    return false;
  }
  const uint32_t header[8] = {1,  // version
                              4,  // bytes per value: IEEE float32
                              uint32_t(dump.ranks),
                              uint32_t(dump.steps),
                              uint32_t(dump.rows),
                              uint32_t(dump.d),
                              uint32_t(table_columns),
                              0};  // reserved
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write("DCTLOOKS", 8);
  file.write(reinterpret_cast<const char *>(header), sizeof header);
  file.write(reinterpret_cast<const char *>(dump.data.data()),
             std::streamsize(dump.data.size() * sizeof(float)));
  file.close();
  if (!file) {
    std::fprintf(stderr, "dct-dlrm: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

/// The table of the runs. "vs dense" is the dense run's wall time over this run's (above 1: this
/// run finished sooner), where the modes include dense.
void print_table(const json &runs, bool model_parallel) {
  double dense_wall = 0.0;
  for (const json &run : runs)
    if (run["mode"] == "dense") dense_wall = run["final"]["wall_s"].get<double>();
  std::printf("\n%-6s %10s %12s %10s %10s %10s %10s %10s %10s %9s %18s\n", "mode", "test acc",
              "best (ep)", "loss", "DP ratio", "MP ratio", "MP fwd", "comm s", "wall s", "vs dense",
              "checksum");
  for (const json &run : runs) {
    const json &f = run["final"];
    double comm = 0.0;
    for (const json &e : run["epochs"]) comm += e["comm_s"].get<double>();
    char mp[32] = "-", fwd[32] = "-";  // the MLP has no model-parallel exchange
    if (model_parallel) {
      std::snprintf(mp, sizeof mp, "%.1fx", f["mp_ratio"].get<double>());
      std::snprintf(fwd, sizeof fwd, "%.1fx", f["mp_forward_ratio"].get<double>());
    }
    char best[32];
    std::snprintf(best, sizeof best, "%.2f%% (%d)", 100.0 * f["best_test_accuracy"].get<double>(),
                  f["best_epoch"].get<int>());
    const double wall = f["wall_s"].get<double>();
    char versus[32] = "-";
    if (dense_wall > 0.0 && wall > 0.0)
      std::snprintf(versus, sizeof versus, "%.2fx", dense_wall / wall);
    std::printf("%-6s %9.2f%% %12s %10.4f %9.1fx %10s %10s %10.2f %10.2f %9s %18s\n",
                run["mode"].get<std::string>().c_str(), 100.0 * f["test_accuracy"].get<double>(),
                best, f["train_loss"].get<double>(), f["dp_ratio"].get<double>(), mp, fwd, comm,
                wall, versus, f["checksum"].get<std::string>().c_str());
  }
}

int run(int argc, char **argv, int rank, int ranks) {
  dlrm::RunConfig config;
  std::string data_dir = "/usr/share/datasets/fashion-mnist", modes_text = "dense,dct", json_path;
  int train_limit = 0, test_limit = 0;
  float emb_lr = -1.0f;
  int interval = 0;  // 0: not given, the library's default

  CLI::App app{"dct-dlrm: DLRM on Fashion-MNIST with dense vs dct compressed collectives"};
  app.set_help_all_flag("--help-all");
  app.add_option("--model", config.model.model, "dlrm (hybrid parallel) or mlp (data parallel)")
      ->check(CLI::IsMember({"dlrm", "mlp"}))
      ->capture_default_str();
  app.add_option("--modes", modes_text,
                 "comma-separated modes run one after the other: dense, dct, eb (DCT-DP with "
                 "the error-bounded embedding all-to-all)")
      ->capture_default_str();
  app.add_option("--data", data_dir, "directory of the gzipped IDX files")->capture_default_str();
  app.add_option("--epochs", config.epochs, "epochs per mode")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--train-limit", train_limit, "use the first N training images (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--test-limit", test_limit, "evaluate the first N test images (0: all)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch", config.model.batch, "samples per rank per step")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--lr", config.model.lr, "learning rate of the MLPs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--momentum", config.model.momentum, "SGD momentum of the MLPs")
      ->check(CLI::Range(0.0, 0.999999))
      ->capture_default_str();
  app.add_option("--lr-schedule", config.model.lr_schedule,
                 "constant, or cosine: both learning rates follow half a cosine from their value "
                 "down to 0 over the run's steps (scaled every step)")
      ->check(CLI::IsMember({"constant", "cosine"}))
      ->capture_default_str();
  app.add_option("--emb-lr", emb_lr, "learning rate of the embedding rows (default: --lr)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", config.model.seed, "seed of the init and the data order")
      ->capture_default_str();
  app.add_option("--table-size", config.model.table_size, "rows per embedding table")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--emb-dim", config.model.emb_dim, "embedding dimension")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--bottom-mlp", config.model.bottom_hidden,
                 "dlrm: hidden widths of the bottom MLP, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  app.add_option("--top-mlp", config.model.top_hidden,
                 "dlrm: hidden widths of the top MLP, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  bool paper_sizes = false;
  app.add_flag("--paper-sizes", paper_sizes,
               "dlrm: the DCT paper's Criteo DLRM layer widths, bottom 512,256,64 and top "
               "512,256 (461,914 MLP parameters instead of 48,154)")
      ->excludes("--bottom-mlp")
      ->excludes("--top-mlp");
  app.add_option("--density", config.dct.density, "dct_density of DCT-DP (library default 0.01)")
      ->check(in_unit_interval);
  app.add_option("--density-warmup", config.dct.density_warmup,
                 "dct_density_warmup of DCT-DP: START,CALLS, the density falling from START to "
                 "--density over the first CALLS steps (off by default)");
  app.add_option("--keep", config.dct.keep, "dct_keep of DCT-MP (library default 0.05)")
      ->check(in_unit_interval);
  app.add_option("--values", config.dct.values,
                 "dct_values: how kept values travel (DCT-DP, and DCT-MP unless --mp-values; "
                 "sign is DCT-DP's only)")
      ->check(CLI::IsMember({"native", "fp16", "bf16", "sign"}));
  app.add_option("--mp-values", config.dct.mp_values, "dct_values of DCT-MP")
      ->check(CLI::IsMember({"native", "fp16", "bf16"}));
  app.add_option("--interval", interval,
                 "dct_interval: calls between threshold estimates (library default 1000)")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--mp-select", config.dct.mp_select, "dct_mp_select of DCT-MP")
      ->check(CLI::IsMember({"exact", "laplace", "threshold"}));
  app.add_option("--algorithm", config.dct.algorithm, "dct_algorithm of DCT-DP")
      ->check(CLI::IsMember(
          {"auto", "allgather", "split", "hierarchical", "recursive_doubling", "dense"}));
  app.add_option("--result-density", config.dct.result_density,
                 "dct_result_density of DCT-DP: the sum keeps about this fraction (split)");
  double bucket_mb = 0.0;
  app.add_option("--bucket-mb", bucket_mb,
                 "gradient buckets of up to this many MB (PyTorch DDP's bucket_cap_mb): "
                 "consecutive layers summed as one request, so dct selects over the bucket; "
                 "0: one request per layer")
      ->check(CLI::Range(0.0, 1024.0))
      ->capture_default_str();
  app.add_flag("--bucket-per-mlp", config.bucket_per_mlp,
               "one request per MLP: each MLP's gradients in one bucket (split further at "
               "--bucket-mb when that is not 0)");
  bool momentum_correction = false;
  CLI::Option *momentum_correction_flag = app.add_flag(
      "--momentum-correction", momentum_correction,
      "dct mode: the library applies the MLPs' momentum before compressing "
      "(dct_momentum, DGC's momentum correction) instead of the optimizer after the sum");
  app.add_option(
         "--momentum-result", config.dct.momentum_result,
         "with --momentum-correction: dct_momentum_result; 'gradient' keeps the "
         "optimizer's momentum (the library returns gradients whose momentum is the "
         "corrected update), 'update' (the library's default) applies the sums as plain SGD")
      ->check(CLI::IsMember({"update", "gradient"}))
      ->needs(momentum_correction_flag);
  app.add_option("--error-bound", config.dct.error_bound,
                 "eb: dct_error_bound (relative; a list per local table; auto[:CLASSES])");
  app.add_option("--error-bound-schedule", config.dct.error_bound_schedule,
                 "eb: dct_error_bound_schedule START,CALLS");
  app.add_option("--backward-error-bound", config.dct.backward_error_bound,
                 "eb: dct_backward_error_bound (default: gradients uncompressed)");
  app.add_option("--lossless", config.dct.lossless, "eb: dct_lossless")
      ->check(CLI::IsMember({"auto", "none", "lz4", "zstd"}));
  app.add_option("--beta-gbps", config.dct.beta_gbps,
                 "eb: dct_beta_gbps of the MP request (the bandwidth the lossless stage is "
                 "chosen for; 0.125 = 1 Gbit/s)");
  app.add_option("--json", json_path, "write every metric (per epoch and final) to FILE");
  std::string dump_path;
  dlrm::LookupDump dump;
  app.add_option("--dump-lookups", dump_path,
                 "write the forward embedding lookups of --dump-steps training steps of the "
                 "first mode to FILE (for dct-bench alltoallv --blocks; dlrm only)");
  app.add_option("--dump-step", dump.first,
                 "first step dumped, 1-based over all epochs (0: the run's last steps)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40))
      ->capture_default_str();
  app.add_option("--dump-steps", dump.steps, "consecutive steps dumped")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  std::string trace_path;
  dlrm::IndexTrace trace;
  app.add_option("--trace-indices", trace_path,
                 "write the kept indices of every DCT-DP request in --trace-steps training "
                 "steps of the first dct or eb mode to FILE (text; needs native values)");
  app.add_option("--trace-step", trace.first,
                 "first step traced, 1-based over all epochs (0: the run's last steps)")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 40))
      ->capture_default_str();
  app.add_option("--trace-steps", trace.steps, "consecutive steps traced")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_flag(
      "--quiet", [&](int64_t) { config.verbose = false; }, "print only the final table");
  std::string checkpoint_dir, die_at, die_in_save;
  int64_t checkpoint_every = 200;
  bool resume = false;
  app.add_option("--checkpoint", checkpoint_dir,
                 "save the whole training state (model, optimizer, position, dct's requests) "
                 "under DIR every --checkpoint-every steps");
  app.add_option("--checkpoint-every", checkpoint_every, "steps between two checkpoints")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40))
      ->capture_default_str();
  app.add_flag("--resume", resume,
               "continue from the latest checkpoint under --checkpoint DIR, bit for bit (same "
               "options and rank count; finished modes are skipped)");
  // Test hooks (tests/checkpoint_resume.sh), hidden: MODE:STEP, the last rank SIGKILLs itself.
  app.add_option("--die-at", die_at, "before that training step")->group("");
  app.add_option("--die-in-save", die_in_save, "inside the checkpoint of that step")->group("");
  bool keep_denormals = false;
  app.add_flag("--keep-denormals", keep_denormals,
               "compute with subnormal floats (default: flushed to zero, as TensorFlow's CPU "
               "kernels and torch.set_flush_denormal(True) do)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    const bool help = e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success);
    if (rank == 0) app.exit(e);  // prints the help, or the error and a hint
    return help ? 0 : kExitUsage;
  }
  if (!keep_denormals) flush_denormals();
  config.model.emb_lr = emb_lr > 0 ? emb_lr : config.model.lr;
  config.bucket_elements = int64_t(bucket_mb * 1e6 / sizeof(float));
  if (momentum_correction) config.dct.momentum = std::to_string(config.model.momentum);
  if (paper_sizes) {
    config.model.bottom_hidden = {512, 256, 64};
    config.model.top_hidden = {512, 256};
  }
  if (interval > 0) config.dct.interval = std::to_string(interval);
  config.dct.table_columns = std::to_string(config.model.emb_dim);
  const std::vector<std::string> modes = split_list(modes_text);
  for (const std::string &mode : modes)
    if (mode != "dense" && mode != "dct" && mode != "eb") {
      if (rank == 0)
        std::fprintf(stderr, "--modes: unknown mode '%s' (dense, dct, eb)\n", mode.c_str());
      return kExitUsage;
    }
  if (modes.empty()) {
    if (rank == 0) std::fprintf(stderr, "--modes: no mode given (dense, dct, eb)\n");
    return kExitUsage;
  }
  if (config.model.model == "dlrm" && dlrm::kCategorical % ranks != 0) {
    // DCT-MP needs one row length on every rank: each must own as many tables.
    if (rank == 0)
      std::fprintf(stderr,
                   "dct-dlrm: the %d embedding tables must divide evenly among the "
                   "ranks; %d ranks do not divide %d (use 1, 2, 4, 8 or 16 ranks)\n",
                   dlrm::kCategorical, ranks, dlrm::kCategorical);
    return kExitUsage;
  }

  dlrm::Split train, test;
  if (!load_data(data_dir, train_limit, test_limit, train, test, rank)) return kExitData;
  if (train.count < config.model.batch * ranks) {
    if (rank == 0)
      std::fprintf(stderr,
                   "dct-dlrm: %d training images are less than one global batch (%d x "
                   "%d ranks)\n",
                   train.count, config.model.batch, ranks);
    return kExitUsage;
  }
  if (rank == 0 && config.verbose)
    std::printf(
        "dct-dlrm: model %s, %d ranks, %d train / %d test images, batch %d per rank, "
        "%d epochs\n",
        config.model.model.c_str(), ranks, train.count, test.count, config.model.batch,
        config.epochs);

  // Training steps per mode, for the windows of --dump-lookups and --trace-indices.
  const int64_t run_steps = int64_t(train.count / (config.model.batch * ranks)) * config.epochs;
  if (!dump_path.empty()) {
    const bool inside = dump.resolve(run_steps);
    const int64_t floats = int64_t(dump.steps) * ranks * config.model.batch *
                           (dlrm::kCategorical / ranks) * config.model.emb_dim;
    const char *problem = config.model.model != "dlrm" ? "needs --model dlrm (lookups)"
                          : !inside                    ? "the dumped steps are not all in the run"
                          : floats > INT_MAX           ? "more than INT_MAX values per rank"
                                                       : nullptr;
    if (problem) {
      if (rank == 0)
        std::fprintf(stderr, "--dump-lookups: %s (%lld steps of %lld from step %lld)\n", problem,
                     static_cast<long long>(dump.steps), static_cast<long long>(run_steps),
                     static_cast<long long>(dump.first));
      return kExitUsage;
    }
    config.dump = &dump;
  }

  if (!trace_path.empty()) {
    bool compressed = false;
    for (const std::string &mode : modes) compressed = compressed || mode != "dense";
    const std::string problem =
        trace.resolve(run_steps, compressed, config.dct.values, !config.dct.momentum.empty());
    if (!problem.empty()) {
      if (rank == 0) std::fprintf(stderr, "--trace-indices: %s\n", problem.c_str());
      return kExitUsage;
    }
    config.trace = &trace;
  }

  const json settings = {{"model", config.model.model},
                         {"ranks", ranks},
                         {"batch", config.model.batch},
                         {"epochs", config.epochs},
                         {"lr", config.model.lr},
                         {"momentum", config.model.momentum},
                         {"emb_lr", config.model.emb_lr},
                         {"lr_schedule", config.model.lr_schedule},
                         {"seed", config.model.seed},
                         {"table_size", config.model.table_size},
                         {"emb_dim", config.model.emb_dim},
                         {"bottom_mlp", config.model.bottom_hidden},
                         {"top_mlp", config.model.top_hidden},
                         {"tables", dlrm::kCategorical},
                         {"train_images", train.count},
                         {"test_images", test.count},
                         {"density", config.dct.density},
                         {"keep", config.dct.keep},
                         {"values", config.dct.values},
                         {"interval", config.dct.interval},
                         {"mp_select", config.dct.mp_select},
                         {"algorithm", config.dct.algorithm},
                         {"momentum_correction", momentum_correction},
                         {"momentum_result", config.dct.momentum_result},
                         {"bucket_mb", bucket_mb},
                         {"bucket_per_mlp", config.bucket_per_mlp},
                         {"result_density", config.dct.result_density},
                         {"density_warmup", config.dct.density_warmup},
                         {"mp_values", config.dct.mp_values},
                         {"error_bound", config.dct.error_bound},
                         {"error_bound_schedule", config.dct.error_bound_schedule},
                         {"lossless", config.dct.lossless},
                         {"beta_gbps", config.dct.beta_gbps},
                         {"backward_error_bound", config.dct.backward_error_bound}};

  std::unique_ptr<dlrm::TrainingCheckpoints> checkpoints;
  if (resume && checkpoint_dir.empty()) {
    if (rank == 0) std::fprintf(stderr, "--resume needs --checkpoint DIR\n");
    return kExitUsage;
  }
  if (!checkpoint_dir.empty()) {
    const auto death = [&](const std::string &text, dlrm::DeathPoint &point) {
      const size_t colon = text.find(':');
      if (text.empty() || colon == std::string::npos) return text.empty();
      point.mode = text.substr(0, colon);
      point.step = std::strtoll(text.c_str() + colon + 1, nullptr, 10);
      return true;
    };
    json fingerprint = settings;
    fingerprint.erase("epochs");  // a resumed run may train longer
    checkpoints = std::make_unique<dlrm::TrainingCheckpoints>(
        checkpoint_dir, checkpoint_every, resume, fingerprint.dump(), MPI_COMM_WORLD);
    if (!death(die_at, checkpoints->die_at) || !death(die_in_save, checkpoints->die_in_save)) {
      if (rank == 0) std::fprintf(stderr, "--die-at / --die-in-save: MODE:STEP\n");
      return kExitUsage;
    }
    config.checkpoints = checkpoints.get();
  }
  json runs = json::array();
  for (const std::string &mode : modes) {
    json done = checkpoints ? checkpoints->finished(mode) : json(nullptr);
    if (!done.is_null() && rank == 0)
      std::printf("%s: finished before the restart (from %s)\n", mode.c_str(),
                  checkpoint_dir.c_str());
    runs.push_back(done.is_null() ? dlrm::run_mode(mode, config, train, test, MPI_COMM_WORLD)
                                  : done);
  }
  if (rank != 0) return 0;
  if (!dump_path.empty() && !write_lookups(dump_path, dump, config.model.emb_dim)) return kExitData;
  if (!trace_path.empty()) {
    const auto given = [](const std::string &value) { return value.empty() ? "library" : value; };
    const std::string header =
        "model " + config.model.model + " batch " + std::to_string(config.model.batch) + " seed " +
        std::to_string(config.model.seed) + " density " + given(config.dct.density) + " interval " +
        given(config.dct.interval) + " algorithm " + given(config.dct.algorithm) + " bucket_mb " +
        std::to_string(bucket_mb) + " bucket_per_mlp " + (config.bucket_per_mlp ? "1" : "0");
    if (!trace.write(trace_path, header)) return kExitData;
  }
  print_table(runs, config.model.model == "dlrm");
  if (!json_path.empty()) {
    json out;
    out["config"] = settings;
    out["runs"] = runs;
    std::ofstream file(json_path);
    file << out.dump(2) << "\n";
    if (!file) {
      std::fprintf(stderr, "dct-dlrm: cannot write %s\n", json_path.c_str());
      return kExitData;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
#if defined(OPENBLAS_VERSION) || defined(OPENBLAS_CONFIG_H)
  // One BLAS thread per rank: ranks already fill the cores, more threads only thrash.
  openblas_set_num_threads(1);
#endif
  int code = 0;
  try {
    code = run(argc, argv, rank, ranks);
  } catch (const std::exception &e) {
    // A library or MPI failure mid-training: the ranks may be out of step, so no clean exit.
    std::fprintf(stderr, "dct-dlrm: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Finalize();
  return code;
}
