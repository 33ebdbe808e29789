// Over 450 lines: one twin fixture (host and device requests) for every device path.
// The allreduce on GPU memory (docs/backends.md, "GPU-aware MPI and staging"): a request whose
// buffers live on the device (dct_backend=auto finds the owner by pointer attributes) gives
// the same sums, sends the same bytes and keeps the same residual as the same request on host
// memory, bit for bit, call after call; density 1 is MPI_Allreduce. Every GPU backend compiled
// in runs; a backend with no device on this node is skipped with a message (.ci/gpu/README.md
// runs this suite on a GPU node).
//
// Built a second time with DCT_EMULATED_GPU (mpi.device_buffers.emulated, in every CI run): the
// CUDA/HIP backends' common source, run on the host by tests/gpu_emulation, stands in for the
// CUDA backend (testing::emulated_gpu), so that the GPU code path of a request (kernels on
// "device" memory, pinned staging, the allgather's sum on the device, the exact path with and
// without a GPU-aware MPI) runs end to end on machines without a GPU.
#ifdef DCT_EMULATED_GPU
#include "emulated_api.hpp"  // first: it stands in for backends/cuda/cuda_api.hpp
#endif

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"
#include "core/compute_backend.hpp"
#include "core/device_transport.hpp"
#include "core/test_hooks.hpp"
#include "core/wire.hpp"
#ifdef DCT_EMULATED_GPU
#include "common/cuda_hip/cuda_hip_backend.hpp"
#endif

namespace dct::test {
namespace {

using detail::Backend;
using detail::BackendArray;

/// The GPU backends compiled into this build that find a device (the emulated one instead when
/// built with DCT_EMULATED_GPU).
std::vector<Backend *> gpus() {
#ifdef DCT_EMULATED_GPU
  static detail::emulation::GpuBackend emulated;
  detail::testing::emulated_gpu = &emulated;
  return {&emulated};
#endif
  std::vector<Backend *> found;
  for (Backend *backend : {detail::backends::cuda_backend(), detail::backends::hip_backend()})
    if (backend != nullptr && backend->available()) found.push_back(backend);
  return found;
}

template <typename T>
void to_device(Backend &gpu, T *device, const std::vector<T> &host) {
  gpu.copy(device, host.data(), host.size() * sizeof(T), nullptr);
}
template <typename T>
std::vector<T> from_device(Backend &gpu, const T *device, std::size_t n) {
  std::vector<T> host(n);
  gpu.copy(host.data(), device, n * sizeof(T), nullptr);
  return host;
}

/// One request on the host and its twin on the device, fed the same gradients.
template <typename T>
class Twins {
 public:
  Twins(Backend &gpu, std::size_t n, const std::vector<std::pair<std::string, std::string>> &keys)
      : gpu_(gpu), n_(n), send_(n), recv_(n), device_send_(gpu, n), device_recv_(gpu, n) {
    MPI_Info info = make_info(keys);
    EXPECT_EQ(DCT_Allreduce_init(send_.data(), recv_.data(), n, mpi_type<T>(), MPI_SUM,
                                 MPI_COMM_WORLD, info, &host_),
              DCT_SUCCESS)
        << DCT_Get_last_error();
    EXPECT_EQ(DCT_Allreduce_init(device_send_.data(), device_recv_.data(), n, mpi_type<T>(),
                                 MPI_SUM, MPI_COMM_WORLD, info, &device_),
              DCT_SUCCESS)
        << DCT_Get_last_error();
    MPI_Info_free(&info);
  }
  ~Twins() {
    DCT_Request_free(&host_);
    DCT_Request_free(&device_);
  }

  /// One call of each on `gradient`; false (with a message) where they differ.
  ::testing::AssertionResult step(const std::vector<T> &gradient) {
    overwrite(send_, gradient);
    to_device(gpu_, device_send_.data(), gradient);
    std::fill(recv_.begin(), recv_.end(), T(-7));
    to_device(gpu_, device_recv_.data(), recv_);
    DCT_Status host_status{}, device_status{};
    if (DCT_Start(&host_) != DCT_SUCCESS || DCT_Wait(&host_, &host_status) != DCT_SUCCESS)
      return ::testing::AssertionFailure() << "host request: " << DCT_Get_last_error();
#ifdef DCT_EMULATED_GPU
    namespace api = detail::emulation::api;
    const std::size_t launched = detail::emulation::launches;
    const std::size_t to_host = api::copied_to_host, to_device = api::copied_to_device;
    const std::size_t waited = detail::emulation::waits;
#endif
    if (DCT_Start(&device_) != DCT_SUCCESS)
      return ::testing::AssertionFailure() << "device request: " << DCT_Get_last_error();
#ifdef DCT_EMULATED_GPU
    // dct.h: DCT_Start and the completion call return with the stream's work done.
    if (!detail::emulation::device_queue.idle())
      return ::testing::AssertionFailure() << "DCT_Start returned with device work queued";
#endif
    if (DCT_Wait(&device_, &device_status) != DCT_SUCCESS)
      return ::testing::AssertionFailure() << "device request: " << DCT_Get_last_error();
#ifdef DCT_EMULATED_GPU
    if (!detail::emulation::device_queue.idle())
      return ::testing::AssertionFailure() << "DCT_Wait returned with device work queued";
    if (detail::emulation::launches == launched)
      return ::testing::AssertionFailure() << "the device request launched no kernel";
    crossed_ = {api::copied_to_host - to_host, api::copied_to_device - to_device};
    waits_ = detail::emulation::waits - waited;
#endif
    status_ = device_status;
    if (!gpu_.owns(device_recv_.data()))
      return ::testing::AssertionFailure() << "the device buffer is not device memory";
    if (!same_bits(from_device(gpu_, device_recv_.data(), n_), recv_))
      return ::testing::AssertionFailure() << "the sums differ";
    if (!same_bits(residual_of<T>(device_, n_), residual_of<T>(host_, n_)))
      return ::testing::AssertionFailure() << "the residuals differ";
    if (device_status.bytes_sent != host_status.bytes_sent ||
        device_status.bytes_received != host_status.bytes_received ||
        device_status.nnz_sent != host_status.nnz_sent)
      return ::testing::AssertionFailure()
             << "bytes or nnz differ: device " << device_status.bytes_sent << "/"
             << device_status.nnz_sent << ", host " << host_status.bytes_sent << "/"
             << host_status.nnz_sent;
    return ::testing::AssertionSuccess();
  }

