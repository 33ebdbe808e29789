#include "core/wire.hpp"

#include <climits>
#include <cmath>
#include <cstring>

#include "core/elias_fano.hpp"
#include "core/error.hpp"

namespace dct::detail::wire {

std::size_t index_bytes(IndexCoding coding, std::size_t entries, std::size_t range) {
  switch (coding) {
    case IndexCoding::offsets:
      return entries * sizeof(WireIndex);
    case IndexCoding::bitmap:
      return (range + 7) / 8;
    case IndexCoding::elias_fano:
      return elias_fano::layout(entries, range).bytes();
  }
  return 0;
}

std::size_t BlockFormat::index_bytes() const {
  return entries > 0 ? wire::index_bytes(indices, entries, range) : 0;
}

template <typename T>
void encode_block(const BlockFormat &format, const WireIndex *idx, const T *val,
                  std::uint64_t begin, std::byte *out) {
  std::memset(out, 0, format.units() * kUnitBytes);
  const std::size_t entries = format.entries;
  if (format.coding == ValueCoding::native) {
    if (entries > 0) std::memcpy(out, val, entries * sizeof(T));
  } else if (format.coding == ValueCoding::sign) {
    if (entries > 0) {
      const T magnitude = std::signbit(val[0]) ? -val[0] : val[0];
      std::memcpy(out, &magnitude, sizeof(T));
      for (std::size_t j = 0; j < entries; ++j)
        if (std::signbit(val[j])) out[sizeof(T) + j / 8] |= std::byte(1u << (j % 8));
    }
  } else {
    for (std::size_t j = 0; j < entries; ++j) {
      const std::uint16_t bits = encode_value16(val[j], format.coding);
      std::memcpy(out + 2 * j, &bits, 2);
    }
  }
  std::byte *indices = out + format.values_bytes();
  if (format.indices == IndexCoding::elias_fano) {
    elias_fano::encode(elias_fano::layout(entries, format.range), idx, begin, indices);
  } else if (format.indices == IndexCoding::bitmap) {
    for (std::size_t j = 0; j < entries; ++j) {
      const std::uint64_t offset = idx[j] - begin;
      indices[offset / 8] |= std::byte(1u << (offset % 8));
    }
  } else {
    for (std::size_t j = 0; j < entries; ++j) {
      const WireIndex offset = static_cast<WireIndex>(idx[j] - begin);
      std::memcpy(indices + j * sizeof(WireIndex), &offset, sizeof offset);
    }
  }
}

template <typename T>
bool decode_block(const BlockFormat &format, const std::byte *in, std::size_t in_bytes,
                  std::uint64_t begin, WireIndex *idx, T *val) {
  if (in_bytes < format.bytes()) return false;
  const std::size_t entries = format.entries;
  const std::byte *indices = in + format.values_bytes();
  if (format.indices == IndexCoding::elias_fano) {
    if (!elias_fano::decode(elias_fano::layout(entries, format.range), indices, format.range, begin,
                            idx))
      return false;
  } else if (format.indices == IndexCoding::bitmap) {
    std::size_t found = 0;
    for (std::size_t word = 0; word * 64 < format.range; ++word) {
      std::uint64_t bits = 0;
      const std::size_t bytes = std::min<std::size_t>(8, (format.range + 7) / 8 - word * 8);
      std::memcpy(&bits, indices + word * 8, bytes);
      const std::size_t valid_bits = std::min<std::size_t>(64, format.range - word * 64);
      if (valid_bits < 64 && (bits >> valid_bits) != 0) return false;  // bits past the range
      while (bits != 0) {
        if (found == entries) return false;
        idx[found++] = static_cast<WireIndex>(begin + word * 64 + __builtin_ctzll(bits));
        bits &= bits - 1;
      }
    }
    if (found != entries) return false;
  } else {
    std::uint64_t previous = 0;
    for (std::size_t j = 0; j < entries; ++j) {
      WireIndex offset;
      std::memcpy(&offset, indices + j * sizeof(WireIndex), sizeof offset);
      if (offset >= format.range || (j > 0 && offset <= previous)) return false;
      previous = offset;
      idx[j] = static_cast<WireIndex>(begin + offset);
    }
  }
  if (format.coding == ValueCoding::native) {
    if (entries > 0) std::memcpy(val, in, entries * sizeof(T));
  } else if (format.coding == ValueCoding::sign) {
    if (entries == 0) return true;
    T magnitude;
    std::memcpy(&magnitude, in, sizeof(T));
    if (std::signbit(magnitude)) return false;
    const std::byte *signs = in + sizeof(T);
    if (entries % 8 != 0 && (std::to_integer<unsigned>(signs[entries / 8]) >> (entries % 8)) != 0)
      return false;  // bits past the last entry
    for (std::size_t j = 0; j < entries; ++j)
      val[j] = (std::to_integer<unsigned>(signs[j / 8]) >> (j % 8)) & 1u ? -magnitude : magnitude;
  } else {
    for (std::size_t j = 0; j < entries; ++j) {
      std::uint16_t bits;
      std::memcpy(&bits, in + 2 * j, 2);
      val[j] = decode_value16<T>(bits, format.coding);
    }
  }
  return true;
}

#define DCT_INSTANTIATE_CODEC(T)                                                                  \
  template void encode_block<T>(const BlockFormat &, const WireIndex *, const T *, std::uint64_t, \
                                std::byte *);                                                     \
  template bool decode_block<T>(const BlockFormat &, const std::byte *, std::size_t,              \
                                std::uint64_t, WireIndex *, T *);
DCT_INSTANTIATE_CODEC(float)
DCT_INSTANTIATE_CODEC(double)
#undef DCT_INSTANTIATE_CODEC

int mpi_units(std::size_t units) {
  require(units <= static_cast<std::size_t>(INT_MAX), DCT_ERR_COUNT, [&] {
    return "a message of " + std::to_string(units * kUnitBytes) +
           " bytes exceeds what one MPI call can describe";
  });
  return static_cast<int>(units);
}

}  // namespace dct::detail::wire
