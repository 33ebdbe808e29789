// main() of the MPI test programs: every rank runs every test; rank 0 prints the usual
// report, the other ranks print only their failures, tagged with their rank; the exit code
// is non-zero on every rank if any rank failed. A watchdog turns a hung test (a deadlock
// between ranks) into a failure that names the test, instead of a silent CI timeout.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

char running_test[512] = "";

extern "C" void on_watchdog(int) {
  // Only async-signal-safe calls here.
  const char prefix[] = "\n[dct] watchdog: this test is still running, probably deadlocked: ";
  ssize_t ignored = write(STDERR_FILENO, prefix, sizeof(prefix) - 1);
  ignored = write(STDERR_FILENO, running_test, std::strlen(running_test));
  ignored = write(STDERR_FILENO, "\n", 1);
  static_cast<void>(ignored);
  _exit(86);  // mpiexec then takes the other ranks down
}

/// Arms an alarm of DCT_TEST_WATCHDOG_S seconds (default 200) around every test.
class Watchdog : public ::testing::EmptyTestEventListener {
 public:
  Watchdog() {
    const char *text = std::getenv("DCT_TEST_WATCHDOG_S");
    seconds_ = text ? static_cast<unsigned>(std::atoi(text)) : 200u;
    std::signal(SIGALRM, on_watchdog);
  }
  void OnTestStart(const ::testing::TestInfo &info) override {
    std::snprintf(running_test, sizeof(running_test), "%s.%s", info.test_suite_name(), info.name());
    alarm(seconds_);
  }
  void OnTestEnd(const ::testing::TestInfo &) override { alarm(0); }

 private:
  unsigned seconds_;
};

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (!result.failed()) return;
    std::printf("[rank %d] %s:%d: Failure\n%s\n", rank_, result.file_name(), result.line_number(),
                result.summary());
    std::fflush(stdout);
  }
  void OnTestEnd(const ::testing::TestInfo &info) override {
    if (info.result()->Failed())
      std::printf("[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char **argv) {
#ifdef DCT_TEST_THREAD_LEVEL  // programs whose tests call dct from several threads
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, DCT_TEST_THREAD_LEVEL, &provided);
#else
  MPI_Init(&argc, &argv);
#endif
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::TestEventListeners &listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  listeners.Append(new Watchdog);
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !failed) std::printf("[dct] a test failed on another rank\n");
  MPI_Finalize();
  return any_failed;
}
