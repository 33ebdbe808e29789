#include "progress.hpp"

#include <algorithm>
#include <list>

#include "allreduce.hpp"

namespace dct::detail {
namespace {

std::list<AllreduceEngine *> &in_flight() {  // in start order
  static std::list<AllreduceEngine *> engines;
  return engines;
}

bool contains(AllreduceEngine *engine) {
  const auto &engines = in_flight();
  return std::find(engines.begin(), engines.end(), engine) != engines.end();
}

}  // namespace

void add_in_flight(AllreduceEngine *engine) {
  in_flight().push_back(engine);
}

void remove_in_flight(AllreduceEngine *engine) {
  in_flight().remove(engine);
}

bool progress_in_flight(AllreduceEngine *target, bool wait) {
  auto &engines = in_flight();
  for (;;) {
    // Alone in flight, a call may block inside MPI instead of polling.
    const bool alone = engines.size() == 1;
    for (auto it = engines.begin(); it != engines.end();) {
      AllreduceEngine *engine = *it;
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
