// DCT_Checkpoint_isave/wait: the file holds the state of the isave, byte for byte what
// DCT_Checkpoint_save wrote at that moment, however training moved on before the wait; refusals
// that leave nothing pending; a writer that fails ends in the same error on every rank with the
// previous checkpoint intact and no temporary left.
#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common.hpp"

namespace dct::test {
namespace {

constexpr std::size_t kCount = 2477;

std::string scratch(const std::string &name) {
  return scratch_path("dct_checkpoint_async_test", name);
}

/// Every part a row can hold: a float request with dct_momentum and the gradient form
/// (residual, velocity, last update) and a double one of another algorithm.
struct Model {
  std::vector<float> a_send = std::vector<float>(kCount), a_recv = std::vector<float>(kCount);
  std::vector<double> b_send = std::vector<double>(kCount / 3),
                      b_recv = std::vector<double>(kCount / 3);
  DCT_Request a = DCT_REQUEST_NULL, b = DCT_REQUEST_NULL;
  int calls = 0;

  Model() {
    MPI_Info info = make_info(
        {{"dct_name", "async.a"}, {"dct_momentum", "0.9"}, {"dct_momentum_result", "gradient"}});
    EXPECT_EQ(DCT_Allreduce_init(a_send.data(), a_recv.data(), kCount, MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD, info, &a),
              DCT_SUCCESS);
    MPI_Info_free(&info);
    info = make_info({{"dct_name", "async.b"}, {"dct_density", "0.05"}, {"dct_interval", "2"}});
    EXPECT_EQ(DCT_Allreduce_init(b_send.data(), b_recv.data(), b_send.size(), MPI_DOUBLE, MPI_SUM,
                                 MPI_COMM_WORLD, info, &b),
              DCT_SUCCESS);
    MPI_Info_free(&info);
  }
  ~Model() {
    DCT_Request_free(&a);
    DCT_Request_free(&b);
  }
  void step() {
    overwrite(a_send, gradient<float>(kCount, calls));
    overwrite(b_send, gradient<double>(b_send.size(), calls, 7));
    ++calls;
    for (DCT_Request *r : {&a, &b}) {
      ASSERT_ALL_RANKS_EQ(DCT_Start(r), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Wait(r, DCT_STATUS_IGNORE), DCT_SUCCESS);
    }
  }
  /// What a load restores of `a` and `b`, as bits.
  std::vector<std::vector<double>> state() const {
    const std::vector<float> a_residual = residual_of<float>(a, kCount);
    const std::vector<float> a_velocity = velocity_of<float>(a, kCount);
    return {std::vector<double>(a_residual.begin(), a_residual.end()),
            std::vector<double>(a_velocity.begin(), a_velocity.end()),
            residual_of<double>(b, b_send.size()),
            {state_of(a).tau(), state_of(b).tau(), double(engine_of(a).calls()),
             double(engine_of(b).calls())}};
  }
};

std::string file_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Whether a file named `path`.tmp.* exists (rank 0 looks; every rank gets the answer).
bool temporary_left(const std::string &path) {
  int found = 0;
  if (rank() == 0) {
    const std::string directory = path.substr(0, path.find_last_of('/'));
    const std::string prefix = path.substr(path.find_last_of('/') + 1) + ".tmp.";
    if (DIR *listing = opendir(directory.c_str())) {
      while (const dirent *entry = readdir(listing))
        found |= std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0;
      closedir(listing);
    }
  }
  return agreed(found) != 0;
}

/// Whether the files are the same bytes (compared on rank 0, the answer on every rank).
bool same_files(const std::string &a, const std::string &b) {
  const bool same = rank() != 0 || (!file_bytes(a).empty() && file_bytes(a) == file_bytes(b));
  return agreed(int(same)) != 0;
}

TEST(CheckpointAsync, TheFileIsTheStateOfTheIsaveByteForByte) {
  const std::string blocking = scratch("blocking"), async = scratch("async");
  Model model;
  for (int i = 0; i < 6; ++i) model.step();
  const auto saved = model.state();
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, blocking.c_str()), DCT_SUCCESS);
  DCT_Checkpoint save = DCT_CHECKPOINT_NULL;
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, async.c_str(), &save), DCT_SUCCESS);
  ASSERT_NE(save, DCT_CHECKPOINT_NULL);
  for (int i = 0; i < 4; ++i) model.step();  // training goes on: every part of every row moves
  EXPECT_NE(model.state(), saved);
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_wait(&save), DCT_SUCCESS);
  EXPECT_EQ(save, DCT_CHECKPOINT_NULL);
  EXPECT_TRUE(same_files(blocking, async));
  EXPECT_FALSE(temporary_left(async));
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, async.c_str()), DCT_SUCCESS);
  EXPECT_EQ(model.state(), saved);
}

TEST(CheckpointAsync, RowsWrittenInPlaceOrThroughCollectiveHdf5AreTheSameBytes) {
  // The blocking save writes the rows with POSIX I/O like the isave's writer, or through
  // collective MPI-IO with DCT_CHECKPOINT_IO=collective: the same file either way.
  const std::string posix = scratch("rows-posix"), collective = scratch("rows-collective");
  Model model;
  for (int i = 0; i < 3; ++i) model.step();
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, posix.c_str()), DCT_SUCCESS);
  setenv("DCT_CHECKPOINT_IO", "collective", 1);
  const int saved = DCT_Checkpoint_save(MPI_COMM_WORLD, collective.c_str());
  unsetenv("DCT_CHECKPOINT_IO");
  ASSERT_ALL_RANKS_EQ(saved, DCT_SUCCESS);
  EXPECT_TRUE(same_files(posix, collective));
}

