// A property test of the public API: random sequences of calls on 2-3 ranks (inits
// with random keys, starts in orders that differ between ranks where dct.h allows it, test,
// wait, waitall, free, checkpoint save and load, drop-in calls, misuse), on data that changes
// every call (Gaussian, scale jumps of 10^+-4, ties, zeros, small integers). After every step:
// the documented code on every rank, density-1 results bitwise equal to MPI_Allreduce,
// passthrough results exact, and error feedback conserving every input (what every rank put
// in = what the results summed + what the residuals hold). Runs for DCT_PROPERTY_SECONDS
// (default 20) or DCT_PROPERTY_STEPS steps; DCT_PROPERTY_SEED picks the sequence (printed).
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>

#include "common.hpp"

namespace dct::test {
namespace {

/// One live request and what it has seen.
struct Live {
  std::string name;
  MPI_Datatype type = MPI_FLOAT;  // MPI_FLOAT, MPI_DOUBLE or MPI_INT (passthrough)
  bool dense = false;             // density 1 or passthrough: one blocking MPI call
  std::size_t count = 0;
  std::vector<double> send, recv;  // as doubles; the request's buffers are below
  std::vector<float> f_send, f_recv;
  std::vector<double> d_send, d_recv;
  std::vector<int> i_send, i_recv;
  DCT_Request request = DCT_REQUEST_NULL;
  bool started = false;
  double put_in = 0, summed = 0;  // this rank's inputs; the results (the same on every rank)
  double magnitude = 0;           // this rank's sum of |input|, for the rounding tolerance
  int last_data = 0;

  void *send_buffer() {
    return type == MPI_FLOAT    ? static_cast<void *>(f_send.data())
           : type == MPI_DOUBLE ? static_cast<void *>(d_send.data())
                                : static_cast<void *>(i_send.data());
  }
  void *recv_buffer() {
    return type == MPI_FLOAT    ? static_cast<void *>(f_recv.data())
           : type == MPI_DOUBLE ? static_cast<void *>(d_recv.data())
                                : static_cast<void *>(i_recv.data());
  }
  double residual_sum() const {
    if (type == MPI_INT || dense) return 0;
    if (type == MPI_FLOAT) {
      const std::vector<float> r = residual_of<float>(request, count);
      return std::accumulate(r.begin(), r.end(), 0.0);
    }
    const std::vector<double> r = residual_of<double>(request, count);
    return std::accumulate(r.begin(), r.end(), 0.0);
  }
};

class Sequence {
 public:
  explicit Sequence(std::uint64_t seed) : shared_(seed), mine_(seed * 7919 + unsigned(rank())) {}

  void run(double seconds, long steps) {
    const auto begin = std::chrono::steady_clock::now();
    for (long step = 0; step < steps; ++step) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() > seconds)
        break;
      step_ = step;
      act();
      if (::testing::Test::HasFatalFailure()) return;
      ++done_;
    }
    while (!live_.empty()) free_one(0);
  }
  long steps_done() const { return done_; }
  std::map<std::string, int> counts;

