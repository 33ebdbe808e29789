// The replaced allocation functions of allocation_counter.hpp: malloc, calloc, realloc,
// posix_memalign, aligned_alloc, memalign and every global operator new forward to glibc's own
// (__libc_*), and count, while counting, the calls whose caller lies outside MPI's libraries.
// ELF symbol interposition makes every library of the process call these.
#include "allocation_counter.hpp"

#if !defined(DCT_COUNT_ALLOCATIONS)
// A sanitizer build: the sanitizers replace the allocation functions themselves.
namespace dct::test {
bool allocation_counting_available() {
  return false;
}
void start_counting() {}
AllocationCount stop_counting() {
  return AllocationCount{};
}
}  // namespace dct::test
#else

#include <dlfcn.h>
#include <execinfo.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

extern "C" {
void *__libc_malloc(std::size_t size);
void *__libc_calloc(std::size_t count, std::size_t size);
void *__libc_realloc(void *pointer, std::size_t size);
void *__libc_memalign(std::size_t alignment, std::size_t size);
void __libc_free(void *pointer);
}

namespace dct::test {
namespace {

std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
constexpr int kRecorded = 8, kFrames = 6;
void *recorded[kRecorded][kFrames];
std::atomic<int> recorded_count{0};
thread_local bool inside = false;  // dladdr's own work is not counted

/// Libraries whose allocations are MPI's own.
bool mpi_library(const char *path) {
  static const char *const kNames[] = {"libmpi",  "libopen-pal", "libopen-rte", "mca_",
                                       "libpmix", "libhwloc",    "libevent",    "libucp",
                                       "libucs",  "libuct",      "libfabric",   "libmpich"};
  if (path == nullptr) return false;
  for (const char *name : kNames)
    if (std::strstr(path, name) != nullptr) return true;
  return false;
}

void note(void *caller) {
  if (!counting.load(std::memory_order_relaxed) || inside) return;
  inside = true;
  Dl_info info{};
  const bool known = dladdr(caller, &info) != 0;
  if (!known || !mpi_library(info.dli_fname)) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    const int slot = recorded_count.fetch_add(1, std::memory_order_relaxed);
    if (slot < kRecorded) {  // the caller and who called it
      void *frames[kFrames + 2] = {};
      const int depth = backtrace(frames, kFrames + 2);
      recorded[slot][0] = caller;
      for (int f = 1; f < kFrames; ++f) recorded[slot][f] = f + 2 < depth ? frames[f + 2] : nullptr;
    }
  }
  inside = false;
}

long page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt + usage.ru_majflt;
}

long faults_at_start = 0;

}  // namespace

bool allocation_counting_available() {
  return true;
}

void start_counting() {
  static void *warm[2];
  backtrace(warm, 2);  // its first call loads the unwinder, which allocates
  allocations = 0;
  recorded_count = 0;
  faults_at_start = page_faults();
  counting = true;
}

AllocationCount stop_counting() {
  counting = false;
  AllocationCount count;
  count.page_faults = page_faults() - faults_at_start;
  count.allocations = allocations;
  const int recorded_now = std::min<int>(recorded_count, kRecorded);
  for (int r = 0; r < recorded_now; ++r) {
    std::string frames;
    for (int f = 0; f < kFrames && recorded[r][f] != nullptr; ++f) {
      Dl_info info{};
      if (dladdr(recorded[r][f], &info) == 0) {
        frames += " <- ?";
        continue;
      }
      // The symbol where the library exports it; else the offset into the file, for addr2line.
      char offset[32];
      std::snprintf(offset, sizeof offset, "+0x%lx",
                    static_cast<unsigned long>(static_cast<const char *>(recorded[r][f]) -
                                               static_cast<const char *>(info.dli_fbase)));
      frames += std::string(f == 0 ? "" : " <- ") + (info.dli_sname ? info.dli_sname : offset) +
                " in " + (info.dli_fname ? info.dli_fname : "?");
    }
    count.where.push_back(frames);
  }
  return count;
}

}  // namespace dct::test

