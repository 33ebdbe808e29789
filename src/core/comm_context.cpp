#include "core/comm_context.hpp"

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "core/compute_backend.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/request_engine.hpp"

namespace dct::detail {

std::recursive_mutex &library_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

namespace {

const char *const kNotRunning =
    "MPI is not initialized or already finalized: call dct between MPI_Init and MPI_Finalize";

/// Set by the finalize hook: MPI_Finalize has begun in a process where dct was started.
std::atomic<bool> finalized_after_start{false};

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace

// Owns the keyvals and the list of live contexts; one instance, guarded by library_mutex().
class ContextRegistry {
 public:
  static ContextRegistry &instance() {
    static ContextRegistry registry;
    return registry;
  }

  void start() {
    if (started_) return;
    check_mpi(
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_user_comm_free, &context_keyval_, nullptr),
        "MPI_Comm_create_keyval");
    check_mpi(
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize, &finalize_keyval_, nullptr),
        "MPI_Comm_create_keyval");
    check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, finalize_keyval_, nullptr), "MPI_Comm_set_attr");
    owns_runtime_ = backends::initialize_runtime();
    started_ = true;
  }

  std::shared_ptr<CommContext> find(MPI_Comm user_comm) const {
    void *holder = nullptr;
    int found = 0;
    check_mpi(MPI_Comm_get_attr(user_comm, context_keyval_, &holder, &found), "MPI_Comm_get_attr");
    return found ? *static_cast<std::shared_ptr<CommContext> *>(holder) : nullptr;
  }

  std::shared_ptr<CommContext> create(MPI_Comm user_comm) {
    MPI_Comm comms[3] = {MPI_COMM_NULL, MPI_COMM_NULL, MPI_COMM_NULL};
    for (MPI_Comm &comm : comms) {
      // Nonblocking, progressing the calls in flight meanwhile: a peer may be waiting for this
      // rank's part of a call started before (issue 35). On every rank alike: MPI does not
      // match MPI_Comm_idup with MPI_Comm_dup (MPICH hangs; Open MPI happened to match them).
      // SimGrid's SMPI has no MPI_Comm_idup: its simulated programs are single-threaded and
      // dup before they start calls.
      MPI_Request request = MPI_REQUEST_NULL;
#ifdef SMPI_H
      constexpr bool progressing = false;
#else
      constexpr bool progressing = true;
#endif
      int rc =
          progressing ? MPI_Comm_idup(user_comm, &comm, &request) : MPI_Comm_dup(user_comm, &comm);
      if (rc == MPI_SUCCESS && progressing) {
        try {
          complete_progressing(request);
        } catch (const Error &) {
          rc = MPI_ERR_OTHER;
        }
      }
      if (rc != MPI_SUCCESS)
        for (MPI_Comm &made : comms)
          if (made != MPI_COMM_NULL) MPI_Comm_free(&made);
      check_mpi(rc, "MPI_Comm_dup");
    }
    auto context = std::make_shared<CommContext>(user_comm, comms[0], comms[1], comms[2]);
    // The duplicates are made without the mutex: other threads' calls go on meanwhile.
    std::lock_guard<std::recursive_mutex> lock(library_mutex());
    auto holder = std::make_unique<std::shared_ptr<CommContext>>(context);
    check_mpi(MPI_Comm_set_attr(user_comm, context_keyval_, holder.get()), "MPI_Comm_set_attr");
    holder.release();  // now owned by the attribute; deleted by on_user_comm_free
    live_.push_back(context);
    return context;
  }

 private:
  // MPI calls this when the user frees the communicator, and when we delete the attribute.
  static int on_user_comm_free(MPI_Comm, int, void *holder, void *) {
    std::lock_guard<std::recursive_mutex> lock(library_mutex());
    std::unique_ptr<std::shared_ptr<CommContext>> owned(
        static_cast<std::shared_ptr<CommContext> *>(holder));
    CommContext &context = **owned;
    context.attached_ = false;
    context.drop_in.clear();  // drop-in engines hold the context: break the cycle
    return MPI_SUCCESS;
  }

  // Runs at the start of MPI_Finalize, while MPI is still fully usable.
  static int on_finalize(MPI_Comm, int, void *, void *) {
    std::lock_guard<std::recursive_mutex> lock(library_mutex());
    finalized_after_start = true;
    ContextRegistry &self = instance();
    for (const std::weak_ptr<CommContext> &weak : self.live_) {
      std::shared_ptr<CommContext> context = weak.lock();
      if (!context) continue;
      if (context->attached_) MPI_Comm_delete_attr(context->user_comm_, self.context_keyval_);
      context->release();
    }
    self.live_.clear();
    MPI_Comm_free_keyval(&self.context_keyval_);
    MPI_Comm_free_keyval(&self.finalize_keyval_);
    if (self.owns_runtime_) backends::finalize_runtime();
    self.owns_runtime_ = false;
    self.started_ = false;
    return MPI_SUCCESS;
  }

  bool started_ = false;
  bool owns_runtime_ = false;
  int context_keyval_ = MPI_KEYVAL_INVALID;
  int finalize_keyval_ = MPI_KEYVAL_INVALID;
  std::vector<std::weak_ptr<CommContext>> live_;
};

