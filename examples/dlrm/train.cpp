// One mode's training run: data order, steps, evaluation, and the metrics of every epoch.
#include "train.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <vector>

#include "layers.hpp"

namespace dlrm {
namespace {

using nlohmann::json;

/// Sums, minima and maxima over the ranks of one epoch's per-rank numbers.
json reduce_epoch(const CommStats &s, double loss_sum, double wall, double eval_s,
                  const EvalResult &eval, int64_t samples, int test_count, MPI_Comm comm) {
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  int64_t ints[6] = {s.dp_bytes_sent,  s.dp_dense_bytes, s.mp_bytes_sent,
                     s.mp_dense_bytes, eval.correct,     s.dp_density.calls};
  MPI_Allreduce(MPI_IN_PLACE, ints, 6, MPI_INT64_T, MPI_SUM, comm);
  double sums[6] = {loss_sum,         s.seconds,     wall - s.seconds,
                    s.dp_density.sum, s.mp_keep.sum, double(s.mp_keep.calls)};
  MPI_Allreduce(MPI_IN_PLACE, sums, 6, MPI_DOUBLE, MPI_SUM, comm);
  double mins[2] = {s.dp_density.min, s.mp_keep.min};
  double maxs[3] = {s.dp_density.max, s.mp_keep.max, wall};
  MPI_Allreduce(MPI_IN_PLACE, mins, 2, MPI_DOUBLE, MPI_MIN, comm);
  MPI_Allreduce(MPI_IN_PLACE, maxs, 3, MPI_DOUBLE, MPI_MAX, comm);
  double eval_loss = eval.loss_sum;
  MPI_Allreduce(MPI_IN_PLACE, &eval_loss, 1, MPI_DOUBLE, MPI_SUM, comm);
  int64_t forward[2] = {s.mp_fwd_bytes_sent, s.mp_fwd_dense_bytes};
  MPI_Allreduce(MPI_IN_PLACE, forward, 2, MPI_INT64_T, MPI_SUM, comm);
  double max_error = s.mp_max_error;
  MPI_Allreduce(MPI_IN_PLACE, &max_error, 1, MPI_DOUBLE, MPI_MAX, comm);

  auto ratio = [](int64_t dense, int64_t sent) { return sent > 0 ? double(dense) / sent : 0.0; };
  json e;
  e["train_loss"] = loss_sum = sums[0] / double(samples);
  e["test_accuracy"] = double(ints[4]) / test_count;
  e["test_loss"] = eval_loss / test_count;
  // Bytes: sums over the ranks, and the mean per rank (what each rank sent).
  e["dp_bytes_sent"] = ints[0];
  e["dp_dense_bytes"] = ints[1];
  e["dp_bytes_sent_per_rank"] = double(ints[0]) / ranks;
  e["dp_ratio"] = ratio(ints[1], ints[0]);
  e["mp_bytes_sent"] = ints[2];
  e["mp_dense_bytes"] = ints[3];
  e["mp_bytes_sent_per_rank"] = double(ints[2]) / ranks;
  e["mp_ratio"] = ratio(ints[3], ints[2]);
  e["mp_forward_bytes_sent"] = forward[0];  // the embedding lookups alone
  e["mp_forward_ratio"] = ratio(forward[1], forward[0]);
  e["mp_max_abs_error"] = max_error;  // eb: largest error of a received lookup
  e["dp_calls"] = ints[5];
  e["dp_density"] = {{"mean", ints[5] ? sums[3] / double(ints[5]) : 0.0},
                     {"min", ints[5] ? mins[0] : 0.0},
                     {"max", ints[5] ? maxs[0] : 0.0}};
  const bool mp = sums[5] > 0;
  e["mp_keep"] = {{"mean", mp ? sums[4] / sums[5] : 0.0},
                  {"min", mp ? mins[1] : 0.0},
                  {"max", mp ? maxs[1] : 0.0}};
  e["comm_s"] = sums[1] / ranks;  // mean over ranks
  e["compute_s"] = sums[2] / ranks;
  e["wall_s"] = maxs[2];  // the slowest rank
  e["eval_s"] = eval_s;
  return e;
}

/// Gathers every rank's dumped lookups (steps x P blocks each) to rank 0 in the file's order:
/// step, sender, receiver.
void gather_dump(const std::vector<float> &mine, LookupDump &dump, int ranks, int rows, int d,
                 MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const size_t per_step = size_t(ranks) * rows * d;  // one sender's blocks of one step
  std::vector<float> all(rank == 0 ? mine.size() * size_t(ranks) : 0);
  MPI_Gather(mine.data(), int(mine.size()), MPI_FLOAT, all.data(), int(mine.size()), MPI_FLOAT, 0,
             comm);
  dump.taken = true;
  dump.ranks = ranks, dump.rows = rows, dump.d = d;
  if (rank != 0) return;
  dump.data.resize(all.size());
  for (int sender = 0; sender < ranks; ++sender)
    for (int step = 0; step < dump.steps; ++step) {
      const float *from = &all[(size_t(sender) * dump.steps + size_t(step)) * per_step];
      std::copy(from, from + per_step,
                &dump.data[(size_t(step) * ranks + size_t(sender)) * per_step]);
    }
}

void print_epoch(const std::string &mode, int epoch, int epochs, const json &e,
                 bool model_parallel) {
  std::printf(
      "[%s] epoch %d/%d  loss %.4f  test acc %.2f%%  wall %.2fs (comm %.2fs, compute "
      "%.2fs, eval %.2fs)\n",
      mode.c_str(), epoch, epochs, e["train_loss"].get<double>(),
      100.0 * e["test_accuracy"].get<double>(), e["wall_s"].get<double>(),
      e["comm_s"].get<double>(), e["compute_s"].get<double>(), e["eval_s"].get<double>());
  std::printf("        DP %.3f MB/rank (dense %.3f MB, %.1fx)  density %.4f [%.4f, %.4f]\n",
              e["dp_bytes_sent_per_rank"].get<double>() / 1e6,
              e["dp_dense_bytes"].get<double>() / 1e6 / double(e["ranks"].get<int>()),
              e["dp_ratio"].get<double>(), e["dp_density"]["mean"].get<double>(),
              e["dp_density"]["min"].get<double>(), e["dp_density"]["max"].get<double>());
  if (model_parallel)
    std::printf("        MP %.3f MB/rank (dense %.3f MB, %.1fx)  keep %.4f [%.4f, %.4f]\n",
                e["mp_bytes_sent_per_rank"].get<double>() / 1e6,
                e["mp_dense_bytes"].get<double>() / 1e6 / double(e["ranks"].get<int>()),
                e["mp_ratio"].get<double>(), e["mp_keep"]["mean"].get<double>(),
                e["mp_keep"]["min"].get<double>(), e["mp_keep"]["max"].get<double>());
  std::fflush(stdout);
}

}  // namespace

json run_mode(const std::string &mode, const RunConfig &config, const Split &train,
              const Split &test, MPI_Comm comm) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  const int global_batch = config.model.batch * ranks;
  const int steps = train.count / global_batch;  // the last partial global batch is dropped
  std::unique_ptr<Model> model = make_model(config.model, train, test, comm);
  std::unique_ptr<Comm> strategy = make_comm(mode, comm, config.dct);
  strategy->set_bucket_elements(config.bucket_elements);
  strategy->set_bucket_per_block(config.bucket_per_mlp);
  model->bind(*strategy);

