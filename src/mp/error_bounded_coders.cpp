// The lossless stage of the error-bounded codec (error_bounded_codec.hpp): LZ4 or zstd over a
// message's body, with the zstd contexts a request's workspace keeps.
#include <lz4.h>
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "core/error.hpp"
#include "mp/error_bounded_codec.hpp"

namespace dct::detail::eb {
namespace {

/// zstd's fastest regular level: the codes are small and the network is the bottleneck only
/// when it is slow, where level 1 already gets most of the ratio.
constexpr int kZstdLevel = 1;

}  // namespace

const char *coder_name(Coder coder) {
  switch (coder) {
    case Coder::lz4:
      return "lz4";
    case Coder::zstd:
      return "zstd";
    default:
      return "none";
  }
}

struct Workspace::Contexts {
  ZSTD_CCtx *compress = ZSTD_createCCtx();
  ZSTD_DCtx *decompress = ZSTD_createDCtx();
  ~Contexts() {
    ZSTD_freeCCtx(compress);
    ZSTD_freeDCtx(decompress);
  }
};

Workspace::Workspace() : contexts_(std::make_unique<Contexts>()) {
  require(contexts_->compress != nullptr && contexts_->decompress != nullptr, DCT_ERR_NO_MEMORY,
          "zstd could not create its contexts");
}
Workspace::~Workspace() = default;

std::size_t Workspace::compress(Coder coder, const std::byte *source, std::size_t bytes,
                                std::byte *target, std::size_t capacity) {
  if (coder == Coder::lz4) {
    if (bytes > std::size_t(LZ4_MAX_INPUT_SIZE) || capacity > std::size_t(INT32_MAX)) return 0;
    const int n = LZ4_compress_default(reinterpret_cast<const char *>(source),
                                       reinterpret_cast<char *>(target), int(bytes), int(capacity));
    return n > 0 ? std::size_t(n) : 0;
  }
  if (coder == Coder::zstd) {
    const std::size_t n =
        ZSTD_compressCCtx(contexts_->compress, target, capacity, source, bytes, kZstdLevel);
    return ZSTD_isError(n) ? 0 : n;
  }
  if (bytes > capacity) return 0;
  if (bytes > 0) std::memcpy(target, source, bytes);
  return bytes;
}

bool Workspace::decompress(Coder coder, const std::byte *source, std::size_t bytes,
                           std::byte *target, std::size_t expected) {
  if (coder == Coder::lz4) {
    if (bytes > std::size_t(INT32_MAX) || expected > std::size_t(INT32_MAX)) return false;
    const int n = LZ4_decompress_safe(reinterpret_cast<const char *>(source),
                                      reinterpret_cast<char *>(target), int(bytes), int(expected));
    return n >= 0 && std::size_t(n) == expected;
  }
  if (coder == Coder::zstd) {
    const std::size_t n =
        ZSTD_decompressDCtx(contexts_->decompress, target, expected, source, bytes);
    return !ZSTD_isError(n) && n == expected;
  }
  if (bytes != expected) return false;
  if (bytes > 0) std::memcpy(target, source, bytes);
  return true;
}

}  // namespace dct::detail::eb
