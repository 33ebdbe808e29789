// A host emulation of the CUDA/HIP kernel language and runtime, just enough to run
// backends/common/cuda_hip/cuda_hip_backend.hpp on a machine without a GPU: it plays the role of
// backends/cuda/cuda_api.hpp. Each kernel launch runs its blocks one after the other, the threads
// of a block on a pool of std::threads with a barrier for __syncthreads (so __shared__ can be a
// static: one block at a time uses it). The launch shrinks the grid and the block (the kernels loop
// grid-stride and block-stride, so their result does not depend on the sizes), which keeps the
// number of threads small while still running several blocks and several threads per block.
//
// This checks the common code's logic (radix selection, scan compaction, capacity, sampling,
// scatter-add), not the GPU: memory is host memory, and races inside a kernel that need real GPU
// timing are not reproduced. Work on the device is queued and runs only when the host waits for
// it (DeviceQueue), so a synchronization the library forgot shows as wrong bits. "Device" memory is
// remembered, so that pointer attributes tell it from host memory: the MPI suite's
// mpi.device_buffers.emulated hands it to the library (testing::emulated_gpu) and runs whole
// requests on it. Test code only.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "dct/dct.h"

#define DCT_GPU_NAMESPACE emulation
#define DCT_GPU_NAME "emulation"
#define DCT_GPU_KIND DCT_BACKEND_CUDA

#define __global__
#define __device__
#define __host__
#define __shared__ static

struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx;
inline thread_local dim3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;

