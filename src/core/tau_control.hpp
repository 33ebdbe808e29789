// How tau moves between exact selections (dct_tau_control). docs/algorithms.md ("Holding the
// density") gives the measurements behind these choices.
//
// Why a reused tau drifts (the paper's schedule, dct_tau_control=fixed): with error feedback,
// entries just below tau stay in the residual and grow, so a tau that kept k entries on the
// call it was estimated keeps more and more on later calls (measured: docs/internals.md,
// measured reasons), and a tau taken while the residual is still empty (the first
// call) is far too small for the calls after it. Correcting tau from the kept count does not
// fix this cheaply: near the threshold the residual piles up, so the kept count reacts to tau
// with a slope of ~sqrt(1/density) on the call itself and the opposite way ~1/density calls
// later; a feedback loop fast enough for the first is unstable with the second at low density
// (measured: docs/algorithms.md).
//
// So DCT-DP's adaptive control (the default) keeps the exact top k of |acc| on every call and
// makes that cheap (gradient_compressor.cpp):
//   1. the selection pass (the one pass every call makes: Backend::select) stores acc in the
//      residual and lists the *candidates* |acc| >= floor, where the floor aims at about 3k;
//   2. among the m candidates (O(m) work: Backend::trim_candidates) the k of largest
//      magnitude are sent, ties at the k-th to the lowest indices; the residual keeps acc for
//      the others, untouched;
//   3. the next call's floor is the 3k-th largest candidate magnitude of this one (when fewer
//      than 3k came, this floor lowered in proportion to the shortfall, down to 0.8x), a
//      quantile of the slowly moving distribution of |acc|; it feeds nothing back into what
//      is sent, so it cannot oscillate;
//   4. only when fewer than k candidates come (the gradients grew several-fold in one call)
//      or more than the list holds is the top k selected over the tensor (its residual then
//      holds acc), which also sets the next floor exactly; the first call's floor is selected
//      over the tensor before its pass.
// The result is bitwise what an exact selection on every call gives.
//
// DCT-MP's `threshold` selection has no error feedback, so the kept count follows tau
// without delay: there a bounded multiplicative correction holds the density, with an exact
// selection when a call leaves the band (`out_of_band`, `next`).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace dct::detail::tau_control {

/// The target kept count for `density` of `n` (n > 0): ceil(density n), in [1, n].
inline std::size_t target(double density, std::size_t n) {
  const auto k = static_cast<std::size_t>(std::ceil(density * static_cast<double>(n)));
  return std::clamp<std::size_t>(k, 1, n);
}

/// How many candidates the floor aims at: 3x the target, within the tensor. 2x let a steep
/// drop of the gradients (a loss spike ending) fall below k on some of the following calls
/// while the large residuals drained; 3x and 4x on none (measured: docs/algorithms.md).
inline std::size_t candidates(std::size_t k, std::size_t n) {
  return std::min(3 * k, n);
}

/// Factor applied to a floor that let only k candidates through, or fewer (fewer than it aims
/// at: in proportion, see next_floor).
inline constexpr double kWiden = 0.8;

/// The floor for the next call, once `finite` (> k) finite candidates came through `floor`:
/// the aim-th largest finite candidate magnitude (`aim_th()`, asked only when that many came),
/// else `floor` lowered in proportion to the shortfall (kWiden when only k came). Calls fall
/// just short of the aim as often as they pass it, and a flat kWiden then let several times the
/// aim through on the next call (measured: docs/algorithms.md).
template <typename AimTh>
double next_floor(double floor, std::size_t finite, std::size_t k, std::size_t aim,
                  AimTh &&aim_th) {
  if (aim <= k) return floor * kWiden;
  if (finite >= aim) return aim_th();
  const double shortfall = double(aim - finite) / double(aim - k);
  return floor * (1.0 - (1.0 - kWiden) * shortfall);
}

/// DCT-MP: relative half-width of the band of kept counts accepted without an exact
/// selection (the promise is +-25%; ties and the rounding of small k stay inside it).
inline constexpr double kBand = 0.2;
/// DCT-MP: exponent of the multiplicative correction, and the largest factor of one step.
/// Below 1 / the tail's slope (3 to 6 at keep 0.1 to 0.01 for Gaussian-like rows), so one
/// step cannot overshoot. As an integral control it trails a steady drift of the activations'
/// scale by drift / kGain in log count: drifts under ~5% per call stay inside the band.
inline constexpr double kGain = 0.3;
inline constexpr double kMaxStep = 1.25;

/// Whether a call that kept `kept` entries for the target `k` needs an exact selection.
/// `tau_is_zero`: every nonzero entry is kept already, so a count below the band only says
/// that there are fewer nonzeros than k.
inline bool out_of_band(std::size_t kept, std::size_t k, bool tau_is_zero) {
  const double ratio = static_cast<double>(kept) / static_cast<double>(k);
  if (ratio > 1.0 + kBand) return true;
  return ratio < 1.0 - kBand && !tau_is_zero;
}

/// The threshold for the next call after a call with `tau` kept `kept` entries for target `k`.
inline double next(double tau, std::size_t kept, std::size_t k) {
  if (!(tau > 0.0) || !std::isfinite(tau)) return tau;  // 0, Inf, NaN: the band decides
  const double ratio = std::max(static_cast<double>(kept), 0.5) / static_cast<double>(k);
  return tau * std::clamp(std::pow(ratio, kGain), 1.0 / kMaxStep, kMaxStep);
}

}  // namespace dct::detail::tau_control
