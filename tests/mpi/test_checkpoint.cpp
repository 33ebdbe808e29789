// Over 450 lines: one round-trip fixture and each corruption it must detect, a test apiece.
// Checkpoints: bitwise round trip, restart equals an uninterrupted run, and every corruption
// detected with its own code while the live state stays exactly as it was.
#include <hdf5.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checkpoint_seal.hpp"
#include "common.hpp"

namespace dct::test {
namespace {

constexpr std::size_t kCount = 3001;

std::string scratch(const std::string &name) {
  return scratch_path("dct_checkpoint_test", name);
}

/// Two live requests with some history, float and double. They are named: default names
/// count requests per communicator and process, which these in-process tests share (the
/// restart script test checks default names across real restarts).
struct Model {
  std::vector<float> a_send = std::vector<float>(kCount), a_recv = std::vector<float>(kCount);
  std::vector<double> b_send = std::vector<double>(kCount / 2),
                      b_recv = std::vector<double>(kCount / 2);
  DCT_Request a = DCT_REQUEST_NULL, b = DCT_REQUEST_NULL;
  int calls = 0;

  Model() {
    MPI_Info info = make_info({{"dct_name", "layer.a"}, {"dct_interval", "3"}});
    EXPECT_EQ(DCT_Allreduce_init(a_send.data(), a_recv.data(), a_send.size(), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD, info, &a),
              DCT_SUCCESS);
    MPI_Info_free(&info);
    // split: an algorithm that learns the result's nonzeros (auto's hint, checkpointed)
    info =
        make_info({{"dct_name", "layer.b"}, {"dct_density", "0.05"}, {"dct_algorithm", "split"}});
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
    overwrite(a_send, gradient<float>(a_send.size(), calls));
    overwrite(b_send, gradient<double>(b_send.size(), calls, 5));
    ++calls;
    for (DCT_Request *r : {&a, &b}) {
      ASSERT_ALL_RANKS_EQ(DCT_Start(r), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Wait(r, DCT_STATUS_IGNORE), DCT_SUCCESS);
    }
  }
};

/// Everything a checkpoint restores, as bits.
struct Snapshot {
  std::vector<float> a_residual;
  std::vector<double> b_residual;
  double a_tau, b_tau;
  MPI_Count a_calls, b_calls;
  std::int64_t a_hint, b_hint;  // what dct_algorithm=auto decides by

  explicit Snapshot(const Model &m)
      : a_residual(residual_of<float>(m.a, m.a_send.size())),
        b_residual(residual_of<double>(m.b, m.b_send.size())),
        a_tau(state_of(m.a).tau()),
        b_tau(state_of(m.b).tau()),
        a_calls(engine_of(m.a).calls()),
        b_calls(engine_of(m.b).calls()),
        a_hint(state_of(m.a).result_nonzeros()),
        b_hint(state_of(m.b).result_nonzeros()) {}

  bool operator==(const Snapshot &o) const {
    return same_bits(a_residual, o.a_residual) && same_bits(b_residual, o.b_residual) &&
           std::memcmp(&a_tau, &o.a_tau, sizeof a_tau) == 0 &&
           std::memcmp(&b_tau, &o.b_tau, sizeof b_tau) == 0 && a_calls == o.a_calls &&
           b_calls == o.b_calls && a_hint == o.a_hint && b_hint == o.b_hint;
  }
};

TEST(Checkpoint, SaveThenLoadRestoresTheStateBitForBit) {
  const std::string path = scratch("roundtrip");
  Model model;
  for (int i = 0; i < 5; ++i) model.step();
  const Snapshot saved(model);
  ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS) << DCT_Get_last_error();
  for (int i = 0; i < 3; ++i) model.step();
  EXPECT_FALSE(Snapshot(model) == saved);
  ASSERT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS) << DCT_Get_last_error();
  EXPECT_TRUE(Snapshot(model) == saved);
}

