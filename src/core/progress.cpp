#include "core/progress.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/comm_context.hpp"
#include "core/error.hpp"
#include "core/request_engine.hpp"

namespace dct::detail {
namespace {

/// The calls in flight, in start order, and the mutex that guards the list (held only to read
/// or change it, never while a call progresses). A vector with room for a few requests, so
/// that starting a call allocates nothing (a list node per start was one of the per-call heap
/// allocations of issue 14).
struct InFlight {
  std::mutex mutex;
  std::vector<RequestEngine *> engines = [] {
    std::vector<RequestEngine *> reserved;
    reserved.reserve(64);
    return reserved;
  }();
};
InFlight &in_flight() {
  static InFlight list;
  return list;
}

bool contains(RequestEngine *engine) {
  InFlight &list = in_flight();
  const std::lock_guard<std::mutex> lock(list.mutex);
  return std::find(list.engines.begin(), list.engines.end(), engine) != list.engines.end();
}

/// One pass over the calls in flight: each is advanced by this thread if it may enter the
/// call's communicator (it is inside it already, or no other thread is); a blocking call only
/// when no blocking call started before it on its communicator is still in flight.
void progress_once(bool block) {
  InFlight &list = in_flight();
  // This thread's copy of the list. Where other threads may be in dct (they may start,
  // complete and free calls meanwhile) each call's context is kept alive, and a call is
  // progressed only if it is still in flight once the pass is inside its context; else only
  // this thread completes and frees calls.
  const bool shared = threads_share_dct();
  static thread_local std::vector<std::pair<RequestEngine *, const CommContext *>> pass;
  static thread_local std::vector<std::shared_ptr<CommContext>> kept_alive;
  static thread_local std::vector<const CommContext *> blocked;  // contexts with such a call
  {
    const std::lock_guard<std::mutex> lock(list.mutex);
    for (RequestEngine *engine : list.engines) {
      pass.emplace_back(engine, engine->context());
      if (shared) kept_alive.push_back(engine->shared_context());
    }
    // Alone in flight, a call may block inside MPI instead of polling: not where other threads
    // may be in dct (blocking there could hold a peer's progress behind this rank's lock).
    block = block && pass.size() == 1 && !shared;
  }
  blocked.clear();
  for (const auto &[engine, context] : pass) {
    // Another thread's call in this context is left to that thread; one that enters while this
    // pass holds it waits for the pass (passes()).
    const bool own = context == entered_context();
    if (!own) context->passes().fetch_add(1);
    std::unique_lock<std::recursive_mutex> entry(context->entry_mutex(), std::try_to_lock);
    bool complete = false;
    if (entry.owns_lock()) {
      // Inside the context no other thread can complete and free the call; before, one may
      // have: it is progressed only if it is still in flight, on this context.
      bool alive = true;
      if (shared) {
        const std::lock_guard<std::mutex> lock(list.mutex);
        alive = std::find(list.engines.begin(), list.engines.end(), engine) != list.engines.end() &&
                engine->context() == context;
      }
      const bool blocking = alive && engine->blocking();
      const bool queued = std::find(blocked.begin(), blocked.end(), context) != blocked.end();
      if (alive && !(blocking && queued)) {
        complete = engine->progress(block);
        if (blocking && !complete) blocked.push_back(context);
      }
    } else {
      blocked.push_back(context);  // its calls' order is unknown here: none runs after them
    }
    const bool held = entry.owns_lock();
    entry = std::unique_lock<std::recursive_mutex>();
    if (!own) {  // in this order: see ContextEntry (api/guarded.hpp)
      if (held) context->pass_exits().fetch_add(1);
      context->passes().fetch_sub(1);
    }
    if (complete) remove_in_flight(engine);
  }
  pass.clear();
  kept_alive.clear();  // the contexts are not kept past the pass
}

}  // namespace

bool threads_share_dct() {
  static const bool multiple = [] {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    return provided == MPI_THREAD_MULTIPLE;
  }();
  return multiple;
}

std::mutex &kernel_mutex() {
  static std::mutex mutex;
  return mutex;
}

void add_in_flight(RequestEngine *engine) {
  InFlight &list = in_flight();
  const std::lock_guard<std::mutex> lock(list.mutex);
  list.engines.push_back(engine);
}

void remove_in_flight(RequestEngine *engine) {
  InFlight &list = in_flight();
  const std::lock_guard<std::mutex> lock(list.mutex);
  list.engines.erase(std::remove(list.engines.begin(), list.engines.end(), engine),
                     list.engines.end());
}

bool progress_in_flight(RequestEngine *target, bool wait) {
  for (;;) {
    progress_once(wait);
    if (!contains(target)) return true;
    if (!wait) return false;
  }
}

void complete_progressing(MPI_Request &request) {
  for (;;) {
    bool idle = false;
    {
      InFlight &list = in_flight();
      const std::lock_guard<std::mutex> lock(list.mutex);
      idle = list.engines.empty();
    }
    if (idle) {  // nothing to progress meanwhile: it may block inside MPI (holding no kernels)
      check_mpi(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
      return;
    }
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    progress_once(false);
  }
}

}  // namespace dct::detail