  /// The device request's last call: its status, and (emulation) the bytes it copied from the
  /// device to the host and back.
  const DCT_Status &status() const {
    return status_;
  }
  std::pair<std::size_t, std::size_t> crossed() const {
    return crossed_;
  }
  /// (emulation) How often the device request's last call made the host wait for the device.
  std::size_t waits() const {
    return waits_;
  }
  /// The host request's last sum.
  const std::vector<T> &host_sum() const {
    return recv_;
  }

 private:
  Backend &gpu_;
  std::size_t n_;
  std::vector<T> send_, recv_;
  BackendArray<T> device_send_, device_recv_;
  DCT_Request host_ = DCT_REQUEST_NULL, device_ = DCT_REQUEST_NULL;
  DCT_Status status_{};
  std::pair<std::size_t, std::size_t> crossed_{0, 0};
  std::size_t waits_ = 0;
};

template <typename T>
void expect_twins_agree(const std::vector<std::pair<std::string, std::string>> &keys, std::size_t n,
                        int calls) {
  const std::vector<Backend *> found = gpus();
  if (found.empty()) GTEST_SKIP() << "no GPU backend compiled in with a device on this node";
  for (Backend *gpu : found) {
    SCOPED_TRACE(DCT_Backend_name(gpu->kind()));
    Twins<T> twins(*gpu, n, keys);
    for (int call = 0; call < calls; ++call) {
      const ::testing::AssertionResult agree = twins.step(gradient<T>(n, call));
      ASSERT_TRUE(all_ranks(agree)) << "call " << call << ": " << agree.message();
    }
  }
}

TEST(DeviceBuffers, CompressedSumsAndResidualsEqualTheHostRequestsBitForBit) {
  // The library's defaults (auto algorithm, adaptive top-k), float and double, and a size that
  // is not a multiple of any block or warp size.
  expect_twins_agree<float>({{"dct_density", "0.01"}}, 100003, 12);
  expect_twins_agree<double>({{"dct_density", "0.01"}}, 100003, 12);
}

TEST(DeviceBuffers, EveryAlgorithmAndWireCodingAgreesWithTheHost) {
  for (const char *algorithm :
       {"allgather", "split", "hierarchical", "recursive_doubling", "dense"})
    for (const char *values : {"native", "fp16", "bf16", "sign"}) {
      SCOPED_TRACE(std::string(algorithm) + " " + values);
      const std::vector<std::pair<std::string, std::string>> keys = {
          {"dct_density", "0.05"}, {"dct_algorithm", algorithm}, {"dct_values", values}};
      expect_twins_agree<float>(keys, 8191, 5);
      expect_twins_agree<double>(keys, 4099, 3);
    }
}

// Where the sum of a segment is denser than its block would be (about 97% nonzero: at density
// 0.9 from 2 ranks on), split's and hierarchical's owners send it dense, padded on the device.
TEST(DeviceBuffers, DenseSegmentsAgreeWithTheHost) {
  for (const char *algorithm : {"split", "hierarchical"}) {
    SCOPED_TRACE(algorithm);
    expect_twins_agree<float>({{"dct_density", "0.9"}, {"dct_algorithm", algorithm}}, 8191, 4);
  }
}
TEST(DeviceBuffers, FixedScheduleAgreesWithTheHost) {
  expect_twins_agree<float>(
      {{"dct_density", "0.02"}, {"dct_tau_control", "fixed"}, {"dct_interval", "3"}}, 65536, 8);
}

// u = m u + g on the device must not contract into a fused multiply-add (nvcc's default): the
// host backend rounds the product, and one ulp apart the two requests send different entries.
TEST(DeviceBuffers, MomentumAgreesWithTheHost) {
  expect_twins_agree<float>({{"dct_density", "0.02"}, {"dct_momentum", "0.9"}}, 65536, 8);
  expect_twins_agree<double>({{"dct_density", "0.02"}, {"dct_momentum", "0.9"}}, 65536, 8);
}

void expect_density_one_is_mpi_allreduce(Backend &gpu) {
  constexpr std::size_t n = 1 << 20;
  BackendArray<float> send(gpu, n), recv(gpu, n);
  MPI_Info info = make_info({{"dct_density", "1"}});
  DCT_Request request = DCT_REQUEST_NULL;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  for (int call = 0; call < 3; ++call) {
    const std::vector<float> g = gradient<float>(n, call);
    to_device(gpu, send.data(), g);
    ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
    EXPECT_TRUE(all_ranks(same_bits(from_device(gpu, recv.data(), n), mpi_sum(g))))
        << "call " << call;
  }
  DCT_Request_free(&request);
}

TEST(DeviceBuffers, DensityOneIsMpiAllreduceBitForBit) {
  const std::vector<Backend *> found = gpus();
  if (found.empty()) GTEST_SKIP() << "no GPU backend compiled in with a device on this node";
  for (Backend *gpu : found) {
    SCOPED_TRACE(DCT_Backend_name(gpu->kind()));
    expect_density_one_is_mpi_allreduce(*gpu);
  }
}

// dct_result_density: split's and hierarchical's owners keep the largest sums of their share
// and move the rest into their residual, which for a GPU request lives on the device (the
// dropped sums go over as a list once the call succeeded): same sums, same residuals.
TEST(DeviceBuffers, ResultDensityAgreesWithTheHost) {
  for (const char *algorithm : {"split", "hierarchical", "auto"}) {
    SCOPED_TRACE(algorithm);
    const std::vector<std::pair<std::string, std::string>> keys = {
        {"dct_density", "0.05"}, {"dct_result_density", "0.02"}, {"dct_algorithm", algorithm}};
    expect_twins_agree<float>(keys, 8191, 5);
    expect_twins_agree<double>(keys, 4099, 3);
  }
}

/// Rank 0 sends its first index twice: not strictly increasing, so every receiver rejects it.
void repeat_first_index(detail::WireIndex *idx, std::size_t entries) {
  if (rank() == 0 && entries >= 2) idx[1] = idx[0];
}

void expect_peer_error_leaves_buffers(Backend &gpu, const char *algorithm) {
  constexpr std::size_t n = 4096;
  constexpr float kSentinel = 42.0f;
  BackendArray<float> send(gpu, n), recv(gpu, n);
  to_device(gpu, send.data(), gradient<float>(n, 0));
  MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_algorithm", algorithm}});
  DCT_Request request = DCT_REQUEST_NULL;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);