namespace dct::detail::emulation {

/// The threads of one block meet here at __syncthreads.
class Barrier {
 public:
  void reset(unsigned int count) {
    count_ = count;
    waiting_ = 0;
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const unsigned long long generation = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      all_.notify_all();
    } else {
      all_.wait(lock, [&] { return generation != generation_; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable all_;
  unsigned int count_ = 1, waiting_ = 0;
  unsigned long long generation_ = 0;
};
inline Barrier block_barrier;

constexpr unsigned int kEmulatedGrid = 3, kEmulatedBlock = 4;

/// The threads that run a block's threads: kEmulatedBlock of them, started at the first launch
/// and reused by every launch after it. Starting a block's threads anew at every launch spent
/// most of the emulated suites' time in the kernel under ASan (perf: 87% kernel time, in the
/// mmap/munmap of thread stacks and of ASan's per-thread allocator caches).
class BlockThreads {
 public:
  BlockThreads() {
    for (unsigned int t = 0; t < kEmulatedBlock; ++t)
      threads_.emplace_back([this, t] { serve(t); });
  }
  ~BlockThreads() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    start_.notify_all();
    for (std::thread &thread : threads_) thread.join();
  }
  /// Runs body(t) for t = 0 .. count-1 (count <= kEmulatedBlock) at once, one thread each,
  /// and returns once every one returned. One launch at a time, as the emulation's globals
  /// (blockDim, block_barrier) already require.
  template <typename Body>
  void run(unsigned int count, const Body &body) {
    std::unique_lock<std::mutex> lock(mutex_);
    body_ = std::cref(body);
    count_ = count;
    running_ = count;
    ++generation_;
    start_.notify_all();
    done_.wait(lock, [&] { return running_ == 0; });
    body_ = nullptr;
  }

 private:
  void serve(unsigned int t) {
    unsigned long long seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (t >= count_) continue;
      lock.unlock();
      body_(t);
      lock.lock();
      if (--running_ == 0) done_.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::function<void(unsigned int)> body_;
  unsigned int count_ = 0, running_ = 0;
  unsigned long long generation_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};
inline BlockThreads &block_threads() {
  static BlockThreads threads;
  return threads;
}

/// Kernels launched so far (a whole-request test checks that its request ran on the "device").
inline std::size_t launches = 0;
/// Where a test sets it, the stream every launch, copy, fill and scan must name (the request's:
/// DCT_Request_set_stream); those on another stream are counted.
inline void *required_stream = nullptr;
inline std::size_t off_stream = 0;
inline void on_stream(void *stream) {
  if (required_stream != nullptr && stream != required_stream) ++off_stream;
}

/// The emulated device's queue: kernels, copies, fills and scans run when the host waits for
/// them (stream_synchronize, or a free, which synchronizes as cudaFree does), not when they are
/// issued, as on a GPU, where they run later than the call that queued them. So a host read of
/// memory the device has not finished writing, or MPI handed a device buffer whose kernel has not
/// run, sees the old contents and a bitwise test fails; an emulation that ran every operation at
/// once would pass them. One queue for every stream, in issue order: one of the orders a GPU
/// may run them in.
class DeviceQueue {
 public:
  void push(std::function<void()> operation) {
    std::lock_guard<std::mutex> lock(mutex_);
    queued_.push_back(std::move(operation));
  }
  /// Whether nothing is queued: what a dct call leaves when it returns (dct.h's stream semantics).
  bool idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    return queued_.empty();
  }
  /// Runs what is queued, in order, on the calling thread.
  void drain() {
    for (;;) {
      std::function<void()> operation;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (queued_.empty()) return;
        operation = std::move(queued_.front());
        queued_.pop_front();
      }
      operation();
    }
  }

 private:
  std::mutex mutex_;
  std::deque<std::function<void()>> queued_;
};
inline DeviceQueue device_queue;

/// The host's waits so far for work the device still had queued (stream_synchronize with
/// something to run; waiting on an idle stream costs no round trip): a whole-request test
/// bounds how often a call makes the host wait for the device.
inline std::size_t waits = 0;

template <typename Kernel, typename... Args>
void launch(Kernel kernel, unsigned int grid, unsigned int block, Args... args) {
  ++launches;
  device_queue.push([=] {
    gridDim.x = std::min(grid, kEmulatedGrid);
    blockDim.x = std::min(block, kEmulatedBlock);
    block_barrier.reset(blockDim.x);
    for (unsigned int b = 0; b < gridDim.x; ++b)
      block_threads().run(blockDim.x, [&](unsigned int t) {
        blockIdx.x = b;
        threadIdx.x = t;
        kernel(args...);
      });
  });
}

}  // namespace dct::detail::emulation

#define DCT_GPU_LAUNCH(kernel, grid, block, stream, ...) \
  (::dct::detail::emulation::on_stream(stream),          \
   ::dct::detail::emulation::launch(kernel, (grid), (block), __VA_ARGS__))

inline void __syncthreads() {
  dct::detail::emulation::block_barrier.wait();
}
inline unsigned int atomicAdd(unsigned int *address, unsigned int value) {
  return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}
inline unsigned int atomicOr(unsigned int *address, unsigned int value) {
  return __atomic_fetch_or(address, value, __ATOMIC_RELAXED);
}
inline int __ffs(unsigned int value) {
  return __builtin_ffs(static_cast<int>(value));
}
inline unsigned long long atomicAdd(unsigned long long *address, unsigned long long value) {
  return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}

namespace dct::detail::emulation::api {

/// The emulated device's allocations (host memory), by address.
class DeviceMemory {
 public:
  void add(void *pointer, std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_[reinterpret_cast<std::uintptr_t>(pointer)] = bytes;
  }
  void remove(void *pointer) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.erase(reinterpret_cast<std::uintptr_t>(pointer));
  }
  /// Whether `pointer` lies inside one of them.
  bool contains(const void *pointer) {
    const auto address = reinterpret_cast<std::uintptr_t>(pointer);
    std::lock_guard<std::mutex> lock(mutex_);
    auto after = blocks_.upper_bound(address);
    if (after == blocks_.begin()) return false;
    --after;
    return address < after->first + std::max<std::size_t>(after->second, 1);
  }

