// How a call picks its threshold tau from the kernels (dct_threshold): the exact selection,
// or an estimate from a sample, and the rule that decides which one pays. Policy over the
// backend interface (core/compute_backend.hpp), which knows nothing of it.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/compute_backend.hpp"
#include "core/internal_api.hpp"

namespace dct::detail {

/// The k-th largest |acc| estimated from the m entries at sample_position(j, m, n, seed): the
/// ceil(k m / n)-th largest among them (NaN ranked as +Inf), O(m). `scratch` is host memory,
/// resized to m. The achieved density is within 4 sqrt((1 - p) / (p m)) of p = k / n
/// (relative, 4 standard deviations of a sample quantile) for any distribution of |acc|
/// without ties.
template <typename T>
DCT_INTERNAL_API T sampled_kth_largest_abs(Backend &backend, const T *send, const T *residual,
                                           std::size_t n, std::size_t k, std::size_t m,
                                           std::uint64_t seed, std::vector<T> &scratch,
                                           Stream stream);

/// tau for a call, as dct_threshold says: the exact k-th largest |acc|, or with `sampled` the
/// estimate from `sample` entries, used only where the sample is under 1/32 of the tensor: a
/// sampled entry (a random gather, then a selection among the sample) costs many times an
/// entry of the exact selection's streaming pass on the host (measured: docs/internals.md,
/// measured reasons), so for smaller tensors exact is also faster.
template <typename T>
T estimate_threshold(Backend &backend, const T *send, const T *residual, std::size_t n,
                     std::size_t k, bool sampled, std::size_t sample, std::uint64_t seed,
                     std::vector<T> &scratch, Stream stream) {
  if (!sampled || sample >= n / 32) return backend.kth_largest_abs(send, residual, n, k, stream);
  return sampled_kth_largest_abs(backend, send, residual, n, k, sample, seed, scratch, stream);
}

}  // namespace dct::detail
