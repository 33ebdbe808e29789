// Reads a fuzzer's bytes as the fields of a harness's input: fixed-size little-endian integers
// from the front (zero once the bytes run out), the rest as the message. A minimal form of
// libFuzzer's FuzzedDataProvider, which ships with Clang only: the replay tests build with any
// compiler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace dct::fuzz {

class Input {
 public:
  Input(const std::uint8_t *data, std::size_t size) : data_(data), size_(size) {}

  /// The next sizeof(T) bytes as an unsigned T (missing bytes read as zero).
  template <typename T>
  T take() {
    std::uint8_t bytes[sizeof(T)] = {};
    const std::size_t n = size_ < sizeof(T) ? size_ : sizeof(T);
    if (n > 0) std::memcpy(bytes, data_, n);
    data_ += n;
    size_ -= n;
    T value = 0;
    for (std::size_t i = sizeof(T); i-- > 0;) value = static_cast<T>((value << 8) | bytes[i]);
    return value;
  }

  /// The bytes left, copied into a buffer of exactly their size, so that AddressSanitizer
  /// catches a decoder that reads one byte past the message.
  std::vector<std::byte> rest() const {
    std::vector<std::byte> bytes(size_);
    if (size_ > 0) std::memcpy(bytes.data(), data_, size_);
    return bytes;
  }

 private:
  const std::uint8_t *data_;
  std::size_t size_;
};

}  // namespace dct::fuzz
