// The adaptive tau control's floor for the next call (src/core/tau_control.hpp). What a call keeps
// is the kernels' exact top k (tests/unit/test_kernels.cpp: KeepTop*, RankCandidates*) and the
// compressor's (tests/mpi/test_tau_control.cpp).
#include <gtest/gtest.h>

#include "core/tau_control.hpp"

namespace {

using dct::detail::tau_control::kWiden;
using dct::detail::tau_control::next_floor;

// The aim was reached: the next floor is the aim-th largest candidate.
TEST(TauControlFloor, TheAimReachedGivesTheAimThLargest) {
  EXPECT_EQ(next_floor(1.5, 40, 10, 30, [] { return 12.0; }), 12.0);
  EXPECT_EQ(next_floor(1.5, 30, 10, 30, [] { return 2.0; }), 2.0);
}

// Fewer candidates than the aim came: the floor goes down by the shortfall's share of
// (1 - kWiden). A flat kWiden for a call one candidate short let ~7x the aim through on the
// next call, on a third of dct-bench's calls of 1,000 floats (docs/performance.md).
TEST(TauControlFloor, ShortOfTheAimLowersTheFloorInProportion) {
  const auto never = []() -> double {
    ADD_FAILURE() << "the aim-th largest was asked for with fewer candidates than the aim";
    return 0.0;
  };
  EXPECT_DOUBLE_EQ(next_floor(1.5, 28, 10, 30, never), 1.5 * (1 - (1 - kWiden) * 2 / 20));
  EXPECT_DOUBLE_EQ(next_floor(1.5, 11, 10, 30, never), 1.5 * (1 - (1 - kWiden) * 19 / 20));
  EXPECT_DOUBLE_EQ(next_floor(1.5, 10, 10, 30, never), 1.5 * kWiden);  // only k
  EXPECT_DOUBLE_EQ(next_floor(1.5, 40, 10, 10, never), 1.5 * kWiden);  // no aim above k
}

}  // namespace