// --- The replaced functions -------------------------------------------------------------------

extern "C" {
void *malloc(std::size_t size) {
  dct::test::note(__builtin_return_address(0));
  return __libc_malloc(size);
}
void *calloc(std::size_t count, std::size_t size) {
  dct::test::note(__builtin_return_address(0));
  return __libc_calloc(count, size);
}
void *realloc(void *pointer, std::size_t size) {
  dct::test::note(__builtin_return_address(0));
  return __libc_realloc(pointer, size);
}
void free(void *pointer) {
  __libc_free(pointer);
}
int posix_memalign(void **pointer, std::size_t alignment, std::size_t size) {
  dct::test::note(__builtin_return_address(0));
  *pointer = __libc_memalign(alignment, size);
  return *pointer != nullptr || size == 0 ? 0 : ENOMEM;
}
void *aligned_alloc(std::size_t alignment, std::size_t size) {
  dct::test::note(__builtin_return_address(0));
  return __libc_memalign(alignment, size);
}
void *memalign(std::size_t alignment, std::size_t size) {
  dct::test::note(__builtin_return_address(0));
  return __libc_memalign(alignment, size);
}
}

namespace {
void *allocate(std::size_t size, void *caller) {
  dct::test::note(caller);
  if (void *pointer = __libc_malloc(size > 0 ? size : 1)) return pointer;
  throw std::bad_alloc();
}
void *allocate_aligned(std::size_t size, std::align_val_t alignment, void *caller) {
  dct::test::note(caller);
  if (void *pointer = __libc_memalign(static_cast<std::size_t>(alignment), size > 0 ? size : 1))
    return pointer;
  throw std::bad_alloc();
}
}  // namespace

void *operator new(std::size_t size) {
  return allocate(size, __builtin_return_address(0));
}
void *operator new[](std::size_t size) {
  return allocate(size, __builtin_return_address(0));
}
void *operator new(std::size_t size, const std::nothrow_t &) noexcept {
  dct::test::note(__builtin_return_address(0));
  return __libc_malloc(size > 0 ? size : 1);
}
void *operator new[](std::size_t size, const std::nothrow_t &) noexcept {
  dct::test::note(__builtin_return_address(0));
  return __libc_malloc(size > 0 ? size : 1);
}
void *operator new(std::size_t size, std::align_val_t alignment) {
  return allocate_aligned(size, alignment, __builtin_return_address(0));
}
void *operator new[](std::size_t size, std::align_val_t alignment) {
  return allocate_aligned(size, alignment, __builtin_return_address(0));
}
void operator delete(void *pointer) noexcept {
  __libc_free(pointer);
}
void operator delete[](void *pointer) noexcept {
  __libc_free(pointer);
}
void operator delete(void *pointer, std::size_t) noexcept {
  __libc_free(pointer);
}
void operator delete[](void *pointer, std::size_t) noexcept {
  __libc_free(pointer);
}
void operator delete(void *pointer, std::align_val_t) noexcept {
  __libc_free(pointer);
}
void operator delete[](void *pointer, std::align_val_t) noexcept {
  __libc_free(pointer);
}
void operator delete(void *pointer, std::size_t, std::align_val_t) noexcept {
  __libc_free(pointer);
}
void operator delete[](void *pointer, std::size_t, std::align_val_t) noexcept {
  __libc_free(pointer);
}
void *operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t &) noexcept {
  dct::test::note(__builtin_return_address(0));
  return __libc_memalign(static_cast<std::size_t>(alignment), size > 0 ? size : 1);
}
void *operator new[](std::size_t size, std::align_val_t alignment,
                     const std::nothrow_t &) noexcept {
  dct::test::note(__builtin_return_address(0));
  return __libc_memalign(static_cast<std::size_t>(alignment), size > 0 ? size : 1);
}

#endif  // DCT_COUNT_ALLOCATIONS
