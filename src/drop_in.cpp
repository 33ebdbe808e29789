#include "drop_in.hpp"

#include <mutex>

#include "allreduce.hpp"
#include "config.hpp"
#include "request_engine.hpp"
#include "runtime.hpp"

namespace dct::detail {

DropInStates::DropInStates() = default;
DropInStates::~DropInStates() = default;

RequestEngine &DropInStates::acquire(const AllreduceArgs &args, const Config &config) {
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  const DropInKey key{args.recvbuf, args.count, args.datatype};
  if (RequestEngine *engine = find(key)) return *engine;
  std::unique_ptr<RequestEngine> created = make_allreduce_engine(args, config);
  created->connect(false);
  order_.emplace_front(key, std::move(created));
  index_.emplace(key, order_.begin());
  while (static_cast<long long>(index_.size()) > config.drop_in_limit) {
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
