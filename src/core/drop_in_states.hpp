// The drop-in states of DCT_Allreduce: the error-feedback state the blocking call keeps per
// (recvbuf, count, datatype) on a communicator, bounded by DCT_DROP_IN_LIMIT states and
// DCT_DROP_IN_MEMORY bytes. This file owns the map: it is declared, filled, looked up and
// evicted here only (CommContext holds one; api/c_api.cpp makes the engines that go in it:
// make_allreduce_engine).
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

/// What the drop-in states of every communicator of this process did, for the interposer's
/// report (which runs after the contexts are gone) and DCT_Allreduce_status's message.
struct DropInTotals {
  long long made = 0;            ///< states created
  long long evicted = 0;         ///< of them, evicted (DCT_DROP_IN_LIMIT, DCT_DROP_IN_MEMORY)
  long long evicted_unused = 0;  ///< of the evicted, used for one call only (a moving buffer)
  double evicted_mass = 0;       ///< sum of |residual| the evicted states held: never sent
  long long peak_bytes = 0;      ///< the most bytes the states of one communicator held
};
/// A snapshot of the process's totals (takes the library mutex).
DropInTotals drop_in_totals();

/// The drop-in states of one communicator: at most `limit` states and `memory` bytes (the
/// last state made stays, whatever its size), the least recently used evicted first, its
/// residual discarded and its mass counted (DropInTotals). `acquire` takes the library mutex;
/// the other members are called with it held (or at teardown).
class DropInStates {
 public:
  DropInStates();
  ~DropInStates();
  DropInStates(const DropInStates &) = delete;
  DropInStates &operator=(const DropInStates &) = delete;

  /// The state of `key`, now the most recently used; made by `make` on first use, then the
  /// least recently used ones evicted down to `limit` states and `memory` bytes. Local: a
  /// state new on one rank needs nothing of the others, since drop-in calls share the
  /// context's communicator and complete inside DCT_Allreduce.
  RequestEngine &acquire(const DropInKey &key, long long limit, long long memory,
                         const std::function<std::unique_ptr<RequestEngine>()> &make);
  /// The state of `key`, now the most recently used; nullptr if there is none.
  RequestEngine *find(const DropInKey &key);
  /// Drops every state (the user's communicator was freed, or MPI is finalizing).
  void clear();
  std::size_t size() const { return index_.size(); }
  long long evicted() const { return evicted_; }
  long long bytes() const { return bytes_; }

 private:
  struct Entry {
    DropInKey key;
    std::unique_ptr<RequestEngine> engine;
    long long bytes;  // what the state holds per element of its tensors, times the count
    long long uses;   // calls: acquisitions, the first included
  };
  void evict_last();

  std::list<Entry> order_;  // most recently used first
  std::map<DropInKey, std::list<Entry>::iterator> index_;
  long long evicted_ = 0;
  long long bytes_ = 0;
};

}  // namespace dct::detail
