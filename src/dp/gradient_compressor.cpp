#include "dp/gradient_compressor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/error.hpp"
#include "dp/threshold.hpp"

namespace dct::detail {

template <typename T>
GradientCompressor<T>::GradientCompressor(Backend &backend, const Config &config,
                                          std::size_t elements, bool staged, Stream stream)
    : backend_(&backend), config_(config), elements_(elements), staged_(staged) {
  residual_ = BackendArray<T>(backend, elements);
  backend.fill_zero(residual_.data(), elements, stream);
}

// acc = send + residual; the kept entries into idx_/val_. adaptive: the exact top k of every
// call, the candidates taken above a floor that follows the distribution of |acc|
// (tau_control.hpp); fixed: tau re-selected every `interval` calls (the top k exactly on those
// calls) and every entry at or above it sent in between. Until keep() ran, the residual holds
// acc everywhere and kept_ is 0: every exception leaves the input conserved there.
template <typename T>
typename GradientCompressor<T>::Selection GradientCompressor<T>::compress(
    const T *send, const VelocityUpdate<T> &velocity, MPI_Count call, Stream stream) {
  stream_ = stream;
  velocity_ = velocity;
  const std::size_t n = elements();
  kept_ = 0;
  nonfinite_ = 0;
  previous_tau_ = tau_;
  reestimated_ = false;
  pending_this_call_ = false;
  on_host_ = false;
  try {
    if (n > 0) {
      const std::size_t k = tau_control::target(config_.density_at(call), n);
      // A call that estimates its threshold reads the update before the selection pass.
      if (adaptive() ? call == 0 : call % config_.interval == 0) send = update_velocity(send);
      if (adaptive()) {
        const std::size_t aim = tau_control::candidates(k, n);
        const T floor = call == 0 ? estimate(send, aim, call) : tau_;
        const TopK top = take_top_k(send, k, aim, floor);
        call_tau_ = top.tau;
        next_floor_ = static_cast<T>(top.next_floor);
      } else if (call % config_.interval != 0) {
        take_all(send, tau_);
        call_tau_ = static_cast<double>(tau_);
      } else if (config_.sampled_threshold &&
                 static_cast<std::size_t>(config_.sample_size) < n / 32) {
        tau_ = estimate(send, k, call);  // an estimate: every entry at or above it goes
        take_all(send, tau_);
        call_tau_ = static_cast<double>(tau_);
      } else {
        tau_ = static_cast<T>(take_top_k(send, k, k, estimate(send, k, call)).tau);
        reestimated_ = true;
        call_tau_ = static_cast<double>(tau_);
      }
    }
    quantise_signs();
  } catch (...) {
    undo(stream);
    throw;
  }
  return Selection{call_tau_, reestimated_};
}

// Puts this call's sent entries back into the residual: while their remainders are pending it
// holds acc there already (the selection pass wrote it); once written, acc - sent, exactly (with
// dct_values=sign the residual there is set to acc, which val_ still holds).
template <typename T>
void GradientCompressor<T>::undo(Stream stream) {
  stream_ = stream;
  if (pending_this_call_) {
    pending_ = 0;
    pending_this_call_ = false;
  } else if (kept_ > 0) {
    if (config_.values == ValueCoding::sign)
      backend_->scatter_zero(idx_.data(), kept_, residual_.data(), stream_);
    backend_->scatter_add(idx_.data(), val_.data(), kept_, residual_.data(), stream_);
  }
  kept_ = 0;
  tau_ = previous_tau_;
}

template <typename T>
SparseList<T> GradientCompressor<T>::pending() const {
  if (pending_ == 0) return SparseList<T>{};
  return SparseList<T>{idx_.data(), rounds_remainders() ? remainders_.data() : nullptr, pending_};
}

template <typename T>
void GradientCompressor<T>::write_pending(Stream stream) const {
  if (pending_ == 0) return;
  backend_->scatter_zero(idx_.data(), pending_, residual_.data(), stream);
  if (rounds_remainders())
    backend_->scatter_add(idx_.data(), remainders_.data(), pending_, residual_.data(), stream);
  pending_ = 0;
  pending_this_call_ = false;
}

template <typename T>
T *GradientCompressor<T>::residual(Stream stream) {
  write_pending(stream);
  return residual_.data();
}

// The adaptive floor moves only with a completed call, and lives in tau_ so that a checkpoint
// saves what the next call uses.
template <typename T>
void GradientCompressor<T>::commit() {
  if (adaptive()) tau_ = next_floor_;
}

template <typename T>
const T *GradientCompressor<T>::outgoing_values() const {
  if (config_.values != ValueCoding::sign) return host_values();
  if (!staged_) return sign_values_.data();
  if (!signs_on_host_ && kept_ > 0) {
    if (sign_values_host_.size() < kept_)
      sign_values_host_ = BackendArray<T>(*backend_, sign_values_.size(), true);
    backend_->copy(sign_values_host_.data(), sign_values_.data(), kept_ * sizeof(T), stream_);
    signs_on_host_ = true;
  }
  return sign_values_host_.data();
}

template <typename T>
const T *GradientCompressor<T>::residual_on_host(Stream stream) const {
  write_pending(stream);
  if (!staged_) return residual_.data();
  residual_host_.resize(elements());
  backend_->copy(residual_host_.data(), residual_.data(), elements() * sizeof(T), stream);
  return residual_host_.data();
}

template <typename T>
void GradientCompressor<T>::restore(const void *residual, double tau, Stream stream) {
  pending_ = 0;  // the checkpoint's residual replaces it whole
  pending_this_call_ = false;
  // (A load that read straight into the residual passes it back.)
  if (elements() > 0 && residual != residual_.data())
    backend_->copy(residual_.data(), residual, elements() * sizeof(T), stream);
  tau_ = static_cast<T>(tau);
}

// The k-th largest |send + residual| (send nullptr: the residual alone), exact or from a sample
// (dct_threshold); NaN and Inf rank above every number, so with k or more of them it is +Inf.
template <typename T>
T GradientCompressor<T>::estimate(const T *send, std::size_t k, MPI_Count call) {
  const std::uint64_t seed = 0x5eed0000ull + static_cast<std::uint64_t>(call);
  reestimated_ = true;
  write_pending(stream_);  // it reads the residual before the selection pass
  return estimate_threshold(*backend_, send, residual_.data(), elements(), k,
                            config_.sampled_threshold,
                            static_cast<std::size_t>(config_.sample_size), seed, sample_, stream_);
}

// The exact top k finite entries of acc (ties to the lowest indices) and every NaN/Inf, from the
// candidates at or above `floor`: one pass over the tensor, then O(candidates) on the list.
// When the floor let through fewer than k finite candidates (the gradients grew several-fold)
// the selection is taken over the tensor.
template <typename T>
typename GradientCompressor<T>::TopK GradientCompressor<T>::take_top_k(const T *send, std::size_t k,
                                                                       std::size_t aim, T floor) {
  // Room for twice the aim: calls pass it by up to a third on average (docs/performance.md).
  // More come in the first calls of error feedback (up to ~12 times the aim at density 0.001:
  // tests/mpi/test_tau_control.cpp) and when many entries tie at the floor (small integers,
  // constant tensors): the list grows to hold them (the memory is kept for later calls) and
  // the residual, which holds acc now, is read once more.
  if (candidate_idx_.size() == 0) reserve_candidates(2 * aim);
  Selected found = select(send, floor, kEveryTie);
  if (found.count > candidate_idx_.size()) {
    reserve_candidates(found.count);
    found = select(static_cast<const T *>(nullptr), floor, kEveryTie);
  }
  if (idx_.size() < k + found.nonfinite) reserve_kept(k + found.nonfinite);
  const Trimmed<T> trimmed = backend_->trim_candidates(
      candidate_idx_.data(), candidate_val_.data(), found.count, k, aim, config_.values,
      idx_.data(), val_.data(), rounds_remainders() ? remainders_.data() : nullptr, stream_);
  const double floor_value = static_cast<double>(floor);
  if (floor > T(0) && trimmed.finite < k) return take_top_k_of_tensor(k, aim, found.nonfinite);
  TopK top;
  if (trimmed.finite <= k) {  // nothing to cut: every candidate goes, the next floor is lower
    keep(found.count, floor, kEveryTie, found.count);
    top.tau = trimmed.finite == k ? static_cast<double>(trimmed.kth) : floor_value;
    top.next_floor = floor_value * tau_control::kWiden;
    return top;
  }
  kept_ = trimmed.kept;
  pending_ = kept_;
  pending_this_call_ = true;
  top.tau = static_cast<double>(trimmed.kth);
  top.next_floor = tau_control::next_floor(floor_value, trimmed.finite, k, aim,
                                           [&] { return static_cast<double>(trimmed.aimth); });
  return top;
}

// take_top_k over the whole tensor, whose residual holds acc: the (k + nonfinite)-th largest
// |acc| is the k-th largest finite one, and a selection limited to k at it takes exactly the
// top k with ties to the lowest indices. The next floor is the aim-th largest finite |acc|.
template <typename T>
typename GradientCompressor<T>::TopK GradientCompressor<T>::take_top_k_of_tensor(
    std::size_t k, std::size_t aim, std::size_t nonfinite) {
  const std::size_t n = elements();
  const T *const none = nullptr;
  reestimated_ = true;
  const auto largest = [&](std::size_t rank) {
    return rank <= n ? backend_->kth_largest_abs(none, residual_.data(), n, rank, stream_) : T(0);
  };
  const T tau = largest(k + nonfinite);  // 0: fewer than k nonzero finite entries, take them all
  TopK top;
  top.tau = static_cast<double>(tau);
  top.next_floor = static_cast<double>(largest(aim + nonfinite));
  if (candidate_idx_.size() < k + nonfinite) reserve_candidates(k + nonfinite);
  const Selected found = select(none, tau, tau > T(0) ? k : kEveryTie);
  require(found.count <= candidate_idx_.size(), DCT_ERR_INTERNAL,
          "the exact selection found more entries than it may keep");
  keep(found.count, tau, kEveryTie, found.count);
  return top;
}

// Every entry at or above `threshold` (dct_tau_control=fixed between its selections, and its
// sampled ones), the candidate list grown when more came than it holds.
template <typename T>
void GradientCompressor<T>::take_all(const T *send, T threshold) {
  const T *const none = nullptr;
  if (candidate_idx_.size() == 0)
    reserve_candidates(tau_control::target(config_.density, elements()));
  Selected found = select(send, threshold, kEveryTie);
  if (found.count > candidate_idx_.size()) {  // the residual holds acc now: select again
    reserve_candidates(found.count);
    found = select(none, threshold, kEveryTie);
  }
  keep(found.count, threshold, kEveryTie, found.count);
}

// The candidates that keep_entry(acc, tau) with `limit` selects (`kept` of them) become this
// call's entries, rounded for the wire; what the wire does not carry of them stays home, as
// the next selection pass's pending writes.
template <typename T>
void GradientCompressor<T>::keep(std::size_t candidates, T tau, std::size_t limit,
                                 std::size_t kept) {
  if (idx_.size() < kept) reserve_kept(kept);
  kept_ = backend_->keep_top(candidate_idx_.data(), candidate_val_.data(), candidates, tau, limit,
                             config_.values, idx_.data(), val_.data(),
                             rounds_remainders() ? remainders_.data() : nullptr, stream_);
  pending_ = kept_;
  pending_this_call_ = true;
}

// The selection pass of this call over the residual (send nullptr: it holds acc), into the
// candidate list; the first pass of a call does the previous call's pending writes.
template <typename T>
Selected GradientCompressor<T>::select(const T *send, T threshold, std::size_t limit) {
  Selected found;
  if (send != nullptr && velocity_.out != nullptr) {
    found = backend_->select_with_momentum(send, velocity_.velocity, velocity_.momentum,
                                           velocity_.out, residual_.data(), elements(), threshold,
                                           limit, candidate_idx_.data(), candidate_val_.data(),
                                           candidate_idx_.size(), pending(), stream_);
    velocity_ = VelocityUpdate<T>{};
  } else {
    found = backend_->select(send, residual_.data(), elements(), threshold, limit,
                             candidate_idx_.data(), candidate_val_.data(), candidate_idx_.size(),
                             pending(), stream_);
  }
  pending_ = 0;
  nonfinite_ = found.nonfinite;  // every pass of a call sees the same acc: the last one's count
  return found;
}

template <typename T>
const T *GradientCompressor<T>::update_velocity(const T *send) {
  if (velocity_.out == nullptr) return send;
  backend_->momentum_update(send, velocity_.velocity, velocity_.momentum, velocity_.out, elements(),
                            stream_);
  const T *updated = velocity_.out;
  velocity_ = VelocityUpdate<T>{};
  return updated;
}

// On a GPU backend, the kept entries into their pinned host copies (the exchanges' input), once
// per call and only when something reads them there.
template <typename T>
void GradientCompressor<T>::copy_entries_to_host() const {
  if (!staged_ || kept_ == 0 || on_host_) return;
  backend_->copy(idx_host_.data(), idx_.data(), kept_ * sizeof(WireIndex), stream_);
  backend_->copy(val_host_.data(), val_.data(), kept_ * sizeof(T), stream_);
  on_host_ = true;
}

// dct_values=sign (core/sign_values.hpp), on the backend: +-w into sign_values_, what stays home
// (acc - (+-m), the entries' pending writes) into remainders_; val_ keeps acc (undo restores
// it). The exchanges read sign_values_, or its host copy.
template <typename T>
void GradientCompressor<T>::quantise_signs() {
  if (config_.values != ValueCoding::sign || kept_ == 0) return;
  sign_values_.reserve_growing(*backend_, kept_);
  backend_->quantise_signs(val_.data(), kept_, sign_values_.data(), remainders_.data(), stream_);
  signs_on_host_ = false;
}

// Room for `entries` candidates (and a margin), or kept entries. Called when the list holds
// nothing this call still needs.
template <typename T>
void GradientCompressor<T>::reserve_candidates(std::size_t entries) {
  const std::size_t capacity = std::min(elements(), entries + entries / 4 + 16);
  if (capacity <= candidate_idx_.size()) return;
  candidate_idx_ = BackendArray<WireIndex>(*backend_, capacity);
  candidate_val_ = BackendArray<T>(*backend_, capacity);
}
template <typename T>
void GradientCompressor<T>::reserve_kept(std::size_t entries) {
  const std::size_t capacity = std::min(elements(), entries + entries / 4 + 16);
  if (capacity <= idx_.size()) return;
  write_pending(stream_);  // they live in the lists replaced here
  idx_ = BackendArray<WireIndex>(*backend_, capacity);
  val_ = BackendArray<T>(*backend_, capacity);
  if (rounds_remainders()) remainders_ = BackendArray<T>(*backend_, capacity);
  if (!staged_) return;
  idx_host_ = BackendArray<WireIndex>(*backend_, capacity, true);
  val_host_ = BackendArray<T>(*backend_, capacity, true);
}

template class GradientCompressor<float>;
template class GradientCompressor<double>;

}  // namespace dct::detail