  const std::vector<float> before = residual_of<float>(request, n);
  const std::vector<float> g = gradient<float>(n, 1);
  to_device(gpu, send.data(), g);
  to_device(gpu, recv.data(), std::vector<float>(n, kSentinel));
  detail::testing::tamper_allreduce_indices = repeat_first_index;
  ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
  const int code = DCT_Wait(&request, DCT_STATUS_IGNORE);
  detail::testing::tamper_allreduce_indices = nullptr;
  // Recursive doubling: only the ranks whose partial sums depended on the damaged message
  // know of it (docs/reliability.md); they fail as the others do everywhere.
  const bool everyone = std::string(algorithm) != "recursive_doubling";
  if (everyone) {
    ASSERT_ALL_RANKS_EQ(code, DCT_ERR_PEER);
  }
  int failed = code == DCT_ERR_PEER ? 1 : 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  EXPECT_EQ(any, 1);
  if (code == DCT_ERR_PEER) {
    EXPECT_TRUE(same_bits(from_device(gpu, recv.data(), n), std::vector<float>(n, kSentinel)));
    std::vector<float> acc(n);  // this call's contribution back in the residual: exactly acc
    for (std::size_t i = 0; i < n; ++i) acc[i] = g[i] + before[i];
    EXPECT_TRUE(same_bits(residual_of<float>(request, n), acc));
  } else {
    EXPECT_EQ(code, DCT_SUCCESS) << DCT_Get_last_error();
  }
  ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);  // intact messages work again
  EXPECT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS) << DCT_Get_last_error();
  DCT_Request_free(&request);
}

// A peer's damaged block (encoded on the device from damaged indices) is rejected where the
// blocks are decoded, on the device (the allgather's blocks, split's and hierarchical's
// entries at their owner, a group that rejected one telling the cross tier; recursive
// doubling's partial sums), by every rank alike, and the failed call leaves the user's device
// buffer and the residual as they were.
constexpr const char *kSparseAlgorithms[] = {"allgather", "split", "hierarchical",
                                             "recursive_doubling"};

TEST(DeviceBuffers, PeerErrorLeavesTheDeviceBufferAndTheResidual) {
  if (size() < 2) GTEST_SKIP() << "needs a peer";
  const std::vector<Backend *> found = gpus();
  if (found.empty()) GTEST_SKIP() << "no GPU backend compiled in with a device on this node";
  for (Backend *gpu : found)
    for (const char *algorithm : kSparseAlgorithms) {
      SCOPED_TRACE(std::string(DCT_Backend_name(gpu->kind())) + ", " + algorithm);
      expect_peer_error_leaves_buffers(*gpu, algorithm);
    }
}

#ifdef DCT_EMULATED_GPU
// ... and the same where MPI delivered the damaged block into device memory (a GPU-aware MPI).
TEST(DeviceBuffers, PeerErrorThroughAGpuAwareMpiLeavesTheBuffers) {
  if (size() < 2) GTEST_SKIP() << "needs a peer";
  detail::emulation::api::mpi_aware = true;
  {
    detail::emulation::GpuBackend aware;
    detail::testing::emulated_gpu = &aware;
    for (const char *algorithm : kSparseAlgorithms) {
      SCOPED_TRACE(algorithm);
      expect_peer_error_leaves_buffers(aware, algorithm);
    }
  }
  detail::emulation::api::mpi_aware = false;
  static_cast<void>(gpus());  // the staged emulation again, for the tests after this one
}
#endif

// dct_transport=nccl where it cannot run: refused at init, alike on every rank, no request.
TEST(DeviceBuffers, NcclTransportIsRefusedWhereItCannotRun) {
  std::vector<float> send(4096), recv(4096);
  MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_transport", "nccl"}});
  DCT_Request request = DCT_REQUEST_NULL;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), 4096, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_HAVE_NCCL ? DCT_ERR_BUFFER : DCT_ERR_NOT_COMPILED);
  EXPECT_EQ(request, DCT_REQUEST_NULL);
  MPI_Info_free(&info);
  // Density 1 never compresses: MPI_Allreduce, whatever the transport.
  info = make_info({{"dct_density", "1"}, {"dct_transport", "nccl"}});
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), 4096, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  MPI_Info_free(&info);
  DCT_Request_free(&request);
}

// Rank 0 on host memory, the others on device memory: the algorithm is chosen on every rank
// from the same facts (whether any rank stages device buffers), so every rank runs the same
// exchange and gets the same bits, at densities where the staging charge decides between
// dense and the sparse exchanges.
TEST(DeviceBuffers, HostAndDeviceRanksChooseTheSameAlgorithm) {
  if (size() < 2) GTEST_SKIP() << "needs a rank on each side";
  const std::vector<Backend *> found = gpus();
  if (found.empty()) GTEST_SKIP() << "no GPU backend compiled in with a device on this node";
  Backend &gpu = *found[0];
  constexpr std::size_t n = 100003;
  const bool on_host = rank() == 0;
  for (const char *density : {"0.01", "0.45", "0.9"}) {
    SCOPED_TRACE(density);
    std::vector<float> send(n), recv(n);
    BackendArray<float> device_send(gpu, n), device_recv(gpu, n);
    float *send_buffer = on_host ? send.data() : device_send.data();
    float *recv_buffer = on_host ? recv.data() : device_recv.data();
    MPI_Info info = make_info({{"dct_density", density}});
    DCT_Request request = DCT_REQUEST_NULL;
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send_buffer, recv_buffer, n, MPI_FLOAT, MPI_SUM,
                                           MPI_COMM_WORLD, info, &request),
                        DCT_SUCCESS);
    MPI_Info_free(&info);
    for (int call = 0; call < 3; ++call) {
      const std::vector<float> gradient = dct::test::gradient<float>(n, call);
      if (on_host)
        overwrite(send, gradient);
      else
        to_device(gpu, device_send.data(), gradient);
      DCT_Status status{};
      ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
      ASSERT_ALL_RANKS_EQ(DCT_Wait(&request, &status), DCT_SUCCESS);
      int algorithms[2] = {status.algorithm, -status.algorithm};
      MPI_Allreduce(MPI_IN_PLACE, algorithms, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      EXPECT_EQ(algorithms[0], -algorithms[1]) << "call " << call << ": ranks chose differently";
      std::vector<float> result = on_host ? recv : from_device(gpu, device_recv.data(), n);
      std::vector<float> first(result);
      MPI_Bcast(first.data(), static_cast<int>(n * sizeof(float)), MPI_BYTE, 0, MPI_COMM_WORLD);
      EXPECT_TRUE(all_ranks(same_bits(result, first))) << "call " << call << ": sums differ";
    }
    DCT_Request_free(&request);
  }
}

