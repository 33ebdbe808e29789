/**
 * @file model.hpp
 * @brief The two models of the demo: DLRM (bottom MLP, sharded embedding tables, dot-product
 * interaction, top MLP) and a plain data-parallel MLP on the raw pixels.
 */
#ifndef DCT_DLRM_MODEL_HPP
#define DCT_DLRM_MODEL_HPP

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm.hpp"
#include "data.hpp"

namespace dlrm {

/** @brief Shape and optimizer settings shared by both models. */
struct ModelConfig {
  std::string model = "dlrm";  ///< "dlrm" or "mlp".
  int batch = 32;              ///< Samples per rank per step.
  int table_size = 4096;       ///< Rows of each embedding table.
  int emb_dim = 16;            ///< Embedding dimension (= the bottom MLP's output).
  /// Hidden widths of DLRM's bottom MLP (196-...-emb_dim) and top MLP (interaction-...-10);
  /// the DCT paper's Criteo DLRM has 512,256,64 and 512,256 (`--paper-sizes`).
  std::vector<int> bottom_hidden{128};
  std::vector<int> top_hidden{128};
  float lr = 0.05f;       ///< Learning rate of the MLPs (SGD with momentum).
  float momentum = 0.9f;  ///< Momentum of the MLPs.
  float emb_lr = 0.05f;   ///< Learning rate of the embedding rows (plain sparse SGD).
  /// How both learning rates change over the run: "constant", or "cosine" (each step's rates
  /// scaled by lr_scale(): half a cosine from 1 down to 0 over all the run's steps).
  std::string lr_schedule = "constant";
  uint64_t seed = 1;  ///< Every initial value derives from it.
};

/** @brief Correct predictions and summed loss over a set of samples. */
struct EvalResult {
  int64_t correct = 0;
  double loss_sum = 0.0;
};

/** @brief A model trained by the demo; every call is collective over the model's communicator. */
class Model {
 public:
  virtual ~Model() = default;
  /** @brief Registers the gradients and exchanges with `comm` (once, before training). */
  virtual void bind(Comm &comm) = 0;
  /**
   * @brief One step on the global batch `global` (P x batch training sample numbers; rank j
   * trains on entries j*batch ... j*batch + batch - 1), with both learning rates scaled by
   * `lr_scale` (the schedule's factor of this step). Returns the sum of this rank's losses.
   */
  virtual double train_step(const int *global, Comm &comm, float lr_scale) = 0;
  /** @brief Evaluates this rank's slice of the test split (counts not yet reduced). */
  virtual EvalResult evaluate() = 0;
  /** @brief FNV-1a of this rank's parameters (replicated MLPs and its own tables). */
  virtual uint64_t checksum() const = 0;
  /** @brief Everything training changes on this rank (parameters, optimizer velocities), in a
   * fixed order: what a checkpoint saves (checkpoint.hpp). */
  virtual std::vector<std::vector<float> *> state() = 0;
  /** @brief Parameters of every replicated layer (weights and bias), in registration order:
   * the element counts of the data-parallel allreduces. */
  virtual std::vector<int64_t> dp_layer_counts() const = 0;
  /**
   * @brief The forward embedding lookups this rank sent in the last `train_step` (P blocks of
   * batch rows x `lookup_row_length()` floats, block j for rank j), or nullptr for a model
   * without a model-parallel exchange.
   */
  virtual const float *last_lookups() const { return nullptr; }
  /** @brief d of the lookup rows (0 without a model-parallel exchange). */
  virtual int lookup_row_length() const { return 0; }
};

/**
 * @brief The factor of `schedule` (ModelConfig::lr_schedule) for step `step` (0-based) of a run
 * of `steps` steps: 1 for "constant"; (1 + cos(pi * step / steps)) / 2 for "cosine", the
 * schedule of SGDR without restarts (Loshchilov and Hutter), which torch's CosineAnnealingLR
 * follows when stepped every batch. Throws std::invalid_argument for another name.
 */
float lr_scale(const std::string &schedule, int64_t step, int64_t steps);

/**
 * @brief Builds the model of `config.model` over `comm`, from the same initial values for
 * every mode. Throws std::invalid_argument for shapes the ranks cannot share (DLRM: the 16
 * tables must divide evenly among the ranks).
 */
std::unique_ptr<Model> make_model(const ModelConfig &config, const Split &train, const Split &test,
                                  MPI_Comm comm);

}  // namespace dlrm

#endif
