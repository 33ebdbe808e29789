// dct_dlrm_check FILE CHECK...: asserts properties of a dct-dlrm --json file; exit 0 if all
// hold, 1 with a message naming the first that does not.
//   loss-falls  every run's last-epoch mean loss is below its first batch's loss
//   equal-runs  the first two runs trained bit for bit alike (checksum, every epoch's loss)
//   bytes       ratios are dense/sent of the summed DCT_Status bytes, the dense bytes match the
//               documented formulas for the model's shapes, and dct compressed when asked to
//   same-as:F   every run equals F's run of the same mode bit for bit: parameter checksum, and
//               per epoch the train loss, test loss and accuracy, and the bytes sent (a run
//               killed and resumed from its checkpoints against the uninterrupted one)
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

using nlohmann::json;

namespace {

int failures = 0;

void expect(bool ok, const std::string &what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

int64_t ring(int64_t bytes, int64_t ranks) {
  return ranks > 1 ? 2 * (ranks - 1) * bytes / ranks : 0;
}

bool close(double a, double b) {
  return std::fabs(a - b) <= 1e-12 * std::fabs(b);
}

void loss_falls(const json &doc) {
  for (const json &run : doc["runs"]) {
    const double first = run["final"]["first_batch_loss"],
                 last = run["epochs"].back()["train_loss"];
    expect(last < first, run["mode"].get<std::string>() + ": last epoch loss " +
                             std::to_string(last) + " not below first batch's " +
                             std::to_string(first));
  }
}

void equal_runs(const json &doc) {
  const json &runs = doc["runs"];
  if (runs.size() < 2) return expect(false, "equal-runs needs two runs");
  const json &a = runs[0], &b = runs[1];
  expect(a["final"]["checksum"] == b["final"]["checksum"],
         "parameter checksums differ: " + a["final"]["checksum"].get<std::string>() + " vs " +
             b["final"]["checksum"].get<std::string>());
  for (size_t e = 0; e < a["epochs"].size(); ++e) {
    const double la = a["epochs"][e]["train_loss"], lb = b["epochs"][e]["train_loss"];
    expect(la == lb, "epoch " + std::to_string(e + 1) + " losses differ: " + std::to_string(la) +
                         " vs " + std::to_string(lb));
    expect(a["epochs"][e]["test_accuracy"] == b["epochs"][e]["test_accuracy"],
           "epoch " + std::to_string(e + 1) + " test accuracies differ");
  }
}

void same_as(const json &doc, const std::string &path) {
  std::ifstream in(path);
  const json reference = json::parse(in);
  expect(doc["runs"].size() == reference["runs"].size(), "another number of runs than " + path);
  for (size_t r = 0; r < doc["runs"].size() && r < reference["runs"].size(); ++r) {
    const json &a = doc["runs"][r], &b = reference["runs"][r];
    const std::string mode = a["mode"];
    expect(a["mode"] == b["mode"], "run " + std::to_string(r) + ": another mode");
    expect(a["final"]["checksum"] == b["final"]["checksum"],
           mode + ": parameter checksums differ: " + a["final"]["checksum"].get<std::string>() +
               " vs " + b["final"]["checksum"].get<std::string>());
    expect(a["epochs"].size() == b["epochs"].size(), mode + ": another number of epochs");
    for (size_t e = 0; e < a["epochs"].size() && e < b["epochs"].size(); ++e)
      for (const char *key :
           {"train_loss", "test_loss", "test_accuracy", "dp_bytes_sent", "mp_bytes_sent"})
        expect(a["epochs"][e][key] == b["epochs"][e][key],
               mode + ": epoch " + std::to_string(e + 1) + ": " + key + " " +
                   a["epochs"][e][key].dump() + " vs " + b["epochs"][e][key].dump());
  }
}

void bytes(const json &doc) {
  const json &c = doc["config"];
  const int64_t p = c["ranks"], batch = c["batch"];
  const bool dlrm = c["model"] == "dlrm";
  const int64_t d = dlrm ? int64_t(c["tables"]) / p * int64_t(c["emb_dim"]) : 0;
  for (const json &run : doc["runs"]) {
    const std::string mode = run["mode"];
    const int64_t steps = run["steps_per_epoch"];
    int64_t dp_step = 0;  // per rank and step: one ring allreduce per sum (layer or bucket)
    int64_t layers = 0, sums = 0;
    for (const json &count : run["dp_layer_counts"]) layers += int64_t(count);
    for (const json &count : run["dp_sum_counts"]) {
      dp_step += ring(int64_t(count) * 4, p);
      sums += int64_t(count);
    }
    expect(sums == layers, mode + ": the buckets hold " + std::to_string(sums) +
                               " parameters, the layers " + std::to_string(layers));
    // forward + backward, to the P-1 other ranks, batch rows of d floats each
    const int64_t mp_step = dlrm ? 2 * (p - 1) * batch * d * 4 : 0;
    int64_t dp_sent = 0, dp_dense = 0, mp_sent = 0, mp_dense = 0;
    for (const json &e : run["epochs"]) {
      const std::string where = mode + " epoch " + std::to_string(int(e["epoch"])) + ": ";
      const int64_t ds = e["dp_bytes_sent"], dd = e["dp_dense_bytes"];
      const int64_t ms = e["mp_bytes_sent"], md = e["mp_dense_bytes"];
      expect(dd == steps * p * dp_step,
             where + "DP dense bytes " + std::to_string(dd) +
                 " != steps x ranks x sum of ring(sum) = " + std::to_string(steps * p * dp_step));
      expect(md == steps * p * mp_step, where + "MP dense bytes " + std::to_string(md) +
                                            " != " + std::to_string(steps * p * mp_step));
      expect(close(e["dp_ratio"], double(dd) / double(ds)), where + "dp_ratio is not dense/sent");
      if (dlrm)
        expect(close(e["mp_ratio"], double(md) / double(ms)), where + "mp_ratio is not dense/sent");
      if (mode == "dense")
        expect(ds == dd && ms == md, where + "dense mode sent other than dense bytes");
      dp_sent += ds, dp_dense += dd, mp_sent += ms, mp_dense += md;
    }
    const json &f = run["final"];
    double best = -1.0;
    int best_epoch = 0;
    for (const json &e : run["epochs"])
      if (double(e["test_accuracy"]) > best) best = e["test_accuracy"], best_epoch = e["epoch"];
    expect(double(f["best_test_accuracy"]) == best && int(f["best_epoch"]) == best_epoch,
           mode + ": best_test_accuracy/best_epoch are not the first best epoch's");
    expect(f["dp_bytes_sent"] == dp_sent && f["dp_dense_bytes"] == dp_dense,
           mode + ": final DP bytes are not the sum over epochs");
    expect(f["mp_bytes_sent"] == mp_sent && f["mp_dense_bytes"] == mp_dense,
           mode + ": final MP bytes are not the sum over epochs");
    expect(close(f["dp_ratio"], double(dp_dense) / double(dp_sent)), mode + ": final dp_ratio");
    if (mode == "dct" && c["density"] != "1")
      expect(double(f["dp_ratio"]) > 1.0, "dct: DP sent no fewer bytes than dense");
    if (mode == "dct" && c["values"] == "sign")  // ~1.2 bytes per kept entry at 1.5%
      expect(double(f["dp_ratio"]) > 50.0, "dct: sign values did not reach 50x fewer DP bytes");
    if (dlrm && mode == "dct" && c["keep"] != "1")
      expect(double(f["mp_ratio"]) > 1.0, "dct: MP sent no fewer bytes than dense");
    if (dlrm && mode == "eb" && c["error_bound"] != "0")
      expect(double(f["mp_forward_ratio"]) > 2.0, "eb: the lookups were not compressed 2x");
  }
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s FILE CHECK... (loss-falls, equal-runs, bytes)\n", argv[0]);
    return 2;
  }
  json doc;
  try {
    std::ifstream in(argv[1]);
    doc = json::parse(in);
    for (int i = 2; i < argc; ++i) {
      const std::string check = argv[i];
      if (check == "loss-falls")
        loss_falls(doc);
      else if (check == "equal-runs")
        equal_runs(doc);
      else if (check == "bytes")
        bytes(doc);
      else if (check.rfind("same-as:", 0) == 0)
        same_as(doc, check.substr(8));
      else
        return std::fprintf(stderr, "unknown check %s\n", argv[i]), 2;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "FAILED: %s: %s\n", argv[1], e.what());
    return 1;
  }
  if (failures == 0) std::printf("all checks passed\n");
  return failures ? 1 : 0;
}
