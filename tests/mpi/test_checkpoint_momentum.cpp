// Checkpoints of dct_momentum requests: the velocity is saved beside the residual
// (format 4) and a restarted run continues bit for bit like the uninterrupted one, at density
// < 1 and at density 1 (no residual, a velocity), float and double; corrupting a velocity
// row is refused with the live state left alone; and a request with momentum against a
// checkpoint without it (or the reverse) is a mismatch on every rank. dct_momentum_result=gradient
// requests save their last update too (format 6): a restart continues bit for bit.

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint_edit.hpp"
#include "common.hpp"

namespace dct::test {
namespace {

constexpr std::size_t kCount = 2999;

std::string scratch(const std::string &name) {
  return scratch_path("dct_checkpoint_momentum", name);
}

/// SGD with momentum correction as the README recommends it: a float layer compressed to 2%,
/// after a density warm-up from 30% over 8 calls (the checkpoint at call 6 falls inside it and
/// the resumed calls cross its end), a double layer at density 1 (dense momentum SGD in the
/// library), both with momentum 0.9.
struct Model {
  std::vector<float> a_send = std::vector<float>(kCount), a_recv = std::vector<float>(kCount);
  std::vector<double> b_send = std::vector<double>(kCount / 3),
                      b_recv = std::vector<double>(kCount / 3);
  DCT_Request a = DCT_REQUEST_NULL, b = DCT_REQUEST_NULL;
  int calls = 0;

  explicit Model(const char *momentum = "0.9") {
    MPI_Info info = make_info({{"dct_name", "mc.a"},
                               {"dct_density", "0.02"},
                               {"dct_density_warmup", "0.3,8"},
                               {"dct_momentum", momentum}});
    EXPECT_EQ(DCT_Allreduce_init(a_send.data(), a_recv.data(), a_send.size(), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD, info, &a),
              DCT_SUCCESS)
        << DCT_Get_last_error();
    MPI_Info_free(&info);
    info = make_info({{"dct_name", "mc.b"}, {"dct_density", "1"}, {"dct_momentum", momentum}});
    EXPECT_EQ(DCT_Allreduce_init(b_send.data(), b_recv.data(), b_send.size(), MPI_DOUBLE, MPI_SUM,
                                 MPI_COMM_WORLD, info, &b),
              DCT_SUCCESS)
        << DCT_Get_last_error();
    MPI_Info_free(&info);
  }
  ~Model() {
    DCT_Request_free(&a);
    DCT_Request_free(&b);
  }
  void step() {
    overwrite(a_send, gradient<float>(a_send.size(), calls));
    overwrite(b_send, gradient<double>(b_send.size(), calls, 3));
    ++calls;
    for (DCT_Request *r : {&a, &b}) {
      ASSERT_ALL_RANKS_EQ(DCT_Start(r), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Wait(r, DCT_STATUS_IGNORE), DCT_SUCCESS);
    }
  }
  /// Everything a checkpoint restores, as bits.
  struct State {
    std::vector<float> a_residual, a_velocity;
    std::vector<double> b_velocity;
    bool operator==(const State &o) const {
      return same_bits(a_residual, o.a_residual) && same_bits(a_velocity, o.a_velocity) &&
             same_bits(b_velocity, o.b_velocity);
    }
  };
  State state() const {
    return {residual_of<float>(a, a_send.size()), velocity_of<float>(a, a_send.size()),
            velocity_of<double>(b, b_send.size())};
  }
};

TEST(CheckpointMomentum, RestartedRunContinuesBitForBit) {
  const std::string path = scratch("restart");
  std::vector<float> a_result;
  std::vector<double> b_result;
  Model::State uninterrupted;
  {
    Model model;
    for (int i = 0; i < 6; ++i) model.step();
    ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS)
        << DCT_Get_last_error();
    for (int i = 0; i < 3; ++i) model.step();
    a_result = model.a_recv;
    b_result = model.b_recv;
    uninterrupted = model.state();
    ASSERT_EQ(uninterrupted.a_velocity.size(), kCount);
    ASSERT_EQ(uninterrupted.b_velocity.size(), kCount / 3);
  }
  Model restarted;  // a new job: fresh requests, zero velocities
  ASSERT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS) << DCT_Get_last_error();
  restarted.calls = 6;
  for (int i = 0; i < 3; ++i) restarted.step();
  EXPECT_TRUE(same_bits(restarted.a_recv, a_result));
  EXPECT_TRUE(same_bits(restarted.b_recv, b_result));
  EXPECT_TRUE(restarted.state() == uninterrupted);

