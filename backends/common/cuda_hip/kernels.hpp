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

template <typename T>
__host__ __device__ inline T accumulated(const T *send, const T *residual, std::size_t i) {
  return (send ? send[i] : T(0)) + residual[i];
}

// --- Exact k-th largest |acc|: radix selection -------------------------------------------
// As the Kokkos host version: the key of |acc| is its bit pattern without the sign, an
// unsigned integer whose order is the order of non-negative floats, with NaN patterns above
// +Inf. Digits of 11 bits from the top (3 passes for float, 6 for double); each pass
// histograms the digit of the keys that match the digits chosen so far, then one thread picks
// the digit that holds the k-th largest. The selection state stays on the device, so the
// passes run back to back on the stream and the host waits once.

template <typename T>
using KeyBits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;

template <typename T>
__device__ inline KeyBits<T> abs_key(T value) {
  KeyBits<T> bits;
  std::memcpy(&bits, &value, sizeof bits);
  constexpr KeyBits<T> sign = KeyBits<T>(1) << (8 * sizeof(T) - 1);
  return bits & ~sign;
}

constexpr int kDigitBits = 11;
constexpr unsigned int kBins = 1u << kDigitBits;

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

/// A selected key as the threshold it stands for: |acc|, a NaN (a key above +Inf's) as +Inf.
/// From the bit patterns: no numeric_limits in device code.
template <typename T>
__host__ __device__ inline T threshold_of(KeyBits<T> key) {
  KeyBits<T> infinity;
  if constexpr (sizeof(T) == 4)
    infinity = KeyBits<T>(0xffu) << 23;
  else
    infinity = KeyBits<T>(0x7ffu) << 52;
  if (key > infinity) key = infinity;
  T tau;
  std::memcpy(&tau, &key, sizeof tau);
  return tau;
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
    unsigned long long above = 0;
    Bits digit = digit_mask;
    while (digit > 0 && above + histogram[digit] < state->remaining) above += histogram[digit--];
    state->remaining -= above;
    state->prefix |= digit << shift;
    state->mask |= digit_mask << shift;
  }
  __syncthreads();
  for (unsigned int b = threadIdx.x; b < kBins; b += blockDim.x) histogram[b] = 0;
}

// --- Sampling, selection, decode ---------------------------------------------------------

template <typename T>
__global__ void gather_abs(const T *send, const T *residual, std::size_t n, std::size_t m,
                           std::uint64_t seed, T *out) {
  for (std::size_t j = first_index(); j < m; j += index_stride()) {
    const std::size_t p = sample_position(j, m, n, seed);
    out[j] = std::fabs(accumulated(send, residual, p));
  }
}

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
/// the radix selection at rank k past them, as Backend's trim_by_ranks takes it from
/// ranks_by_selections: keep_top at the k-th largest finite |value| where more than k are
/// finite, else nothing.
template <typename T>
__global__ void trim_threshold(const SelectState<KeyBits<T>> *kth,
                               const unsigned long long *nonfinite, std::size_t m, std::size_t k,
                               DeviceThreshold<T> *out) {
  if (threadIdx.x != 0) return;
  const std::size_t finite = m - static_cast<std::size_t>(*nonfinite);
  out->tau = k >= 1 && k <= finite ? threshold_of<T>(kth->prefix) : T(0);
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
    if (acc - acc != T(0))
      ++nonfinite;
    else if (std::fabs(acc) > tau)
      ++above;
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
    return this->kept(i, acc, threshold) && acc - acc == T(0) && std::fabs(acc) == threshold ? 1u
                                                                                             : 0u;
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
    if (tie_inclusive == nullptr || acc - acc != T(0) || std::fabs(acc) != threshold) return 1u;
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

/// The pending writes of Backend::select: residual[idx[j]] = val[j] (0 without val).
template <typename T>
__global__ void scatter_set_kernel(const WireIndex *idx, const T *val, std::size_t m, T *out) {
  for (std::size_t j = first_index(); j < m; j += index_stride())
    out[idx[j]] = val != nullptr ? val[j] : T(0);
}

template <typename T>
__global__ void scatter_add_kernel(const WireIndex *idx, const T *val, std::size_t m, T *out) {
  for (std::size_t j = first_index(); j < m; j += index_stride()) out[idx[j]] += val[j];
}

template <typename T>
__global__ void add_kernel(const T *x, T *sum, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += index_stride()) sum[i] += x[i];
}

/// Whether `v` is neither NaN nor +-Inf (the Kokkos core's is_finite).
template <typename T>
__device__ inline bool finite_value(T v) {
  return v - v == T(0);
}

template <typename T>
__global__ void momentum_update_kernel(const T *send, const T *velocity, T momentum, T *out,
                                       std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += index_stride()) {
    const T v = velocity[i];
    out[i] = (finite_value(v) ? momentum * v : T(0)) + send[i];
  }
}

template <typename T>
__global__ void momentum_unroll_kernel(T *result, T *previous, T momentum, std::size_t n) {
  for (std::size_t i = first_index(); i < n; i += index_stride()) {
    const T update = result[i], last = previous[i];
    result[i] = finite_value(last) ? update - momentum * last : update;
    previous[i] = update;
  }
}

__global__ void lower_bounds_kernel(const WireIndex *idx, std::size_t m, const std::uint64_t *keys,
                                    std::size_t count, std::uint64_t *out) {
  for (std::size_t j = first_index(); j < count; j += index_stride())
    out[j] = count_below(idx, m, keys[j]);
}

template <typename T>
__global__ void scatter_zero_kernel(const WireIndex *idx, std::size_t m, T *out) {
  for (std::size_t j = first_index(); j < m; j += index_stride()) out[idx[j]] = T(0);
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
