// The calls in flight, and how they progress.
//
// A started call is a schedule of nonblocking MPI operations on its request's own
// communicator (so calls in flight never mix their messages). Its next operations are posted
// only when dct gets control, in DCT_Test, DCT_Wait, DCT_Waitall or DCT_Allreduce; each of
// those progresses *every* call in flight, not only the one asked about, because two ranks
// may complete their requests in different orders and each needs the other to post.
// Calls whose work is one blocking MPI call (density 1, passthrough) run in their start order
// (which dct.h asks to be the same on every rank), and only once every rank has started them:
// each posts a barrier at its start (CommContext::order_comm) and enters MPI's call when the
// barrier completed. A rank inside such a call so never leaves a peer waiting for it to
// progress a compressed call, whatever order compressed and blocking calls were started and
// completed in (issue 35: waiting for the compressed calls started before it deadlocked
// against a peer that started them after).
//
// dct calls never overlap: c_api.cpp refuses a second thread (DCT_ERR_THREAD), so this list
// needs no lock.
#pragma once

#include <mpi.h>

#include <mutex>

namespace dct::detail {

class RequestEngine;

void add_in_flight(RequestEngine *engine);
void remove_in_flight(RequestEngine *engine);

/// Progresses every call in flight until `target` is complete (`wait`), or once (test).
/// Returns whether `target` is complete.
bool progress_in_flight(RequestEngine *target, bool wait);

/// Whether several threads may be inside dct at once (MPI_THREAD_MULTIPLE, on different
/// communicators): a call then never blocks inside MPI while it holds what another thread's
/// progress may need.
bool threads_share_dct();

/// Kernels of different threads take turns: Kokkos' host execution spaces do not take
/// dispatches from several threads at once. Held only around work that never waits for a peer.
std::mutex &kernel_mutex();

/// kernel_mutex for the scope where threads may share dct (threads_share_dct), else nothing:
/// calls of one thread at a time need no turn, and the per-call path saves the lock.
class KernelTurn {
 public:
  /// `kernels`: whether the scope runs kernels at all.
  explicit KernelTurn(bool kernels = true) {
    if (kernels && threads_share_dct()) lock_ = std::unique_lock<std::mutex>(kernel_mutex());
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

/// Waits for `request` (a nonblocking collective dct posted inside one call, e.g. an
/// agreement), progressing every call in flight meanwhile. Throws DCT_ERR_MPI on failure.
void complete_progressing(MPI_Request &request);

}  // namespace dct::detail