// The drop-in call's states are made on each rank alone, so each call agrees on whether the
// buffers are device memory: a mix fails alike on every rank, buffers untouched.
TEST(DeviceBuffers, DropInCallsAgreeOnTheBuffersMemory) {
  if (size() < 2) GTEST_SKIP() << "needs a rank on each side";
  const std::vector<Backend *> found = gpus();
  if (found.empty()) GTEST_SKIP() << "no GPU backend compiled in with a device on this node";
  Backend &gpu = *found[0];
  constexpr std::size_t n = 4099;
  std::vector<float> send(n, 1.0f), recv(n, -7.0f);
  BackendArray<float> device_send(gpu, n), device_recv(gpu, n);
  to_device(gpu, device_send.data(), send);
  to_device(gpu, device_recv.data(), recv);
  const bool on_host = rank() == 0;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce(on_host ? send.data() : device_send.data(),
                                    on_host ? recv.data() : device_recv.data(), n, MPI_FLOAT,
                                    MPI_SUM, MPI_COMM_WORLD),
                      DCT_ERR_MISMATCH);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("device memory"), std::string::npos)
      << DCT_Get_last_error();
  const std::vector<float> after = on_host ? recv : from_device(gpu, device_recv.data(), n);
  EXPECT_TRUE(same_bits(after, std::vector<float>(n, -7.0f)));
}

