// Library lifetime and per-communicator state.
//
// dct starts lazily on the first call that needs it: it checks that MPI is running, hangs a
// finalize hook on MPI_COMM_SELF (whose attributes MPI deletes first thing in MPI_Finalize)
// and starts Kokkos unless the application already did. The hook frees every communicator
// dct duplicated, releases the drop-in states and finalizes Kokkos if dct started it.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/device_transport.hpp"
#include "core/drop_in_states.hpp"

namespace dct::detail {

struct Config;

/// Throws DCT_ERR_NOT_INITIALIZED unless MPI is initialized and not finalized; on the first
/// call installs the finalize hook and starts the backend runtime.
void ensure_library_ready();

/// Throws DCT_ERR_NOT_INITIALIZED once MPI_Finalize has run dct's finalize hook; takes no lock
/// and calls no MPI (the per-call check of DCT_Start, DCT_Wait and DCT_Test, whose requests
/// exist only once the library was ready).
void require_mpi_running();

/// Guards the library's shared tables (contexts, handles, drop-in states); never held while
/// a collective is in progress.
std::recursive_mutex &library_mutex();

/// What dct keeps per user communicator: a private duplicate (its own tag space, errors
/// returned rather than fatal) and the drop-in states of DCT_Allreduce.
class CommContext {
 public:
  CommContext(MPI_Comm user_comm, MPI_Comm private_comm, MPI_Comm shared_comm, MPI_Comm order_comm);
  ~CommContext();
  CommContext(const CommContext &) = delete;
  CommContext &operator=(const CommContext &) = delete;

  MPI_Comm comm() const { return comm_; }
  /// A second duplicate, for traffic that completes inside one dct call and so never meets a
  /// call in flight: the agreements of the collective inits (agreement.hpp). MPI_COMM_NULL
  /// once released.
  MPI_Comm shared_comm() const { return shared_comm_; }
  /// A third duplicate, for the barriers that tell a blocking call (density 1, passthrough)
  /// that every rank started it (progress.hpp), posted in the start order of those calls.
  MPI_Comm order_comm() const { return order_comm_; }
  /// Held by the thread inside dct on this communicator (api/guarded.hpp: ContextEntry) and by
  /// another thread's progress pass while it advances a call of this communicator.
  std::recursive_mutex &entry_mutex() const { return entry_mutex_; }
  /// Progress passes of other threads trying or holding entry_mutex now: a call that finds
  /// the mutex taken by one waits for it instead of being refused.
  std::atomic<int> &passes() const { return passes_; }
  /// Progress passes of other threads that held entry_mutex and left (counted after they
  /// release it, before `passes` drops): a call that found the mutex taken and then sees no
  /// pass may have met one that just left, which it tells by this count having moved.
  std::atomic<std::uint64_t> &pass_exits() const { return pass_exits_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  DropInStates drop_in;

  /// Default name of the next persistent request on this communicator ("allreduce.N"): the
  /// same program creates the same names in every run, which is what checkpoints match.
  /// `take_default_name` moves on to the next, once every rank created the request.
  std::string default_name() const { return "allreduce." + std::to_string(persistent_created_); }
  void take_default_name() { ++persistent_created_; }
  /// The same for DCT-MP forward requests ("alltoallv.N", counted apart, so that allreduce
  /// names stay those of earlier versions); a backward request takes its forward's name and
  /// ".backward" (".backward.M" for the M-th after the first).
  std::string default_alltoallv_name() const {
    return "alltoallv." + std::to_string(alltoallv_created_);
  }
  void take_default_alltoallv_name() { ++alltoallv_created_; }

  /// The configuration of the drop-in states (DCT_* variables), read and agreed on by every
  /// rank at the first compressed DCT_Allreduce on this communicator; nullptr until then.
  std::shared_ptr<const Config> drop_in_config;

  /// The transport of this communicator's GPU requests (device_transport.hpp), or nullptr for
  /// MPI. Collective over `comm` (a request's own communicator, at its init): `wanted` is this
  /// rank's request's wish (dct_transport auto or nccl, CUDA buffers, compressed), `required`
  /// dct_transport=nccl (the same on every rank: agreed at init). Made by the first request
  /// every rank wants it for and kept; where it cannot be made, auto falls back to MPI and
  /// nccl fails with DCT_ERR_NOT_COMPILED or DCT_ERR_BUFFER, alike on every rank.
  DeviceTransport *device_transport(MPI_Comm comm, bool wanted, bool required);

  /// Frees the private communicators and the transport (at the user's MPI_Comm_free or at
  /// MPI_Finalize); later collectives on this context fail with DCT_ERR_NOT_INITIALIZED.
  void release();

 private:
  friend class ContextRegistry;
  MPI_Comm user_comm_;
  MPI_Comm comm_;
  MPI_Comm shared_comm_;
  MPI_Comm order_comm_;
  mutable std::recursive_mutex entry_mutex_;
  mutable std::atomic<int> passes_{0};
  mutable std::atomic<std::uint64_t> pass_exits_{0};
  int rank_ = 0;
  int size_ = 1;
  bool attached_ = true;  // the user communicator still carries our attribute
  int persistent_created_ = 0;
  int alltoallv_created_ = 0;
  std::unique_ptr<DeviceTransport> transport_;
  bool transport_tried_ = false;
  std::string transport_why_;  // why there is none, once tried
};

/// Names a communicator dct made for its own traffic ("dct:private"): libdct_pmpi, which may
/// be preloaded into a program that calls dct too, then leaves dct's own MPI_Allreduce calls
/// alone (a density-1 request is exactly MPI_Allreduce; issue 35 found it compressed twice).
/// The name lives in MPI, so it holds across the two copies of dct's code in such a process.
void mark_private(MPI_Comm comm);
/// Whether `comm` is one dct made for its own traffic (mark_private).
bool is_private(MPI_Comm comm);

/// The context the calling thread's dct call entered (api/guarded.hpp), or nullptr: its own
/// progress passes hold that one already.
inline const CommContext *&entered_context() {
  static thread_local const CommContext *context = nullptr;
  return context;
}

/// The context of `user_comm`, created (collectively: MPI_Comm_dup) on first use and cached
/// as an attribute of `user_comm`. Throws DCT_ERR_COMM for MPI_COMM_NULL or an
/// inter-communicator.
std::shared_ptr<CommContext> comm_context(MPI_Comm user_comm);

/// The context of `user_comm` if dct already has one, else nullptr (never communicates).
std::shared_ptr<CommContext> find_comm_context(MPI_Comm user_comm);

}  // namespace dct::detail
