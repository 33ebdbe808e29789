// The calls in flight, and how they progress.
//
// A started call is a schedule of nonblocking MPI operations on its request's own
// communicator (so calls in flight never mix their messages). Its next operations are posted
// only when dct gets control, in DCT_Test, DCT_Wait, DCT_Waitall or DCT_Allreduce; each of
// those progresses *every* call in flight, not only the one asked about, because two ranks
// may complete their requests in different orders and each needs the other to post.
// Calls whose work is one blocking MPI call (density 1, passthrough) run only when every call
// started before them is complete: all ranks start calls in the same order, so they then
// enter those blocking calls in the same order too, whatever order they wait in.
//
// dct calls never overlap: c_api.cpp refuses a second thread (DCT_ERR_THREAD), so this list
// needs no lock.
#pragma once

namespace dct::detail {

class RequestEngine;

void add_in_flight(RequestEngine *engine);
void remove_in_flight(RequestEngine *engine);

/// Progresses every call in flight until `target` is complete (`wait`), or once (test).
/// Returns whether `target` is complete.
bool progress_in_flight(RequestEngine *target, bool wait);

}  // namespace dct::detail