#ifdef DCT_EMULATED_GPU
/// dct_transport=nccl's stand-in: NCCL's grouped broadcasts as one MPI_Allgatherv in place on
/// the "device" buffer (host memory in the emulation), its grouped sends and receives as one
/// MPI_Alltoallv (with one peer, one MPI_Sendrecv), its dense sum as dense's own MPI calls, in
/// stream order: the device's queued work runs
/// first, as the stream would run it before NCCL's kernels, without counting as a host wait (NCCL's
/// calls only queue). Counts what it did.
class EmulatedNccl final : public detail::DeviceTransport {
 public:
  explicit EmulatedNccl(MPI_Comm comm) {
    MPI_Comm_dup(comm, &comm_);
    ++made;
  }
  ~EmulatedNccl() override {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  const char *name() const override { return "emulated nccl"; }
  void allgatherv(std::byte *buffer, const int *units, const int *offsets,
                  detail::Stream stream) override {
    EXPECT_TRUE(detail::emulation::api::device_memory.contains(buffer));
    in_stream_order(stream);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buffer, units, offsets, MPI_UINT64_T, comm_);
    ++gathers;
  }
  void alltoallv(const std::byte *send, const int *send_units, const int *send_offsets,
                 std::byte *recv, const int *recv_units, const int *recv_offsets,
                 detail::Stream stream) override {
    EXPECT_TRUE(detail::emulation::api::device_memory.contains(send));
    EXPECT_TRUE(detail::emulation::api::device_memory.contains(recv));
    in_stream_order(stream);
    MPI_Alltoallv(send, send_units, send_offsets, MPI_UINT64_T, recv, recv_units, recv_offsets,
                  MPI_UINT64_T, comm_);
    ++alltoalls;
  }
  void sendrecv(const std::byte *send, int send_units, std::byte *recv, int recv_units, int peer,
                detail::Stream stream) override {
    EXPECT_TRUE(send_units == 0 || detail::emulation::api::device_memory.contains(send));
    EXPECT_TRUE(recv_units == 0 || detail::emulation::api::device_memory.contains(recv));
    EXPECT_NE(peer, rank());
    in_stream_order(stream);
    // A count of 0 on one side must be 0 on the other (MPI aborts on a truncation otherwise).
    MPI_Sendrecv(send, send_units, MPI_UINT64_T, peer, 0, recv, recv_units, MPI_UINT64_T, peer, 0,
                 comm_, MPI_STATUS_IGNORE);
    ++sendrecvs;
  }
  void sum_blocks(void *buffer, std::size_t count, std::size_t value_bytes,
                  detail::Stream stream) override {
    EXPECT_TRUE(detail::emulation::api::device_memory.contains(buffer));
    EXPECT_TRUE(value_bytes == sizeof(float) || value_bytes == sizeof(double));
    in_stream_order(stream);
    // dense's MPI calls on dense's blocks, so that the sum has the host twin's bits.
    const MPI_Datatype type = value_bytes == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT;
    const int ranks = size(), me = rank();
    std::vector<int> counts(ranks), offsets(ranks);
    for (int r = 0, start = 0; r < ranks; ++r) {
      counts[r] = int(detail::dense_block(count, std::size_t(ranks), std::size_t(r)));
      offsets[r] = start;
      start += counts[r];
    }
    std::vector<std::byte> block(static_cast<std::size_t>(counts[me]) * value_bytes + 1);
    MPI_Request request;
    MPI_Ireduce_scatter(buffer, block.data(), counts.data(), type, MPI_SUM, comm_, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    MPI_Iallgatherv(block.data(), counts[me], type, buffer, counts.data(), offsets.data(), type,
                    comm_, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    ++sums;
  }
  static inline int made = 0, gathers = 0, alltoalls = 0, sendrecvs = 0, sums = 0;
  static inline detail::Stream last_stream = nullptr;

 private:
  static void in_stream_order(detail::Stream stream) {
    EXPECT_NE(stream, nullptr) << "the backend's resolved stream";
    detail::emulation::on_stream(stream);
    last_stream = stream;
    detail::emulation::device_queue.drain();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
};

std::unique_ptr<detail::DeviceTransport> make_emulated_nccl(MPI_Comm comm) {
  return std::make_unique<EmulatedNccl>(comm);
}

// With a device transport (dct_transport=auto finds it: every rank's buffers are device
// memory), every algorithm's messages go device to device (the allgather's blocks, split's
// blocks and reduced segments, recursive doubling's partial sums, dense's sum, and hierarchical's
// in each tier over a transport of the tier's own): after the first call nothing but a few
// scalars crosses between host and device, and the sums stay the host twin's, bit for bit. One
// transport per communicator, whatever the number of requests, plus one per tier of a request's
// hierarchy.
TEST(DeviceBuffers, ADeviceTransportMovesNoBlockThroughTheHost) {
  struct Hook {  // set for this test only, even when an assertion ends it early
    Hook() { detail::testing::make_device_transport = make_emulated_nccl; }
    ~Hook() { detail::testing::make_device_transport = nullptr; }
  } hook;
  Backend &gpu = *gpus()[0];
  constexpr std::size_t n = 100003;
  constexpr std::size_t kScalars = 512;
  constexpr int kCalls = 6;
  const int made = EmulatedNccl::made;
  int tiers = 0;  // transports of the hierarchical requests' tiers
  const bool several = size() > 1;
  // Per call: the transport's gathers, alltoalls, sendrecvs and sums, and the host's waits from
  // the third call on. The allgather's 4: the selection's pass and its trim, the verdicts, the end
  // of the call (NCCL is queued behind the encode and before the decode: waiting for the encode
  // before it and for NCCL after it made 2 more on a GPU, 1 here, whose stand-in did not wait).
  // Split's 7: the pass, the trim, the cuts (and the histogram's, on a call that rebalances), the
  // owner's verdicts, the segments' verdicts, the end of the call. Dense's 2 (3 at 1 rank): the
  // pass and the end of the call (its list is scattered where it was kept and summed in place;
  // staged, 7). Recursive doubling's: one send and receive per step (recursive_doubling.cpp: log2
  // P' rounds, P' the largest power of two <= P, and a step each way for the first 2 (P - P')
  // ranks, of which the even ones sit the rounds out and only receive the sum at the end), and
  // 3 waits (the pass, the trim, the end of the call) and 2 per merge (the verdict on the
  // peer's list, the merged list's count: a GPU-aware MPI waits for the encode too, a third)
  // or 1 where the sum replaces mine (its verdict).
  struct Doubling {
    int steps, merges, replaces;
  };
  const Doubling doubling = [] {
    int power = 1, rounds = 0;
    for (; power * 2 <= size(); power *= 2) ++rounds;
    const int extra = size() - power;
    if (rank() >= 2 * extra) return Doubling{rounds, rounds, 0};
    return rank() % 2 == 0 ? Doubling{2, 0, 1} : Doubling{rounds + 2, rounds + 1, 0};
  }();
  struct Expected {
    int gathers, alltoalls, sendrecvs, sums;
    std::size_t waits;
  };
  const auto expected = [&](DCT_Algorithm ran) {
    if (ran == DCT_ALGORITHM_ALLGATHER) return Expected{several ? 1 : 0, 0, 0, 0, 4};
    if (ran == DCT_ALGORITHM_SPLIT) return Expected{1, 1, 0, 0, 7};
    if (ran == DCT_ALGORITHM_DENSE) return Expected{0, 0, 0, several ? 1 : 0, several ? 2u : 3u};
    if (ran == DCT_ALGORITHM_RECURSIVE_DOUBLING)
      return Expected{0, 0, doubling.steps, 0,
                      std::size_t(3 + 2 * doubling.merges + doubling.replaces)};
    // Hierarchical: split's gathers and alltoalls in each tier, over the tier's own transport,
    // and 13 waits (split's 7, with a whole split across the groups inside it).
    return Expected{2, 2, 0, 0, 13};
  };
  // nullptr: the default (auto), which picks the allgather here; hierarchical is split where
  // the ranks make one group (below 4 ranks, or one node that the group size does not divide).
  for (const char *algorithm :
       {static_cast<const char *>(nullptr), "split", "recursive_doubling", "dense", "hierarchical"})
    for (const char *values : {"native", "bf16"}) {
      SCOPED_TRACE(std::string(algorithm ? algorithm : "auto") + " " + values);
      std::vector<std::pair<std::string, std::string>> keys = {{"dct_density", "0.01"},
                                                               {"dct_values", values}};
      if (algorithm != nullptr) keys.emplace_back("dct_algorithm", algorithm);
      Twins<float> twins(gpu, n, keys);
      const int gathers = EmulatedNccl::gathers, alltoalls = EmulatedNccl::alltoalls,
                sendrecvs = EmulatedNccl::sendrecvs, sums = EmulatedNccl::sums;
      ASSERT_TRUE(all_ranks(twins.step(gradient<float>(n, 0))));
      const auto ran = static_cast<DCT_Algorithm>(twins.status().algorithm);
      if (algorithm == nullptr) {
        EXPECT_EQ(ran, DCT_ALGORITHM_ALLGATHER);
      } else if (std::string(algorithm) != "hierarchical") {
        EXPECT_STREQ(DCT_Algorithm_name(ran), algorithm);
      }
      const Expected want = expected(ran);
      if (ran == DCT_ALGORITHM_HIERARCHICAL) tiers += 2;
      for (int call = 1; call < kCalls; ++call) {
        ASSERT_TRUE(all_ranks(twins.step(gradient<float>(n, call))));
        ASSERT_EQ(twins.status().algorithm, ran);
        const auto [to_host, to_device] = twins.crossed();
        EXPECT_LE(to_host, kScalars) << "call " << call;
        EXPECT_LE(to_device, kScalars) << "call " << call;
        if (call >= 2) {
          EXPECT_LE(twins.waits(), want.waits) << "call " << call;
        }
      }
      EXPECT_EQ(EmulatedNccl::gathers - gathers, kCalls * want.gathers);
      EXPECT_EQ(EmulatedNccl::alltoalls - alltoalls, kCalls * want.alltoalls);
      EXPECT_EQ(EmulatedNccl::sums - sums, kCalls * want.sums);
      EXPECT_EQ(EmulatedNccl::sendrecvs - sendrecvs, kCalls * want.sendrecvs);
      // On the stream of the request's kernels (here the backend's own), behind them.
      if (want.gathers > 0 || want.sendrecvs > 0) {
        EXPECT_EQ(EmulatedNccl::last_stream, gpu.queue_of(nullptr));
      }
    }
  // One per communicator, whatever the number of requests, and one per tier of a request's
  // hierarchy.
  EXPECT_GE(EmulatedNccl::made - made, tiers);
  EXPECT_LE(EmulatedNccl::made - made, tiers + 1);
  // dct_transport=nccl on device buffers runs on it too; on host buffers it is refused.
  BackendArray<float> send(gpu, 4096), recv(gpu, 4096);
  MPI_Info info = make_info({{"dct_density", "0.01"}, {"dct_transport", "nccl"}});
  DCT_Request request = DCT_REQUEST_NULL;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), 4096, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, info, &request),
                      DCT_SUCCESS);
  DCT_Request_free(&request);
  std::vector<float> host_send(4096), host_recv(4096);
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(host_send.data(), host_recv.data(), 4096, MPI_FLOAT,
                                         MPI_SUM, MPI_COMM_WORLD, info, &request),
                      DCT_ERR_BUFFER);
  MPI_Info_free(&info);
}

