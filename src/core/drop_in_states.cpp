#include "core/drop_in_states.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/comm_context.hpp"
#include "core/request_engine.hpp"

namespace dct::detail {
namespace {

DropInTotals totals;  // guarded by library_mutex()

/// The memory a state holds: its residual, and the velocity (two buffers: committed and this
/// call's) and last update of the momentum forms.
long long state_bytes(const RequestEngine &engine) {
  const EngineState *state = engine.state();
  const long long tensors = 1 + (state != nullptr && state->keeps_velocity() ? 2 : 0) +
                            (state != nullptr && state->keeps_last_update() ? 1 : 0);
  return tensors * static_cast<long long>(engine.count()) * engine.element_size();
}

/// Sum of |residual| of `engine` (on the host; a device residual is copied there once).
double residual_mass(const RequestEngine &engine) {
  const void *residual = engine.state() != nullptr ? engine.state()->residual() : nullptr;
  if (residual == nullptr) return 0;
  const std::size_t n = static_cast<std::size_t>(engine.count());
  double mass = 0;
  if (engine.element_size() == 4)
    for (std::size_t i = 0; i < n; ++i) mass += std::fabs(static_cast<const float *>(residual)[i]);
  else
    for (std::size_t i = 0; i < n; ++i) mass += std::fabs(static_cast<const double *>(residual)[i]);
  return mass;
}

}  // namespace

DropInTotals drop_in_totals() {
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  return totals;
}

DropInStates::DropInStates() = default;
DropInStates::~DropInStates() = default;

RequestEngine &DropInStates::acquire(const DropInKey &key, long long limit, long long memory,
                                     const std::function<std::unique_ptr<RequestEngine>()> &make) {
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  if (RequestEngine *engine = find(key)) {
    ++order_.front().uses;
    return *engine;
  }
  std::unique_ptr<RequestEngine> created = make();
  created->connect(false);
  const long long bytes = state_bytes(*created);
  order_.push_front(Entry{key, std::move(created), bytes, 1});
  index_.emplace(key, order_.begin());
  bytes_ += bytes;
  ++totals.made;
  while (static_cast<long long>(index_.size()) > limit || (bytes_ > memory && index_.size() > 1))
    evict_last();
  totals.peak_bytes = std::max(totals.peak_bytes, bytes_);
  return *order_.front().engine;
}

void DropInStates::evict_last() {
  const Entry &last = order_.back();
  ++evicted_;
  ++totals.evicted;
  totals.evicted_unused += last.uses == 1 ? 1 : 0;
  totals.evicted_mass += residual_mass(*last.engine);
  bytes_ -= last.bytes;
  index_.erase(last.key);
  order_.pop_back();
}

RequestEngine *DropInStates::find(const DropInKey &key) {
  auto found = index_.find(key);
  if (found == index_.end()) return nullptr;
  order_.splice(order_.begin(), order_, found->second);
  return found->second->engine.get();
}

void DropInStates::clear() {
  index_.clear();
  order_.clear();
  bytes_ = 0;
}

}  // namespace dct::detail
