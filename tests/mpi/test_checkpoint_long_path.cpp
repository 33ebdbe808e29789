// A checkpoint at a long path, in a process that opened no MPI file before (its own program:
// Open MPI's sharedfp/lockedfile overflowed on such a path; test_checkpoint.cpp checks the path
// after other files were opened).
#include <sys/stat.h>

#include "common.hpp"

namespace dct::test {
namespace {

/// A path of `length` characters under `root`, in directories of 49-character names (created).
std::string long_path(const std::string &root, std::size_t length) {
  std::string path = root;
  if (rank() == 0) ::mkdir(path.c_str(), 0755);
  while (path.size() + 51 < length) {
    path += "/" + std::string(49, 'd');
    if (rank() == 0) ::mkdir(path.c_str(), 0755);
  }
  path += "/" + std::string(length - path.size() - 1, 'f');
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

TEST(CheckpointLongPath, SavesAndLoads) {
  std::vector<float> send = gradient<float>(100, 0), recv(100);
  MPI_Info info = make_info({{"dct_name", "long"}});
  DCT_Request request;
  ASSERT_EQ(DCT_Allreduce_init(send.data(), recv.data(), 100, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                               info, &request),
            DCT_SUCCESS);
  MPI_Info_free(&info);
  ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
  ASSERT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
  for (std::size_t length : {std::size_t(240), std::size_t(300), std::size_t(1000)}) {
    const std::string path = long_path("dct_long_path.np" + std::to_string(size()), length);
    const int saved = DCT_Checkpoint_save(MPI_COMM_WORLD, path.c_str());
    if (saved == DCT_ERR_NOT_COMPILED) GTEST_SKIP() << "built without HDF5";
    // No MPI file was opened before in this process: dct excludes the component and succeeds.
    EXPECT_EQ(saved, DCT_SUCCESS) << length << ": " << DCT_Get_last_error();
    EXPECT_EQ(DCT_Checkpoint_load(MPI_COMM_WORLD, path.c_str()), DCT_SUCCESS)
        << length << ": " << DCT_Get_last_error();
  }
  DCT_Request_free(&request);
}

}  // namespace
}  // namespace dct::test