// With a GPU-aware MPI the exact path hands the device buffers to MPI_Allreduce itself (here
// "device" memory is host memory, so MPI can read it) instead of staging them.
TEST(DeviceBuffers, DensityOneAndDenseGiveDeviceBuffersToAGpuAwareMpi) {
  detail::emulation::api::mpi_aware = true;
  {
    detail::emulation::GpuBackend aware;  // asks the MPI query once, on first use
    detail::testing::emulated_gpu = &aware;
    EXPECT_TRUE(aware.mpi_accepts_device_memory());
    expect_density_one_is_mpi_allreduce(aware);
    // The dense exchange too: this rank's list crosses, MPI sums in the user's device buffer
    // (the staged dense copies the n-element sum over: SparseExchangesSumOnTheDevice...).
    constexpr std::size_t n = 100003;
    Twins<float> twins(aware, n, {{"dct_density", "0.05"}, {"dct_algorithm", "dense"}});
    for (int call = 0; call < 4; ++call) {
      ASSERT_TRUE(all_ranks(twins.step(gradient<float>(n, call))));
      if (call == 0) continue;  // samples its threshold on the host
      ASSERT_EQ(twins.status().algorithm, DCT_ALGORITHM_DENSE);
      const auto [to_host, to_device] = twins.crossed();
      EXPECT_LT(to_host, n * sizeof(float) / 5) << "call " << call;
      EXPECT_LT(to_device, n * sizeof(float) / 5) << "call " << call;
    }
    // Density 1 with momentum: MPI reads the velocity the device has just written.
    Twins<float> momentum(aware, n, {{"dct_density", "1"}, {"dct_momentum", "0.9"}});
    for (int call = 0; call < 3; ++call)
      ASSERT_TRUE(all_ranks(momentum.step(gradient<float>(n, call)))) << "call " << call;
  }
  detail::emulation::api::mpi_aware = false;
  static_cast<void>(gpus());  // the staged emulation again, for the tests after this one
}

// With a GPU-aware MPI the sparse exchanges hand MPI their device buffers: the allgather's
// blocks (gathered with the headers under the adaptive control, on their own under the fixed
// one), split's and hierarchical's blocks and reduced segments, recursive doubling's partial
// sums are sent and received in device memory, so that after the first call only counts, cuts and
// flags cross between host and device, and the sums stay the host twin's, bit for bit.
TEST(DeviceBuffers, AGpuAwareMpiMovesNoBlockThroughTheHost) {
  detail::emulation::api::mpi_aware = true;
  {
    detail::emulation::GpuBackend aware;
    detail::testing::emulated_gpu = &aware;
    constexpr std::size_t n = 100003;
    constexpr std::size_t kScalars = 512;
    const std::vector<std::vector<std::pair<std::string, std::string>>> variants = {
        {{"dct_algorithm", "allgather"}},
        {{"dct_algorithm", "allgather"}, {"dct_tau_control", "fixed"}, {"dct_interval", "2"}},
        {{"dct_algorithm", "split"}},
        {{"dct_algorithm", "hierarchical"}},
        {{"dct_algorithm", "recursive_doubling"}},
        {{"dct_algorithm", "split"}, {"dct_result_density", "0.005"}}};
    for (const auto &variant : variants)
      for (const char *values : {"native", "bf16", "sign"}) {
        auto keys = variant;
        SCOPED_TRACE(keys.front().second + (keys.size() > 1 ? " " + keys[1].first : "") + " " +
                     values);
        keys.emplace_back("dct_density", "0.01");
        keys.emplace_back("dct_values", values);
        Twins<float> twins(aware, n, keys);
        for (int call = 0; call < 6; ++call) {
          ASSERT_TRUE(all_ranks(twins.step(gradient<float>(n, call))));
          if (call == 0) continue;  // samples its threshold on the host
          const DCT_Status &status = twins.status();
          const auto [to_host, to_device] = twins.crossed();
          // Split's cuts (P + 1 boundaries, 8 bytes each, per tier); a re-balancing call also
          // reads back its histogram's bucket bounds (at most 32 per rank, at least 256).
          const std::size_t cuts = status.tau_reestimated
                                       ? 8 * (std::max<std::size_t>(256, 32 * size()) + 2)
                                       : 16 * std::size_t(size());
          EXPECT_LE(to_host, kScalars + cuts) << "call " << call;
          EXPECT_LE(to_device, kScalars) << "call " << call;
        }
      }
  }
  detail::emulation::api::mpi_aware = false;
  static_cast<void>(gpus());  // the staged emulation again, for the tests after this one
}

