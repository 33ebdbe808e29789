#include "core/progress.hpp"

#include <algorithm>
#include <vector>

#include "core/request_engine.hpp"

namespace dct::detail {
namespace {

// In start order. A vector with room for a few requests, so that starting a call allocates
// nothing (a list node per start was one of the per-call heap allocations of issue 14).
std::vector<RequestEngine *> &in_flight() {
  static std::vector<RequestEngine *> engines = [] {
    std::vector<RequestEngine *> reserved;
    reserved.reserve(64);
    return reserved;
  }();
  return engines;
}

bool contains(RequestEngine *engine) {
  const auto &engines = in_flight();
  return std::find(engines.begin(), engines.end(), engine) != engines.end();
}

}  // namespace

void add_in_flight(RequestEngine *engine) {
  in_flight().push_back(engine);
}

void remove_in_flight(RequestEngine *engine) {
  auto &engines = in_flight();
  engines.erase(std::remove(engines.begin(), engines.end(), engine), engines.end());
}

bool progress_in_flight(RequestEngine *target, bool wait) {
  auto &engines = in_flight();
  for (;;) {
    // Alone in flight, a call may block inside MPI instead of polling.
    const bool alone = engines.size() == 1;
    for (std::size_t i = 0; i < engines.size();) {  // by index: robust to the vector moving
      RequestEngine *engine = engines[i];
      bool complete = false;
      if (engine->blocking())
        complete = i == 0 && engine->progress(true);
      else
        complete = engine->progress(wait && alone);
      if (complete)
        engines.erase(engines.begin() + std::ptrdiff_t(i));
      else
        ++i;
    }
    if (!contains(target)) return true;
    if (!wait) return false;
  }
}

}  // namespace dct::detail