 private:
  std::mutex mutex_;
  std::map<std::uintptr_t, std::size_t> blocks_;
};
inline DeviceMemory device_memory;
/// The emulated pinned host allocations (malloc_host): copies to and from them are queued, where
/// those to and from other (pageable) host memory make the host wait, as CUDA's and HIP's do.
inline DeviceMemory pinned_memory;

/// What mpi_accepts_device_memory() answers (a GPU-aware MPI or not); tests set it.
inline bool mpi_aware = false;

enum error_t { success = 0, out_of_memory = 2 };
using stream_t = void *;

inline const char *error_name(error_t error) {
  return error == out_of_memory ? "out_of_memory" : "error";
}
inline const char *error_string(error_t) {
  return "emulated error";
}
inline error_t get_last_error() {
  return success;
}
inline bool is_out_of_memory(error_t error) {
  return error == out_of_memory;
}
inline bool is_sticky(error_t) {
  return false;
}

inline error_t device_count(int *count) {
  *count = 1;
  return success;
}
/// What the host does when it waits for the device: runs what is queued.
inline void wait_for_device() {
  if (!device_queue.idle()) ++waits;
  device_queue.drain();
}
inline error_t allocate(void **pointer, std::size_t bytes) {
  *pointer = std::malloc(std::max<std::size_t>(bytes, 1));
  return *pointer ? success : out_of_memory;
}
inline void release(void *pointer) {  // cudaFreeHost and cudaFree wait for the device
  wait_for_device();
  std::free(pointer);
}
inline error_t malloc_host(void **pointer, std::size_t bytes) {
  const error_t error = allocate(pointer, bytes);
  if (error == success) pinned_memory.add(*pointer, bytes);
  return error;
}
inline error_t free_host(void *pointer) {
  pinned_memory.remove(pointer);
  release(pointer);
  return success;
}
inline error_t malloc_device(void **pointer, std::size_t bytes) {
  const error_t error = allocate(pointer, bytes);
  if (error == success) device_memory.add(*pointer, bytes);
  return error;
}
inline error_t free_device(void *pointer) {
  device_memory.remove(pointer);
  release(pointer);
  return success;
}
/// Bytes copied from the device to the host and the other way (what a request moves across).
inline std::size_t copied_to_host = 0, copied_to_device = 0;

inline error_t copy_async(void *destination, const void *source, std::size_t bytes,
                          stream_t stream) {
  on_stream(stream);
  const bool from = device_memory.contains(source), to = device_memory.contains(destination);
  if (from && !to) copied_to_host += bytes;
  if (to && !from) copied_to_device += bytes;
  // cudaMemcpyAsync between the device and pageable host memory: to the host it returns once
  // the copy is done, from the host once the source is staged, after what the stream holds.
  const bool pageable =
      (!from && !pinned_memory.contains(source)) || (!to && !pinned_memory.contains(destination));
  if ((from || to) && pageable) {
    wait_for_device();
    std::memcpy(destination, source, bytes);
  } else {
    device_queue.push([=] { std::memcpy(destination, source, bytes); });
  }
  return success;
}
inline error_t zero_async(void *destination, std::size_t bytes, stream_t stream) {
  on_stream(stream);
  device_queue.push([=] { std::memset(destination, 0, bytes); });
  return success;
}
inline error_t stream_create(stream_t *stream) {
  static int own;
  *stream = &own;
  return success;
}
inline error_t stream_synchronize(stream_t) {
  wait_for_device();
  return success;
}
inline error_t is_device_pointer(const void *pointer, bool *device) {
  *device = device_memory.contains(pointer);
  return success;
}
template <typename Flag>
error_t inclusive_sum_of(void *temporary, std::size_t &temporary_bytes, Flag flag, std::size_t n,
                         unsigned int *out, stream_t stream) {
  on_stream(stream);
  if (temporary == nullptr) {
    temporary_bytes = 64;  // something, as the libraries ask for
    return success;
  }
  device_queue.push([=] {
    unsigned int sum = 0;
    for (std::size_t i = 0; i < n; ++i) out[i] = sum += flag(i);
  });
  return success;
}
inline bool mpi_accepts_device_memory() {
  return mpi_aware;
}

}  // namespace dct::detail::emulation::api