 private:
  std::mt19937_64 shared_;  // the same on every rank: which action, which request
  std::mt19937_64 mine_;    // this rank's: data
  std::vector<std::unique_ptr<Live>> live_;
  int next_name_ = 0;
  long step_ = 0, done_ = 0;
  bool saved_ = false;
  std::vector<std::string> saved_names_;
  std::map<std::string, std::pair<double, double>> saved_sums_;

  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(shared_);
  }

  std::string where() const { return "step " + std::to_string(step_) + ": "; }

  void act() {
    const std::size_t action = pick(100);
    if (live_.empty() || action < 12)
      return live_.size() < 5 ? init() : free_one(pick(live_.size()));
    if (action < 45) return start_and_complete();
    if (action < 55) return free_one(pick(live_.size()));
    if (action < 65) return drop_in();
    if (action < 72) return save();
    if (action < 79) return load();
    return misuse();
  }

  void init() {
    auto live = std::make_unique<Live>();
    live->name = "p" + std::to_string(next_name_++);
    const std::size_t kind = pick(10);
    live->type = kind < 5 ? MPI_FLOAT : kind < 8 ? MPI_DOUBLE : MPI_INT;
    const char *densities[] = {"0.01", "0.1", "0.3", "1"};
    const char *density = densities[pick(4)];
    live->dense = live->type == MPI_INT || std::string(density) == "1";
    const std::size_t counts_[] = {0, 1, 7, 100, 1000, 4099};
    live->count = counts_[pick(6)];
    live->f_send.resize(live->count);
    live->f_recv.resize(live->count);
    live->d_send.resize(live->count);
    live->d_recv.resize(live->count);
    live->i_send.resize(live->count);
    live->i_recv.resize(live->count);
    const char *algorithms[] = {"auto", "allgather", "split", "recursive_doubling", "dense"};
    const char *values[] = {"native", "fp16", "bf16"};
    const char *controls[] = {"adaptive", "fixed"};
    MPI_Info info = make_info({{"dct_name", live->name},
                               {"dct_density", density},
                               {"dct_algorithm", algorithms[pick(5)]},
                               {"dct_values", values[pick(3)]},
                               {"dct_tau_control", controls[pick(2)]},
                               {"dct_interval", std::to_string(1 + pick(5))}});
    const int code = DCT_Allreduce_init(live->send_buffer(), live->recv_buffer(), live->count,
                                        live->type, MPI_SUM, MPI_COMM_WORLD, info, &live->request);
    MPI_Info_free(&info);
    ASSERT_ALL_RANKS_EQ(code, DCT_SUCCESS) << where();
    ++counts["init"];
    live_.push_back(std::move(live));
  }

  /// New data for `live`, of a random kind (the kind shared, the values this rank's own).
  void fill(Live &live) {
    const std::size_t kind = pick(6);
    std::normal_distribution<double> gauss(0.0, 1.0);
    double scale = 1;
    if (kind == 1) scale = 1e4;
    if (kind == 2) scale = 1e-4;
    for (std::size_t i = 0; i < live.count; ++i) {
      double v = gauss(mine_) * scale;
      if (kind == 3) v = 0.5;                           // ties everywhere
      if (kind == 4) v = 0;                             // zeros
      if (kind == 5) v = double(int(mine_() % 7) - 3);  // small integers
      if (live.type == MPI_INT) v = double(int(mine_() % 2001) - 1000);
      live.f_send[i] = float(v);
      live.d_send[i] = v;
      live.i_send[i] = int(v);
    }
    for (std::size_t i = 0; i < live.count; ++i) {
      const double v = live.type == MPI_FLOAT    ? double(live.f_send[i])
                       : live.type == MPI_DOUBLE ? live.d_send[i]
                                                 : double(live.i_send[i]);
      live.put_in += v;
      live.magnitude += std::fabs(v);
    }
  }

  void start_and_complete() {
    // A few requests; compressed ones started in an order of this rank's own, the blocking
    // ones (density 1, passthrough) in the same order on every rank (dct.h).
    std::vector<Live *> chosen;
    for (auto &live : live_)
      if (pick(2) == 0) chosen.push_back(live.get());
    if (chosen.empty()) chosen.push_back(live_[pick(live_.size())].get());
    std::vector<Live *> order = chosen;
    std::vector<std::size_t> sparse_slots;
    for (std::size_t i = 0; i < order.size(); ++i)
      if (!order[i]->dense) sparse_slots.push_back(i);
    std::vector<Live *> sparse;
    for (std::size_t s : sparse_slots) sparse.push_back(order[s]);
    std::shuffle(sparse.begin(), sparse.end(), mine_);
    for (std::size_t k = 0; k < sparse_slots.size(); ++k) order[sparse_slots[k]] = sparse[k];
    for (Live *live : order) {
      fill(*live);
      ASSERT_ALL_RANKS_EQ(DCT_Start(&live->request), DCT_SUCCESS) << where();
      live->started = true;
    }
    const std::size_t how = pick(3);
    if (how == 0) {
      std::vector<DCT_Request> handles;
      for (Live *live : order) handles.push_back(live->request);
      ASSERT_ALL_RANKS_EQ(DCT_Waitall(int(handles.size()), handles.data(), DCT_STATUSES_IGNORE),
                          DCT_SUCCESS)
          << where();
      ++counts["waitall"];
    } else {
      // One by one, in this rank's own order (no collective in between: a wait may need a
      // peer's later one), with DCT_Test polling first for half of them.
      std::vector<Live *> waits = order;
      std::shuffle(waits.begin(), waits.end(), mine_);
      std::vector<int> codes;
      for (Live *live : waits) {
        int flag = 0, code = DCT_SUCCESS;
        if (how == 1)
          for (int polls = 0; polls < 3 && !flag && code == DCT_SUCCESS; ++polls)
            code = DCT_Test(&live->request, &flag, DCT_STATUS_IGNORE);
        if (code == DCT_SUCCESS && !flag) code = DCT_Wait(&live->request, DCT_STATUS_IGNORE);
        codes.push_back(code);
      }
      for (int code : codes) ASSERT_ALL_RANKS_EQ(code, DCT_SUCCESS) << where();
      ++counts[how == 1 ? "test" : "wait"];
    }
    for (Live *live : order) {
      live->started = false;
      check_result(*live);
    }
  }

  void check_result(Live &live) {
    if (live.type == MPI_INT) {
      std::vector<int> expected(live.count);
      MPI_Allreduce(live.i_send.data(), expected.data(), int(live.count), MPI_INT, MPI_SUM,
                    MPI_COMM_WORLD);
      ASSERT_TRUE(all_ranks(expected == live.i_recv)) << where() << "passthrough sum";
      return;
    }
    if (live.dense) {  // exactly MPI_Allreduce
      bool same = false;
      if (live.type == MPI_FLOAT)
        same = same_bits(mpi_sum(live.f_send), live.f_recv);
      else
        same = same_bits(mpi_sum(live.d_send), live.d_recv);
      ASSERT_TRUE(all_ranks(same)) << where() << "density 1 differs from MPI_Allreduce";
    }
    for (std::size_t i = 0; i < live.count; ++i)
      live.summed += live.type == MPI_FLOAT ? double(live.f_recv[i]) : live.d_recv[i];
  }

  /// Error feedback: every rank's inputs = the results' sum + every rank's residual.
  void check_conservation(Live &live) {
    if (live.type == MPI_INT || live.dense) return;
    double mine[3] = {live.put_in, live.residual_sum(), live.magnitude}, all[3] = {};
    MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const double in = all[0], kept = all[1];
    // Float rounding of the sums and of the results' additions, relative to what came in.
    const double tolerance = 1e-5 * all[2] + 1e-9;
    ASSERT_TRUE(all_ranks(std::fabs(in - live.summed - kept) <= tolerance))
        << where() << live.name << ": in " << in << ", summed " << live.summed << ", kept " << kept;
  }

  void free_one(std::size_t at) {
    Live &live = *live_[at];
    check_conservation(live);
    ASSERT_ALL_RANKS_EQ(DCT_Request_free(&live.request), DCT_SUCCESS) << where();
    ASSERT_EQ(live.request, DCT_REQUEST_NULL);
    live_.erase(live_.begin() + std::ptrdiff_t(at));
    ++counts["free"];
  }

  void drop_in() {
    const std::size_t n = 1 + pick(3000);
    const std::size_t kind = pick(3);
    if (kind == 2) {  // passthrough: exact
      std::vector<int> send(n), recv(n, -1), expected(n);
      for (int &v : send) v = int(mine_() % 100);
      ASSERT_ALL_RANKS_EQ(
          DCT_Allreduce(send.data(), recv.data(), n, MPI_INT, MPI_SUM, MPI_COMM_WORLD), DCT_SUCCESS)
          << where();
      MPI_Allreduce(send.data(), expected.data(), int(n), MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      ASSERT_TRUE(all_ranks(recv == expected)) << where() << "drop-in passthrough";
    } else {
      static std::vector<float> send(4096), recv(4096);  // one drop-in state per (recv, n)
      for (std::size_t i = 0; i < n; ++i) send[i] = float(std::normal_distribution<>(0, 1)(mine_));
      ASSERT_ALL_RANKS_EQ(
          DCT_Allreduce(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
          DCT_SUCCESS)
          << where();
    }
    ++counts["drop-in"];
  }

  std::string path() const {
    const std::string directory = "dct_property.np" + std::to_string(size());
    if (rank() == 0) ::mkdir(directory.c_str(), 0755);
    return directory + "/state.h5";
  }

  void save() {
    const std::string file = path();
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, file.c_str()), DCT_SUCCESS) << where();
    saved_ = true;
    saved_names_.clear();
    saved_sums_.clear();
    for (auto &live : live_) {
      if (live->type != MPI_INT) saved_names_.push_back(live->name);
      saved_sums_[live->name] = {live->put_in, live->summed};
    }
    ++counts["save"];
  }

  void load() {
    if (!saved_) return;
    // Loads exactly when every live request a checkpoint holds (all but MPI's passthrough) was
    // saved (names are never reused: the same name is the same count and type).
    bool all_saved = true;
    for (auto &live : live_)
      if (live->type != MPI_INT)
        all_saved = all_saved && std::find(saved_names_.begin(), saved_names_.end(), live->name) !=
                                     saved_names_.end();
    const int code = DCT_Checkpoint_load(MPI_COMM_WORLD, path().c_str());
    ASSERT_ALL_RANKS_EQ(code, all_saved ? DCT_SUCCESS : DCT_ERR_CKPT_MISMATCH) << where();
    if (code == DCT_SUCCESS)  // the state (and its accounts) of the save
      for (auto &live : live_) std::tie(live->put_in, live->summed) = saved_sums_[live->name];
    // (the magnitudes only grow: the tolerance stays an upper bound)
    ++counts[code == DCT_SUCCESS ? "load" : "load refused"];
  }

  void misuse() {
    Live &live = *live_[pick(live_.size())];
    int flag = 1;
    switch (pick(5)) {
      case 0:  // completing a request that was not started
        EXPECT_EQ(DCT_Wait(&live.request, DCT_STATUS_IGNORE), DCT_ERR_ACTIVE) << where();
        break;
      case 1:
        EXPECT_EQ(DCT_Test(&live.request, &flag, DCT_STATUS_IGNORE), DCT_ERR_ACTIVE) << where();
        EXPECT_EQ(flag, 0);
        break;
      case 2: {  // an unknown key, on every rank
        MPI_Info info = make_info({{"dct_densty", "0.1"}});
        DCT_Request request = DCT_REQUEST_NULL;
        ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(live.send_buffer(), live.recv_buffer(), live.count,
                                               live.type, MPI_SUM, MPI_COMM_WORLD, info, &request),
                            DCT_ERR_INFO)
            << where();
        MPI_Info_free(&info);
        break;
      }
      case 3: {  // a count that differs on one rank: refused alike, nothing created
        DCT_Request request = DCT_REQUEST_NULL;
        const std::size_t n = live.count + (rank() == 0 && live.count > 0 ? 1 : 0);
        std::vector<double> buffer(n + 1);
        const int code = DCT_Allreduce_init(buffer.data(), buffer.data() + 1, n, MPI_DOUBLE,
                                            MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &request);
        ASSERT_ALL_RANKS_EQ(code, size() > 1 && live.count > 0 ? DCT_ERR_MISMATCH : code);
        if (request != DCT_REQUEST_NULL) DCT_Request_free(&request);
        break;
      }
      default: {  // a freed handle
        DCT_Request freed = live.request;
        DCT_Request copy = freed;
        (void)copy;
        DCT_Request null = DCT_REQUEST_NULL;
        EXPECT_EQ(DCT_Start(&null), DCT_ERR_REQUEST) << where();
        break;
      }
    }
    ++counts["misuse"];
  }
};