  // Without the velocity the run would differ: the checkpoint carries state that matters.
  Model forgetful;
  forgetful.calls = 6;
  for (int i = 0; i < 3; ++i) forgetful.step();
  EXPECT_FALSE(same_bits(forgetful.b_recv, b_result));
}

/// dct_momentum_result=gradient, float at 2% and double at density 1 (MPI_Allreduce of the
/// gradients, no state but the call counter).
struct GradientModel {
  std::vector<float> send = std::vector<float>(kCount), recv = std::vector<float>(kCount);
  DCT_Request request = DCT_REQUEST_NULL;
  int calls = 0;
  explicit GradientModel(const char *result = "gradient") {
    MPI_Info info = make_info({{"dct_name", "mc.g"},
                               {"dct_density", "0.02"},
                               {"dct_momentum", "0.9"},
                               {"dct_momentum_result", result}});
    EXPECT_EQ(DCT_Allreduce_init(send.data(), recv.data(), send.size(), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD, info, &request),
              DCT_SUCCESS)
        << DCT_Get_last_error();
    MPI_Info_free(&info);
  }
  ~GradientModel() { DCT_Request_free(&request); }
  void step() {
    overwrite(send, gradient<float>(send.size(), calls++));
    ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
  }
};

TEST(CheckpointMomentum, GradientResultRestartsBitForBit) {
  const std::string path = scratch("gradient");
  std::vector<std::vector<float>> expected;
  {
    GradientModel model;
    for (int i = 0; i < 5; ++i) model.step();
    ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS)
        << DCT_Get_last_error();
    for (int i = 0; i < 3; ++i) {
      model.step();
      expected.push_back(model.recv);
    }
  }
  detail::CheckpointReader reader(path, MPI_COMM_SELF);
  EXPECT_EQ(reader.format_version(), 6);
  const detail::SavedRequest *saved = reader.find("mc.g");
  ASSERT_TRUE(saved != nullptr);
  EXPECT_TRUE(saved->has_residual && saved->has_velocity && saved->has_last_update);
  // Not zeros: the bit-for-bit restart below needs it restored.
  std::vector<float> saved_residual(kCount), saved_velocity(kCount), last_update(kCount);
  reader.read_row(*saved, rank(), saved_residual.data(), saved_velocity.data(), nullptr,
                  last_update.data());
  EXPECT_TRUE(std::any_of(last_update.begin(), last_update.end(), [](float x) { return x != 0; }));

  {  // (freed before the next request of the same name)
    GradientModel restarted;
    ASSERT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS)
        << DCT_Get_last_error();
    restarted.calls = 5;
    for (int i = 0; i < 3; ++i) {
      restarted.step();
      EXPECT_TRUE(all_ranks(same_bits(restarted.recv, expected[std::size_t(i)]))) << "call " << i;
    }
  }
  // Against a request returning the update itself: a mismatch on every rank, nothing changed.
  GradientModel update("update");
  update.step();
  const std::vector<float> residual = residual_of<float>(update.request, kCount);
  const int rc = DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str());
  EXPECT_TRUE(all_ranks(rc == DCT_ERR_CKPT_MISMATCH)) << rc << ": " << DCT_Get_last_error();
  EXPECT_NE(std::string(DCT_Get_last_error()).find("dct_momentum_result"), std::string::npos)
      << DCT_Get_last_error();
  EXPECT_TRUE(same_bits(residual_of<float>(update.request, kCount), residual));
}

