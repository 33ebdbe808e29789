// The adaptive tau control's trim (src/tau_control.hpp): what it keeps, and the floor it sets
// for the next call.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tau_control.hpp"

namespace {

using dct::detail::tau_control::kWiden;
using dct::detail::tau_control::Trim;

/// Trims candidates of magnitudes 2, 3, ..., f + 1 (alternating signs, indices 0, 2, 4, ...)
/// admitted by `floor`, to k of an aim of `aim`.
Trim trim_ramp(std::size_t f, std::size_t k, std::size_t aim, double floor,
               std::vector<std::uint32_t> &idx, std::vector<float> &val) {
  idx.clear();
  val.clear();
  for (std::size_t j = 0; j < f; ++j) {
    idx.push_back(static_cast<std::uint32_t>(2 * j));
    val.push_back(static_cast<float>(j % 2 ? -(j + 2.0) : j + 2.0));
  }
  std::vector<float> magnitudes, dropped_val(f);
  std::vector<std::uint32_t> dropped_idx(f);
  return dct::detail::tau_control::trim(idx.data(), val.data(), f, k, aim, floor, magnitudes,
                                        dropped_idx.data(), dropped_val.data());
}

TEST(TauControlTrim, KeepsTheTopKInIndexOrder) {
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  const Trim trim = trim_ramp(40, 10, 30, 1.0, idx, val);
  ASSERT_EQ(trim.kept, 10u);
  EXPECT_EQ(trim.tau, 32.0);  // the 10th largest of 2..41
  for (std::size_t j = 0; j < trim.kept; ++j) EXPECT_EQ(idx[j], 2 * (30 + j));
  EXPECT_EQ(trim.next_floor, 12.0);  // the 30th largest
}

// Fewer candidates than the aim came: the floor goes down by the shortfall's share of
// (1 - kWiden). A flat kWiden for a call one candidate short let ~7x the aim through on the
// next call, on a third of dct-bench's calls of 1,000 floats (docs/performance.md).
TEST(TauControlTrim, ShortOfTheAimLowersTheFloorInProportion) {
  std::vector<std::uint32_t> idx;
  std::vector<float> val;
  EXPECT_DOUBLE_EQ(trim_ramp(28, 10, 30, 1.5, idx, val).next_floor,
                   1.5 * (1 - (1 - kWiden) * 2 / 20));
  EXPECT_DOUBLE_EQ(trim_ramp(11, 10, 30, 1.5, idx, val).next_floor,
                   1.5 * (1 - (1 - kWiden) * 19 / 20));
  EXPECT_DOUBLE_EQ(trim_ramp(10, 10, 30, 1.5, idx, val).next_floor, 1.5 * kWiden);  // only k
  EXPECT_DOUBLE_EQ(trim_ramp(30, 10, 30, 1.5, idx, val).next_floor, 2.0);           // the aim: 30th
}

}  // namespace