TEST(Checkpoint, RestartedRunContinuesExactlyLikeAnUninterruptedOne) {
  const std::string path = scratch("restart");
  std::vector<float> result;
  std::unique_ptr<Snapshot> uninterrupted, saved;
  {
    Model model;
    for (int i = 0; i < 5; ++i) model.step();
    ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
    saved = std::make_unique<Snapshot>(model);
    model.step();  // call 6: "layer.a" (interval 3) re-estimates tau here
    model.step();
    result = model.a_recv;
    uninterrupted = std::make_unique<Snapshot>(model);
  }

  Model restarted;  // a new job: same program, fresh requests
  ASSERT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS) << DCT_Get_last_error();
  // Everything, the auto algorithm's hint included (a fresh request has none).
  if (size() > 1) {
    EXPECT_GT(saved->b_hint, 0);
  }
  EXPECT_TRUE(Snapshot(restarted) == *saved);
  restarted.calls = 5;
  restarted.step();
  restarted.step();
  EXPECT_TRUE(same_bits(restarted.a_recv, result));
  EXPECT_TRUE(Snapshot(restarted) == *uninterrupted);
}

/// Rank 0 edits a copy of a good checkpoint with serial HDF5 or plain file I/O.
void on_rank_zero(const std::function<void()> &edit) {
  if (rank() == 0) edit();
  MPI_Barrier(MPI_COMM_WORLD);
}

/// Seals `path` again after a test edited it through HDF5: the edit then reaches the checks
/// behind the seal (checkpoint_seal.hpp), as a crafted file with a valid seal would.
void reseal(const std::string &path) {
  detail::seal_file(path);
}

void copy_file(const std::string &from, const std::string &to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
}

TEST(Checkpoint, EveryCorruptionHasItsCodeAndLeavesTheStateAlone) {
  const std::string good = scratch("good");
  Model model;
  for (int i = 0; i < 4; ++i) model.step();
  ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, good.c_str()), DCT_SUCCESS);
  model.step();
  const Snapshot live(model);

  std::string message;  // the load's: reading the state back is a dct call of its own
  auto expect_load = [&](const std::string &path, int code, const char *what) {
    EXPECT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), code)
        << what << ": " << DCT_Get_last_error();
    message = DCT_Get_last_error();
    EXPECT_TRUE(Snapshot(model) == live) << what << " changed the live state";
  };

  expect_load(scratch("missing"), DCT_ERR_CKPT_NOT_FOUND, "missing file");

  const std::string text = scratch("text");
  on_rank_zero([&] { std::ofstream(text) << "not a checkpoint\n"; });
  expect_load(text, DCT_ERR_CKPT_FORMAT, "not HDF5");

  const std::string foreign = scratch("foreign");
  on_rank_zero(
      [&] { H5Fclose(H5Fcreate(foreign.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)); });
  expect_load(foreign, DCT_ERR_CKPT_FORMAT, "HDF5 but not dct");

  const std::string version = scratch("version");
  on_rank_zero([&] {
    copy_file(good, version);
    hid_t file = H5Fopen(version.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t attribute = H5Aopen(file, "format_version", H5P_DEFAULT);
    const std::int64_t future = 99;
    H5Awrite(attribute, H5T_NATIVE_INT64, &future);
    H5Aclose(attribute);
    H5Fclose(file);
    reseal(version);
  });
  expect_load(version, DCT_ERR_CKPT_VERSION, "wrong format version");

  const std::string truncated = scratch("truncated");
  on_rank_zero([&] {
    copy_file(good, truncated);
    struct stat info {};
    ::stat(truncated.c_str(), &info);
    EXPECT_EQ(::truncate(truncated.c_str(), info.st_size / 2), 0);
  });
  expect_load(truncated, DCT_ERR_CKPT_TRUNCATED, "truncated");

  // Flip one byte in the last saved rank's residual row of "layer.a".
  const std::string flipped = scratch("flipped");
  on_rank_zero([&] {
    copy_file(good, flipped);
    hid_t file = H5Fopen(flipped.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t dataset = H5Dopen2(file, "requests/layer.a/residual", H5P_DEFAULT);
    const haddr_t offset = H5Dget_offset(dataset);
    H5Dclose(dataset);
    H5Fclose(file);
    ASSERT_NE(offset, HADDR_UNDEF);
    std::fstream bytes(flipped, std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = static_cast<std::streamoff>(offset) +
                              static_cast<std::streamoff>((size() - 1) * kCount * 4 + 17);
    bytes.seekg(at);
    char c = 0;
    bytes.get(c);
    bytes.seekp(at);
    bytes.put(static_cast<char>(c ^ 0x10));
    bytes.close();
    reseal(flipped);
  });
  expect_load(flipped, DCT_ERR_CKPT_CHECKSUM, "flipped byte");
  EXPECT_NE(message.find("checksum"), std::string::npos);

  {  // A live request that the checkpoint does not have.
    std::vector<float> x(10), y(10);
    MPI_Info info = make_info({{"dct_name", "layer.new"}});
    DCT_Request extra;
    ASSERT_EQ(DCT_Allreduce_init(x.data(), y.data(), 10, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, info,
                                 &extra),
              DCT_SUCCESS);
    expect_load(good, DCT_ERR_CKPT_MISMATCH, "request missing from the file");
    DCT_Request_free(&extra);
    MPI_Info_free(&info);
  }
  // The good file itself still loads, and takes the state back to the saved call 4.
  EXPECT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, good.c_str()), DCT_SUCCESS);
  EXPECT_EQ(Snapshot(model).a_calls, 4);
}