// The whole call runs on the request's stream (DCT_Request_set_stream): every kernel, copy,
// fill and scan, the exchanges' included, for every algorithm, the result budget and momentum.
TEST(DeviceBuffers, EveryDeviceOperationRunsOnTheRequestsStream) {
  Backend &gpu = *gpus()[0];
  constexpr std::size_t n = 8191;
  static int stream_token;  // the emulation's streams are opaque pointers
  void *const stream = &stream_token;
  const std::vector<std::vector<std::pair<std::string, std::string>>> variants = {
      {{"dct_algorithm", "allgather"}},
      {{"dct_algorithm", "split"}},
      {{"dct_algorithm", "hierarchical"}},
      {{"dct_algorithm", "recursive_doubling"}},
      {{"dct_algorithm", "dense"}},
      {{"dct_algorithm", "split"}, {"dct_result_density", "0.02"}},
      {{"dct_values", "sign"}, {"dct_momentum", "0.9"}}};
  for (auto keys : variants) {
    SCOPED_TRACE(keys.front().first + "=" + keys.front().second);
    keys.emplace_back("dct_density", "0.05");
    BackendArray<float> send(gpu, n), recv(gpu, n);
    MPI_Info info = make_info(keys);
    DCT_Request request = DCT_REQUEST_NULL;
    ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(send.data(), recv.data(), n, MPI_FLOAT, MPI_SUM,
                                           MPI_COMM_WORLD, info, &request),
                        DCT_SUCCESS);
    MPI_Info_free(&info);
    ASSERT_ALL_RANKS_EQ(DCT_Request_set_stream(request, stream), DCT_SUCCESS);
    for (int call = 0; call < 3; ++call) {
      to_device(gpu, send.data(), gradient<float>(n, call));
      detail::emulation::required_stream = stream;
      detail::emulation::off_stream = 0;
      const int started = DCT_Start(&request);
      const int waited = started == DCT_SUCCESS ? DCT_Wait(&request, DCT_STATUS_IGNORE) : started;
      detail::emulation::required_stream = nullptr;
      ASSERT_ALL_RANKS_EQ(waited, DCT_SUCCESS);
      EXPECT_EQ(detail::emulation::off_stream, 0u) << "call " << call;
    }
    DCT_Request_free(&request);
  }
}

std::size_t nonzeros(const std::vector<float> &sum) {
  return static_cast<std::size_t>(
      std::count_if(sum.begin(), sum.end(), [](float v) { return v != 0.0f; }));
}
std::size_t native_block_bytes(std::size_t entries, std::size_t n) {
  return detail::wire::block_format<float>(entries, n, detail::ValueCoding::native).units() *
         detail::wire::kUnitBytes;
}

// The allgather, split and hierarchical exchanges of a GPU request move compressed bytes only
// between host and device: this rank's blocks to the host (split: one per owner, cut at the
// segment boundaries on the device, and the owner's encoded segment), what the sum is made of
// to the device (decoded and summed there), plus a few scalars; not the kept entries as (index,
// value) pairs (8 bytes each for float), as they did before the device codec; every value coding,
// sign included. Calls after the first (which samples its threshold on the host).
TEST(DeviceBuffers, OnlyCompressedBlocksCrossBetweenHostAndDevice) {
  Backend &gpu = *gpus()[0];
  constexpr std::size_t n = 100003;
  constexpr std::size_t kScalars = 512;  // counts, thresholds and flags read back per call
  for (const char *algorithm : {"allgather", "split", "hierarchical"}) {
    for (const char *values : {"native", "fp16", "bf16", "sign"}) {
      SCOPED_TRACE(std::string(algorithm) + ", " + values);
      Twins<float> twins(
          gpu, n, {{"dct_density", "0.01"}, {"dct_algorithm", algorithm}, {"dct_values", values}});
      for (int call = 0; call < 6; ++call) {
        ASSERT_TRUE(all_ranks(twins.step(gradient<float>(n, call))));
        if (call == 0) continue;
        const DCT_Status &status = twins.status();
        const auto kept = static_cast<std::size_t>(status.nnz_sent);
        const auto all = kept + static_cast<std::size_t>(status.nnz_received);
        const detail::ValueCoding coding =
            std::string(values) == "native" ? detail::ValueCoding::native
            : std::string(values) == "fp16" ? detail::ValueCoding::fp16
            : std::string(values) == "bf16" ? detail::ValueCoding::bf16
                                            : detail::ValueCoding::sign;
        const std::size_t own_block =
            detail::wire::block_format<float>(kept, n, coding).units() * detail::wire::kUnitBytes;
        // Split's owner sums on the device and sends its segment back encoded: at most the block
        // of the sum's nonzeros. Hierarchical's owners send three such blocks: the group's sums
        // of the super-segment to the cross tier, the cross tier's segment, and the super-segment
        // summed over all ranks.
        const std::size_t sum_block =
            native_block_bytes(nonzeros(twins.host_sum()), n) + detail::wire::kUnitBytes;
        const std::size_t segment = status.algorithm == DCT_ALGORITHM_SPLIT          ? sum_block
                                    : status.algorithm == DCT_ALGORITHM_HIERARCHICAL ? 3 * sum_block
                                                                                     : 0;
        const auto [to_host, to_device] = twins.crossed();
        EXPECT_LT(to_host, kept * (sizeof(float) + sizeof(detail::WireIndex)) + segment)
            << "call " << call;
        // ... and its owners receive the blocks of their segments there first.
        EXPECT_LT(to_device, segment > 0 ? 2 * native_block_bytes(all, n) + kScalars
                                         : all * (sizeof(float) + sizeof(detail::WireIndex)))
            << "call " << call;
        EXPECT_GT(to_device, 0u) << "call " << call;
        EXPECT_GE(to_host, own_block) << "call " << call;
        if (std::string(algorithm) == "allgather") {
          ASSERT_EQ(status.algorithm, DCT_ALGORITHM_ALLGATHER);
          EXPECT_LE(to_host, own_block + kScalars) << "call " << call;
        } else if (!status.tau_reestimated) {
          // One block per owner (each rounded up to a unit) and the P + 1 cuts found on the
          // device (8 bytes each); a re-balancing call also reads its histogram back.
          EXPECT_LE(to_host, own_block + segment + kScalars + 16 * std::size_t(size()))
              << "call " << call;
        }
      }
    }
  }
}

