#include "checkpoint.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dct/dct.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "layers.hpp"

namespace dlrm {
namespace {

using nlohmann::json;

constexpr char kMagic[8] = {'D', 'C', 'T', 'D', 'L', 'R', 'M', '1'};
static_assert(std::is_trivially_copyable_v<CommStats>, "CommStats is saved as its bytes");

/// Throws on every rank unless `ok` holds on every rank (`what`: this rank's reason).
void agree(bool ok, const std::string &what, MPI_Comm comm) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  if (all == 0) throw std::runtime_error(ok ? "checkpoint: failed on another rank" : what);
}

/// Runs `body` on `rank` alone (file-system work done once), then every rank learns whether it
/// threw: the same std::runtime_error on every rank, so that none is left waiting.
template <typename Body>
void on_one_rank(int rank, int on, MPI_Comm comm, Body body) {
  std::string problem;
  if (rank == on) try {
      body();
    } catch (const std::exception &e) {
      problem = e.what();
    }
  agree(problem.empty(), problem, comm);
}

void make_directory(const std::string &path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
}

void sync_path(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

/// Writes `text` to `path` through a temporary, fsynced and renamed over it.
void replace_file(const std::string &path, const std::string &text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("cannot write " + temporary);
  }
  sync_path(temporary);
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    throw std::runtime_error("cannot rename " + temporary + ": " + std::strerror(errno));
}

std::string read_text(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::string();
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void append(std::string &out, const void *data, size_t bytes) {
  out.append(static_cast<const char *>(data), bytes);
}

/// One rank's file: magic, the position as JSON, CommStats' bytes, the model's vectors, and an
/// FNV-1a of everything before it.
std::string rank_file(const json &header, const RunState &state, Model &model) {
  std::string out(kMagic, sizeof kMagic);
  const std::string text = header.dump();
  const uint64_t text_bytes = text.size(), stats_bytes = sizeof(CommStats);
  append(out, &text_bytes, 8);
  out += text;
  append(out, &stats_bytes, 8);
  append(out, &state.stats, sizeof(CommStats));
  const std::vector<std::vector<float> *> vectors = model.state();
  const uint64_t count = vectors.size();
  append(out, &count, 8);
  for (const std::vector<float> *v : vectors) {
    const uint64_t n = v->size();
    append(out, &n, 8);
    append(out, v->data(), n * sizeof(float));
  }
  const uint64_t hash = fnv1a(out.data(), out.size());
  append(out, &hash, 8);
  return out;
}

/// Parses a rank file into `header`, `state.stats` and the model's vectors; "" or the reason
/// it is refused. Nothing is trusted: every length is checked against what is left.
std::string parse_rank_file(const std::string &bytes, json &header, RunState &state, Model &model) {
  if (bytes.size() < sizeof kMagic + 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return "not a dct-dlrm checkpoint";
  uint64_t hash = 0;
  std::memcpy(&hash, bytes.data() + bytes.size() - 8, 8);
  if (fnv1a(bytes.data(), bytes.size() - 8) != hash) return "damaged (hash mismatch)";
  size_t at = sizeof kMagic;
  const size_t end = bytes.size() - 8;
  auto take = [&](void *into, uint64_t n) {
    if (n > end - at) return false;
    std::memcpy(into, bytes.data() + at, n);
    at += n;
    return true;
  };
  uint64_t text_bytes = 0, stats_bytes = 0, count = 0;
  if (!take(&text_bytes, 8) || text_bytes > end - at) return "truncated header";
  header = json::parse(bytes.substr(at, text_bytes), nullptr, false);
  at += text_bytes;
  if (header.is_discarded()) return "unreadable header";
  if (!take(&stats_bytes, 8) || stats_bytes != sizeof(CommStats) ||
      !take(&state.stats, sizeof(CommStats)))
    return "bad statistics block";
  const std::vector<std::vector<float> *> vectors = model.state();
  if (!take(&count, 8) || count != vectors.size()) return "another model (parameter blocks)";
  std::vector<std::vector<float>> loaded(vectors.size());
  for (size_t i = 0; i < vectors.size(); ++i) {
    uint64_t n = 0;
    if (!take(&n, 8) || n != vectors[i]->size()) return "another model (parameter sizes)";
    loaded[i].resize(n);
    if (!take(loaded[i].data(), n * sizeof(float))) return "truncated parameters";
  }
  if (at != end) return "trailing bytes";
  for (size_t i = 0; i < vectors.size(); ++i) *vectors[i] = std::move(loaded[i]);
  return std::string();
}

}  // namespace

// The position as JSON (CommStats is saved as its bytes, beside it).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(RunState, epoch, step, loss_sum, first_batch_loss, total_wall,
                                   epoch_wall, dp_sent, dp_dense, mp_sent, mp_dense, fwd_sent,
                                   epochs)

TrainingCheckpoints::TrainingCheckpoints(std::string directory, int64_t every, bool resume,
                                         std::string fingerprint, MPI_Comm comm)
    : directory_(std::move(directory)),
      fingerprint_(std::move(fingerprint)),
      every_(every),
      resume_(resume),
      comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &ranks_);
  on_one_rank(rank_, 0, comm_, [&] { make_directory(directory_); });
}

