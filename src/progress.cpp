#include "progress.hpp"

#include <algorithm>
#include <list>

#include "request_engine.hpp"

namespace dct::detail {
namespace {

std::list<RequestEngine *> &in_flight() {  // in start order
  static std::list<RequestEngine *> engines;
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
  in_flight().remove(engine);
}

bool progress_in_flight(RequestEngine *target, bool wait) {
  auto &engines = in_flight();
  for (;;) {
    // Alone in flight, a call may block inside MPI instead of polling.
    const bool alone = engines.size() == 1;
    for (auto it = engines.begin(); it != engines.end();) {
      RequestEngine *engine = *it;
      bool complete = false;
      if (engine->blocking())
        complete = it == engines.begin() && engine->progress(true);
      else
        complete = engine->progress(wait && alone);
      it = complete ? engines.erase(it) : std::next(it);
    }
    if (!contains(target)) return true;
    if (!wait) return false;
  }
}

}  // namespace dct::detail
