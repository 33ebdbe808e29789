// Fashion-MNIST reading (zlib) and the feature mapping of the DLRM demo.
#include "data.hpp"

#include <zlib.h>

#include <sys/stat.h>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace dlrm {
namespace {

bool file_exists(const std::string &path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

/// An open IDX file. gzopen reads uncompressed files transparently, so `.gz` is optional.
class IdxFile {
 public:
  IdxFile(const std::string &dir, const std::string &name) {
    path_ = dir + "/" + name + ".gz";
    if (!file_exists(path_) && file_exists(dir + "/" + name)) path_ = dir + "/" + name;
    if (!file_exists(path_))
      throw std::runtime_error(path_ +
                               ": no such file (is dataset-fashion-mnist installed? "
                               "--data DIR selects another directory)");
    file_ = gzopen(path_.c_str(), "rb");
    if (!file_) throw std::runtime_error(path_ + ": cannot open: " + std::strerror(errno));
  }
  ~IdxFile() {
    if (file_) gzclose(file_);
  }
  IdxFile(const IdxFile &) = delete;
  IdxFile &operator=(const IdxFile &) = delete;

  /// Reads exactly `bytes` bytes or throws, naming what was being read.
  void read(void *out, size_t bytes, const char *what) {
    auto *p = static_cast<unsigned char *>(out);
    while (bytes > 0) {
      const unsigned chunk = bytes > (1u << 30) ? (1u << 30) : static_cast<unsigned>(bytes);
      const int got = gzread(file_, p, chunk);
      if (got < 0) {
        int code = 0;
        throw std::runtime_error(path_ + ": corrupt or not gzip data while reading " + what + " (" +
                                 gzerror(file_, &code) + ")");
      }
      if (got == 0) throw std::runtime_error(path_ + ": truncated while reading " + what);
      p += got;
      bytes -= static_cast<size_t>(got);
    }
  }

  /// A big-endian 32-bit header field.
  uint32_t read_u32(const char *what) {
    unsigned char b[4];
    read(b, 4, what);
    return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
  }

  const std::string &path() const { return path_; }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

/// IDX magic: two zero bytes, type 0x08 (unsigned byte), number of dimensions.
constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
/// Larger than any real split; guards the allocation against a corrupt header.
constexpr uint32_t kMaxImages = 1000000;

}  // namespace

Split load_split(const std::string &dir, const std::string &prefix, int limit) {
  IdxFile images(dir, prefix + "-images-idx3-ubyte");
  IdxFile labels(dir, prefix + "-labels-idx1-ubyte");
  const uint32_t image_magic = images.read_u32("the magic number");
  if (image_magic != kImagesMagic)
    throw std::runtime_error(images.path() + ": bad magic number " + std::to_string(image_magic) +
                             " (expected 2051, an IDX file of 3-D unsigned bytes)");
  const uint32_t n = images.read_u32("the image count");
  const uint32_t rows = images.read_u32("the row count");
  const uint32_t cols = images.read_u32("the column count");
  if (rows != kImageSide || cols != kImageSide)
    throw std::runtime_error(images.path() + ": images are " + std::to_string(rows) + "x" +
                             std::to_string(cols) + ", expected 28x28");
  if (n == 0 || n > kMaxImages)
    throw std::runtime_error(images.path() + ": implausible image count " + std::to_string(n));
  const uint32_t label_magic = labels.read_u32("the magic number");
  if (label_magic != kLabelsMagic)
    throw std::runtime_error(labels.path() + ": bad magic number " + std::to_string(label_magic) +
                             " (expected 2049, an IDX file of 1-D unsigned bytes)");
  const uint32_t label_count = labels.read_u32("the label count");
  if (label_count != n)
    throw std::runtime_error(labels.path() + ": " + std::to_string(label_count) + " labels for " +
                             std::to_string(n) + " images in " + images.path());

  Split split;
  split.count = (limit > 0 && uint32_t(limit) < n) ? limit : int(n);
  split.pixels.resize(size_t(split.count) * kPixels);
  split.labels.resize(size_t(split.count));
  images.read(split.pixels.data(), split.pixels.size(), "the pixels");
  labels.read(split.labels.data(), split.labels.size(), "the labels");
  for (int i = 0; i < split.count; ++i)
    if (split.labels[size_t(i)] >= kClasses)
      throw std::runtime_error(labels.path() + ": label " +
                               std::to_string(split.labels[size_t(i)]) + " of image " +
                               std::to_string(i) + " is not in 0..9");
  return split;
}

void raw_features(const Split &split, int i, float *out) {
  const uint8_t *p = &split.pixels[size_t(i) * kPixels];
  for (int k = 0; k < kPixels; ++k) out[k] = float(p[k]) * (1.0f / 255.0f);
}

void dense_features(const Split &split, int i, float *out) {
  const uint8_t *p = &split.pixels[size_t(i) * kPixels];
  const int half = kImageSide / 2;
  for (int r = 0; r < half; ++r)
    for (int c = 0; c < half; ++c) {
      const int sum = p[(2 * r) * kImageSide + 2 * c] + p[(2 * r) * kImageSide + 2 * c + 1] +
                      p[(2 * r + 1) * kImageSide + 2 * c] + p[(2 * r + 1) * kImageSide + 2 * c + 1];
      out[r * half + c] = float(sum) * (1.0f / (4.0f * 255.0f));
    }
}

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::vector<int32_t> categorical_features(const Split &split, int table_size) {
  const int patch = kImageSide / kPatchGrid;  // 7
  std::vector<int32_t> out(size_t(split.count) * kCategorical);
  for (int i = 0; i < split.count; ++i) {
    const uint8_t *p = &split.pixels[size_t(i) * kPixels];
    for (int t = 0; t < kCategorical; ++t) {
      const int r0 = (t / kPatchGrid) * patch, c0 = (t % kPatchGrid) * patch;
      uint64_t bits = 0;
      for (int r = 0; r < patch; ++r)
        for (int c = 0; c < patch; ++c)
          bits = (bits << 1) | uint64_t(p[(r0 + r) * kImageSide + c0 + c] > 127);
      out[size_t(i) * kCategorical + t] =
          int32_t(mix64(bits ^ (uint64_t(t) << 56)) % uint64_t(table_size));
    }
  }
  return out;
}

std::vector<int> epoch_order(int n, uint64_t seed, int epoch) {
  std::vector<int> order(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) order[size_t(i)] = i;
  uint64_t state = mix64(seed ^ mix64(uint64_t(epoch) + 1));
  for (int i = n - 1; i > 0; --i) {
    state = mix64(state);
    const int j = int(state % uint64_t(i + 1));
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

}  // namespace dlrm