void TrainingCheckpoints::save(const std::string &mode, int64_t global_step, Model &model,
                               const RunState &state) {
  const std::string base = directory_ + "/" + mode;
  const std::string name = "step-" + std::to_string(global_step);
  const std::string step_dir = base + "/" + name;
  on_one_rank(rank_, 0, comm_, [&] {
    make_directory(base);
    make_directory(step_dir);
  });
  // dct's requests of this mode (their own crash-safe file), then this rank's part.
  const std::string dct_path = step_dir + "/dct.h5";
  const int rc = DCT_Checkpoint_save(comm_, dct_path.c_str());  // the same code on every rank
  if (rc != DCT_SUCCESS)
    throw std::runtime_error("DCT_Checkpoint_save: " + std::string(DCT_Get_last_error()));
  const json header = {
      {"fingerprint", fingerprint_}, {"mode", mode},        {"ranks", ranks_}, {"rank", rank_},
      {"step", global_step},         {"state", json(state)}};
  const std::string path = step_dir + "/rank-" + std::to_string(rank_) + ".bin";
  std::string problem;
  try {
    const std::string temporary = path + ".tmp";
    {
      std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
      out << rank_file(header, state, model);
      if (!out.flush()) throw std::runtime_error("cannot write " + temporary);
    }
    if (die_in_save.at(mode, global_step) && rank_ == ranks_ - 1) ::raise(SIGKILL);  // test hook
    sync_path(temporary);
    if (std::rename(temporary.c_str(), path.c_str()) != 0)
      throw std::runtime_error("cannot rename " + temporary + ": " + std::strerror(errno));
  } catch (const std::exception &e) {
    problem = e.what();
  }
  agree(problem.empty(), problem, comm_);
  // Every part is complete: now `latest` names this step, and the step before the previous
  // one goes (the previous one stays until the next is complete).
  on_one_rank(rank_, 0, comm_, [&] {
    sync_path(step_dir);
    const std::string previous = read_text(base + "/latest");
    replace_file(base + "/latest", name);
    sync_path(base);
    const std::string older = read_text(base + "/previous");
    if (!previous.empty()) replace_file(base + "/previous", previous);
    if (!older.empty() && older != previous && older != name &&
        older.find('/') == std::string::npos) {
      for (int r = 0; r < ranks_; ++r)  // a resume refuses another rank count: ranks_ files
        std::remove((base + "/" + older + "/rank-" + std::to_string(r) + ".bin").c_str());
      std::remove((base + "/" + older + "/dct.h5").c_str());
      ::rmdir((base + "/" + older).c_str());
    }
  });
}

bool TrainingCheckpoints::load(const std::string &mode, Model &model, RunState &state) {
  if (!resume_) return false;
  const std::string base = directory_ + "/" + mode;
  // Rank 0 reads which step is the latest; every rank takes the same one.
  std::string name = rank_ == 0 ? read_text(base + "/latest") : std::string();
  int length = int(name.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, comm_);
  name.resize(size_t(length));
  MPI_Bcast(name.data(), length, MPI_CHAR, 0, comm_);
  if (name.empty()) return false;
  agree(name.rfind("step-", 0) == 0 && name.find('/') == std::string::npos,
        base + "/latest does not name a step", comm_);
  const std::string step_dir = base + "/" + name;
  json header;
  RunState loaded;
  const std::string bytes = read_text(step_dir + "/rank-" + std::to_string(rank_) + ".bin");
  std::string problem = parse_rank_file(bytes, header, loaded, model);
  if (problem.empty() &&
      (header.value("fingerprint", "") != fingerprint_ || header.value("ranks", -1) != ranks_ ||
       header.value("rank", -1) != rank_ || header.value("mode", "") != mode))
    problem = "saved with other settings or rank count: resume with the run's own options";
  agree(problem.empty(), step_dir + ": " + problem, comm_);
  const int rc = DCT_Checkpoint_load(comm_, (step_dir + "/dct.h5").c_str());
  if (rc != DCT_SUCCESS)
    throw std::runtime_error("DCT_Checkpoint_load: " + std::string(DCT_Get_last_error()));
  header["state"].get_to(loaded);  // the position; stats and parameters are in already
  state = std::move(loaded);
  return true;
}

void TrainingCheckpoints::finish(const std::string &mode, const json &run) {
  on_one_rank(rank_, 0, comm_, [&] {
    make_directory(directory_ + "/" + mode);
    replace_file(directory_ + "/" + mode + "/done.json",
                 json{{"fingerprint", fingerprint_}, {"ranks", ranks_}, {"run", run}}.dump());
  });
}

json TrainingCheckpoints::finished(const std::string &mode) {
  if (!resume_) return nullptr;
  const json done = json::parse(read_text(directory_ + "/" + mode + "/done.json"), nullptr, false);
  const bool ours = !done.is_discarded() && done.is_object() &&
                    done.value("fingerprint", "") == fingerprint_ &&
                    done.value("ranks", -1) == ranks_ && done.contains("run");
  // Every rank reads the same file; they agree all the same (a file system may lag).
  int mine = ours ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm_);
  return all ? done["run"] : json(nullptr);
}

}  // namespace dlrm
