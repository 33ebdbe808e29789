// The compression kernel interface. One implementation per backend directory; this build's
// host implementation is backends/kokkos/ (Kokkos' default host execution space).
//
// Keep rule, shared by every kernel and documented in dct.h: an entry is sent iff
// !(|acc| < tau) && acc != 0. Zeros carry nothing, and NaN/Inf are always sent so that they
// reach the result as they would through MPI_Allreduce.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace dct::detail {

/// Index type on the wire; it bounds a compressed tensor to DCT_MAX_COUNT elements.
using WireIndex = std::uint32_t;

// fabs, not a sign test: gradient signs are coin flips, and a branch on them mispredicts half
// the time (measured: 8x slower filter).
template <typename T>
inline bool keep_entry(T acc, T tau) {
  return !(std::fabs(acc) < tau) && acc != T(0);
}

namespace kernels {

/// Makes sure the backend's runtime (Kokkos) is up; returns true if this call started it.
bool initialize_runtime();
/// Shuts down what initialize_runtime started; no-op if the application owns the runtime.
void finalize_runtime();

/// k-th largest |send[i] + residual[i]| (1 <= k <= n), by exact radix selection in O(n).
/// NaN ranks above +Inf; a NaN result is returned as +Inf. `send` may be nullptr (zeros).
template <typename T>
T kth_largest_abs(const T *send, const T *residual, std::size_t n, std::size_t k);

/// The fused filter pass: acc = send + residual; kept entries (keep rule) are written in index
/// order as (idx, val) pairs and their residual becomes 0; the others keep acc as residual.
/// At most `capacity` pairs are written; kept entries beyond it stay in the residual (as acc)
/// so that a second pass with send == nullptr picks them up. Returns the number of kept
/// entries found, which may exceed `capacity`. `send` may be nullptr (zeros).
template <typename T>
std::size_t filter(const T *send, T *residual, std::size_t n, T tau, WireIndex *idx, T *val,
                   std::size_t capacity);

/// True iff every idx[j] < n and the indices strictly increase (the encoder's invariant, which
/// also makes the scatter-add race-free).
bool indices_valid(const WireIndex *idx, std::size_t m, std::size_t n);

/// out[idx[j]] += val[j] for j < m; indices must have passed indices_valid.
template <typename T>
void scatter_add(const WireIndex *idx, const T *val, std::size_t m, T *out);

/// out[i] = 0 for i < n.
template <typename T>
void fill_zero(T *out, std::size_t n);

}  // namespace kernels
}  // namespace dct::detail
