// One step of the restart scenarios that need separate jobs (tests/mpi/checkpoint_restart.sh):
//   save PATH          7 calls on three requests with default names (the double one with
//                      dct_momentum, the third with dct_momentum_result=gradient), then save
//   redistribute PATH  restart on this job's rank count (DCT_RESTART=redistribute): the sum over
//                      ranks of every residual and velocity equals the saved one exactly
//                      (dyadic data, momentum 0.5), every rank has the saved last update
//   strict PATH        restart on another rank count without redistribute: refused
//   crash PATH         9 calls, then a save during which rank 1 dies
//   isave PATH         7 calls, DCT_Checkpoint_isave, 3 more calls, then its wait (the file
//                      must be save's, byte for byte)
//   crash-async PATH   9 calls, then an asynchronous save whose writer thread dies on rank 1
//   verify PATH        the checkpoint at PATH is the 7-call one and loads
// Exit status 0 when the step behaved as expected.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "common.hpp"

namespace {

using namespace dct::test;

constexpr std::size_t kCount = 2053;
constexpr int kSavedCalls = 7;

/// The program's model: two requests created in the same order in every run, without names,
/// so they get the default names allreduce.0 and allreduce.1.
struct Job {
  std::vector<float> a_send = std::vector<float>(kCount), a_recv = std::vector<float>(kCount);
  std::vector<double> b_send = std::vector<double>(kCount), b_recv = std::vector<double>(kCount);
  std::vector<float> c_send = std::vector<float>(kCount), c_recv = std::vector<float>(kCount);
  DCT_Request a = DCT_REQUEST_NULL, b = DCT_REQUEST_NULL, c = DCT_REQUEST_NULL;
  int calls = 0;

