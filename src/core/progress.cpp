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
  // This thread's copy of the list: the others may start and complete calls meanwhile.
  static thread_local std::vector<RequestEngine *> pass;
  static thread_local std::vector<const CommContext *> blocked;  // contexts with such a call
  {
    const std::lock_guard<std::mutex> lock(list.mutex);
    pass.assign(list.engines.begin(), list.engines.end());
    // Alone in flight, a call may block inside MPI instead of polling: not where other threads
    // may be in dct (blocking there could hold a peer's progress behind this rank's lock).
    block = block && pass.size() == 1 && !threads_share_dct();
  }
  blocked.clear();
  for (RequestEngine *engine : pass) {
    const CommContext *context = engine->context();
    const bool blocking = engine->blocking();
    if (blocking && std::find(blocked.begin(), blocked.end(), context) != blocked.end()) continue;
    // Another thread's call in this context is left to that thread; one that enters while this
    // pass holds it waits for the pass (passes()).
    const bool own = context == entered_context();
    if (!own) context->passes().fetch_add(1);
    std::unique_lock<std::recursive_mutex> entry(context->entry_mutex(), std::try_to_lock);
    bool complete = false;
    if (entry.owns_lock()) complete = engine->progress(block);
    entry = std::unique_lock<std::recursive_mutex>();
    if (!own) context->passes().fetch_sub(1);
    if (blocking && !complete) blocked.push_back(context);
    if (!complete) continue;
    const std::lock_guard<std::mutex> lock(list.mutex);
    list.engines.erase(std::remove(list.engines.begin(), list.engines.end(), engine),
                       list.engines.end());
  }
}

}  // namespace

bool calls_in_flight() {
  InFlight &list = in_flight();
  const std::lock_guard<std::mutex> lock(list.mutex);
  return !list.engines.empty();
}

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
