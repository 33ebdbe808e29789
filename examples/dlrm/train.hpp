/**
 * @file train.hpp
 * @brief The training loop of one mode and its metrics, reduced over the ranks.
 */
#ifndef DCT_DLRM_TRAIN_HPP
#define DCT_DLRM_TRAIN_HPP

#include <mpi.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "comm.hpp"
#include "data.hpp"
#include "model.hpp"
#include "step_window.hpp"
#include "trace.hpp"

namespace dlrm {

/**
 * @brief `--dump-lookups`: the forward embedding lookups of `steps` consecutive training steps
 * of the first mode run, gathered to rank 0 (the file is written by main.cpp).
 */
struct LookupDump : StepWindow {  // the steps dumped (main.cpp resolves them before the run)
  bool taken = false;  ///< Set on every rank once a mode has dumped (only the first does).
  int ranks = 0, rows = 0, d = 0;  ///< P, rows per block (the batch), row length.
  /// On rank 0: steps x P senders x P receivers x rows x d floats, in that order.
  std::vector<float> data;
};

/** @brief Everything a run needs besides the data. */
struct RunConfig {
  ModelConfig model;
  DctOptions dct;
  int epochs = 5;
  /** Gradient bucket capacity in floats (Comm::set_bucket_elements; 0: one sum per layer). */
  int64_t bucket_elements = 0;
  /** One bucket per MLP (Comm::set_bucket_per_block), split at bucket_elements if not 0. */
  bool bucket_per_mlp = false;
  bool verbose = true;         ///< Rank 0 prints every epoch.
  LookupDump *dump = nullptr;  ///< Where the first mode leaves its lookups (nullptr: none).
  /// Where the first compressed mode leaves its kept indices (nullptr: none).
  IndexTrace *trace = nullptr;
  /// --checkpoint / --resume (nullptr: none).
  TrainingCheckpoints *checkpoints = nullptr;
};

/**
 * @brief Trains a fresh model (same seed, same data order as every other mode) with the
 * communication of `mode` and returns, on every rank, the metrics as JSON: "mode", "epochs"
 * (per epoch: losses, accuracy, bytes, density/keep, times) and "final".
 */
nlohmann::json run_mode(const std::string &mode, const RunConfig &config, const Split &train,
                        const Split &test, MPI_Comm comm);

}  // namespace dlrm

#endif