/// Rewrites `path`'s tau of saved rank 0 of "layer.a" (rank 0 only; the file is closed after).
void edit_tau(const std::string &path, double tau) {
  hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t dataset = H5Dopen2(file, "requests/layer.a/tau", H5P_DEFAULT);
  std::vector<double> taus(static_cast<std::size_t>(size()));
  H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, taus.data());
  taus[0] = tau;
  H5Dwrite(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, taus.data());
  H5Dclose(dataset);
  H5Fclose(file);
  reseal(path);
}

// Issue 14, item 6: tau and the call counter are covered (range and checksum), the path must be
// a regular file (a FIFO must not hang), errno is reported right, and ranks naming different
// files fail together instead of waiting in collective MPI-IO.
TEST(Checkpoint, ThresholdCounterFileKindAndPathAreChecked) {
  const std::string good = scratch("guarded");
  Model model;
  for (int i = 0; i < 3; ++i) model.step();
  ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, good.c_str()), DCT_SUCCESS);
  model.step();
  const Snapshot live(model);
  std::string message;  // the load's: reading the state back is a dct call of its own
  auto expect_load = [&](const std::string &path, int code, const char *what) {
    EXPECT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), code)
        << what << ": " << DCT_Get_last_error();
    message = DCT_Get_last_error();
    EXPECT_TRUE(Snapshot(model) == live) << what << " changed the live state";
  };

  const std::string nan_tau = scratch("nan_tau");
  on_rank_zero([&] {
    copy_file(good, nan_tau);
    edit_tau(nan_tau, std::numeric_limits<double>::quiet_NaN());
  });
  expect_load(nan_tau, DCT_ERR_CKPT_FORMAT, "tau NaN");

  const std::string other_tau = scratch("other_tau");
  on_rank_zero([&] {
    copy_file(good, other_tau);
    edit_tau(other_tau, 2 * Snapshot(model).a_tau + 1);
  });
  expect_load(other_tau, DCT_ERR_CKPT_CHECKSUM, "tau changed");

  const std::string counter = scratch("counter");
  on_rank_zero([&] {
    copy_file(good, counter);
    hid_t file = H5Fopen(counter.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t group = H5Gopen2(file, "requests/layer.b", H5P_DEFAULT);
    hid_t attribute = H5Aopen(group, "calls", H5P_DEFAULT);
    const std::int64_t calls = 1000;
    H5Awrite(attribute, H5T_NATIVE_INT64, &calls);
    H5Aclose(attribute);
    H5Gclose(group);
    H5Fclose(file);
    reseal(counter);
  });
  expect_load(counter, DCT_ERR_CKPT_CHECKSUM, "call counter changed");

  const std::string fifo = scratch("fifo");
  on_rank_zero([&] { ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0); });
  expect_load(fifo, DCT_ERR_CKPT_FORMAT, "a FIFO");
  EXPECT_NE(message.find("not a regular file"), std::string::npos);

  const std::string loop = scratch("loop");
  on_rank_zero([&] { ASSERT_EQ(::symlink("loop.h5", loop.c_str()), 0); });  // points at itself
  expect_load(loop, DCT_ERR_CKPT_NOT_FOUND, "a symlink loop");
  EXPECT_NE(message.find(std::strerror(ELOOP)), std::string::npos) << message;

  if (size() > 1) {
    const std::string mine = scratch("rank" + std::to_string(rank()));
    EXPECT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, mine.c_str()), DCT_ERR_ARG);
    EXPECT_NE(std::string(DCT_Get_last_error()).find("different checkpoint paths"),
              std::string::npos);
    EXPECT_EQ(::access(mine.c_str(), F_OK), -1);
    expect_load(rank() == 0 ? good : mine, DCT_ERR_ARG, "different paths");
  }
  EXPECT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, good.c_str()), DCT_SUCCESS);
  EXPECT_EQ(Snapshot(model).a_calls, 3);
}

