/**
 * @file embedding.hpp
 * @brief The sparse half of DLRM: this rank's shard of the embedding tables, and the pairwise
 * dot-product feature interaction.
 */
#ifndef DCT_DLRM_EMBEDDING_HPP
#define DCT_DLRM_EMBEDDING_HPP

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlrm {

/**
 * @brief The tables this rank owns: global table g lives on rank g % P, as local table g / P.
 * Each is `rows x dim`, initialised uniform in +-sqrt(1/rows) (DLRM's choice) from
 * (seed, g), so the init does not depend on the number of ranks.
 */
class EmbeddingShard {
 public:
  EmbeddingShard(int tables, int rows, int dim, int rank, int ranks, uint64_t seed);

  /** @brief Tables on this rank (tables / P). */
  int local_tables() const { return local_; }
  /** @brief Floats of one sample's lookups from this shard: local_tables * dim. */
  int row_length() const { return local_ * dim_; }
  /** @brief The global table number of local table `lt`. */
  int global_table(int lt) const { return lt * ranks_ + rank_; }

  /**
   * @brief Writes the lookups of `samples` (global sample numbers into `categorical`, count x
   * `tables`) into `out` (count x row_length): this shard's tables side by side.
   */
  void lookup(const int32_t *categorical, int tables, const int *samples, int count,
              float *out) const;
  /**
   * @brief Sparse SGD: `row -= lr * grad` for every (sample, local table), in sample order so
   * that repeated rows are updated deterministically. `grad` is laid out as `lookup`'s output.
   */
  void update(const int32_t *categorical, int tables, const int *samples, int count,
              const float *grad, float lr);

  /** @brief The raw parameters, for checksums. */
  const std::vector<float> &weights() const { return weights_; }
  std::vector<float> &weights() { return weights_; }

 private:
  float *row(int lt, int32_t index) { return &weights_[(size_t(lt) * rows_ + index) * dim_]; }
  const float *row(int lt, int32_t index) const {
    return &weights_[(size_t(lt) * rows_ + index) * dim_];
  }
  int rows_, dim_, rank_, ranks_, local_;
  std::vector<float> weights_;
};

/**
 * @brief Pairwise dot products among `vectors` vectors of `dim` per sample (the bottom MLP's
 * output first, then the embeddings): `out` (rows x (dim + vectors*(vectors-1)/2)) = the first
 * vector followed by the strict lower triangle of Z Z^T, with Z the sample's vectors x dim
 * matrix (one cblas_sgemm per sample).
 */
void interaction_forward(const float *z, int rows, int vectors, int dim, float *out);

/**
 * @brief Gradient of interaction_forward: from dout (same shape as `out`) and the same `z`,
 * writes dz (rows x vectors x dim).
 */
void interaction_backward(const float *z, const float *dout, int rows, int vectors, int dim,
                          float *dz);

/** @brief Width of interaction_forward's output. */
inline int interaction_width(int vectors, int dim) {
  return dim + vectors * (vectors - 1) / 2;
}

}  // namespace dlrm

#endif