  json run;
  run["mode"] = mode;
  run["steps_per_epoch"] = steps;
  run["dp_layer_counts"] = model->dp_layer_counts();
  run["dp_sum_counts"] = strategy->sum_counts();
  run["epochs"] = json::array();
  // --dump-lookups: this rank's lookups of the dumped steps (the first mode only), collected
  // outside the timed part of the step.
  LookupDump *dump =
      config.dump && !config.dump->taken && model->last_lookups() ? config.dump : nullptr;
  const size_t lookup_floats = size_t(ranks) * config.model.batch * model->lookup_row_length();
  std::vector<float> dumped;
  // --trace-indices: the first mode that keeps indices (not dense) records them.
  IndexTrace *trace = config.trace && !config.trace->taken && strategy->set_trace(config.trace)
                          ? config.trace
                          : nullptr;
  if (trace) trace->mode = mode;
  // Where training stands: from the start, or (--resume) from the latest checkpoint, whose
  // state replaces the fresh model's and the requests' (checkpoint.hpp).
  TrainingCheckpoints *checkpoints = config.checkpoints;
  RunState state;
  const bool resumed = checkpoints && checkpoints->load(mode, *model, state);
  if (resumed && rank == 0)  // said even with --quiet: a resumed run should say so
    std::printf("%s: resumed at epoch %d, step %d of %d\n", mode.c_str(), state.epoch + 1,
                state.step, steps);
  run["epochs"] = state.epochs;
  double &first_batch_loss = state.first_batch_loss, &total_wall = state.total_wall;
  int64_t &dp_sent = state.dp_sent, &dp_dense = state.dp_dense, &mp_sent = state.mp_sent,
          &mp_dense = state.mp_dense, &fwd_sent = state.fwd_sent;
  for (int epoch = state.epoch; epoch < config.epochs; ++epoch) {
    const std::vector<int> order = epoch_order(train.count, config.model.seed, epoch);
    const bool continued = epoch == state.epoch && state.step > 0;  // resumed mid-epoch
    strategy->stats() = continued ? state.stats : CommStats();
    MPI_Barrier(comm);  // epochs start together, so wall times compare across modes
    const double start = MPI_Wtime() - (continued ? state.epoch_wall : 0.0);
    double loss_sum = continued ? state.loss_sum : 0.0, dump_s = 0.0;
    for (int step = continued ? state.step : 0; step < steps; ++step) {
      const int64_t global_step = int64_t(epoch) * steps + step + 1;
      if (checkpoints && checkpoints->die_at.at(mode, global_step) && rank == ranks - 1)
        ::raise(SIGKILL);  // test hook: a rank killed in the middle of an epoch
      if (trace) {
        trace->step = global_step;
        trace->active = trace->covers(global_step);
      }
      const float scale =
          lr_scale(config.model.lr_schedule, global_step - 1, int64_t(config.epochs) * steps);
      const double loss = model->train_step(&order[size_t(step) * global_batch], *strategy, scale);
      loss_sum += loss;
      if (dump && dump->covers(global_step)) {
        const double dump_start = MPI_Wtime();
        const float *lookups = model->last_lookups();
        dumped.insert(dumped.end(), lookups, lookups + lookup_floats);
        dump_s += MPI_Wtime() - dump_start;
      }
      if (epoch == 0 && step == 0) {
        double global = loss;
        MPI_Allreduce(MPI_IN_PLACE, &global, 1, MPI_DOUBLE, MPI_SUM, comm);
        first_batch_loss = global / global_batch;
      }
      if (checkpoints && checkpoints->every() > 0 && global_step % checkpoints->every() == 0) {
        state.epoch = epoch;
        state.step = step + 1;
        state.loss_sum = loss_sum;
        state.epoch_wall = MPI_Wtime() - start - dump_s;
        state.stats = strategy->stats();
        state.epochs = run["epochs"];
        checkpoints->save(mode, global_step, *model, state);
      }
    }
    const double wall = MPI_Wtime() - start - dump_s;
    const double eval_start = MPI_Wtime();
    const EvalResult eval = model->evaluate();
    const double eval_s = MPI_Wtime() - eval_start;
    json e = reduce_epoch(strategy->stats(), loss_sum, wall, eval_s, eval,
                          int64_t(steps) * global_batch, test.count, comm);
    e["epoch"] = epoch + 1;
    e["ranks"] = ranks;
    dp_sent += e["dp_bytes_sent"].get<int64_t>();
    dp_dense += e["dp_dense_bytes"].get<int64_t>();
    mp_sent += e["mp_bytes_sent"].get<int64_t>();
    mp_dense += e["mp_dense_bytes"].get<int64_t>();
    fwd_sent += e["mp_forward_bytes_sent"].get<int64_t>();
    total_wall += e["wall_s"].get<double>();
    if (rank == 0 && config.verbose)
      print_epoch(mode, epoch + 1, config.epochs, e, config.model.model == "dlrm");
    run["epochs"].push_back(e);
  }

