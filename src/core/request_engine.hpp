// The lifecycle every dct request shares, whatever it computes: start, progress, wait/test,
// the status and its running totals, the stream, and a way to the state it carries between
// calls (engine_state.hpp). The compressed allreduce (allreduce.cpp), MPI's passthrough and both
// DCT-MP compressors (alltoallv.cpp, error_bounded.cpp) derive from it, so handles,
// DCT_Start/Wait/Test/Waitall, the in-flight order (progress.hpp) and DCT_Request_free serve
// every kind alike.
#pragma once

#include <mpi.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "core/comm_context.hpp"
#include "core/compute_backend.hpp"
#include "core/config.hpp"
#include "core/engine_state.hpp"
#include "core/error.hpp"
#include "dct/dct.h"

namespace dct::detail {

class RequestEngine {
 public:
  virtual ~RequestEngine();

  /// Collective when `own`: the communicator the calls talk on, set up once every rank has
  /// agreed to create the request (agreement.hpp). `own`: a private duplicate (persistent
  /// requests, whose calls progress independently of each other); else the context's shared
  /// communicator (drop-in states, whose calls complete inside one DCT_Allreduce).
  virtual void connect(bool own) { static_cast<void>(own); }
  /// Compresses `send` (MPI_IN_PLACE: take it from `recv`) and posts the first exchange.
  /// Throws DCT_ERR_ACTIVE if already started; on any error the state is as before.
  virtual void start(const void *send, void *recv) = 0;
  /// Completes the call (progressing every call in flight meanwhile) and fills the status
  /// (may be nullptr). On error the request is inactive and this call's contribution is back
  /// in the residual.
  void wait(DCT_Status *status);
  /// As wait if the call is complete after one round of progress; else returns false.
  bool test(DCT_Status *status);

  /// Advances the call without throwing; `block` lets it wait inside MPI. Returns true once
  /// the call is complete, successfully or not (the error is reported by wait/test).
  bool progress(bool block) noexcept;
  /// Whether the call is one blocking MPI call (run in start order: see progress.hpp).
  virtual bool blocking() const = 0;

  bool active() const { return active_; }
  /// The stream the kernels of later calls run on (CUDA/HIP; ignored on the host). Throws
  /// DCT_ERR_ACTIVE while a call is in flight.
  void set_stream(Stream stream);
  const DCT_Status &last_status() const { return status_; }
  const Config &config() const { return config_; }

  /// The state the request carries between calls (engine_state.hpp), which checkpoints
  /// save; nullptr for a request that carries none (MPI's passthrough).
  EngineState *state() { return state_; }
  const EngineState *state() const { return state_; }

  const std::string &name() const { return config_.name; }
  /// A DCT-MP backward request's own name (it shares its forward's configuration).
  void rename(std::string name) { config_.name = std::move(name); }
  MPI_Count count() const { return count_; }
  int element_size() const { return element_size_; }
  MPI_Count calls() const { return totals_.calls; }
  const CommContext *context() const { return context_.get(); }
  std::shared_ptr<CommContext> shared_context() const { return context_; }

 protected:
  RequestEngine(std::shared_ptr<CommContext> context, MPI_Count count, int element_size,
                Config config)
      : context_(std::move(context)),
        count_(count),
        element_size_(element_size),
        config_(std::move(config)) {}

  MPI_Comm comm() const;  // throws DCT_ERR_NOT_INITIALIZED once MPI_Finalize released it
  void begin_call();      // throws DCT_ERR_ACTIVE
  void launch();          // the call is started: in flight until complete
  void finish_call(DCT_Status *status);

  /// One step of the call; true when done. May throw.
  virtual bool advance(bool block) = 0;
  /// Undoes what start() took out of the error-feedback state, after an error.
  virtual void abandon() = 0;

  std::shared_ptr<CommContext> context_;
  MPI_Count count_;
  int element_size_;
  Config config_;
  /// Set by an engine that carries state (itself, as an EngineState), in its constructor.
  EngineState *state_ = nullptr;
  Stream stream_ = nullptr;
  bool active_ = false;
  bool complete_ = false;
  /// A blocking call's barrier on the context's order_comm (progress.hpp), until it completes.
  MPI_Request everyone_started_ = MPI_REQUEST_NULL;
  std::exception_ptr error_;
  DCT_Status status_{};
  DCT_Status totals_{};
};

}  // namespace dct::detail
