/**
 * @file layers.hpp
 * @brief Fully connected layers and MLPs on the CPU: fp32, matrix products through cblas_sgemm.
 *
 * Every layer keeps its weights and bias in one buffer (`params`: W, out x in row-major, then
 * b) and its gradient in another of the same layout, so that one persistent allreduce per
 * layer can carry both.
 */
#ifndef DCT_DLRM_LAYERS_HPP
#define DCT_DLRM_LAYERS_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace dlrm {

/** @brief A fully connected layer y = x W^T + b, with its gradient and momentum buffers. */
struct Linear {
  int in = 0, out = 0;
  std::vector<float> params;    ///< W (out x in) then b (out).
  std::vector<float> grad;      ///< Same layout; summed over ranks in place by the allreduce.
  std::vector<float> velocity;  ///< Momentum of SGD, same layout.

  /** @brief Glorot-uniform weights from (`seed`, `tag`), zero bias: identical on every rank. */
  Linear(int in_features, int out_features, uint64_t seed, uint64_t tag);
  float *weight() { return params.data(); }
  float *bias() { return params.data() + size_t(in) * out; }
  const float *weight() const { return params.data(); }
  const float *bias() const { return params.data() + size_t(in) * out; }

  /** @brief y (rows x out) = x (rows x in) W^T + b. */
  void forward(const float *x, int rows, float *y) const;
  /**
   * @brief From dy (rows x out) and the layer's input x: writes the weight and bias gradients
   * into `grad` (overwriting), and dx (rows x in) unless `dx` is null.
   */
  void backward(const float *x, const float *dy, int rows, float *dx);
};

/**
 * @brief A stack of Linear layers with ReLU between them (and after the last one when
 * `relu_last`), keeping the activations of the last forward call for the backward.
 */
class Mlp {
 public:
  /** @brief `sizes` = {in, hidden..., out}; `tag` separates the init of different MLPs. */
  Mlp(const std::vector<int> &sizes, bool relu_last, uint64_t seed, uint64_t tag);

  /** @brief Runs `rows` samples; returns the output (rows x out), valid until the next call. */
  const float *forward(const float *x, int rows);
  /**
   * @brief Backpropagates dy (rows x out) through the last forward call. Calls
   * `grad_ready(l)` as soon as layer l's gradient is complete (last layer first), so its
   * allreduce can start while the earlier layers are still being differentiated. Writes dx
   * (rows x in) unless `dx` is null.
   */
  void backward(const float *dy, float *dx, const std::function<void(int)> &grad_ready);

  std::vector<Linear> &layers() { return layers_; }
  const std::vector<Linear> &layers() const { return layers_; }
  int in() const { return layers_.front().in; }
  int out() const { return layers_.back().out; }

 private:
  std::vector<Linear> layers_;
  bool relu_last_;
  int rows_ = 0;
  const float *input_ = nullptr;
  std::vector<std::vector<float>> outputs_;  ///< After the activation, one per layer.
  std::vector<float> delta_, delta_next_;
};

/**
 * @brief Mean softmax cross-entropy of `logits` (rows x classes) against `labels`; writes
 * d(mean loss)/d(logits) into `dlogits` unless null. Returns the *sum* of the losses (double)
 * so that callers can average over any set of samples.
 */
double softmax_cross_entropy(const float *logits, const uint8_t *labels, int rows, int classes,
                             float *dlogits, int *correct);

/**
 * @brief SGD with momentum on one layer: `v = momentum * v + grad * scale; w -= lr * v`,
 * where `grad` holds the sum over ranks and `scale` = 1/P makes it the average.
 */
void sgd_momentum(Linear &layer, float lr, float momentum, float scale);

/** @brief A uniform float in [-a, a) from (seed, tag, index): the demo's only randomness. */
float uniform_init(uint64_t seed, uint64_t tag, uint64_t index, float a);

/** @brief FNV-1a over raw bytes, chained through `hash`: compares parameters bit for bit. */
uint64_t fnv1a(const void *data, size_t bytes, uint64_t hash = 1469598103934665603ULL);

}  // namespace dlrm

#endif
