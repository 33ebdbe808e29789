// dct-bench device (CUDA builds): dct's compressed allreduce on GPU buffers against what a user
// would otherwise call, in the same run, and the exact selection against a CUB radix sort.
//
//   mpiexec -n 4 dct-bench device [--sizes 4M,64M,256M] [--density 0.01] [--algorithm auto]
//       [--transport auto] [--iters 20] [--warmup 3] [--no-nccl]
//
// Each rank uses GPU (node-local rank) mod (GPUs on the node); several ranks may share one.
// Per size, float, calls cycling through 4 gradients (signal + noise, as in `allreduce`), each
// call timed alone after a barrier (mean over calls, then the slowest rank):
//   staged_us   cudaMemcpy device->host, MPI_Allreduce on pinned host buffers, host->device:
//               what an application without CUDA-aware MPI does
//   mpi_us      the MPI_Allreduce inside staged_us alone
//   nccl_us     ncclAllReduce on the device buffers + stream synchronize ("n/a" where NCCL
//               refuses, e.g. two ranks on one GPU: the header line says why)
//   dct_us      DCT_Start + DCT_Wait on the device buffers (filter, threshold and the
//               allgather's block codec on the GPU; blocks through pinned host memory and MPI,
//               or device to device over NCCL: dct_transport), library defaults but
//               dct_density, dct_algorithm and dct_transport
//   bytes_x     DCT_Status.dense_bytes / bytes_sent of the last call
// With --density 1 dct's sum must equal the staged MPI_Allreduce bit for bit (exit code 2 if not).
// Then, on rank 0 alone: the exact selection (the k-th largest |x|, k = density n) against
// cub::DeviceRadixSort::SortKeys of the same 32-bit keys, best of 10 each.
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "core/compute_backend.hpp"
#include "cuda_baselines.hpp"
#include "dct/dct.hpp"
#if defined(DCT_BENCH_HAVE_NCCL)
#include <nccl.h>
#endif

namespace dct::bench {
namespace {

struct DeviceOptions {
  std::vector<long long> sizes = parse_sizes("4M,64M,256M");
  double density = 0.01;
  std::string algorithm = "auto";
  std::string transport = "auto";
  int iters = 20, warmup = 3;
  bool nccl = true;
};

using detail::BackendArray;

/// Mean over calls of one rank's times, then the slowest rank, in microseconds.
double slowest_mean_us(const std::vector<double> &seconds) {
  double mean = 0;
  for (double s : seconds) mean += s / static_cast<double>(seconds.size());
  double slowest = 0;
  MPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest * 1e6;
}

/// Times `call` iters times after warmup untimed calls, each after `prepare` and a barrier.
template <typename Prepare, typename Call>
double time_calls(const DeviceOptions &o, Prepare prepare, Call call) {
  std::vector<double> seconds;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    prepare(i);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    call();
    if (i >= o.warmup) seconds.push_back(MPI_Wtime() - start);
  }
  return slowest_mean_us(seconds);
}

#if defined(DCT_BENCH_HAVE_NCCL)
struct Nccl {
  Nccl() {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ncclUniqueId id{};
    if (rank == 0) ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    const ncclResult_t result = ncclCommInitRank(&comm, size, id, rank);
    int ok = result == ncclSuccess ? 1 : 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all == 0) {
      refusal = result == ncclSuccess ? "refused on another rank" : ncclGetErrorString(result);
      if (result == ncclSuccess) ncclCommDestroy(comm);
      comm = nullptr;
    }
    check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  }
  ~Nccl() {
    if (comm != nullptr) ncclCommDestroy(comm);
    cudaStreamDestroy(stream);
  }
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  std::string refusal;
};
#endif

