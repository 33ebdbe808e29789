// dct_values=sign on the device (Backend::quantise_signs in backends/common/cuda_hip) against the
// host's (core/sign_values.hpp, what the host backends run), through the emulation: the same
// bits for the values on the wire and the remainders, at sizes around the magnitude's chunk, with
// signed zeros, NaN and Inf; and the magnitude is the mean of the finite magnitudes.
#include "emulated_api.hpp"  // first: it stands in for backends/cuda/cuda_api.hpp

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/cuda_hip/cuda_hip_backend.hpp"
#include "core/sign_values.hpp"

namespace dct::detail {
namespace {

template <typename T>
bool same_bits(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <typename T>
struct Quantised {
  std::vector<T> wire, remainders;
};

template <typename T>
Quantised<T> on_device(const std::vector<T> &val) {
  static emulation::GpuBackend emulated;
  Backend &gpu = emulated;
  const std::size_t m = val.size();
  BackendArray<T> in(gpu, m + 1), wire(gpu, m + 1), remainders(gpu, m + 1);
  gpu.copy(in.data(), val.data(), m * sizeof(T), nullptr);
  gpu.quantise_signs(in.data(), m, wire.data(), remainders.data(), nullptr);
  Quantised<T> out{std::vector<T>(m), std::vector<T>(m)};
  gpu.copy(out.wire.data(), wire.data(), m * sizeof(T), nullptr);
  gpu.copy(out.remainders.data(), remainders.data(), m * sizeof(T), nullptr);
  return out;
}

template <typename T>
Quantised<T> on_host(const std::vector<T> &val) {
  Quantised<T> out{std::vector<T>(val.size()), std::vector<T>(val.size())};
  sign_values::quantise_on_host(val.data(), val.size(), out.wire.data(), out.remainders.data());
  return out;
}

template <typename T>
std::vector<T> gradient(std::size_t m, unsigned seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> val(m);
  for (T &v : val) v = static_cast<T>(normal(engine) * std::exp(3 * normal(engine)));
  return val;
}

template <typename T>
void expect_device_matches_host(const std::vector<T> &val) {
  const Quantised<T> device = on_device(val), host = on_host(val);
  EXPECT_TRUE(same_bits(device.wire, host.wire)) << val.size() << " values";
  EXPECT_TRUE(same_bits(device.remainders, host.remainders)) << val.size() << " values";
}

template <typename T>
void check_sizes() {
  const std::size_t chunk = sign_values::kChunk;
  for (std::size_t m : {std::size_t(0), std::size_t(1), std::size_t(7), chunk - 1, chunk, chunk + 1,
                        5 * chunk + 3, std::size_t(100003)}) {
    const std::vector<T> val = gradient<T>(m, static_cast<unsigned>(m));
    expect_device_matches_host(val);
    if (m == 0) continue;
    // The magnitude is the mean of |v| (summed in double: its order changes the last bits only),
    // every entry sends +-m with its own sign, and keeps v - (+-m).
    double sum = 0;
    for (T v : val) sum += std::fabs(double(v));
    const Quantised<T> host = on_host(val);
    const double mean = std::fabs(double(host.wire[0]));
    EXPECT_NEAR(mean, sum / double(m), 1e-6 * mean) << m;
    for (std::size_t j = 0; j < m; ++j) {
      ASSERT_EQ(std::signbit(host.wire[j]), std::signbit(val[j])) << j;
      ASSERT_EQ(std::fabs(host.wire[j]), static_cast<T>(mean)) << j;
      ASSERT_EQ(host.remainders[j], val[j] - host.wire[j]) << j;
    }
  }
}

TEST(SignValues, DeviceMatchesHostAroundTheChunkSize) {
  check_sizes<float>();
  check_sizes<double>();
}

// Up to one chunk, the sum is the plain one in index order: the bits of dct before chunking.
TEST(SignValues, OneChunkSumsInIndexOrder) {
  const std::vector<float> val = gradient<float>(sign_values::kChunk, 9);
  double sum = 0;
  for (float v : val) sum += std::fabs(double(v));
  EXPECT_EQ(std::fabs(on_host(val).wire[0]), static_cast<float>(sum / double(val.size())));
}

// Signed zeros travel with their sign; NaN makes every value on the wire NaN (signed), Inf
// makes it Inf; the non-finite entries keep nothing, the finite ones v - (+-mean of the finite).
TEST(SignValues, SignedZerosNaNAndInf) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> val = gradient<float>(3000, 4);
  val[0] = -0.0f;
  val[1] = 0.0f;
  expect_device_matches_host(val);
  EXPECT_TRUE(std::signbit(on_host(val).wire[0]));
  EXPECT_FALSE(std::signbit(on_host(val).wire[1]));
  for (float special : {inf, -inf, nan}) {
    std::vector<float> with = val;
    with[2500] = special;
    expect_device_matches_host(with);
    const Quantised<float> host = on_host(with);
    EXPECT_EQ(host.remainders[2500], 0.0f);
    for (std::size_t j : {std::size_t(3), std::size_t(2999)}) {
      EXPECT_EQ(std::signbit(host.wire[j]), std::signbit(with[j]));
      if (special != special)
        EXPECT_TRUE(std::isnan(host.wire[j]));
      else
        EXPECT_TRUE(std::isinf(host.wire[j]));
      EXPECT_TRUE(std::isfinite(host.remainders[j]));
    }
    with[100] = inf;
    with[200] = nan;  // NaN before Inf
    EXPECT_TRUE(std::isnan(on_host(with).wire[3]));
    expect_device_matches_host(with);
  }
  // Nothing finite: the mean is 0, the remainders 0.
  const std::vector<float> none = {inf, -inf};
  expect_device_matches_host(none);
  EXPECT_EQ(on_host(none).remainders, std::vector<float>(2, 0.0f));
}

}  // namespace
}  // namespace dct::detail