// Recursive doubling keeps a GPU request's partial sum on the device: each round's message is
// encoded there and the peer's decoded and merged there, so what crosses is the messages,
// compressed: my own list's block in the first round, at most the sum's block in the others
// (and in the folds of a rank count that is not a power of two), and nothing at 1 rank. At a
// density whose sum turns dense (0.7: from 3 ranks on) the partial sums switch to dense on the
// device as on the host, at the same step: the twins' bytes and bits agree.
TEST(DeviceBuffers, RecursiveDoublingMergesOnTheDevice) {
  Backend &gpu = *gpus()[0];
  constexpr std::size_t n = 100003;
  constexpr std::size_t kScalars = 512;
  int power = 1, rounds = 0;
  while (power * 2 <= size()) {
    power *= 2;
    ++rounds;
  }
  const std::size_t later_sends =
      std::size_t(rounds) - (rounds > 0 ? 1 : 0) + (power != size() ? 2 : 0);
  for (const char *density : {"0.01", "0.7"}) {
    SCOPED_TRACE(density);
    Twins<float> twins(gpu, n, {{"dct_density", density}, {"dct_algorithm", "recursive_doubling"}});
    for (int call = 0; call < 5; ++call) {
      ASSERT_TRUE(all_ranks(twins.step(gradient<float>(n, call))));
      ASSERT_EQ(twins.status().algorithm, DCT_ALGORITHM_RECURSIVE_DOUBLING);
      if (call == 0 || std::string(density) != "0.01") continue;
      const auto kept = static_cast<std::size_t>(twins.status().nnz_sent);
      const std::size_t sum_block = native_block_bytes(nonzeros(twins.host_sum()), n);
      const auto [to_host, to_device] = twins.crossed();
      EXPECT_LE(to_host,
                (size() > 1 ? native_block_bytes(kept, n) : 0) + later_sends * sum_block + kScalars)
          << "call " << call;
      EXPECT_LE(to_device, (std::size_t(rounds) + 1) * sum_block + kScalars) << "call " << call;
    }
  }
}

// The other sparse exchanges of a GPU request sum on the device too: what crosses to it is
// what the sum is made of (split's reduced segments as they were gathered, recursive
// doubling's final list), not the n-element result staged in host memory, which only dense
// still copies over. Calls after the first, as above.
TEST(DeviceBuffers, SparseExchangesSumOnTheDeviceNotThroughAHostResult) {
  Backend &gpu = *gpus()[0];
  constexpr std::size_t n = 100003;
  constexpr std::size_t result_bytes = n * sizeof(float);
  for (const char *algorithm : {"split", "hierarchical", "recursive_doubling", "dense"}) {
    SCOPED_TRACE(algorithm);
    Twins<float> twins(gpu, n, {{"dct_density", "0.01"}, {"dct_algorithm", algorithm}});
    for (int call = 0; call < 4; ++call) {
      ASSERT_TRUE(all_ranks(twins.step(gradient<float>(n, call))));
      if (call == 0) continue;
      const auto to_device = twins.crossed().second;
      if (std::string(algorithm) == "dense") {
        EXPECT_GE(to_device, result_bytes) << "call " << call;
        continue;
      }
      // Every rank's entries at most twice as native blocks (split's owners receive them, then
      // every rank the reduced segments; recursive doubling's final list as pairs), each
      // rounded up to a unit, and a few scalars.
      const auto all = static_cast<std::size_t>(twins.status().nnz_sent) * std::size_t(size());
      EXPECT_LE(to_device, 2 * native_block_bytes(all, n) + 16 * std::size_t(size()) + 512)
          << "call " << call;
      // Far below the result, which at this density and up to 8 ranks is over 4 times all of
      // their entries as pairs.
      EXPECT_LT(to_device, result_bytes / 4) << "call " << call;
    }
  }
}
// A GPU request's call makes the host wait for the device only where the host needs what the
// device has made: the selection's counts and thresholds, the verdicts of the blocks decoded
// (all of a step's at once), the copies of compressed bytes between host and device, before MPI
// reads device memory, and at the end of DCT_Start and of DCT_Wait (dct.h); kernels that only
// write device memory are queued back to back (compute_backend.hpp). Counted in the emulation,
// which runs the device's work only when the host waits for it, and waits at a copy between the
// device and pageable host memory as CUDA does. When every backend call waited, an allgather
// call waited 16 / 19 / 25 / 31 times at 1 / 2 / 4 / 6 ranks, a split call 25 / 33 / 49 / 65:
// now a number that does not grow with the ranks (docs/backends.md).
TEST(DeviceBuffers, TheHostWaitsForTheDeviceOnlyWhereItReadsIt) {
  Backend &gpu = *gpus()[0];
  constexpr std::size_t n = 100003;
  const std::size_t P = static_cast<std::size_t>(size());
  std::size_t steps = 0;  // recursive doubling's rounds, and its two folds where P is not 2^k
  while ((std::size_t(2) << steps) <= P) ++steps;
  if ((std::size_t(1) << steps) != P) steps += 2;
  // The selection (the pass; the trim: its count, thresholds and top k, read together) and
  // DCT_Start's end: 3; then per algorithm what it reads back and the call's end, and a spare.
  constexpr std::size_t kSelection = 3;
  const std::vector<std::pair<const char *, std::size_t>> algorithms = {
      {"allgather", kSelection + 3},  // my block out, the blocks in, their verdicts
      {"split", kSelection + 8},      // cuts, blocks out and in, verdicts, the segments back
      {"recursive_doubling", kSelection + 1 + 3 * steps},  // per step out, in, the verdict
      {"dense", kSelection + 4},
  };
  for (const auto &[algorithm, most] : algorithms) {
    for (const char *values : {"native", "sign"}) {
      SCOPED_TRACE(std::string(algorithm) + ", " + values);
      Twins<float> twins(
          gpu, n, {{"dct_density", "0.01"}, {"dct_algorithm", algorithm}, {"dct_values", values}});
      for (int call = 0; call < 4; ++call) {
        ASSERT_TRUE(all_ranks(twins.step(gradient<float>(n, call))));
        if (call < 2) continue;  // the threshold sampled on the host, then re-estimated
        EXPECT_LE(twins.waits(), most) << "call " << call;
      }
    }
  }
}
#endif

}  // namespace
}  // namespace dct::test