void require_mpi_running() {
  // A request exists only once dct started, so its finalize hook tells; no MPI call (Open
  // MPI's MPI_Initialized and MPI_Finalized take a lock) on the per-call path.
  require(!finalized_after_start.load(std::memory_order_acquire), DCT_ERR_NOT_INITIALIZED,
          kNotRunning);
}

void ensure_library_ready() {
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  require(mpi_running(), DCT_ERR_NOT_INITIALIZED, kNotRunning);
  ContextRegistry::instance().start();
}

CommContext::CommContext(MPI_Comm user_comm, MPI_Comm private_comm, MPI_Comm shared_comm,
                         MPI_Comm order_comm)
    : user_comm_(user_comm),
      comm_(private_comm),
      shared_comm_(shared_comm),
      order_comm_(order_comm) {
  for (MPI_Comm comm : {comm_, shared_comm_, order_comm_}) {
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    mark_private(comm);
  }
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

CommContext::~CommContext() {
  release();
}

DeviceTransport *CommContext::device_transport(MPI_Comm comm, bool wanted, bool required) {
  // Whether to make one is decided together: where the buffers live is each rank's own.
  int everyone = wanted ? 1 : 0;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &everyone, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  if (everyone == 0) {
    require(!required, DCT_ERR_BUFFER,
            "dct_transport=nccl needs CUDA device buffers on every rank (compressed requests)");
    return nullptr;
  }
  if (!transport_tried_) {
    transport_tried_ = true;
    transport_ = backends::make_device_transport(comm, transport_why_);
  }
  require(transport_ != nullptr || !required, DCT_ERR_NOT_COMPILED,
          "dct_transport=nccl: " + transport_why_);
  return transport_.get();
}

void CommContext::release() {
  transport_.reset();
  for (MPI_Comm *comm : {&comm_, &shared_comm_, &order_comm_}) {
    if (*comm != MPI_COMM_NULL && mpi_running()) MPI_Comm_free(comm);
    *comm = MPI_COMM_NULL;
  }
}

void mark_private(MPI_Comm comm) {
  char name[] = "dct:private";  // MPI_Comm_set_name takes a char * in MPI-3.0's binding
  MPI_Comm_set_name(comm, name);
}

bool is_private(MPI_Comm comm) {
  char name[MPI_MAX_OBJECT_NAME] = {};
  int length = 0;
  return PMPI_Comm_get_name(comm, name, &length) == MPI_SUCCESS &&
         std::strncmp(name, "dct:", 4) == 0;
}

static void require_intracommunicator(MPI_Comm user_comm) {
  require(user_comm != MPI_COMM_NULL, DCT_ERR_COMM, "communicator is MPI_COMM_NULL");
  int inter = 0;
  check_mpi(MPI_Comm_test_inter(user_comm, &inter), "MPI_Comm_test_inter");
  require(!inter, DCT_ERR_COMM, "inter-communicators are not supported");
}

std::shared_ptr<CommContext> find_comm_context(MPI_Comm user_comm) {
  ensure_library_ready();
  require_intracommunicator(user_comm);
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  return ContextRegistry::instance().find(user_comm);
}

std::shared_ptr<CommContext> comm_context(MPI_Comm user_comm) {
  std::shared_ptr<CommContext> context = find_comm_context(user_comm);
  if (context) return context;
  return ContextRegistry::instance().create(user_comm);
}

}  // namespace dct::detail
