#include "core/drop_in_states.hpp"

#include <mutex>

#include "core/comm_context.hpp"
#include "core/request_engine.hpp"

namespace dct::detail {

DropInStates::DropInStates() = default;
DropInStates::~DropInStates() = default;

RequestEngine &DropInStates::acquire(const DropInKey &key, long long limit,
                                     const std::function<std::unique_ptr<RequestEngine>()> &make) {
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  if (RequestEngine *engine = find(key)) return *engine;
  std::unique_ptr<RequestEngine> created = make();
  created->connect(false);
  order_.emplace_front(key, std::move(created));
  index_.emplace(key, order_.begin());
  while (static_cast<long long>(index_.size()) > limit) {
    index_.erase(order_.back().first);
    order_.pop_back();
    ++evicted_;
  }
  return *order_.front().second;
}

RequestEngine *DropInStates::find(const DropInKey &key) {
  auto found = index_.find(key);
  if (found == index_.end()) return nullptr;
  order_.splice(order_.begin(), order_, found->second);
  return found->second->second.get();
}

void DropInStates::clear() {
  index_.clear();
  order_.clear();
}

}  // namespace dct::detail