  Job() {
    MPI_Info info = make_info({{"dct_density", "0.02"}, {"dct_interval", "4"}});
    DCT_Allreduce_init(a_send.data(), a_recv.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                       info, &a);
    MPI_Info_set(info, "dct_momentum", "0.5");  // velocities stay dyadic: sums are exact
    DCT_Allreduce_init(b_send.data(), b_recv.data(), kCount, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                       info, &b);
    MPI_Info_set(info, "dct_momentum_result", "gradient");
    DCT_Allreduce_init(c_send.data(), c_recv.data(), kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                       info, &c);
    MPI_Info_free(&info);
  }
  ~Job() {
    DCT_Request_free(&a);
    DCT_Request_free(&b);
    DCT_Request_free(&c);
  }
  bool step() {
    overwrite(a_send, dyadic_gradient<float>(kCount, calls));
    overwrite(b_send, dyadic_gradient<double>(kCount, calls + 1000));
    overwrite(c_send, dyadic_gradient<float>(kCount, calls + 2000));
    ++calls;
    for (DCT_Request *r : {&a, &b, &c})
      if (DCT_Start(r) != DCT_SUCCESS || DCT_Wait(r, DCT_STATUS_IGNORE) != DCT_SUCCESS) {
        std::printf("rank %d: call failed: %s\n", rank(), DCT_Get_last_error());
        return false;
      }
    return true;
  }
};

/// Sum over ranks, in double, of a live request's residual.
template <typename T>
std::vector<double> live_sum(DCT_Request r) {
  const std::vector<T> mine = residual_of<T>(r, kCount);
  return mpi_sum(std::vector<double>(mine.begin(), mine.end()));
}

/// Sum over ranks, in double, of a live request's momentum velocity.
std::vector<double> live_velocity_sum(DCT_Request r) {
  return mpi_sum(velocity_of<double>(r, kCount));
}

/// Sum over saved ranks, in double, of a saved request's residual (or velocity), read by every
/// rank.
template <typename T>
std::vector<double> saved_sum(const std::string &path, const std::string &name,
                              bool velocity = false) {
  dct::detail::CheckpointReader reader(path, MPI_COMM_SELF);
  const dct::detail::SavedRequest *saved = reader.find(name);
  std::vector<double> sum(kCount, 0.0);
  std::vector<T> residual(kCount), row(kCount);
  for (int r = 0; saved && r < reader.ranks(); ++r) {
    reader.read_row(*saved, r, velocity ? residual.data() : row.data(),
                    velocity ? row.data() : nullptr);
    for (std::size_t i = 0; i < kCount; ++i) sum[i] += row[i];
  }
  return sum;
}

/// A live dct_momentum_result=gradient request's last update (float).
std::vector<float> live_last_update(DCT_Request r) {
  const auto *update = static_cast<const float *>(state_of(r).last_update());
  return update ? std::vector<float>(update, update + kCount) : std::vector<float>();
}

/// Saved rank `row`'s last update of a saved request (read under its checksum).
std::vector<float> saved_last_update(const std::string &path, const std::string &name, int row) {
  dct::detail::CheckpointReader reader(path, MPI_COMM_SELF);
  const dct::detail::SavedRequest *saved = reader.find(name);
  std::vector<float> residual(kCount), velocity(kCount), update(kCount);
  if (saved == nullptr || !saved->has_last_update) return {};
  reader.read_row(*saved, row, residual.data(), velocity.data(), nullptr, update.data());
  return update;
}

bool expect(bool ok, const char *what) {
  if (!ok) std::printf("rank %d: FAILED: %s (%s)\n", rank(), what, DCT_Get_last_error());
  return ok;
}

int run(const std::string &mode, const std::string &path) {
  // Read by each request at its init, like every configuration key.
  if (mode == "redistribute") setenv("DCT_RESTART", "redistribute", 1);
  Job job;
  if (mode == "save" || mode == "crash") {
    const int calls = mode == "save" ? kSavedCalls : kSavedCalls + 2;
    for (int i = 0; i < calls; ++i)
      if (!job.step()) return 1;
    if (mode == "crash") setenv("DCT_TEST_CRASH_IN_CHECKPOINT_SAVE", "1", 1);
    return expect(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()) == DCT_SUCCESS, "save") ? 0 : 1;
  }
  if (mode == "isave" || mode == "crash-async") {
    const int calls = mode == "isave" ? kSavedCalls : kSavedCalls + 2;
    for (int i = 0; i < calls; ++i)
      if (!job.step()) return 1;
    if (mode == "crash-async") setenv("DCT_TEST_CRASH_IN_CHECKPOINT_WRITER", "1", 1);
    DCT_Checkpoint save = DCT_CHECKPOINT_NULL;
    if (!expect(DCT_Checkpoint_isave(MPI_COMM_WORLD, path.c_str(), &save) == DCT_SUCCESS, "isave"))
      return 1;
    for (int i = 0; i < 3; ++i)
      if (!job.step()) return 1;
    return expect(DCT_Checkpoint_wait(&save) == DCT_SUCCESS, "wait") ? 0 : 1;
  }
  if (mode == "strict") {
    return expect(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()) == DCT_ERR_CKPT_MISMATCH,
                  "strict load on another rank count is refused")
               ? 0
               : 1;
  }
  if (!expect(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()) == DCT_SUCCESS, "load")) return 1;
  bool ok =
      expect(engine_of(job.a).name() == "allreduce.0" && engine_of(job.b).name() == "allreduce.1",
             "default names are stable across runs");
  ok &= expect(engine_of(job.a).calls() == kSavedCalls && engine_of(job.b).calls() == kSavedCalls &&
                   engine_of(job.c).calls() == kSavedCalls,
               "call counters restored");
  if (mode == "redistribute") {
    ok &= expect(live_sum<float>(job.a) == saved_sum<float>(path, "allreduce.0"),
                 "float residual sum preserved exactly");
    ok &= expect(live_sum<double>(job.b) == saved_sum<double>(path, "allreduce.1"),
                 "double residual sum preserved exactly");
    ok &= expect(live_velocity_sum(job.b) == saved_sum<double>(path, "allreduce.1", true),
                 "double velocity sum preserved exactly");
    const std::vector<float> update = saved_last_update(path, "allreduce.2", 0);
    ok &= expect(!update.empty() && same_bits(live_last_update(job.c), update),
                 "every rank has the saved last update");
  }
  job.calls = kSavedCalls;
  ok &= expect(job.step(), "the restarted job keeps training");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int status = 2;
  if (argc == 3) status = run(argv[1], argv[2]);
  int worst = 0;
  MPI_Allreduce(&status, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank() == 0) std::printf("%s %s: %s\n", argv[1], argv[2], worst == 0 ? "ok" : "FAILED");
  MPI_Finalize();
  return worst;
}
