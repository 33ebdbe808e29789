// 16-bit floating-point values on the wire: IEEE binary16 (fp16) and bfloat16 (bf16), with
// round-to-nearest-even, as bit patterns in std::uint16_t. Written once for host and device
// code (the CUDA and HIP backends include it), so every backend rounds identically.
//
// Private header of dct: include it from library sources only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define DCT_HOST_DEVICE __host__ __device__
#else
#define DCT_HOST_DEVICE
#endif

namespace dct::detail {

/// How values travel on the wire: the tensor's own type, a 16-bit float, or (`sign`, DCT-DP
/// only) one sign bit per entry and one magnitude per block, the scaled sign of EF-SignSGD.
enum class ValueCoding : std::uint8_t { native = 0, fp16 = 1, bf16 = 2, sign = 3 };

/// Bytes of one value on the wire, for the codings with a whole number of them (not `sign`,
/// whose blocks size their values with values_bytes).
inline std::size_t value_bytes(ValueCoding coding, std::size_t native_bytes) {
  return coding == ValueCoding::native || coding == ValueCoding::sign ? native_bytes : 2;
}

/// Bytes of the values of a block of `entries`: `sign` sends one magnitude (the tensor's type)
/// and one bit per entry; the others value_bytes per entry.
inline std::size_t values_bytes(ValueCoding coding, std::size_t entries, std::size_t native_bytes) {
  if (coding != ValueCoding::sign) return entries * value_bytes(coding, native_bytes);
  return entries > 0 ? native_bytes + (entries + 7) / 8 : 0;
}

/// Wire bytes per entry that the cost model charges for a rank's own values (the magnitude
/// of a `sign` block is left out: one per message).
inline double value_bytes_per_entry(ValueCoding coding, std::size_t native_bytes) {
  return coding == ValueCoding::sign ? 0.125 : double(value_bytes(coding, native_bytes));
}

namespace f16 {

/// The bits of `from` as a To (std::bit_cast before C++20). hip-clang's device pass has no
/// std::memcpy outside the native HIP headers (a Kokkos HIP build includes them later), so it
/// takes the compiler's builtin there.
template <typename To, typename From>
DCT_HOST_DEVICE inline To bit_copy(const From &from) {
  static_assert(sizeof(To) == sizeof(From), "bit_copy: sizes differ");
  To to;
#if defined(__HIP_DEVICE_COMPILE__)
  __builtin_memcpy(&to, &from, sizeof to);
#else
  std::memcpy(&to, &from, sizeof to);
#endif
  return to;
}

/// The sign bit of a float or double, NaN and zero included (std::signbit, which device code
/// cannot count on).
template <typename T>
DCT_HOST_DEVICE inline bool sign_bit(T value) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "sign_bit: float or double");
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  return (bit_copy<Bits>(value) >> (8 * sizeof(T) - 1)) != 0;
}

DCT_HOST_DEVICE inline std::uint32_t bits_of(float value) {
  return bit_copy<std::uint32_t>(value);
}
DCT_HOST_DEVICE inline float float_of(std::uint32_t bits) {
  return bit_copy<float>(bits);
}

/// fp32 -> fp16, round to nearest even; overflow gives +-Inf, NaN stays NaN (quiet).
DCT_HOST_DEVICE inline std::uint16_t to_fp16(float value) {
  const std::uint32_t bits = bits_of(value);
  const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u)  // Inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
  if (magnitude >= 0x477ff000u)
    return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (magnitude < 0x38800000u) {
    // Subnormal or zero in fp16: the value in units of 2^-24, rounded to nearest even.
    if (magnitude < 0x33000000u) return sign;  // below half the smallest subnormal
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t total_shift = 126u - (magnitude >> 23);  // 14..24
    std::uint32_t result = mantissa >> total_shift;
    const std::uint32_t remainder = mantissa & ((1u << total_shift) - 1u);
    const std::uint32_t halfway = 1u << (total_shift - 1u);
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<std::uint16_t>(sign | result);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits.
  std::uint32_t result = (magnitude - 0x38000000u) >> 13;
  const std::uint32_t remainder = magnitude & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

/// fp16 -> fp32, exact.
DCT_HOST_DEVICE inline float from_fp16(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1fu) return float_of(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Subnormal: mantissa * 2^-24, exact in fp32.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

/// fp32 -> bf16, round to nearest even; NaN stays NaN (quiet).
DCT_HOST_DEVICE inline std::uint16_t to_bf16(float value) {
  const std::uint32_t bits = bits_of(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

/// bf16 -> fp32, exact.
DCT_HOST_DEVICE inline float from_bf16(std::uint16_t half) {
  return float_of(static_cast<std::uint32_t>(half) << 16);
}

}  // namespace f16

/// The 16-bit pattern `value` travels as (unused for ValueCoding::native).
template <typename T>
DCT_HOST_DEVICE inline std::uint16_t encode_value16(T value, ValueCoding coding) {
  const float narrowed = static_cast<float>(value);
  return coding == ValueCoding::bf16 ? f16::to_bf16(narrowed) : f16::to_fp16(narrowed);
}
template <typename T>
DCT_HOST_DEVICE inline T decode_value16(std::uint16_t bits, ValueCoding coding) {
  return static_cast<T>(coding == ValueCoding::bf16 ? f16::from_bf16(bits) : f16::from_fp16(bits));
}

/// `value` as the receiver will see it after the wire: identity for native (and sign), else
/// rounded to 16 bits. The sender keeps `value - wire_value(value)` in its residual, so nothing is
/// lost (the difference is exact for finite values that do not overflow the 16-bit range; values
/// that do are sent as the largest finite 16-bit value and the rest stays in the residual).
template <typename T>
DCT_HOST_DEVICE inline T wire_value(T value, ValueCoding coding) {
  // `sign` is quantised per block after the selection (sign_quantise), not per value.
  if (coding == ValueCoding::native || coding == ValueCoding::sign) return value;
  if (value != value || value - value != T(0)) return value;  // NaN, Inf: sent as they are
  T rounded = decode_value16<T>(encode_value16(value, coding), coding);
  if (rounded - rounded != T(0)) {  // finite value rounded to Inf: saturate
    const T largest =
        coding == ValueCoding::bf16 ? T(3.38953138925153547590470800371487866880e+38) : T(65504);
    rounded = value < T(0) ? -largest : largest;
  }
  return rounded;
}

/// What stays in the sender's residual after `acc` was sent as `sent = wire_value(acc, ...)`:
/// the rounding error, exact; 0 for native values and for NaN/Inf (sent as they are).
template <typename T>
DCT_HOST_DEVICE inline T wire_remainder(T acc, T sent) {
  return acc - acc == T(0) ? acc - sent : T(0);
}

}  // namespace dct::detail
