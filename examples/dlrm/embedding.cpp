// Embedding shard and dot-product interaction of the DLRM demo.
#include "embedding.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "layers.hpp"

namespace dlrm {

EmbeddingShard::EmbeddingShard(int tables, int rows, int dim, int rank, int ranks, uint64_t seed)
    : rows_(rows), dim_(dim), rank_(rank), ranks_(ranks), local_(tables / ranks) {
  if (tables % ranks != 0)
    throw std::invalid_argument("table count not a multiple of the rank count");
  weights_.resize(size_t(local_) * rows_ * dim_);
  const float a = std::sqrt(1.0f / float(rows));
  for (int lt = 0; lt < local_; ++lt) {
    const uint64_t tag = 1000 + uint64_t(global_table(lt));  // per global table: P-independent
    float *w = &weights_[size_t(lt) * rows_ * dim_];
    for (size_t i = 0; i < size_t(rows_) * dim_; ++i) w[i] = uniform_init(seed, tag, i, a);
  }
}

void EmbeddingShard::lookup(const int32_t *categorical, int tables, const int *samples, int count,
                            float *out) const {
  for (int s = 0; s < count; ++s) {
    const int32_t *cat = categorical + size_t(samples[s]) * tables;
    for (int lt = 0; lt < local_; ++lt) {
      const float *src = row(lt, cat[global_table(lt)]);
      std::copy(src, src + dim_, out + (size_t(s) * local_ + lt) * dim_);
    }
  }
}

void EmbeddingShard::update(const int32_t *categorical, int tables, const int *samples, int count,
                            const float *grad, float lr) {
  for (int s = 0; s < count; ++s) {
    const int32_t *cat = categorical + size_t(samples[s]) * tables;
    for (int lt = 0; lt < local_; ++lt) {
      float *dst = row(lt, cat[global_table(lt)]);
      const float *g = grad + (size_t(s) * local_ + lt) * dim_;
      for (int k = 0; k < dim_; ++k) dst[k] -= lr * g[k];
    }
  }
}

void interaction_forward(const float *z, int rows, int vectors, int dim, float *out) {
  const int width = interaction_width(vectors, dim);
  std::vector<float> gram(size_t(vectors) * vectors);
  for (int r = 0; r < rows; ++r) {
    const float *zr = z + size_t(r) * vectors * dim;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, vectors, vectors, dim, 1.0f, zr, dim, zr,
                dim, 0.0f, gram.data(), vectors);
    float *o = out + size_t(r) * width;
    std::copy(zr, zr + dim, o);
    int k = dim;
    for (int i = 1; i < vectors; ++i)
      for (int j = 0; j < i; ++j) o[k++] = gram[size_t(i) * vectors + j];
  }
}

void interaction_backward(const float *z, const float *dout, int rows, int vectors, int dim,
                          float *dz) {
  const int width = interaction_width(vectors, dim);
  std::vector<float> g(size_t(vectors) * vectors);
  for (int r = 0; r < rows; ++r) {
    const float *zr = z + size_t(r) * vectors * dim;
    const float *d = dout + size_t(r) * width;
    // d(z_i . z_j) reaches both vectors: dZ = S Z with S symmetric, S_ij = S_ji = dout_ij.
    std::fill(g.begin(), g.end(), 0.0f);
    int k = dim;
    for (int i = 1; i < vectors; ++i)
      for (int j = 0; j < i; ++j) g[size_t(i) * vectors + j] = g[size_t(j) * vectors + i] = d[k++];
    float *dzr = dz + size_t(r) * vectors * dim;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, vectors, dim, vectors, 1.0f, g.data(),
                vectors, zr, dim, 0.0f, dzr, dim);
    for (int c = 0; c < dim; ++c) dzr[c] += d[c];  // the first vector is also passed through
  }
}

}  // namespace dlrm
