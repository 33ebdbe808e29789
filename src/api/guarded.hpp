// The boundary of every C entry point: calls must not overlap (a try-lock, never a wait), and
// every exception becomes a return code and the thread's last error. Private header of
// src/api/ (c_api.cpp, c_api_mp.cpp).
#pragma once

#include <mutex>
#include <new>
#include <string>

#include "core/error.hpp"
#include "core/request_table.hpp"
#include "dct/dct.h"

namespace dct::detail {

/// The detailed message of the last failure on this thread (DCT_Get_last_error).
inline thread_local std::string last_error;

/// Held by the thread inside dct (dct.h: calls must not overlap); recursive, for DCT_Waitall's
/// calls of DCT_Wait. Taken without waiting: a second thread is refused, never blocked, so it
/// cannot deadlock against a thread that waits inside dct for other ranks.
class EntryLock {
 public:
  explicit EntryLock(const char *function) : lock_(mutex(), std::try_to_lock) {
    if (!lock_.owns_lock())
      last_error = std::string(function) +
                   ": another thread is inside dct; dct calls must not overlap (dct.h, Threads)";
  }
  bool entered() const { return lock_.owns_lock(); }

 private:
  static std::recursive_mutex &mutex() {
    static std::recursive_mutex entry;
    return entry;
  }
  std::unique_lock<std::recursive_mutex> lock_;
};

/// Runs `body`, turning every exception into a return code and the thread's last error.
template <typename Body>
int guarded(const char *function, Body &&body) noexcept {
  const EntryLock entry(function);
  if (!entry.entered()) return DCT_ERR_THREAD;
  try {
    last_error.clear();
    body();
    return DCT_SUCCESS;
  } catch (const Error &e) {
    last_error = std::string(function) + ": " + e.what();
    return e.code();
  } catch (const std::bad_alloc &) {
    last_error = std::string(function) + ": out of memory";
    return DCT_ERR_NO_MEMORY;
  } catch (const std::exception &e) {
    last_error = std::string(function) + ": internal error: " + e.what();
    return DCT_ERR_INTERNAL;
  } catch (...) {
    last_error = std::string(function) + ": internal error: unknown exception";
    return DCT_ERR_INTERNAL;
  }
}

/// Whether `request` is a live request that was started and not completed yet.
inline bool started(DCT_Request request) noexcept {
  try {
    return RequestTable::instance().find(&request).engine->active();
  } catch (...) {
    return true;  // let DCT_Wait report the bad handle
  }
}

}  // namespace dct::detail