TEST(Property, RandomCallSequencesKeepEveryPromise) {
  std::uint64_t seed = std::random_device{}();
  if (const char *text = std::getenv("DCT_PROPERTY_SEED")) seed = std::strtoull(text, nullptr, 10);
  MPI_Bcast(&seed, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  const char *seconds_text = std::getenv("DCT_PROPERTY_SECONDS");
  const char *steps_text = std::getenv("DCT_PROPERTY_STEPS");
  double seconds = seconds_text ? std::atof(seconds_text) : 20.0;
  long steps = steps_text ? std::atol(steps_text) : 1000000;
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  // Every rank stops at the same step: the step count of rank 0's clock.
  Sequence sequence(seed);
  if (rank() == 0)
    std::printf("[property] seed %llu (DCT_PROPERTY_SEED to replay)\n",
                static_cast<unsigned long long>(seed));
  // The time bound is turned into a step bound agreed on by every rank, in rounds of 50.
  long budget = 0;
  const auto begin = std::chrono::steady_clock::now();
  while (budget < steps) {
    sequence.run(1e9, 50);
    if (::testing::Test::HasFatalFailure()) break;
    budget += 50;
    int stop =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count() > seconds;
    MPI_Bcast(&stop, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (stop) break;
  }
  if (rank() == 0) {
    std::printf("[property] %ld steps:", budget);
    for (const auto &[what, count] : sequence.counts) std::printf(" %s %d,", what.c_str(), count);
    std::printf("\n");
  }
}

}  // namespace
}  // namespace dct::test