TEST(CheckpointMomentum, ACorruptLastUpdateIsRefused) {
  const std::string path = scratch("corrupt_update");
  GradientModel model;
  for (int i = 0; i < 3; ++i) model.step();
  ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  model.step();
  const std::vector<float> residual = residual_of<float>(model.request, kCount);
  add_to_saved_value(path, "requests/mc.g/last_update", 11, 1.0);  // saved rank 0's
  const int rc = DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str());
  EXPECT_TRUE(all_ranks(rc == DCT_ERR_CKPT_CHECKSUM)) << rc << ": " << DCT_Get_last_error();
  EXPECT_TRUE(same_bits(residual_of<float>(model.request, kCount), residual));
}

TEST(CheckpointMomentum, ReaderHasTheVelocityUnderTheChecksum) {
  const std::string path = scratch("reader");
  Model model;
  for (int i = 0; i < 4; ++i) model.step();
  ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  const Model::State live = model.state();
  detail::CheckpointReader reader(path, MPI_COMM_SELF);
  EXPECT_GE(reader.format_version(), 4);  // a format with velocities
  const detail::SavedRequest *a = reader.find("mc.a");
  const detail::SavedRequest *b = reader.find("mc.b");
  ASSERT_TRUE(a != nullptr && b != nullptr);
  EXPECT_TRUE(a->has_residual && a->has_velocity);
  EXPECT_TRUE(!b->has_residual && b->has_velocity);
  std::vector<float> residual(kCount), velocity(kCount);
  reader.read_row(*a, rank(), residual.data(), velocity.data());
  EXPECT_TRUE(same_bits(residual, live.a_residual));
  EXPECT_TRUE(same_bits(velocity, live.a_velocity));
  std::vector<double> b_velocity(kCount / 3);
  reader.read_row(*b, rank(), nullptr, b_velocity.data());
  EXPECT_TRUE(same_bits(b_velocity, live.b_velocity));
}

TEST(CheckpointMomentum, MomentumOnOneSideOnlyIsAMismatchOnEveryRank) {
  const std::string path = scratch("mismatch");
  {
    Model with;
    with.step();
    ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  }
  Model without("0");
  without.step();
  const Model::State before = without.state();
  const int rc = DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str());
  EXPECT_TRUE(all_ranks(rc == DCT_ERR_CKPT_MISMATCH)) << rc << ": " << DCT_Get_last_error();
  EXPECT_NE(std::string(DCT_Get_last_error()).find("momentum"), std::string::npos)
      << DCT_Get_last_error();
  EXPECT_TRUE(without.state() == before);
}

TEST(CheckpointMomentum, ACorruptVelocityIsRefusedAndChangesNothing) {
  const std::string path = scratch("corrupt");
  Model model;
  for (int i = 0; i < 3; ++i) model.step();
  ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  model.step();
  const Model::State before = model.state();
  add_to_saved_value(path, "requests/mc.b/velocity", 7, 1.0);  // saved rank 0's velocity
  const int rc = DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str());
  EXPECT_TRUE(all_ranks(rc == DCT_ERR_CKPT_CHECKSUM)) << rc << ": " << DCT_Get_last_error();
  EXPECT_TRUE(model.state() == before);
}

// A restart reads straight into requests that have not run (no staging memory): a failed
// load must put back the zeros they held, on every rank, including the ranks whose own rows
// were read before another rank's failed its checksum.
TEST(CheckpointMomentum, AFailedLoadIntoNewRequestsLeavesThemAsTheyWere) {
  const std::string path = scratch("fresh");
  {
    Model model;
    for (int i = 0; i < 3; ++i) model.step();
    ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  }
  add_to_saved_value(path, "requests/mc.a/velocity", 7, 1.0);  // saved rank 0's velocity
  Model fresh;
  const Model::State empty = fresh.state();
  const int rc = DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str());
  EXPECT_TRUE(all_ranks(rc == DCT_ERR_CKPT_CHECKSUM)) << rc << ": " << DCT_Get_last_error();
  EXPECT_TRUE(all_ranks(fresh.state() == empty));
  EXPECT_TRUE(all_ranks(fresh.state() == Model().state()));  // zeros, as made
}

}  // namespace
}  // namespace dct::test