  if (trace) {
    strategy->set_trace(nullptr);
    trace->active = false;
    trace->gather(comm);
  }
  if (dump) gather_dump(dumped, *dump, ranks, config.model.batch, model->lookup_row_length(), comm);

  // One checksum over every rank's parameters, in rank order: equal runs have equal bits.
  const uint64_t mine = model->checksum();
  std::vector<uint64_t> hashes(static_cast<size_t>(ranks));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, comm);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(fnv1a(hashes.data(), hashes.size() * 8)));

  json final;
  final["first_batch_loss"] = first_batch_loss;
  final["train_loss"] = run["epochs"].back()["train_loss"];  // epochs >= 1
  final["test_accuracy"] = run["epochs"].back()["test_accuracy"];
  // The best epoch too: a run stopped early at its best (a dense run that overfits) is what a
  // compressed run's final accuracy should also be compared with.
  int best = 0;
  for (int e = 1; e < int(run["epochs"].size()); ++e)
    if (run["epochs"][size_t(e)]["test_accuracy"].get<double>() >
        run["epochs"][size_t(best)]["test_accuracy"].get<double>())
      best = e;
  final["best_test_accuracy"] = run["epochs"][size_t(best)]["test_accuracy"];
  final["best_epoch"] = best + 1;
  final["dp_bytes_sent"] = dp_sent;
  final["dp_dense_bytes"] = dp_dense;
  final["dp_ratio"] = dp_sent > 0 ? double(dp_dense) / dp_sent : 0.0;
  final["mp_bytes_sent"] = mp_sent;
  final["mp_dense_bytes"] = mp_dense;
  final["mp_ratio"] = mp_sent > 0 ? double(mp_dense) / mp_sent : 0.0;
  // The forward carries half of the dense MP bytes (same shapes both ways).
  final["mp_forward_ratio"] = fwd_sent > 0 ? double(mp_dense) / 2.0 / double(fwd_sent) : 0.0;
  final["wall_s"] = total_wall;
  final["checksum"] = hex;
  run["final"] = final;
  if (checkpoints) checkpoints->finish(mode, run);  // a resumed run skips this mode
  return run;
}

}  // namespace dlrm
