/**
 * @file checkpoint.hpp
 * @brief `--checkpoint DIR --checkpoint-every N` and `--resume`: the training run's whole state
 * (the model's parameters and optimizer velocities, where the run stands, dct's error-feedback
 * and momentum state) saved together every N steps, and a killed run resumed bit for bit.
 *
 * Layout: DIR/<mode>/step-<S>/dct.h5 (DCT_Checkpoint_save of the mode's requests) and
 * DIR/<mode>/step-<S>/rank-<r>.bin (each rank's parameters, velocities and position, with an
 * FNV-1a of its bytes), then DIR/<mode>/latest naming step-<S>, replaced (rename) only once
 * every rank's files are complete: the pair is taken together or not at all, and a kill at any
 * moment leaves the previous checkpoint to resume from. DIR/<mode>/done.json holds a finished
 * mode's results. The previous step directory is kept until the next one is complete.
 */
#ifndef DCT_DLRM_CHECKPOINT_HPP
#define DCT_DLRM_CHECKPOINT_HPP

#include <mpi.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "comm.hpp"
#include "model.hpp"

namespace dlrm {

/** @brief Where a mode's training stands between two steps, on this rank. */
struct RunState {
  int epoch = 0;  ///< The epoch in progress.
  int step = 0;   ///< The next step of that epoch.
  double loss_sum = 0.0, first_batch_loss = 0.0, total_wall = 0.0, epoch_wall = 0.0;
  int64_t dp_sent = 0, dp_dense = 0, mp_sent = 0, mp_dense = 0, fwd_sent = 0;
  CommStats stats;                                  ///< Of the epoch in progress.
  nlohmann::json epochs = nlohmann::json::array();  ///< The finished epochs' metrics.
};

/** @brief `MODE:STEP`: the test hooks --die-at and --die-in-save (rank P-1 kills itself). */
struct DeathPoint {
  std::string mode;
  int64_t step = -1;
  bool at(const std::string &current_mode, int64_t global_step) const {
    return step >= 0 && mode == current_mode && step == global_step;
  }
};

/** @brief The checkpoints of one demo run (every mode), collective over `comm`. */
class TrainingCheckpoints {
 public:
  /** @brief `fingerprint`: the run's settings; a resume with other settings is refused. */
  TrainingCheckpoints(std::string directory, int64_t every, bool resume, std::string fingerprint,
                      MPI_Comm comm);
  int64_t every() const { return every_; }
  DeathPoint die_at, die_in_save;

  /** @brief Saves checkpoint `global_step` of `mode`: dct's state, then every rank's. */
  void save(const std::string &mode, int64_t global_step, Model &model, const RunState &state);
  /**
   * @brief With --resume: the latest checkpoint of `mode` into `model`, `state` and dct's
   * requests (which must exist), true if there was one. Throws std::runtime_error, on every
   * rank, for a checkpoint of other settings or a damaged file.
   */
  bool load(const std::string &mode, Model &model, RunState &state);
  /** @brief A finished mode's results (every rank), so that a resumed run skips the mode. */
  void finish(const std::string &mode, const nlohmann::json &run);
  /** @brief With --resume: the results of `mode` if it had finished, else null. */
  nlohmann::json finished(const std::string &mode);

 private:
  std::string directory_, fingerprint_;
  int64_t every_;
  bool resume_;
  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 1;
};

}  // namespace dlrm

#endif
