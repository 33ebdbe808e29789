/**
 * @file data.hpp
 * @brief Fashion-MNIST from gzipped IDX files, and the features the demo derives from it.
 *
 * Debian ships no click log, so the DLRM demo derives its inputs from images: dense features
 * are the 2x2-average-pooled image (14x14 = 196 values in [0, 1]); categorical features are,
 * per 7x7 patch of a 4x4 grid, a hash of the binarised patch modulo the table size.
 */
#ifndef DCT_DLRM_DATA_HPP
#define DCT_DLRM_DATA_HPP

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dlrm {

/** @brief Side of a Fashion-MNIST image (28x28 pixels, one byte each). */
constexpr int kImageSide = 28;
/** @brief Pixels per image. */
constexpr int kPixels = kImageSide * kImageSide;
/** @brief Number of classes. */
constexpr int kClasses = 10;
/** @brief Dense features per sample: the image average-pooled 2x2 to 14x14. */
constexpr int kDenseFeatures = (kImageSide / 2) * (kImageSide / 2);
/** @brief Categorical features (embedding tables): one per 7x7 patch of a 4x4 grid. */
constexpr int kPatchGrid = 4;
/** @brief Number of categorical features. */
constexpr int kCategorical = kPatchGrid * kPatchGrid;

/** @brief One split (train or test) of the data set, pixels kept as bytes to save memory. */
struct Split {
  int count = 0;                ///< Number of images.
  std::vector<uint8_t> pixels;  ///< count x 784, row-major, 0..255.
  std::vector<uint8_t> labels;  ///< count labels in 0..9.
};

/**
 * @brief Reads `<prefix>-images-idx3-ubyte.gz` and `<prefix>-labels-idx1-ubyte.gz` in `dir`
 * (or the same names without `.gz`), keeping the first `limit` images (all if `limit` <= 0).
 * @throws std::runtime_error naming the file and what is wrong (missing, bad magic number,
 * wrong image size, truncated, counts that disagree, label out of range).
 */
Split load_split(const std::string &dir, const std::string &prefix, int limit);

/** @brief Raw pixels of sample `i` scaled to [0, 1] into `out` (784 floats). */
void raw_features(const Split &split, int i, float *out);

/** @brief Dense features of sample `i`: 2x2 average pooling, 196 floats in [0, 1]. */
void dense_features(const Split &split, int i, float *out);

/**
 * @brief Categorical features of every sample: `count x 16` row indices in [0, table_size).
 * Feature t hashes the 49 bits of patch t (pixel > 0.5, i.e. byte > 127) with the patch
 * number, so equal patterns at different positions land on unrelated rows.
 */
std::vector<int32_t> categorical_features(const Split &split, int table_size);

/**
 * @brief The order of the training samples in `epoch`: a Fisher-Yates shuffle of 0..n-1 from
 * (`seed`, `epoch`), identical on every rank and every mode (its own generator and modulo, so
 * it does not depend on the standard library's distributions).
 */
std::vector<int> epoch_order(int n, uint64_t seed, int epoch);

/** @brief splitmix64: the demo's one mixing function (hashes, seeds, shuffles). */
uint64_t mix64(uint64_t x);

}  // namespace dlrm

#endif