// Issue 14, item 2: after this process opened MPI-IO files with short names, Open MPI's
// lockedfile component is selectable and overflows on a long name: dct refuses the name with
// DCT_ERR_CKPT_IO (or succeeds where the component is excluded); it never crashes.
TEST(Checkpoint, LongPathAfterOtherFilesIsRefusedOrWorks) {
  Model model;
  model.step();
  ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, scratch("short").c_str()), DCT_SUCCESS);
  const Snapshot live(model);
  std::string path = scratch("long");
  path.insert(path.size() - 3, 300 - path.size(), 'x');
  const int saved = DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str());
  const std::string why = DCT_Get_last_error();
  EXPECT_TRUE(saved == DCT_SUCCESS || saved == DCT_ERR_CKPT_IO) << why;
  const int loaded = DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str());
  if (saved == DCT_ERR_CKPT_IO) {
#if defined(OMPI_MAJOR_VERSION)  // refused by dct before Open MPI's lockedfile sees the name
    EXPECT_NE(why.find("OMPI_MCA_sharedfp"), std::string::npos) << why;
#else  // other MPIs: the file system refuses the 300-character name (NAME_MAX is 255)
    EXPECT_NE(why.find("cannot create"), std::string::npos) << why;
#endif
    EXPECT_TRUE(loaded == DCT_ERR_CKPT_IO || loaded == DCT_ERR_CKPT_NOT_FOUND);
  } else {
    EXPECT_EQ(loaded, DCT_SUCCESS) << DCT_Get_last_error();
  }
  EXPECT_TRUE(Snapshot(model) == live);
}

/// A request saved as another kind (the file says "alltoallv" where the live request of that
/// name is an allreduce) is a mismatch on every rank (docs/checkpoint-format.md), and nothing
/// of the live state changes. The kind is not under the rows' checksums: only the load's
/// comparison with the live request catches it.
TEST(Checkpoint, RequestOfAnotherKindIsAMismatchOnEveryRank) {
  const std::string good = scratch("kind_good");
  Model model;
  for (int i = 0; i < 3; ++i) model.step();
  ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, good.c_str()), DCT_SUCCESS);
  model.step();
  const Snapshot live(model);
  const std::string other = scratch("kind_alltoallv");
  on_rank_zero([&] {
    copy_file(good, other);
    hid_t file = H5Fopen(other.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t group = H5Gopen2(file, "requests/layer.a", H5P_DEFAULT);
    hid_t attribute = H5Aopen(group, "kind", H5P_DEFAULT);
    hid_t type = H5Aget_type(attribute);
    const std::string kind = "alltoallv";  // as long as "allreduce": the stored type holds it
    EXPECT_EQ(H5Tget_size(type), kind.size());
    EXPECT_GE(H5Awrite(attribute, type, kind.data()), 0);
    H5Tclose(type);
    H5Aclose(attribute);
    H5Gclose(group);
    H5Fclose(file);
    reseal(other);
  });
  const int code = DCT_Checkpoint_load(MPI_COMM_WORLD, other.c_str());
  const std::string message = DCT_Get_last_error();
  EXPECT_TRUE(all_ranks(code == DCT_ERR_CKPT_MISMATCH)) << "rank " << rank() << ": " << code;
  EXPECT_NE(message.find("'layer.a' is an allreduce request, the checkpoint holds an alltoallv"),
            std::string::npos)
      << message;
  EXPECT_TRUE(Snapshot(model) == live) << "a refused load changed the live state";
  // The untouched file still loads: the refusal left nothing behind.
  EXPECT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, good.c_str()), DCT_SUCCESS) << DCT_Get_last_error();
  EXPECT_EQ(Snapshot(model).a_calls, 3);
}

