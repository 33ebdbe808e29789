// The drop-in states of DCT_Allreduce: the error-feedback state the blocking call keeps per
// (recvbuf, count, datatype) on a communicator, bounded by DCT_DROP_IN_LIMIT. This file owns
// the map: it is declared, filled, looked up and evicted here only (CommContext holds one;
// api/c_api.cpp makes the engines that go in it: make_allreduce_engine).
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

namespace dct::detail {

class RequestEngine;

using DropInKey = std::tuple<const void *, MPI_Count, MPI_Datatype>;

/// The drop-in states of one communicator: at most config.drop_in_limit, the least recently
/// used evicted first, its residual discarded (counted in `evicted`). `acquire` takes the
/// library mutex; the other members are called with it held (or at teardown).
class DropInStates {
 public:
  DropInStates();
  ~DropInStates();
  DropInStates(const DropInStates &) = delete;
  DropInStates &operator=(const DropInStates &) = delete;

  /// The state of `key`, now the most recently used; made by `make` on first use, then the
  /// least recently used ones evicted down to `limit`. Local: a state new on one rank needs
  /// nothing of the others, since drop-in calls share the context's communicator and complete
  /// inside DCT_Allreduce.
  RequestEngine &acquire(const DropInKey &key, long long limit,
                         const std::function<std::unique_ptr<RequestEngine>()> &make);
  /// The state of `key`, now the most recently used; nullptr if there is none.
  RequestEngine *find(const DropInKey &key);
  /// Drops every state (the user's communicator was freed, or MPI is finalizing).
  void clear();
  std::size_t size() const { return index_.size(); }
  long long evicted() const { return evicted_; }

 private:
  using Entry = std::pair<DropInKey, std::unique_ptr<RequestEngine>>;
  std::list<Entry> order_;  // most recently used first
  std::map<DropInKey, std::list<Entry>::iterator> index_;
  long long evicted_ = 0;
};

}  // namespace dct::detail
