// Checkpoints of DCT-MP requests (format 5): a forward/backward pair saved after some
// steps and loaded into new requests continues bit for bit like the uninterrupted pair, for the
// selections and compressors that keep state between calls (the threshold selection's tau and
// its dct_interval schedule; the error-bounded forward's schedule position, its automatic
// bounds and the probes' schedule), and without the checkpoint it would differ. A backward
// before the forward's first call after a load (the masks are not saved), a pair of another
// compressor, another rank count and a corrupted state row are refused on every rank with the
// live state left alone. Unnamed pairs are saved under their default names.

#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint_edit.hpp"
#include "common.hpp"

namespace dct::test {
namespace {

constexpr int kRow = 16;

std::string scratch(const std::string &name) {
  return scratch_path("dct_checkpoint_alltoallv", name);
}

using Keys = std::vector<std::pair<std::string, std::string>>;

/// A forward/backward pair on `comm`: rank i sends (i + j) % 3 + 2 rows to rank j.
struct Pair {
  MPI_Comm comm;
  std::vector<int> sendcounts, sdispls, recvcounts, rdispls;
  std::vector<float> send, recv, grad, grad_out;
  DCT_Request forward = DCT_REQUEST_NULL, backward = DCT_REQUEST_NULL;
  int calls = 0;

  Pair(const Keys &keys, MPI_Comm on = MPI_COMM_WORLD) : comm(on) {
    int me = 0, ranks = 1, sent = 0, received = 0;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &ranks);
    for (int j = 0; j < ranks; ++j) {
      sendcounts.push_back(((me + j) % 3 + 2) * kRow);
      recvcounts.push_back(((j + me) % 3 + 2) * kRow);
      sdispls.push_back(sent);
      rdispls.push_back(received);
      sent += sendcounts.back();
      received += recvcounts.back();
    }
    send.resize(std::size_t(sent));
    grad_out.resize(std::size_t(sent));
    recv.resize(std::size_t(received));
    grad.resize(std::size_t(received));
    Keys all = keys;
    all.push_back({"dct_row_length", std::to_string(kRow)});
    MPI_Info info = make_info(all);
    EXPECT_EQ(
        DCT_Alltoallv_init(send.data(), sendcounts.data(), sdispls.data(), recv.data(),
                           recvcounts.data(), rdispls.data(), MPI_FLOAT, comm, info, &forward),
        DCT_SUCCESS)
        << DCT_Get_last_error();
    MPI_Info_free(&info);
    EXPECT_EQ(
        DCT_Alltoallv_backward_init(forward, grad.data(), recvcounts.data(), rdispls.data(),
                                    grad_out.data(), sendcounts.data(), sdispls.data(), &backward),
        DCT_SUCCESS)
        << DCT_Get_last_error();
  }
  ~Pair() {
    DCT_Request_free(&backward);
    DCT_Request_free(&forward);
  }
  /// One training step: activations of step `calls` forward, their gradients backward.
  void step() {
    overwrite(send, gradient<float>(send.size(), calls, 11));
    overwrite(grad, gradient<float>(grad.size(), calls, 23));
    ++calls;
    ASSERT_ALL_RANKS_EQ(DCT_Start(&forward), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&forward, DCT_STATUS_IGNORE), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Start(&backward), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&backward, DCT_STATUS_IGNORE), DCT_SUCCESS);
  }
  /// What the last step delivered, forward and backward.
  std::vector<float> outputs() const {
    std::vector<float> out = recv;
    out.insert(out.end(), grad_out.begin(), grad_out.end());
    return out;
  }
};

/// The settings whose requests keep state between calls.
const Keys kThreshold = {{"dct_name", "mp"},
                         {"dct_mp_select", "threshold"},
                         {"dct_keep", "0.1"},
                         {"dct_interval", "1000"},
                         {"dct_values", "fp16"}};
const Keys kErrorBounded = {{"dct_name", "mp"},
                            {"dct_mp_compressor", "error_bounded"},
                            {"dct_table_columns", "8"},
                            {"dct_error_bound", "auto:0.05,0.01,0.002"},
                            {"dct_error_bound_schedule", "4,10"},
                            {"dct_backward_error_bound", "0.02"},
                            {"dct_interval", "3"}};

/// Steps 1-3, a save, steps 4-6 against a new pair loaded from the save running steps 4-6; and
/// a new pair that is not loaded differs on them.
void expect_resumed_bit_for_bit(const Keys &keys, const std::string &path) {
  std::vector<std::vector<float>> uninterrupted;
  {
    Pair pair(keys);
    for (int i = 0; i < 3; ++i) pair.step();
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
    for (int i = 0; i < 3; ++i) {
      pair.step();
      uninterrupted.push_back(pair.outputs());
    }
  }
  {
    Pair resumed(keys);
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
    resumed.calls = 3;
    for (int i = 0; i < 3; ++i) {
      resumed.step();
      EXPECT_TRUE(all_ranks(same_bits(resumed.outputs(), uninterrupted[std::size_t(i)])))
          << "step " << 4 + i;
    }
  }
  Pair fresh(keys);  // the same inputs without the saved state
  fresh.calls = 3;
  bool differs = false;
  for (int i = 0; i < 3; ++i) {
    fresh.step();
    differs = differs || !same_bits(fresh.outputs(), uninterrupted[std::size_t(i)]);
  }
  int any = differs ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  // (On one rank the threshold selection's fresh and saved taus keep the same entries of
  // these inputs; from two ranks on they differ.)
  if (size() > 1) {
    EXPECT_EQ(any, 1) << "the checkpoint carries no state that matters";
  }
}

