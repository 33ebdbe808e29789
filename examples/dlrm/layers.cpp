// Dense layers with cblas_sgemm (OpenBLAS): the arithmetic of the demo's MLPs.
#include "layers.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "data.hpp"

namespace dlrm {

float uniform_init(uint64_t seed, uint64_t tag, uint64_t index, float a) {
  const uint64_t bits = mix64(mix64(seed ^ (tag * 0x100000001b3ULL)) ^ index);
  const float unit = float(bits >> 40) * (1.0f / 16777216.0f);  // 24 bits: exact in fp32
  return (2.0f * unit - 1.0f) * a;
}

uint64_t fnv1a(const void *data, size_t bytes, uint64_t hash) {
  const auto *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 1099511628211ULL;
  return hash;
}

Linear::Linear(int in_features, int out_features, uint64_t seed, uint64_t tag)
    : in(in_features), out(out_features) {
  const size_t n = size_t(in) * out + size_t(out);
  params.assign(n, 0.0f);
  grad.assign(n, 0.0f);
  velocity.assign(n, 0.0f);
  const float a = std::sqrt(6.0f / float(in + out));
  for (size_t i = 0; i < size_t(in) * out; ++i) params[i] = uniform_init(seed, tag, i, a);
}

void Linear::forward(const float *x, int rows, float *y) const {
  // Bias first, then y += x W^T with beta = 1: one pass over y for both.
  for (int r = 0; r < rows; ++r) std::copy(bias(), bias() + out, y + size_t(r) * out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, x, in, weight(), in,
              1.0f, y, out);
}

void Linear::backward(const float *x, const float *dy, int rows, float *dx) {
  // dW (out x in) = dy^T x; db = column sums of dy; dx (rows x in) = dy W.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, rows, 1.0f, dy, out, x, in, 0.0f,
              grad.data(), in);
  float *db = grad.data() + size_t(in) * out;
  std::fill(db, db + out, 0.0f);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) db[o] += dy[size_t(r) * out + o];
  if (dx)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in, out, 1.0f, dy, out, weight(),
                in, 0.0f, dx, in);
}

Mlp::Mlp(const std::vector<int> &sizes, bool relu_last, uint64_t seed, uint64_t tag)
    : relu_last_(relu_last) {
  for (size_t l = 0; l + 1 < sizes.size(); ++l)
    layers_.emplace_back(sizes[l], sizes[l + 1], seed, tag * 64 + l);
  outputs_.resize(layers_.size());
}

const float *Mlp::forward(const float *x, int rows) {
  rows_ = rows;
  input_ = x;
  const float *h = x;
  for (size_t l = 0; l < layers_.size(); ++l) {
    std::vector<float> &y = outputs_[l];
    y.resize(size_t(rows) * layers_[l].out);
    layers_[l].forward(h, rows, y.data());
    if (l + 1 < layers_.size() || relu_last_)
      for (float &v : y) v = std::max(v, 0.0f);
    h = y.data();
  }
  return h;
}

void Mlp::backward(const float *dy, float *dx, const std::function<void(int)> &grad_ready) {
  const int last = int(layers_.size()) - 1;
  delta_.assign(dy, dy + size_t(rows_) * layers_[size_t(last)].out);
  for (int l = last; l >= 0; --l) {
    Linear &layer = layers_[size_t(l)];
    if (l < last || relu_last_) {  // through the ReLU: zero where the output was clamped
      const std::vector<float> &y = outputs_[size_t(l)];
      for (size_t i = 0; i < delta_.size(); ++i)
        if (y[i] <= 0.0f) delta_[i] = 0.0f;
    }
    const float *x = l > 0 ? outputs_[size_t(l) - 1].data() : input_;
    float *d_in = nullptr;
    if (l > 0) {
      delta_next_.resize(size_t(rows_) * layer.in);
      d_in = delta_next_.data();
    } else {
      d_in = dx;
    }
    layer.backward(x, delta_.data(), rows_, d_in);
    grad_ready(l);
    if (l > 0) std::swap(delta_, delta_next_);
  }
}

double softmax_cross_entropy(const float *logits, const uint8_t *labels, int rows, int classes,
                             float *dlogits, int *correct) {
  double loss = 0.0;
  int hits = 0;
  std::vector<float> p(static_cast<size_t>(classes));
  for (int r = 0; r < rows; ++r) {
    const float *z = logits + size_t(r) * classes;
    const int best = int(std::max_element(z, z + classes) - z);
    hits += best == labels[r];
    const float zmax = z[best];
    float sum = 0.0f;
    for (int c = 0; c < classes; ++c) sum += (p[size_t(c)] = std::exp(z[c] - zmax));
    loss += double(std::log(sum) - (z[labels[r]] - zmax));
    if (dlogits)
      for (int c = 0; c < classes; ++c)
        dlogits[size_t(r) * classes + c] =
            (p[size_t(c)] / sum - (c == labels[r] ? 1.0f : 0.0f)) / float(rows);
  }
  if (correct) *correct = hits;
  return loss;
}

void sgd_momentum(Linear &layer, float lr, float momentum, float scale) {
  for (size_t i = 0; i < layer.params.size(); ++i) {
    layer.velocity[i] = momentum * layer.velocity[i] + layer.grad[i] * scale;
    layer.params[i] -= lr * layer.velocity[i];
  }
}

}  // namespace dlrm
