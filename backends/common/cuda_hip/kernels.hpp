// The kernels of the CUDA and HIP backends (cuda_hip_backend.hpp) and the helpers that launch
// them: the radix selection of the k-th largest |acc|, the selection at a threshold (count, tie
// ranks, compaction), the scatters, momentum and sign_values's kernels. The block codec's are in
// block_codec.hpp. Written in the kernel language common to nvcc and hip-clang, launched
// through DCT_GPU_LAUNCH (tests/gpu_emulation runs them on the host).
//
// Private: included by cuda_hip_backend.hpp inside its namespace, after the api functions.
#pragma once

void check(api::error_t error, const char *what) {
  if (error == api::success) return;
  (void)api::get_last_error();  // clear a recoverable error so that later calls do not see it
  std::string message = std::string(DCT_GPU_NAME " ") + what +
                        " failed: " + api::error_name(error) + ": " + api::error_string(error);
  if (api::is_sticky(error))
    message += " (a sticky error: the device context is unusable for the rest of the process)";
  fail(api::is_out_of_memory(error) ? DCT_ERR_NO_MEMORY : DCT_ERR_INTERNAL, message);
}

/// A kernel launch's error (bad configuration, no kernel image for this device).
void check_launch(const char *kernel) {
  check(api::get_last_error(), kernel);
}

constexpr unsigned int kBlock = 256;
constexpr std::size_t kMaxGrid = 65536;  // kernels loop over the rest (grid-stride)

unsigned int grid_for(std::size_t n, std::size_t max_grid = kMaxGrid) {
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks < max_grid ? blocks : max_grid));
}

__device__ inline std::size_t first_index() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::size_t index_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

using kernel_logic::accumulated;
using kernel_logic::classify;
using kernel_logic::KeyBits;
using kernel_logic::Selection;
constexpr unsigned int kBins = kernel_logic::kDigitBins;

/// body(i) for i < n, grid-stride: kernel_logic.hpp's element-wise kernels.
template <typename Body>
__global__ void for_each_kernel(Body body, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += index_stride()) body(i);
}

// --- Exact k-th largest |acc|: radix selection -------------------------------------------
// As the Kokkos host version: the key of |acc| is its bit pattern without the sign, an
// unsigned integer whose order is the order of non-negative floats, with NaN patterns above
// +Inf. Digits of 11 bits from the top (3 passes for float, 6 for double); each pass
// histograms the digit of the keys that match the digits chosen so far, then one thread picks
// the digit that holds the k-th largest. The selection state stays on the device, so the
// passes run back to back on the stream and the host waits once.

using kernel_logic::abs_key;
using kernel_logic::kDigitBits;

template <typename Bits>
struct SelectState {
  Bits prefix;                   // digits chosen so far
  Bits mask;                     // their bits
  unsigned long long remaining;  // rank of the answer among the keys that match prefix
};

/// The selection of the k-th largest key, or with `past` the (k + *past)-th: past the keys a
/// count on the device left there, so that the host need not read it first.
template <typename Bits>
__global__ void select_init(SelectState<Bits> *state, unsigned long long k,
                            const unsigned long long *past, unsigned long long *histogram) {
  for (unsigned int b = threadIdx.x; b < kBins; b += blockDim.x) histogram[b] = 0;
  if (threadIdx.x == 0) {
    state->prefix = 0;
    state->mask = 0;
    state->remaining = k + (past != nullptr ? *past : 0);
  }
}

