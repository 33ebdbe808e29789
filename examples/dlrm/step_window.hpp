/**
 * @file step_window.hpp
 * @brief The training steps that a diagnostic option records (`--dump-lookups`,
 * `--trace-indices`): [first, first + steps), 1-based over all epochs of a mode.
 */
#ifndef DCT_DLRM_STEP_WINDOW_HPP
#define DCT_DLRM_STEP_WINDOW_HPP

#include <cstdint>

namespace dlrm {

struct StepWindow {
  int64_t first = 0;  ///< First step recorded; 0 until resolve(): the run's last `steps`.
  int steps = 1;      ///< Consecutive steps recorded.

  /** @brief Before the run (once): resolves `first` = 0 to the last `steps` of `run_steps`;
   * false if the window does not lie inside the run. */
  bool resolve(int64_t run_steps) {
    if (first == 0) first = run_steps - steps + 1;
    return first >= 1 && first - 1 + steps <= run_steps;
  }
  bool covers(int64_t step) const { return step >= first && step < first + steps; }
};

}  // namespace dlrm

#endif