int run_size(const DeviceOptions &o, long long bytes, int rank, void *nccl_state) {
  const std::size_t n = static_cast<std::size_t>(bytes) / sizeof(float);
  constexpr int kCycle = 4;
  detail::Backend &cuda = *detail::backends::cuda_backend();
  BackendArray<float> pool(cuda, n * kCycle), send(cuda, n), recv(cuda, n);
  BackendArray<float> host_send(cuda, n, true), host_recv(cuda, n, true);
  {
    std::mt19937_64 engine(1234567u + 7919u * static_cast<unsigned>(rank));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> signal(n), gradient(n);
    for (float &x : signal) x = normal(engine);
    for (int c = 0; c < kCycle; ++c) {
      for (std::size_t j = 0; j < n; ++j) gradient[j] = signal[j] + normal(engine);
      check_cuda(cudaMemcpy(pool.data() + c * n, gradient.data(), n * sizeof(float),
                            cudaMemcpyHostToDevice),
                 "cudaMemcpy");
    }
  }
  auto load = [&](int call) {
    check_cuda(cudaMemcpy(send.data(), pool.data() + (call % kCycle) * n, n * sizeof(float),
                          cudaMemcpyDeviceToDevice),
               "cudaMemcpy");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  };
  const int count = static_cast<int>(n);

  std::vector<double> mpi_seconds;
  const double staged_us = time_calls(o, load, [&] {
    check_cuda(cudaMemcpy(host_send.data(), send.data(), bytes, cudaMemcpyDeviceToHost),
               "cudaMemcpy");
    const double start = MPI_Wtime();
    MPI_Allreduce(host_send.data(), host_recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    mpi_seconds.push_back(MPI_Wtime() - start);
    check_cuda(cudaMemcpy(recv.data(), host_recv.data(), bytes, cudaMemcpyHostToDevice),
               "cudaMemcpy");
  });
  mpi_seconds.erase(mpi_seconds.begin(), mpi_seconds.begin() + o.warmup);
  const double mpi_us = slowest_mean_us(mpi_seconds);

  std::string nccl_text = "n/a";  // why: in the header
#if defined(DCT_BENCH_HAVE_NCCL)
  auto *nccl = static_cast<Nccl *>(nccl_state);
  if (nccl != nullptr && nccl->comm != nullptr) {
    const double us = time_calls(o, load, [&] {
      if (ncclAllReduce(send.data(), recv.data(), n, ncclFloat, ncclSum, nccl->comm,
                        nccl->stream) != ncclSuccess)
        throw std::runtime_error("ncclAllReduce failed");
      check_cuda(cudaStreamSynchronize(nccl->stream), "cudaStreamSynchronize");
    });
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", us);
    nccl_text = text;
  }
#else
  (void)nccl_state;
#endif

  Info info;
  info.set("dct_density", std::to_string(o.density))
      .set("dct_algorithm", o.algorithm)
      .set("dct_transport", o.transport);
  DCT_Request request = DCT_REQUEST_NULL;
  if (DCT_Allreduce_init(send.data(), recv.data(), static_cast<MPI_Count>(n), MPI_FLOAT, MPI_SUM,
                         MPI_COMM_WORLD, info.get(), &request) != DCT_SUCCESS)
    throw std::runtime_error(DCT_Get_last_error());
  DCT_Status status{};
  const double dct_us = time_calls(o, load, [&] {
    if (DCT_Start(&request) != DCT_SUCCESS || DCT_Wait(&request, &status) != DCT_SUCCESS)
      throw std::runtime_error(std::string("dct: ") + DCT_Get_last_error());
  });
  DCT_Request_free(&request);
  int exact = 1;
  if (o.density >= 1) {
    // The last call's input is gradient (warmup + iters - 1) mod 4; redo the staged sum of it.
    std::vector<float> dct_sum(n);
    check_cuda(cudaMemcpy(dct_sum.data(), recv.data(), bytes, cudaMemcpyDeviceToHost),
               "cudaMemcpy");
    check_cuda(cudaMemcpy(host_send.data(), send.data(), bytes, cudaMemcpyDeviceToHost),
               "cudaMemcpy");
    MPI_Allreduce(host_send.data(), host_recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    exact = std::memcmp(dct_sum.data(), host_recv.data(), bytes) == 0 ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &exact, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  }
  const double bytes_x =
      status.bytes_sent > 0 ? double(status.dense_bytes) / double(status.bytes_sent) : 0;
  if (rank == 0)
    std::printf("%10lld %10.1f %10.1f %12s %10.1f %8.2f %8.1f %9.4f %s%s\n", bytes, staged_us,
                mpi_us, nccl_text.c_str(), dct_us, staged_us / dct_us, bytes_x, status.density,
                DCT_Algorithm_name(status.algorithm), exact ? "" : "  NOT EXACT");
  return exact ? 0 : 2;
}

void selection_row(const DeviceOptions &o, long long bytes) {
  detail::Backend &cuda = *detail::backends::cuda_backend();
  const std::size_t n = static_cast<std::size_t>(bytes) / sizeof(float);
  const std::size_t k = std::max<std::size_t>(1, static_cast<std::size_t>(o.density * double(n)));
  BackendArray<float> values(cuda, n), zeros(cuda, n);
  std::vector<float> host(n);
  std::mt19937_64 engine(99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float &x : host) x = normal(engine);
  check_cuda(cudaMemcpy(values.data(), host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check_cuda(cudaMemset(zeros.data(), 0, bytes), "cudaMemset");
  double exact_ms = 1e30;
  float tau = 0;
  for (int rep = 0; rep <= 10; ++rep) {
    const double start = MPI_Wtime();
    tau = cuda.kth_largest_abs(values.data(), zeros.data(), n, k, nullptr);
    if (rep > 0) exact_ms = std::min(exact_ms, (MPI_Wtime() - start) * 1e3);
  }
  const double sort_ms = cub_radix_sort_ms(values.data(), n, 10);
  std::printf("%10lld %10.3f %10.3f %8.1f   tau %.6g\n", bytes, exact_ms, sort_ms,
              sort_ms / exact_ms, static_cast<double>(tau));
}

int run(const DeviceOptions &o) {
  int rank = 0, size = 1, local_rank = 0, devices = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank);
  MPI_Comm_free(&node);
  check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  check_cuda(cudaSetDevice(local_rank % devices), "cudaSetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, local_rank % devices), "cudaGetDeviceProperties");
  void *nccl_state = nullptr;
#if defined(DCT_BENCH_HAVE_NCCL)
  std::unique_ptr<Nccl> nccl;
  if (o.nccl) {
    nccl = std::make_unique<Nccl>();
    nccl_state = nccl.get();
  }
#endif
  if (rank == 0) {
    std::printf(
        "# dct-bench device: %d ranks, %d GPU(s) per node (%s), float, density %g, "
        "mean of %d calls after %d, slowest rank\n",
        size, devices, prop.name, o.density, o.iters, o.warmup);
    std::string nccl_note = "not built with NCCL";
#if defined(DCT_BENCH_HAVE_NCCL)
    nccl_note = !o.nccl                 ? "left out (--no-nccl)"
                : nccl->comm == nullptr ? "n/a: ncclCommInitRank: " + nccl->refusal
                                        : "ncclAllReduce on the device buffers";
#endif
    std::printf("# nccl_us: %s\n", nccl_note.c_str());
    std::printf("%10s %10s %10s %12s %10s %8s %8s %9s %s\n", "bytes", "staged_us", "mpi_us",
                "nccl_us", "dct_us", "stg/dct", "bytes_x", "density", "algorithm");
  }
  int code = 0;
  for (long long bytes : o.sizes) code = std::max(code, run_size(o, bytes, rank, nccl_state));
  if (rank == 0) {
    std::printf(
        "# exact selection (k = density n) against CUB's radix sort of the keys, best of "
        "10\n%10s %10s %10s %8s\n",
        "bytes", "exact_ms", "sort_ms", "sort/ex");
    for (long long bytes : o.sizes) selection_row(o, bytes);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return code;
}

}  // namespace

Run add_device(CLI::App &app) {
  auto o = std::make_shared<DeviceOptions>();
  CLI::App *command = app.add_subcommand(
      "device", "dct on GPU buffers against staged MPI_Allreduce and NCCL (CUDA builds)");
  add_sizes_option(*command, o->sizes, "tensor sizes")->default_str("4M,64M,256M");
  command->add_option("--density", o->density, "dct_density")
      ->check(kUnitInterval)
      ->capture_default_str();
  command->add_option("--algorithm", o->algorithm, "dct_algorithm")
      ->check(knob("dct_algorithm"))
      ->capture_default_str();
  command->add_option("--transport", o->transport, "dct_transport")
      ->check(knob("dct_transport"))
      ->capture_default_str();
  command->add_option("--iters", o->iters, "timed calls per row")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  command->add_option("--warmup", o->warmup, "untimed calls before them")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  command->add_flag("!--no-nccl", o->nccl, "leave NCCL out");
  return [o] { return run(*o); };
}

}  // namespace dct::bench