TEST(CheckpointAsync, TheRequestsMayBeFreedBeforeTheWait) {
  const std::string path = scratch("freed");
  std::vector<std::vector<double>> saved;
  DCT_Checkpoint save = DCT_CHECKPOINT_NULL;
  {
    Model model;
    for (int i = 0; i < 3; ++i) model.step();
    saved = model.state();
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, path.c_str(), &save), DCT_SUCCESS);
  }  // the requests and their state are gone; the snapshot is the save's
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_wait(&save), DCT_SUCCESS);
  Model restarted;
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  EXPECT_EQ(restarted.state(), saved);
}

TEST(CheckpointAsync, RefusalsLeaveNothingPending) {
  const std::string path = scratch("refusals");
  Model model;
  model.step();
  DCT_Checkpoint save = DCT_CHECKPOINT_NULL, second = DCT_CHECKPOINT_NULL;
  EXPECT_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, path.c_str(), nullptr), DCT_ERR_ARG);
  EXPECT_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, nullptr, &save), DCT_ERR_ARG);
  EXPECT_EQ(save, DCT_CHECKPOINT_NULL);
  const std::string nowhere = scratch("no-such-directory") + "/x/checkpoint.h5";
  EXPECT_ALL_RANKS_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, nowhere.c_str(), &save),
                      DCT_ERR_CKPT_IO);
  EXPECT_EQ(save, DCT_CHECKPOINT_NULL);

  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, path.c_str(), &save), DCT_SUCCESS);
  // A second save to the same path would share its temporary and race its rename.
  EXPECT_ALL_RANKS_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, path.c_str(), &second), DCT_ERR_ACTIVE);
  EXPECT_EQ(second, DCT_CHECKPOINT_NULL);
  EXPECT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_ERR_ACTIVE);
  model.step();  // the requests themselves stay usable
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_wait(&save), DCT_SUCCESS);
  EXPECT_EQ(DCT_Checkpoint_wait(&save), DCT_ERR_ARG);  // already waited
  EXPECT_EQ(DCT_Checkpoint_wait(nullptr), DCT_ERR_ARG);
  DCT_Checkpoint forged = reinterpret_cast<DCT_Checkpoint>(&model);
  EXPECT_EQ(DCT_Checkpoint_wait(&forged), DCT_ERR_ARG);
  EXPECT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
}

// One file is one save however it is spelled (`ck/a.h5` and `ck/./a.h5` were both
// accepted, shared one temporary, and the second wait failed with the file's seal broken).
TEST(CheckpointAsync, OneFileSpelledTwoWaysIsOneSave) {
  const std::string path = scratch("spellings");
  const std::string directory = path.substr(0, path.find_last_of('/'));
  const std::string name = path.substr(path.find_last_of('/') + 1);
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  Model model;
  model.step();
  for (const std::string &other :
       {directory + "/./" + name, directory + "//" + name, std::string(cwd) + "/" + path,
        "./" + directory + "/../" + directory + "/" + name}) {
    DCT_Checkpoint save = DCT_CHECKPOINT_NULL, second = DCT_CHECKPOINT_NULL;
    const auto saved = model.state();
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, path.c_str(), &save), DCT_SUCCESS);
    EXPECT_ALL_RANKS_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, other.c_str(), &second),
                        DCT_ERR_ACTIVE);
    EXPECT_EQ(second, DCT_CHECKPOINT_NULL);
    EXPECT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, other.c_str()), DCT_ERR_ACTIVE);
    EXPECT_NE(std::string(DCT_Get_last_error()).find("asynchronous save"), std::string::npos)
        << DCT_Get_last_error();
    model.step();
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_wait(&save), DCT_SUCCESS);
    EXPECT_FALSE(temporary_left(path));
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, other.c_str()), DCT_SUCCESS);
    EXPECT_EQ(model.state(), saved) << other;  // the isave's state, sealed, under either name
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, other.c_str()), DCT_SUCCESS);
  }
}

TEST(CheckpointAsync, AFailedWriterFailsTheWaitOnEveryRankAndKeepsThePreviousCheckpoint) {
  const std::string path = scratch("writer-fails"), copy = scratch("writer-fails-before");
  Model model;
  for (int i = 0; i < 4; ++i) model.step();
  const auto saved = model.state();
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, copy.c_str()), DCT_SUCCESS);
  model.step();
  const std::string last = std::to_string(size() - 1);
  setenv("DCT_TEST_FAIL_IN_CHECKPOINT_WRITER", last.c_str(), 1);  // one rank's disk fails
  DCT_Checkpoint save = DCT_CHECKPOINT_NULL;
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_isave(MPI_COMM_WORLD, path.c_str(), &save), DCT_SUCCESS);
  EXPECT_ALL_RANKS_EQ(DCT_Checkpoint_wait(&save), DCT_ERR_CKPT_IO);
  unsetenv("DCT_TEST_FAIL_IN_CHECKPOINT_WRITER");
  EXPECT_EQ(save, DCT_CHECKPOINT_NULL);
  EXPECT_FALSE(temporary_left(path));
  EXPECT_TRUE(same_files(path, copy));
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  EXPECT_EQ(model.state(), saved);
}

}  // namespace
}  // namespace dct::test