TEST(CheckpointAlltoallv, ThresholdSelectionResumesBitForBit) {
  expect_resumed_bit_for_bit(kThreshold, scratch("threshold"));
}

TEST(CheckpointAlltoallv, ErrorBoundedScheduleAndBoundsResumeBitForBit) {
  expect_resumed_bit_for_bit(kErrorBounded, scratch("error_bounded"));
}

TEST(CheckpointAlltoallv, BackwardBeforeTheForwardAfterALoadIsRefused) {
  const std::string path = scratch("masks");
  for (const Keys &keys : {kThreshold, kErrorBounded}) {
    {
      Pair pair(keys);
      pair.step();
      ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
    }
    Pair resumed(keys);
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
    EXPECT_TRUE(all_ranks(DCT_Start(&resumed.backward) == DCT_ERR_ACTIVE));
    EXPECT_NE(std::string(DCT_Get_last_error()).find("DCT_Checkpoint_load"), std::string::npos)
        << DCT_Get_last_error();
    resumed.calls = 1;
    resumed.step();  // the forward first: then the pair runs
  }
}

TEST(CheckpointAlltoallv, AnotherCompressorIsAMismatchThatChangesNothing) {
  const std::string path = scratch("other");
  {
    Pair pair(kThreshold);
    pair.step();
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  }
  Pair other(kErrorBounded);  // the same name and kinds, other state
  other.step();
  const int rc = DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str());
  EXPECT_TRUE(all_ranks(rc == DCT_ERR_CKPT_MISMATCH)) << rc << ": " << DCT_Get_last_error();
  // Nothing changed: the next step is the one an untouched pair makes.
  Pair untouched(kErrorBounded);
  untouched.step();
  untouched.step();
  other.step();
  EXPECT_TRUE(all_ranks(same_bits(other.outputs(), untouched.outputs())));
}

TEST(CheckpointAlltoallv, AnotherRankCountIsRefused) {
  if (size() == 1) GTEST_SKIP() << "needs a file of more ranks than one";
  const std::string path = scratch("ranks");
  {
    Pair pair(kThreshold);
    pair.step();
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  }
  Pair alone(kThreshold, MPI_COMM_SELF);
  const int rc = DCT_Checkpoint_load(MPI_COMM_SELF, path.c_str());
  EXPECT_EQ(rc, DCT_ERR_CKPT_MISMATCH) << DCT_Get_last_error();
  EXPECT_NE(std::string(DCT_Get_last_error()).find("DCT-MP"), std::string::npos)
      << DCT_Get_last_error();
}

TEST(CheckpointAlltoallv, ACorruptStateRowIsRefusedOnEveryRank) {
  const std::string path = scratch("corrupt");
  Pair pair(kErrorBounded);
  for (int i = 0; i < 2; ++i) pair.step();
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  // Saved rank 0's forward call counter: its row is [used, count, forward calls, bounds...].
  add_to_saved_value(path, "requests/mp/state", 2, 1.0);
  const int rc = DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str());
  EXPECT_TRUE(all_ranks(rc == DCT_ERR_CKPT_CHECKSUM)) << rc << ": " << DCT_Get_last_error();
  pair.step();  // the pair's own masks are still there: its backward runs
}

TEST(CheckpointAlltoallv, UnnamedPairsAreSavedUnderTheirDefaultNames) {
  const std::string path = scratch("names");
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);  // a communicator of its own: the names count from 0
  {
    Pair first({}, comm), second({{"dct_mp_select", "threshold"}}, comm);
    DCT_Request another = DCT_REQUEST_NULL;
    ASSERT_EQ(
        DCT_Alltoallv_backward_init(second.forward, second.grad.data(), second.recvcounts.data(),
                                    second.rdispls.data(), second.grad_out.data(),
                                    second.sendcounts.data(), second.sdispls.data(), &another),
        DCT_SUCCESS);
    first.step();
    second.step();
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(comm, path.c_str()), DCT_SUCCESS);
    DCT_Request_free(&another);
  }
  MPI_Comm_free(&comm);
  detail::CheckpointReader reader(path, MPI_COMM_SELF);
  EXPECT_GE(reader.format_version(), 5);  // a format with DCT-MP requests
  for (const char *name : {"alltoallv.0", "alltoallv.0.backward", "alltoallv.1",
                           "alltoallv.1.backward", "alltoallv.1.backward.1"})
    EXPECT_NE(reader.find(name), nullptr) << name;
  const detail::SavedRequest *forward = reader.find("alltoallv.1");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->kind, "alltoallv");
  EXPECT_EQ(forward->count, 0);  // per rank, in the state rows
  EXPECT_EQ(forward->calls, 1);
  EXPECT_GT(forward->state_words, 0);
  EXPECT_EQ(reader.find("alltoallv.1.backward")->kind, "alltoallv_backward");
}

}  // namespace
}  // namespace dct::test
