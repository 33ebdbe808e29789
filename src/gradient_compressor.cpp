#include "gradient_compressor.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "error.hpp"
#include "threshold.hpp"

namespace dct::detail {

template <typename T>
GradientCompressor<T>::GradientCompressor(Backend &backend, const Config &config,
                                          std::size_t elements, bool staged, Stream stream)
    : backend_(&backend), config_(config), elements_(elements), staged_(staged) {
  residual_ = BackendArray<T>(backend, elements);
  backend.fill_zero(residual_.data(), elements, stream);
}

// acc = send + residual; the kept entries into idx_/val_ (dct_tau_control: fixed re-selects
// tau every `interval` calls; adaptive keeps the exact top k of every call through a floor,
// see tau_control.hpp). At every point where it can throw, kept_ counts exactly the entries
// taken out of the residual.
template <typename T>
typename GradientCompressor<T>::Selection GradientCompressor<T>::compress(const T *send,
                                                                          MPI_Count call,
                                                                          Stream stream) {
  stream_ = stream;
  const std::size_t n = elements();
  kept_ = 0;
  previous_tau_ = tau_;
  reestimated_ = false;
  try {
    if (n > 0) {
      const std::size_t k = tau_control::target(config_.density, n);
      if (adaptive())
        take_top_k(send, k, call);
      else {
        if (call % config_.interval == 0) send = reestimate(send, k, call);
        if (idx_.size() == 0) reserve_entries(k, 0);
        take_entries(send, tau_);
        copy_entries_to_host();
      }
    }
    quantise_signs();
  } catch (...) {
    undo(stream);
    throw;
  }
  return Selection{adaptive() ? call_tau_ : static_cast<double>(tau_), reestimated_};
}

// Puts this call's sent entries back into the residual (there: acc - sent, exactly; with
// dct_values=sign the residual there is set to acc, which val_ still holds).
template <typename T>
void GradientCompressor<T>::undo(Stream stream) {
  stream_ = stream;
  if (kept_ > 0 && config_.values == ValueCoding::sign)
    backend_->scatter_zero(idx_.data(), kept_, residual_.data(), stream_);
  if (kept_ > 0) backend_->scatter_add(idx_.data(), val_.data(), kept_, residual_.data(), stream_);
  kept_ = 0;
  tau_ = previous_tau_;
}

// The adaptive floor moves only with a completed call, and lives in tau_ so that a checkpoint
// saves what the next call uses.
template <typename T>
void GradientCompressor<T>::commit() {
  if (adaptive()) tau_ = next_floor_;
}

template <typename T>
const T *GradientCompressor<T>::outgoing_values() const {
  return config_.values == ValueCoding::sign ? sign_values_.data() : host_values();
}

template <typename T>
const T *GradientCompressor<T>::residual_on_host(Stream stream) const {
  if (!staged_) return residual_.data();
  residual_host_.resize(elements());
  backend_->copy(residual_host_.data(), residual_.data(), elements() * sizeof(T), stream);
  return residual_host_.data();
}

template <typename T>
void GradientCompressor<T>::restore(const void *residual, double tau, Stream stream) {
  if (elements() > 0) backend_->copy(residual_.data(), residual, elements() * sizeof(T), stream);
  tau_ = static_cast<T>(tau);
}

// fp16/bf16: the candidates hold acc rounded, and the trim compares those rounded values.
template <typename T>
bool GradientCompressor<T>::rounds_values() const {
  return config_.values == ValueCoding::fp16 || config_.values == ValueCoding::bf16;
}

// Adaptive control: candidates above the floor tau_, trimmed to the top k; the floor is
// selected exactly on the first call and whenever fewer than k finite candidates come (NaN
// and Inf are sent but do not count toward k).
template <typename T>
void GradientCompressor<T>::take_top_k(const T *send, std::size_t k, MPI_Count call) {
  const std::size_t n = elements();
  const std::size_t aim = tau_control::candidates(k, n);
  if (call == 0) send = reestimate(send, aim, call);
  if (idx_.size() == 0) reserve_entries(aim, 0);
  take_entries(send, tau_);
  copy_entries_to_host();
  std::size_t finite = tau_control::count_finite(host_values(), kept_);
  if (tau_ > T(0) && finite < k) {
    // Put them back (the residual holds acc again, exactly) and select the floor anew.
    backend_->scatter_add(idx_.data(), val_.data(), kept_, residual_.data(), stream_);
    kept_ = 0;
    reestimate(nullptr, aim, call);
    take_entries(nullptr, tau_);
    copy_entries_to_host();
    finite = tau_control::count_finite(host_values(), kept_);
  }
  const tau_control::Trim trim = trim_to(k, aim, finite);
  call_tau_ = trim.tau;
  next_floor_ = static_cast<T>(trim.next_floor);
}

// Keeps the top k of the kept_ candidates (tau_control::trim) and puts the others back into
// the residual. Host work on the entries only (GPU backends: trim_on_device). The host
// copies are up to date. `finite`: how many of the candidates are finite.
template <typename T>
tau_control::Trim GradientCompressor<T>::trim_to(std::size_t k, std::size_t aim,
                                                 std::size_t finite) {
  if (staged_ && !rounds_values()) return trim_on_device(k, aim, finite);
  const std::size_t m = kept_;
  dropped_idx_.resize(m > k ? m - k : 0);
  dropped_val_.resize(dropped_idx_.size());
  WireIndex *idx = staged_ ? idx_host_.data() : idx_.data();
  T *val = staged_ ? val_host_.data() : val_.data();
  const tau_control::Trim trim =
      tau_control::trim(idx, val, m, k, aim, static_cast<double>(tau_), magnitudes_,
                        dropped_idx_.data(), dropped_val_.data());
  const std::size_t dropped = m - trim.kept;
  if (dropped == 0) return trim;
  const WireIndex *back_idx = dropped_idx_.data();
  const T *back_val = dropped_val_.data();
  if (staged_) {  // fp16/bf16 on a GPU backend: the trimmed lists go back to the device
    if (dropped_device_idx_.size() < dropped) {
      dropped_device_idx_ = BackendArray<WireIndex>(*backend_, dropped + dropped / 4);
      dropped_device_val_ = BackendArray<T>(*backend_, dropped_device_idx_.size());
    }
    backend_->copy(dropped_device_idx_.data(), back_idx, dropped * sizeof(WireIndex), stream_);
    backend_->copy(dropped_device_val_.data(), back_val, dropped * sizeof(T), stream_);
    backend_->copy(idx_.data(), idx, trim.kept * sizeof(WireIndex), stream_);
    backend_->copy(val_.data(), val, trim.kept * sizeof(T), stream_);
    back_idx = dropped_device_idx_.data();
    back_val = dropped_device_val_.data();
  }
  backend_->scatter_add(back_idx, back_val, dropped, residual_.data(), stream_);
  kept_ = trim.kept;
  return trim;
}

// The same trim on a GPU backend, for native and sign values (the candidates hold acc
// itself), without taking the candidates through host memory (on an H100 the host trim of
// ~3k candidates took 137 of the 146 ms of a 256 MiB call): every candidate goes back into
// the residual, which then holds acc exactly; the k-th largest finite |acc| of the tensor is
// tau (every entry at or above the floor is a candidate, so it is the k-th largest candidate,
// and the aim-th likewise), and the filter at tau takes the entries the host trim keeps, in
// index order: the same bits as a host request (mpi.device_buffers).
template <typename T>
tau_control::Trim GradientCompressor<T>::trim_on_device(std::size_t k, std::size_t aim,
                                                        std::size_t finite) {
  const std::size_t m = kept_;
  tau_control::Trim trim = tau_control::untrimmed(m, static_cast<double>(tau_));
  if (finite <= k) return trim;
  const std::size_t non_finite = m - finite, n = elements();
  backend_->scatter_add(idx_.data(), val_.data(), m, residual_.data(), stream_);
  kept_ = 0;
  const T tau = backend_->kth_largest_abs(nullptr, residual_.data(), n, k + non_finite, stream_);
  trim.next_floor = tau_control::next_floor(trim.tau, finite, k, aim, [&] {
    return static_cast<double>(
        backend_->kth_largest_abs(nullptr, residual_.data(), n, aim + non_finite, stream_));
  });
  take_entries(nullptr, tau);
  copy_entries_to_host();
  trim.kept = kept_;
  trim.tau = static_cast<double>(tau);
  return trim;
}

// On a GPU backend, the kept entries into their pinned host copies (the exchanges' input).
template <typename T>
void GradientCompressor<T>::copy_entries_to_host() {
  if (!staged_ || kept_ == 0) return;
  backend_->copy(idx_host_.data(), idx_.data(), kept_ * sizeof(WireIndex), stream_);
  backend_->copy(val_host_.data(), val_.data(), kept_ * sizeof(T), stream_);
}

// tau_ = the k-th largest finite |send + residual| (send nullptr: the residual alone).
// NaN and Inf rank above every number in the selection; when k or more of them make it
// infinite, one filter pass at tau = Inf counts them (folding `send` into the residual) and
// the selection is taken again with their number added to k. Returns what the next filter
// reads: `send`, or nullptr once it is in the residual.
template <typename T>
const T *GradientCompressor<T>::reestimate(const T *send, std::size_t k, MPI_Count call) {
  const std::uint64_t seed = 0x5eed0000ull + static_cast<std::uint64_t>(call);
  tau_ = estimate_threshold(*backend_, send, residual_.data(), elements(), k,
                            config_.sampled_threshold,
                            static_cast<std::size_t>(config_.sample_size), seed, sample_, stream_);
  reestimated_ = true;
  if (tau_control::finite(tau_)) return send;
  tau_ = std::numeric_limits<T>::infinity();
  take_entries(send, tau_);
  const std::size_t non_finite = kept_;
  backend_->scatter_add(idx_.data(), val_.data(), kept_, residual_.data(), stream_);
  kept_ = 0;
  tau_ = backend_->kth_largest_abs(nullptr, residual_.data(), elements(),
                                   std::min(elements(), k + non_finite), stream_);
  if (!tau_control::finite(tau_)) tau_ = T(0);  // nothing finite: keep every nonzero
  return nullptr;
}

// The fused filter of acc = send + residual (send nullptr: the residual alone) with
// `threshold` into idx_/val_, growing them when more entries pass than they hold.
template <typename T>
void GradientCompressor<T>::take_entries(const T *send, T threshold) {
  const std::size_t n = elements();
  const std::size_t capacity = idx_.size();
  const std::size_t found = backend_->filter(send, residual_.data(), n, threshold, config_.values,
                                             idx_.data(), val_.data(), capacity, stream_);
  kept_ = found < capacity ? found : capacity;
  if (found > capacity) {
    // The entries past the capacity were left in the residual; collect them in a second pass.
    reserve_entries(found, capacity);
    kept_ += backend_->filter(static_cast<const T *>(nullptr), residual_.data(), n, threshold,
                              config_.values, idx_.data() + capacity, val_.data() + capacity,
                              found - capacity, stream_);
    require(kept_ == found, DCT_ERR_INTERNAL, "filter overflow pass lost entries");
  }
}

// dct_values=sign: the kept entries travel as +-m, m the mean magnitude of the finite kept
// values (EF-SignSGD's scaled sign, the m that minimises the block's squared error), and
// acc - (+-m) goes back into the residual for error feedback to send later. val_ keeps acc
// (undo restores it); the exchange reads sign_values_. A non-finite kept value makes m
// non-finite (NaN before Inf), so the sum is non-finite on every rank as with the other
// codings, and that entry leaves the residual as sent.
template <typename T>
void GradientCompressor<T>::quantise_signs() {
  if (config_.values != ValueCoding::sign || kept_ == 0) return;
  const T *val = host_values();
  double sum = 0;
  std::size_t finite = 0;
  bool nan = false, inf = false;
  for (std::size_t i = 0; i < kept_; ++i) {
    if (std::isfinite(val[i])) {
      sum += std::fabs(double(val[i]));
      ++finite;
    } else {
      nan = nan || std::isnan(val[i]);
      inf = inf || std::isinf(val[i]);
    }
  }
  const T mean = finite > 0 ? static_cast<T>(sum / double(finite)) : T(0);
  const T wire = nan   ? std::numeric_limits<T>::quiet_NaN()
                 : inf ? std::numeric_limits<T>::infinity()
                       : mean;
  sign_values_.resize(kept_);
  sign_error_.resize(kept_);
  for (std::size_t i = 0; i < kept_; ++i) {
    sign_values_[i] = std::signbit(val[i]) ? -wire : wire;
    const T sent = std::signbit(val[i]) ? -mean : mean;
    sign_error_[i] = std::isfinite(val[i]) ? val[i] - sent : T(0);
  }
  const T *error = sign_error_.data();
  if (staged_) {
    if (sign_error_device_.size() < kept_) sign_error_device_ = BackendArray<T>(*backend_, kept_);
    backend_->copy(sign_error_device_.data(), error, kept_ * sizeof(T), stream_);
    error = sign_error_device_.data();
  }
  backend_->scatter_add(idx_.data(), error, kept_, residual_.data(), stream_);
}

// Room for `entries` kept entries (and a margin), keeping the first `keep` already written.
template <typename T>
void GradientCompressor<T>::reserve_entries(std::size_t entries, std::size_t keep) {
  const std::size_t capacity = entries + entries / 4 + 16;
  if (idx_.size() == 0) {
    idx_ = BackendArray<WireIndex>(*backend_, capacity);
    val_ = BackendArray<T>(*backend_, capacity);
  }
  idx_.grow(capacity, keep);
  val_.grow(capacity, keep);
  if (!staged_) return;
  idx_host_ = BackendArray<WireIndex>(*backend_, idx_.size(), true);
  val_host_ = BackendArray<T>(*backend_, val_.size(), true);
}

template class GradientCompressor<float>;
template class GradientCompressor<double>;

}  // namespace dct::detail
