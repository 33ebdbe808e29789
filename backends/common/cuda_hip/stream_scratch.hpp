// The CUDA/HIP backend's device memory, its own stream and the scratch memory its kernels share
// from call to call (cuda_hip_backend.hpp): one workspace on the device and one pinned buffer for
// what the host reads back, grown as needed and never shrunk.
//
// Private: included by cuda_hip_backend.hpp inside its namespace, after kernels.hpp.
#pragma once

/// `bytes` of memory from `allocate` (api::malloc_device or api::malloc_host; nullptr for 0
/// bytes), and its release by `release`, which clears the error it may leave; throws as check()
/// does (out of memory: recoverable).
inline void *allocate_with(api::error_t (*allocate)(void **, std::size_t), std::size_t bytes,
                           const char *what) {
  void *pointer = nullptr;
  if (bytes > 0) check(allocate(&pointer, bytes), what);
  return pointer;
}
inline void release_with(api::error_t (*release)(void *), void *pointer) noexcept {
  if (pointer != nullptr && release(pointer) != api::success) (void)api::get_last_error();
}
inline void *allocate_device(std::size_t bytes) {
  return allocate_with(api::malloc_device, bytes, "device allocation");
}
inline void free_device(void *pointer) noexcept {
  release_with(api::free_device, pointer);
}
inline void *allocate_pinned(std::size_t bytes) {
  return allocate_with(api::malloc_host, bytes, "pinned host allocation");
}
inline void free_pinned(void *pointer) noexcept {
  release_with(api::free_host, pointer);
}

/// Memory of at least the bytes last asked for, from `allocate`: grown by freeing it and
/// allocating again, never shrunk (empty again where the allocation throws).
class GrowingMemory {
 public:
  using Allocate = void *(*)(std::size_t);
  using Release = void (*)(void *) noexcept;
  GrowingMemory(Allocate allocate, Release release) : allocate_(allocate), release_(release) {}
  GrowingMemory(const GrowingMemory &) = delete;
  GrowingMemory &operator=(const GrowingMemory &) = delete;
  ~GrowingMemory() { release_(data_); }

  char *at_least(std::size_t bytes) {
    if (bytes > bytes_) {
      release_(data_);
      data_ = nullptr;
      bytes_ = 0;
      data_ = static_cast<char *>(allocate_(bytes));
      bytes_ = bytes;
    }
    return data_;
  }

 private:
  Allocate allocate_;
  Release release_;
  char *data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A backend's stream and scratch memory. `mutex` is held while kernels that use the workspace
/// or the readback buffer are queued: the backend's kernels run one call at a time. Its
/// destruction frees the scratch memory; the stream stays (the runtime may be gone at exit).
class StreamScratch {
 public:
  /// `stream`, or the backend's own non-blocking stream (created on first use, on the device
  /// current then) for nullptr: dct never uses the legacy default stream.
  api::stream_t resolve(Stream stream) {
    if (stream != nullptr) return static_cast<api::stream_t>(stream);
    std::lock_guard<std::mutex> lock(stream_mutex_);
    if (own_stream_ == nullptr) check(api::stream_create(&own_stream_), "stream creation");
    return own_stream_;
  }

  /// Pinned host memory of at least `bytes` for the scalars the host reads back (counts, a
  /// threshold, a verdict). A copy from the device into pageable memory returns only once it is
  /// done, so each would make the host wait for the device right there; into pinned memory it
  /// is queued like a kernel, and the one wait at the end covers them all. The caller holds
  /// `mutex`.
  char *readback(std::size_t bytes) { return readback_.at_least(bytes); }

  /// Device scratch memory of at least `bytes`, kept between calls (grow only), for kernels on
  /// stream `s`. The caller holds `mutex` while it queues them. Kernels an earlier call
  /// queued may still read it: on the same stream they run first; on another, wait for them
  /// (freeing it to grow it waits for the whole device).
  char *workspace(std::size_t bytes, api::stream_t s) {
    if (workspace_stream_ != nullptr && workspace_stream_ != s)
      check(api::stream_synchronize(workspace_stream_), "workspace (synchronize)");
    workspace_stream_ = s;
    return workspace_.at_least(bytes);
  }

  std::mutex mutex;

 private:
  std::mutex stream_mutex_;
  api::stream_t own_stream_ = nullptr;
  GrowingMemory workspace_{allocate_device, free_device};
  api::stream_t workspace_stream_ = nullptr;  // the stream of the last kernels that used it
  GrowingMemory readback_{allocate_pinned, free_pinned};
};
