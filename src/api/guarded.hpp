// The boundary of every C entry point: calls on one communicator must not overlap (a try-lock
// per communicator, never a wait), and every exception becomes a return code and the
// thread's last error. Private header of
// src/api/ (c_api.cpp, c_api_mp.cpp).
#pragma once

#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "core/comm_context.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/request_table.hpp"
#include "dct/dct.h"

namespace dct::detail {

/// The detailed message of the last failure on this thread (DCT_Get_last_error).
inline thread_local std::string last_error;

/// A call's entry into `context` (dct.h, Threads): held by the thread inside dct on that
/// communicator; recursive, for DCT_Waitall's calls of DCT_Wait and for progress passes that
/// reach the thread's own calls. Taken without waiting: a second thread on the same
/// communicator is refused with DCT_ERR_THREAD, never blocked, so it cannot deadlock against a
/// thread that waits inside dct for other ranks. Threads on different communicators enter
/// together (issue 35: one global lock let two ranks' threads hold it inside different
/// communicators' collectives, each waiting for the other).
class ContextEntry {
 public:
  explicit ContextEntry(const CommContext &context)
      : lock_(context.entry_mutex(), std::defer_lock), outer_(entered_context()) {
    // Another thread's progress pass holds it: wait for that one, progressing the calls in
    // flight meanwhile (the pass may be inside a density-1 call's MPI_Allreduce whose peers
    // first need this rank's part of another blocking call). A pass that held it at the
    // try_lock and left before `passes` was read has moved `pass_exits` (it counts its exit
    // first): without that count, a call whose communicator only another thread's pass had
    // touched failed with DCT_ERR_THREAD (seen once in CI, under MPICH).
    for (;;) {
      const std::uint64_t exits = context.pass_exits().load();
      if (lock_.try_lock()) break;
      require(context.passes().load() > 0 || context.pass_exits().load() != exits, DCT_ERR_THREAD,
              [] {
                return "another thread is inside dct on this communicator; calls on one "
                       "communicator must not overlap (dct.h, Threads)";
              });
      progress_in_flight(nullptr, false);
      std::this_thread::yield();
    }
    entered_context() = &context;
  }
  ~ContextEntry() { entered_context() = outer_; }
  ContextEntry(const ContextEntry &) = delete;
  ContextEntry &operator=(const ContextEntry &) = delete;

 private:
  std::unique_lock<std::recursive_mutex> lock_;
  const CommContext *outer_;
};

/// A call on a persistent request: enters the request's communicator, then finds the request
/// again inside it (another thread may have freed it meanwhile).
class RequestEntry {
 public:
  explicit RequestEntry(const DCT_Request *handle)
      : context_(RequestTable::instance().context_of(handle)),
        entry_(*context_),
        request_(RequestTable::instance().find(handle)) {}
  PersistentRequest &request() const { return request_; }
  RequestEngine &engine() const { return *request_.engine; }

 private:
  std::shared_ptr<CommContext> context_;
  ContextEntry entry_;
  PersistentRequest &request_;
};

/// Runs `body`, turning every exception into a return code and the thread's last error. The
/// body enters the communicator it works on (ContextEntry) before it changes anything.
template <typename Body>
int guarded(const char *function, Body &&body) noexcept {
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
