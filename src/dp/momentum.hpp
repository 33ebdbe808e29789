// dct_momentum's state for the compressed allreduce (allreduce.cpp): the velocity the request
// compresses instead of the gradient (momentum correction), and for dct_momentum_result=gradient
// the last update, from which the result is unrolled back to a gradient.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "core/compute_backend.hpp"
#include "core/config.hpp"
#include "core/wire.hpp"

namespace dct::detail {

/// A call's velocity update as the compressor's selection pass makes it
/// (Backend::select_with_momentum): out = momentum * velocity + send, compressed in place of send.
/// `out` nullptr: no velocity, send is compressed as it is.
template <typename T>
struct VelocityUpdate {
  const T *velocity = nullptr;
  T momentum = T(0);
  T *out = nullptr;
};

template <typename T>
class Momentum {
 public:
  /// `dense_path`: the request's calls are MPI_Allreduce (density 1), where
  /// dct_momentum_result=gradient leaves the momentum to the application, so that the call is
  /// MPI_Allreduce of the gradients, bit for bit. `staged`: the backend's memory is not the
  /// host's (checkpoints then read copies). The state starts at zero, queued on `stream`.
  Momentum(Backend &backend, const Config &config, bool dense_path, bool staged,
           std::size_t elements, Stream stream)
      : backend_(&backend),
        staged_(staged),
        elements_(elements),
        momentum_(static_cast<T>(config.momentum)) {
    const bool on = config.momentum > 0.0 &&
                    !(dense_path && config.momentum_result == MomentumResult::gradient);
    keeps_velocity_ = on && elements > 0;
    keeps_last_update_ = keeps_velocity_ && config.momentum_result == MomentumResult::gradient;
    if (keeps_velocity_) {
      velocity_ = BackendArray<T>(backend, elements);
      velocity_next_ = BackendArray<T>(backend, elements);
      backend.fill_zero(velocity_.data(), elements, stream);
    }
    if (keeps_last_update_) {
      previous_ = BackendArray<T>(backend, elements);
      backend.fill_zero(previous_.data(), elements, stream);
    }
  }

  bool keeps_velocity() const { return keeps_velocity_; }
  bool keeps_last_update() const { return keeps_last_update_; }

  /// What the call compresses in place of `send`: this call's velocity (momentum * velocity +
  /// send), in a second buffer that commit() makes the request's, so that a failed call
  /// leaves the velocity as it was. `send` itself without a velocity. (The dense path's; the
  /// compressed calls have the selection pass make it: velocity_update().)
  const T *update(const T *send, Stream stream) {
    if (!keeps_velocity_) return send;
    backend_->momentum_update(send, velocity_.data(), momentum_, velocity_next_.data(), elements_,
                              stream);
    return velocity_next_.data();
  }
  /// The same update for the compressor to make (nothing without a velocity).
  VelocityUpdate<T> velocity_update() {
    if (!keeps_velocity_) return VelocityUpdate<T>{};
    return VelocityUpdate<T>{velocity_.data(), momentum_, velocity_next_.data()};
  }
  /// The call succeeded: its velocity becomes the request's, zeroed at the `sent` entries
  /// (DGC's momentum factor masking: the sent update already carries that velocity; without it
  /// the correction did not help: docs/performance.md, "Training").
  void commit_masking(const WireIndex *sent, std::size_t sent_count, Stream stream) {
    if (!keeps_velocity_) return;
    std::swap(velocity_, velocity_next_);
    backend_->scatter_zero(sent, sent_count, velocity_.data(), stream);
  }
  /// ... and on the dense path, which sent every entry as it is, unmasked.
  void commit() {
    if (keeps_velocity_) std::swap(velocity_, velocity_next_);
  }
  /// dct_momentum_result=gradient: `result` (the update) becomes r = update - m * last update,
  /// whose heavy-ball momentum (b = m b + r, from b = 0) is the update itself; the update is
  /// kept as the next call's last update.
  void unroll(T *result, Stream stream) {
    if (keeps_last_update_)
      backend_->momentum_unroll(result, previous_.data(), momentum_, elements_, stream);
  }

  /// The velocity and last update in host memory (nullptr where none is kept).
  const T *velocity_on_host(Stream stream) const {
    return keeps_velocity_ ? on_host(velocity_, velocity_host_, stream) : nullptr;
  }
  const T *last_update_on_host(Stream stream) const {
    return keeps_last_update_ ? on_host(previous_, previous_host_, stream) : nullptr;
  }
  /// The live velocity where it is host memory a load may read into, else nullptr.
  T *loadable_velocity() { return !keeps_velocity_ || staged_ ? nullptr : velocity_.data(); }
  /// Replaces the velocity / last update (`elements` each; ignored where none is kept). A load
  /// that read straight into the velocity passes it back.
  void restore_velocity(const void *velocity, Stream stream) {
    if (keeps_velocity_ && velocity != velocity_.data())
      backend_->copy(velocity_.data(), velocity, elements_ * sizeof(T), stream);
  }
  void restore_last_update(const void *update, Stream stream) {
    if (keeps_last_update_) backend_->copy(previous_.data(), update, elements_ * sizeof(T), stream);
  }

 private:
  // `state` where checkpoints can read it: itself, or (staged) a copy in `host`.
  const T *on_host(const BackendArray<T> &state, std::vector<T> &host, Stream stream) const {
    if (!staged_) return state.data();
    host.resize(elements_);
    backend_->copy(host.data(), state.data(), elements_ * sizeof(T), stream);
    return host.data();
  }

  Backend *backend_;
  bool staged_;
  std::size_t elements_;
  T momentum_;
  bool keeps_velocity_ = false;
  bool keeps_last_update_ = false;
  BackendArray<T> velocity_, velocity_next_;  // committed and this call's
  mutable std::vector<T> velocity_host_;      // velocity_on_host() of a staged request
  BackendArray<T> previous_;                  // the last update
  mutable std::vector<T> previous_host_;      // last_update_on_host() of a staged request
};

}  // namespace dct::detail