template <typename T>
__global__ void select_histogram(const T *send, const T *residual, std::size_t n,
                                 const SelectState<KeyBits<T>> *state, int shift,
                                 KeyBits<T> digit_mask, unsigned long long *histogram) {
  __shared__ unsigned int local[kBins];
  for (unsigned int b = threadIdx.x; b < kBins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const KeyBits<T> prefix = state->prefix, mask = state->mask;
  for (std::size_t i = first_index(); i < n; i += index_stride()) {
    const KeyBits<T> key = abs_key<T>(accumulated(send, residual, i));
    if ((key & mask) == prefix)
      atomicAdd(&local[static_cast<unsigned int>((key >> shift) & digit_mask)], 1u);
  }
  __syncthreads();
  for (unsigned int b = threadIdx.x; b < kBins; b += blockDim.x)
    if (local[b] != 0) atomicAdd(&histogram[b], static_cast<unsigned long long>(local[b]));
}

/// One thread: the digit (from the top) whose bin holds the remaining-th largest key; clears
/// the histogram for the next pass.
template <typename Bits>
__global__ void select_digit(SelectState<Bits> *state, int shift, Bits digit_mask,
                             unsigned long long *histogram) {
  if (threadIdx.x == 0) {
    const Bits digit = kernel_logic::digit_of_rank(histogram, digit_mask, state->remaining);
    state->prefix |= digit << shift;
    state->mask |= digit_mask << shift;
  }
  __syncthreads();
  for (unsigned int b = threadIdx.x; b < kBins; b += blockDim.x) histogram[b] = 0;
}

// --- Selection at a threshold ----------------------------------------------------------------

/// A selection's threshold where a kernel left it on the device, so that the host need not read
/// it first (the trim: keep_top at its own k-th largest). With `active` 0 the selection keeps
/// nothing (the trim where no more than k candidates are finite).
template <typename T>
struct DeviceThreshold {
  T tau;
  unsigned int active;
};

/// The threshold a selection uses: `tau`, or where `at` is set the one on the device. False
/// where the device's says to keep nothing.
template <typename T>
__host__ __device__ inline bool threshold_in_force(T &tau, const DeviceThreshold<T> *at) {
  if (at == nullptr) return true;
  tau = at->tau;
  return at->active != 0u;
}

/// One thread: the trim's threshold from the count of non-finite candidates and
/// the radix selection at rank k past them, as Backend::trim_candidates defines it: keep_top at
/// the k-th largest finite |value| where more than k are finite, else nothing.
template <typename T>
__global__ void trim_threshold(const SelectState<KeyBits<T>> *kth,
                               const unsigned long long *nonfinite, std::size_t m, std::size_t k,
                               DeviceThreshold<T> *out) {
  if (threadIdx.x != 0) return;
  const std::size_t finite = m - static_cast<std::size_t>(*nonfinite);
  out->tau = k >= 1 && k <= finite ? kernel_logic::threshold_of_key<T>(kth->prefix) : T(0);
  out->active = finite > k ? 1u : 0u;
}

/// The selection at tau with a limit (Backend::select, keep_top), over the values of
/// accumulated(send, residual, i) (a candidate list is the tensor with send == nullptr and the
/// list's values as residual); `at`: tau on the device instead (DeviceThreshold). count_selected
/// counts the selected entries above tau (finite) and the non-finite ones; with a limit, an
/// inclusive scan of the ties gives each tie its rank, and the ties of rank >= budget are left
/// out; a last scan of the keep flags gives the output positions (stable compaction: entry i
/// goes to position inclusive[i] - 1, in index order).
template <typename T>
__global__ void count_selected(const T *send, const T *residual, std::size_t n, T tau,
                               const DeviceThreshold<T> *at, unsigned long long *counts) {
  __shared__ unsigned long long block_counts[2];  // finite entries above tau, NaN/Inf
  if (threadIdx.x == 0) block_counts[0] = block_counts[1] = 0;
  __syncthreads();
  unsigned long long above = 0, nonfinite = 0;
  if (!threshold_in_force(tau, at)) n = 0;
  for (std::size_t i = first_index(); i < n; i += index_stride()) {
    const T acc = accumulated(send, residual, i);
    if (!keep_entry(acc, tau)) continue;
    const Selection kind = classify(acc, tau);
    nonfinite += kind == Selection::nonfinite;
    above += kind == Selection::above;
  }
  if (above) atomicAdd(&block_counts[0], above);
  if (nonfinite) atomicAdd(&block_counts[1], nonfinite);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (block_counts[0]) atomicAdd(&counts[0], block_counts[0]);
    if (block_counts[1]) atomicAdd(&counts[1], block_counts[1]);
  }
}

/// What the selection's flags share: entry i's acc and whether it passes the keep rule at the
/// threshold in force (`tau`, or the device's where `at` is set: threshold_in_force).
template <typename T>
struct SelectionRule {
  const T *send;
  const T *residual;
  T tau;
  const DeviceThreshold<T> *at;
  __host__ __device__ bool kept(std::size_t i, T &acc, T &threshold) const {
    threshold = tau;
    if (!threshold_in_force(threshold, at)) return false;
    acc = accumulated(send, residual, i);
    return keep_entry(acc, threshold);
  }
};

