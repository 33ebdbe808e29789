// The lifecycle every dct request shares, whatever it computes: start, progress, wait/test,
// the status and its running totals, the stream, and the error-feedback state checkpoints
// save. The compressed allreduce (allreduce.cpp), MPI's passthrough and both DCT-MP
// compressors (alltoallv.cpp, error_bounded.cpp) derive from it, so handles,
// DCT_Start/Wait/Test/Waitall, the in-flight order (progress.hpp) and DCT_Request_free serve
// every kind alike.
#pragma once

#include <mpi.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/comm_context.hpp"
#include "core/compute_backend.hpp"
#include "core/config.hpp"
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

  /// Error-feedback state, for tests and checkpoints: `count` elements of the request's
  /// datatype (nullptr when the request keeps no residual), and the threshold in use.
  virtual const void *residual() const = 0;
  virtual double tau() const = 0;
  /// dct_momentum's velocity, `count` elements of the request's datatype (nullptr without
  /// momentum): state a checkpoint saves with the residual (format 4).
  virtual const void *velocity() const { return nullptr; }
  /// dct_momentum_result=gradient's last update, `count` elements of the request's datatype
  /// (nullptr without): state a checkpoint saves with the velocity (format 6).
  virtual const void *last_update() const { return nullptr; }
  /// Whether the request keeps a velocity / a last update (with elements), which checkpoints
  /// then hold.
  virtual bool keeps_velocity() const { return false; }
  virtual bool keeps_last_update() const { return false; }

  /// What the request computes, as checkpoints record it (the `kind` attribute):
  /// "allreduce", "alltoallv" or "alltoallv_backward".
  virtual const char *kind() const = 0;
  /// Whether checkpoints save this engine (compressed ones; MPI's passthrough has no state).
  virtual bool checkpointed() const = 0;
  /// Replaces the error-feedback state: `residual` and `velocity` hold `count` elements each
  /// (each ignored when the request keeps none), `calls` the number of completed calls (it
  /// drives the tau schedule).
  virtual void restore(const void *residual, const void *velocity, double tau, MPI_Count calls) = 0;

  /// The live residual and velocity in writable host memory, with every pending write done,
  /// for a checkpoint load to read into directly when they hold nothing yet (nullptr: not in
  /// host memory, or none); restore() then gets these same pointers back.
  virtual void *loadable_residual() { return nullptr; }
  virtual void *loadable_velocity() { return nullptr; }

  /// What dct_algorithm=auto learnt from the last call and decides the next one by: the
  /// result's nonzeros, the same on every rank (0 before the first call, and for engines that
  /// decide nothing). Checkpoints save it (attribute `result_nonzeros`), so that a resumed run
  /// takes the algorithm (and so the order of the additions) the uninterrupted one takes.
  virtual std::int64_t algorithm_hint() const { return 0; }
  virtual void restore_algorithm_hint(std::int64_t hint) { static_cast<void>(hint); }

  /// State beyond the residual, velocity, tau and call counter that a checkpoint saves per
  /// rank (format 5: DCT-MP's schedule position and adaptive bounds), as float64 words; empty
  /// when there is none.
  virtual std::vector<double> extra_state() const { return {}; }
  /// Checks `words` (what extra_state() saved, read from a file: untrusted) against this
  /// engine and throws DCT_ERR_CKPT_MISMATCH or DCT_ERR_CKPT_FORMAT without changing anything.
  virtual void check_extra_state(const std::vector<double> &words) const {
    require(words.empty(), DCT_ERR_CKPT_FORMAT,
            "request '" + name() + "' keeps no state beyond its residual, the checkpoint has some");
  }
  /// Installs checked words (after restore()).
  virtual void restore_extra_state(const std::vector<double> &words) { static_cast<void>(words); }
  /// Replaces the last update (`count` elements; requests that keep one, after restore()).
  virtual void restore_last_update(const void *update) { static_cast<void>(update); }
  /// Whether count() is this rank's own (DCT-MP: the elements it sends), which may differ
  /// between ranks; checkpoints then record it in extra_state(), not in the `count` attribute.
  virtual bool counts_per_rank() const { return false; }

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
