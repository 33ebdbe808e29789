// The state a compressed request carries from one call to the next (error feedback, momentum,
// the threshold, schedules), read and replaced as a whole. Checkpoints (src/checkpoint/) save
// and restore it, DCT_Get_residual and the drop-in states' accounting read it; how a file lays
// it out is the checkpoint code's business, not this interface's. It sits in core, not in
// checkpoint/, because the engines of dp/ and mp/ implement it and may not include checkpoint/.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace dct::detail {

class EngineState {
 public:
  /// What the request computes: "allreduce", "alltoallv" or "alltoallv_backward".
  virtual const char *kind() const = 0;
  /// Whether the request's count (RequestEngine::count) is this rank's own (DCT-MP: the
  /// elements it sends), which may differ between ranks; extra() then holds it.
  virtual bool counts_per_rank() const = 0;

  /// The error-feedback residual, `count` elements of the request's datatype in host memory
  /// (nullptr when the request keeps none), and the threshold in use.
  virtual const void *residual() const = 0;
  virtual double tau() const = 0;
  /// dct_momentum's velocity and dct_momentum_result=gradient's last update, `count` elements
  /// each in host memory; nullptr where the request keeps none (keeps_velocity,
  /// keeps_last_update: whether it keeps one with elements, asked without copying it).
  virtual const void *velocity() const = 0;
  virtual const void *last_update() const = 0;
  virtual bool keeps_velocity() const = 0;
  virtual bool keeps_last_update() const = 0;
  /// What dct_algorithm=auto learnt from the last call and decides the next one by: the
  /// result's nonzero count, the same on every rank (0 before the first call, and for requests
  /// that decide nothing). Restoring it makes a resumed run take the algorithm (and so the
  /// order of the additions) the uninterrupted one takes.
  virtual std::int64_t result_nonzeros() const = 0;
  /// State beyond the above, as float64 words (DCT-MP: its count, schedule position and
  /// adaptive bounds); empty when there is none.
  virtual std::vector<double> extra() const = 0;

  /// The live residual and velocity in writable host memory, with every pending write done,
  /// for a load to read into directly (nullptr: not in host memory, or none); restore() then
  /// gets these same pointers back.
  virtual void *loadable_residual() = 0;
  virtual void *loadable_velocity() = 0;
  /// Checks `words` (what extra() gave, read back from a file: untrusted) against this
  /// request and throws DCT_ERR_CKPT_MISMATCH or DCT_ERR_CKPT_FORMAT, changing nothing.
  virtual void check_extra(const std::vector<double> &words) const = 0;

  /// Replaces the state: `residual` and `velocity` hold `count` elements each (each ignored
  /// when the request keeps none), `calls` the number of completed calls (it drives the tau
  /// schedule). The other parts follow, each after this one.
  virtual void restore(const void *residual, const void *velocity, double tau, MPI_Count calls) = 0;
  /// `count` elements (ignored when the request keeps no last update).
  virtual void restore_last_update(const void *update) = 0;
  virtual void restore_result_nonzeros(std::int64_t nonzeros) = 0;
  /// Words check_extra() accepted.
  virtual void restore_extra(const std::vector<double> &words) = 0;

 protected:
  ~EngineState() = default;  // owned as its RequestEngine
};

/// The parts of the state a request without error feedback has (DCT-MP's): no residual,
/// velocity or last update, no algorithm to choose; the rest is the request's own.
class StateWithoutFeedback : public EngineState {
 public:
  const void *residual() const override { return nullptr; }
  const void *velocity() const override { return nullptr; }
  const void *last_update() const override { return nullptr; }
  bool keeps_velocity() const override { return false; }
  bool keeps_last_update() const override { return false; }
  std::int64_t result_nonzeros() const override { return 0; }
  void *loadable_residual() override { return nullptr; }
  void *loadable_velocity() override { return nullptr; }
  void restore_last_update(const void *) override {}
  void restore_result_nonzeros(std::int64_t) override {}

 protected:
  ~StateWithoutFeedback() = default;
};

}  // namespace dct::detail