/// Entry i is a tie at tau (selected, finite, |acc| == tau).
template <typename T>
struct TieFlag : SelectionRule<T> {
  __host__ __device__ unsigned int operator()(std::size_t i) const {
    T acc = T(0), threshold = T(0);
    return this->kept(i, acc, threshold) && classify(acc, threshold) == Selection::tie ? 1u : 0u;
  }
};

/// Entry i is selected: the keep rule, and a tie only while its rank is within the budget
/// that `limit` leaves after the `*above` entries above tau (`tie_inclusive`: the scanned tie
/// flags; nullptr: every tie). The budget is read on the device, where count_selected left
/// `*above`, so that the host does not wait between the count and the scan.
template <typename T>
struct SelectFlag : SelectionRule<T> {
  const unsigned int *tie_inclusive;
  const unsigned long long *above;
  std::size_t limit;
  __host__ __device__ unsigned int operator()(std::size_t i) const {
    T acc = T(0), threshold = T(0);
    if (!this->kept(i, acc, threshold)) return 0u;
    if (tie_inclusive == nullptr || classify(acc, threshold) != Selection::tie) return 1u;
    const std::size_t budget = limit > *above ? limit - static_cast<std::size_t>(*above) : 0;
    return static_cast<std::size_t>(tie_inclusive[i]) <= budget ? 1u : 0u;
  }
};

/// Backend::select's compaction: acc into the residual (with send), the selected entries as
/// (i, acc) at their positions below the capacity.
template <typename T>
__global__ void select_compact(const T *send, T *residual, std::size_t n, SelectFlag<T> flag,
                               const unsigned int *inclusive, WireIndex *idx, T *val,
                               std::size_t capacity) {
  for (std::size_t i = first_index(); i < n; i += index_stride()) {
    const T acc = accumulated(send, residual, i);
    const bool selected = flag(i) != 0u;  // before the residual holds acc: the flag adds send
    if (send != nullptr) residual[i] = acc;
    const std::size_t position = static_cast<std::size_t>(inclusive[i]) - 1;
    if (selected && position < capacity) {
      idx[position] = static_cast<WireIndex>(i);
      val[position] = acc;
    }
  }
}

/// Backend::keep_top's compaction: the selected candidates rounded for the wire, what the wire
/// does not carry of each into the remainders (as every backend: float16.hpp).
template <typename T>
__global__ void keep_compact(const WireIndex *idx, const T *val, std::size_t m, SelectFlag<T> flag,
                             const unsigned int *inclusive, ValueCoding coding, WireIndex *out_idx,
                             T *out_val, T *remainders) {
  for (std::size_t j = first_index(); j < m; j += index_stride()) {
    if (!flag(j)) continue;
    const T acc = val[j];
    const T sent = wire_value(acc, coding);
    const std::size_t position = static_cast<std::size_t>(inclusive[j]) - 1;
    out_idx[position] = idx[j];
    out_val[position] = sent;
    if (remainders != nullptr) remainders[position] = wire_remainder(acc, sent);
  }
}

// --- dct_values=sign (core/sign_values.hpp) -------------------------------------------------
// The magnitude's sum in its fixed order: one thread per chunk, then one thread over the
// chunks' sums (k / 1024 of them), then every entry against the magnitude.
template <typename T>
__global__ void sign_chunks_kernel(const T *val, std::size_t m, std::size_t chunks,
                                   sign_values::Partial *partials) {
  for (std::size_t c = first_index(); c < chunks; c += index_stride())
    partials[c] = sign_values::chunk(val, m, c);
}

template <typename T>
__global__ void sign_magnitude_kernel(const sign_values::Partial *partials, std::size_t chunks,
                                      sign_values::Magnitude<T> *magnitude) {
  sign_values::Partial total;
  for (std::size_t c = 0; c < chunks; ++c) sign_values::add(total, partials[c]);
  *magnitude = sign_values::magnitude<T>(total);
}

template <typename T>
__global__ void sign_entries_kernel(const T *val, std::size_t m,
                                    const sign_values::Magnitude<T> *magnitude, T *wire,
                                    T *remainders) {
  const sign_values::Magnitude<T> of_all = *magnitude;
  for (std::size_t j = first_index(); j < m; j += index_stride())
    sign_values::quantise(val[j], of_all, wire[j], remainders[j]);
}
