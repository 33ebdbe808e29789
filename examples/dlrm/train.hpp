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

#include "comm.hpp"
#include "data.hpp"
#include "model.hpp"

namespace dlrm {

/** @brief Everything a run needs besides the data. */
struct RunConfig {
  ModelConfig model;
  DctOptions dct;
  int epochs = 5;
  /** Gradient bucket capacity in floats (Comm::set_bucket_elements; 0: one sum per layer). */
  int64_t bucket_elements = 0;
  bool verbose = true;  ///< Rank 0 prints every epoch.
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
