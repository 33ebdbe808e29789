// The host SIMD tiers of dct's hot loops (DCT-DP's selection pass and trim, DCT-MP's per-row
// selection, the error-bounded quantiser): each has portable code and an AVX-512F path that
// gives the same bits, picked at run time. One enum and one CPU check for all of them; each
// loop keeps its own tier variable, which the tests lower to run every tier on the same data.
//
// Private header of src/: include it from library sources only.
#pragma once

namespace dct::detail {

/// The tiers, lowest first.
enum class HostSimd { portable, avx512 };

/// The best tier this CPU runs for a loop whose AVX-512F code is `compiled` in this build.
inline HostSimd best_host_simd(bool compiled) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__) && \
    !defined(__HIP_DEVICE_COMPILE__)
  if (compiled && __builtin_cpu_supports("avx512f")) return HostSimd::avx512;
#endif
  static_cast<void>(compiled);
  return HostSimd::portable;
}

}  // namespace dct::detail