TEST(Checkpoint, RequestOfAnotherSizeIsAMismatch) {
  const std::string path = scratch("size");
  {
    Model model;
    model.step();
    ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  }
  std::vector<float> x(kCount + 1), y(kCount + 1);
  MPI_Info info = make_info({{"dct_name", "layer.a"}});
  DCT_Request resized;
  ASSERT_EQ(DCT_Allreduce_init(x.data(), y.data(), x.size(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               info, &resized),
            DCT_SUCCESS);
  MPI_Info_free(&info);
  EXPECT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_ERR_CKPT_MISMATCH);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("3002 elements"), std::string::npos)
      << DCT_Get_last_error();
  DCT_Request_free(&resized);
}

TEST(Checkpoint, MisuseIsRefusedOnEveryRank) {
  const std::string path = scratch("misuse");
  EXPECT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, nullptr), DCT_ERR_ARG);
  EXPECT_EQ(DCT_Checkpoint_save(MPI_COMM_NULL, path.c_str()), DCT_ERR_COMM);
  Model model;
  model.step();
  ASSERT_EQ(DCT_Start(&model.a), DCT_SUCCESS);
  EXPECT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_ERR_ACTIVE);
  EXPECT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_ERR_ACTIVE);
  ASSERT_EQ(DCT_Wait(&model.a, DCT_STATUS_IGNORE), DCT_SUCCESS);

  std::vector<float> x(10), y(10);
  MPI_Info info = make_info({{"dct_name", "layer.a"}});  // the same name twice
  DCT_Request twin;
  ASSERT_EQ(
      DCT_Allreduce_init(x.data(), y.data(), 10, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, info, &twin),
      DCT_SUCCESS);
  MPI_Info_free(&info);
  EXPECT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_ERR_ARG);
  DCT_Request_free(&twin);
  EXPECT_EQ(::access(path.c_str(), F_OK), -1);  // nothing was written under the name

  // DCT_RESTART is read where every key is: at the request's init.
  setenv("DCT_RESTART", "sometimes", 1);
  EXPECT_EQ(DCT_Allreduce_init(x.data(), y.data(), 10, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               MPI_INFO_NULL, &twin),
            DCT_ERR_INFO);
  unsetenv("DCT_RESTART");
}

/// The value of `key` in a request's configuration read back (DCT_Request_get_info).
std::string info_value(DCT_Request request, const char *key) {
  MPI_Info info = MPI_INFO_NULL;
  EXPECT_EQ(DCT_Request_get_info(request, &info), DCT_SUCCESS) << DCT_Get_last_error();
  char value[MPI_MAX_INFO_VAL + 1] = {};
  int found = 0;
  if (info != MPI_INFO_NULL) {
    MPI_Info_get(info, key, MPI_MAX_INFO_VAL, value, &found);
    MPI_Info_free(&info);
  }
  return found ? value : "(absent)";
}

// dct_restart is a request's key: saved on every rank of MPI_COMM_WORLD, the checkpoint is
// loaded by each rank alone (MPI_COMM_SELF: another rank count from 2 ranks on), where only a
// request created with dct_restart=redistribute takes it, summing every saved rank's residual.
TEST(Checkpoint, RestartKeyOfTheRequestDecidesARankCountChange) {
  const std::string path = scratch("restart_key");
  const std::size_t n = 777;
  std::vector<float> send(n), recv(n);
  std::vector<float> saved_rows;
  {
    MPI_Info info = make_info({{"dct_name", "moved"}, {"dct_density", "0.05"}});
    DCT_Request request;
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                           MPI_COMM_WORLD, info, &request),
                        DCT_SUCCESS);
    MPI_Info_free(&info);
    for (int call = 0; call < 3; ++call) {
      overwrite(send, gradient<float>(n, call));
      ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
    }
    EXPECT_EQ(info_value(request, "dct_restart"), "strict");  // the default
    ASSERT_ALL_RANKS_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
    const std::vector<float> mine = residual_of<float>(request, n);
    saved_rows.resize(n * static_cast<std::size_t>(size()));
    MPI_Allgather(mine.data(), int(n), MPI_FLOAT, saved_rows.data(), int(n), MPI_FLOAT,
                  MPI_COMM_WORLD);
    DCT_Request_free(&request);
  }
  // What redistribute gives the one new rank: every saved row, added in double in rank order.
  std::vector<double> sum(n, 0.0);
  for (int r = 0; r < size(); ++r)
    for (std::size_t i = 0; i < n; ++i) sum[i] += saved_rows[std::size_t(r) * n + i];
  const std::vector<float> expected(sum.begin(), sum.end());

  for (const char *policy : {"strict", "redistribute"}) {
    MPI_Info info = make_info({{"dct_name", "moved"}, {"dct_restart", policy}});
    DCT_Request request;
    ASSERT_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF,
                                 info, &request),
              DCT_SUCCESS);
    MPI_Info_free(&info);
    EXPECT_EQ(info_value(request, "dct_restart"), policy);
    const int code = DCT_Checkpoint_load(MPI_COMM_SELF, path.c_str());
    const std::string message = DCT_Get_last_error();
    const std::vector<float> residual = residual_of<float>(request, n);
    if (size() == 1) {  // the same rank count: no policy needed
      EXPECT_EQ(code, DCT_SUCCESS) << message;
      EXPECT_TRUE(same_bits(residual, expected)) << policy;
    } else if (std::string(policy) == "strict") {
      EXPECT_EQ(code, DCT_ERR_CKPT_MISMATCH);
      EXPECT_NE(message.find("'moved' has dct_restart=strict"), std::string::npos) << message;
      EXPECT_TRUE(same_bits(residual, std::vector<float>(n, 0.0f))) << "the state changed";
    } else {
      EXPECT_EQ(code, DCT_SUCCESS) << message;
      EXPECT_TRUE(same_bits(residual, expected)) << "every saved rank's residual, summed";
    }
    DCT_Request_free(&request);
  }
  MPI_Barrier(MPI_COMM_WORLD);  // every rank has read the file before the next test
}

TEST(Checkpoint, ReaderSeesWhatWasSaved) {
  const std::string path = scratch("reader");
  Model model;
  for (int i = 0; i < 3; ++i) model.step();
  ASSERT_EQ(DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS);
  const std::vector<float> mine = residual_of<float>(model.a, kCount);
  detail::CheckpointReader reader(path, MPI_COMM_SELF);
  EXPECT_EQ(reader.ranks(), size());
  ASSERT_EQ(reader.requests().size(), 2u);
  EXPECT_EQ(reader.requests()[0].name, "layer.a");
  EXPECT_EQ(reader.requests()[1].name, "layer.b");
  const detail::SavedRequest *a = reader.find("layer.a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->calls, 3);
  EXPECT_EQ(a->count, MPI_Count(kCount));
  std::vector<float> saved(kCount);
  reader.read_residual(*a, rank(), saved.data());
  EXPECT_TRUE(same_bits(saved, mine));
}

}  // namespace
}  // namespace dct::test
