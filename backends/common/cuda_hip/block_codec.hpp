// The sparse block codec (src/core/wire.hpp) on the device: the kernels behind
// Backend::encode_block and Backend::decode_block of the CUDA and HIP backends, so that a
// request on device memory sends and receives compressed bytes without decoding or encoding
// them on the host. The bytes are wire::encode_block's, bit for bit (tests/gpu_emulation checks
// every coding against it), and decoding validates as wire::decode_block does, with the same
// verdict on every block.
//
// The block is handled as 32-bit little-endian words (bit b of the stream is bit b % 32 of word
// b / 32; GPUs are little-endian, as the host format is defined): an entry's fields are ORed
// into a zeroed block with atomicOr, one thread per entry, so that entries whose bits share a
// word need no ordering. Decoding a bitmap or an Elias–Fano code needs each set bit's rank: the
// ones of each 32-bit chunk are counted, scanned (CUB / rocPRIM), and each chunk then writes
// its entries at their ranks.
//
// Included by cuda_hip_backend.hpp inside its namespace; uses its launch helpers.
#pragma once

/// The fields of a wire::BlockFormat as the kernels use them, in bits from the block's start.
struct BlockBits {
  std::size_t entries = 0;
  std::size_t range = 0;
  ValueCoding coding = ValueCoding::native;
  unsigned native_bytes = 4;
  wire::IndexCoding indices = wire::IndexCoding::offsets;
  std::size_t index_bit = 0;  ///< where the indices start: 8 * values_bytes()
  unsigned low_bits = 0;      ///< Elias–Fano: low bits per entry
  std::size_t ones_bit = 0;   ///< where the set bits start: the bitmap, Elias–Fano's unary part
  std::size_t ones_bits = 0;  ///< their length
  std::size_t words = 0;      ///< 32-bit words of the whole block (its units)

  /// The end of the index code (padding bits to its last byte must be zero).
  __host__ __device__ std::size_t code_end() const { return ones_bit + ones_bits; }
};

inline BlockBits block_bits(const wire::BlockFormat &format) {
  BlockBits b;
  b.entries = format.entries;
  b.range = format.range;
  b.coding = format.coding;
  b.native_bytes = static_cast<unsigned>(format.native_bytes);
  b.indices = format.indices;
  b.index_bit = 8 * format.values_bytes();
  b.ones_bit = b.index_bit;
  if (format.indices == wire::IndexCoding::elias_fano) {
    const wire::elias_fano::Layout layout = wire::elias_fano::layout(format.entries, format.range);
    b.low_bits = layout.low_bits;
    b.ones_bit = b.index_bit + format.entries * layout.low_bits;
    b.ones_bits = layout.high_bits;
  } else if (format.indices == wire::IndexCoding::bitmap) {
    b.ones_bits = format.range;
  }
  b.words = format.units() * wire::kUnitBytes / 4;
  return b;
}

/// ORs the `width` (<= 64) low bits of `value` into the stream at `bit`.
__device__ inline void or_bits(unsigned int *words, std::size_t bit, std::uint64_t value,
                               unsigned width) {
  while (width > 0) {
    const unsigned shift = static_cast<unsigned>(bit % 32);
    const unsigned take = 32 - shift < width ? 32 - shift : width;
    const unsigned int part =
        static_cast<unsigned int>(value & (take == 32 ? 0xffffffffull : ((1ull << take) - 1)));
    if (part != 0) atomicOr(words + bit / 32, part << shift);
    value >>= take;
    bit += take;
    width -= take;
  }
}

/// The `width` (<= 64) bits of the stream at `bit`; words past `count` read as zero.
__host__ __device__ inline std::uint64_t get_bits(const unsigned int *words, std::size_t count,
                                                  std::size_t bit, unsigned width) {
  std::uint64_t value = 0;
  unsigned got = 0;
  while (got < width) {
    const std::size_t word = bit / 32;
    const unsigned shift = static_cast<unsigned>(bit % 32);
    const unsigned take = 32 - shift < width - got ? 32 - shift : width - got;
    const std::uint64_t part = word < count ? (words[word] >> shift) : 0u;
    value |= (part & (take == 32 ? 0xffffffffull : ((1ull << take) - 1))) << got;
    got += take;
    bit += take;
  }
  return value;
}

/// One thread per entry: its value and its index into the zeroed block (wire::encode_block).
template <typename T>
__global__ void encode_entries(BlockBits b, const WireIndex *idx, const T *val, std::uint64_t begin,
                               unsigned int *words) {
  for (std::size_t j = first_index(); j < b.entries; j += index_stride()) {
    if (b.coding == ValueCoding::native) {
      reinterpret_cast<T *>(words)[j] = val[j];
    } else if (b.coding == ValueCoding::sign) {
      if (j == 0) reinterpret_cast<T *>(words)[0] = f16::sign_bit(val[0]) ? -val[0] : val[0];
      if (f16::sign_bit(val[j])) or_bits(words, 8 * sizeof(T) + j, 1, 1);
    } else {
      or_bits(words, 16 * j, encode_value16(val[j], b.coding), 16);
    }
    const std::uint64_t offset = idx[j] - begin;
    if (b.indices == wire::IndexCoding::offsets) {
      or_bits(words, b.index_bit + 32 * j, offset, 32);
    } else if (b.indices == wire::IndexCoding::bitmap) {
      or_bits(words, b.index_bit + offset, 1, 1);
    } else {
      if (b.low_bits > 0) or_bits(words, b.index_bit + j * b.low_bits, offset, b.low_bits);
      or_bits(words, b.ones_bit + (offset >> b.low_bits) + j, 1, 1);
    }
  }
}

/// Set bits of a word (the scan's functor is also compiled for the host, where __popc is not).
__host__ __device__ inline unsigned int ones_in(unsigned int x) {
  x = x - ((x >> 1) & 0x55555555u);
  x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  return (((x + (x >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
}

/// The set bits of the index code (a bitmap, or Elias–Fano's unary part), 32 at a time: the
/// scan's input is their count.
struct ChunkOnes {
  BlockBits b;
  const unsigned int *words;
  __host__ __device__ unsigned int chunk(std::size_t c) const {
    const std::size_t start = 32 * c;
    const unsigned width =
        b.ones_bits - start < 32 ? static_cast<unsigned>(b.ones_bits - start) : 32u;
    return static_cast<unsigned int>(get_bits(words, b.words, b.ones_bit + start, width));
  }
  __host__ __device__ unsigned int operator()(std::size_t c) const { return ones_in(chunk(c)); }
};

// Decoding's verdict: flags a failed check.
__device__ inline void reject(unsigned int *failed) {
  atomicOr(failed, 1u);
}

/// One thread per chunk of set bits: the entries they stand for, at their ranks.
__global__ void decode_ones(ChunkOnes ones, std::size_t chunks, const unsigned int *inclusive,
                            std::uint64_t begin, WireIndex *idx, unsigned int *failed) {
  const BlockBits &b = ones.b;
  for (std::size_t c = first_index(); c < chunks; c += index_stride()) {
    unsigned int bits = ones.chunk(c);
    std::size_t rank = inclusive[c] - ones_in(bits);
    while (bits != 0 && rank < b.entries) {
      const std::size_t position = 32 * c + static_cast<std::size_t>(__ffs(bits) - 1);
      bits &= bits - 1;
      std::uint64_t offset = position;
      if (b.indices == wire::IndexCoding::elias_fano)
        offset = (std::uint64_t(position - rank) << b.low_bits) |
                 get_bits(ones.words, b.words, b.index_bit + rank * b.low_bits, b.low_bits);
      if (offset >= b.range) reject(failed);
      idx[rank++] = static_cast<WireIndex>(begin + offset);
    }
  }
}

/// One thread per entry: its value; plain offsets; the order of the indices.
template <typename T>
__global__ void decode_entries(BlockBits b, const unsigned int *words, std::uint64_t begin,
                               WireIndex *idx, T *val, unsigned int *failed) {
  for (std::size_t j = first_index(); j < b.entries; j += index_stride()) {
    if (b.coding == ValueCoding::native) {
      val[j] = reinterpret_cast<const T *>(words)[j];
    } else if (b.coding == ValueCoding::sign) {
      const T magnitude = reinterpret_cast<const T *>(words)[0];
      if (j == 0 && f16::sign_bit(magnitude)) reject(failed);
      val[j] = get_bits(words, b.words, 8 * sizeof(T) + j, 1) ? -magnitude : magnitude;
    } else {
      val[j] = decode_value16<T>(static_cast<std::uint16_t>(get_bits(words, b.words, 16 * j, 16)),
                                 b.coding);
    }
    if (b.indices == wire::IndexCoding::offsets) {
      const std::uint64_t offset = get_bits(words, b.words, b.index_bit + 32 * j, 32);
      if (offset >= b.range) reject(failed);
      idx[j] = static_cast<WireIndex>(begin + offset);
    }
  }
}

/// Strictly increasing indices (Elias–Fano and offsets; a bitmap's are by construction).
__global__ void check_increasing(std::size_t entries, const WireIndex *idx, unsigned int *failed) {
  for (std::size_t j = first_index() + 1; j < entries; j += index_stride())
    if (idx[j] <= idx[j - 1]) reject(failed);
}

/// One thread: the padding bits that decoding must find zero (the sign bits past the last
/// entry; the bits after the index code up to its last byte).
__global__ void check_padding(BlockBits b, const unsigned int *words, unsigned int *failed) {
  if (first_index() != 0) return;
  if (b.coding == ValueCoding::sign && b.entries % 8 != 0) {
    const std::size_t from = 8 * b.native_bytes + b.entries;
    if (get_bits(words, b.words, from, static_cast<unsigned>(8 - b.entries % 8)) != 0)
      reject(failed);
  }
  const std::size_t end = b.code_end();
  if (b.indices != wire::IndexCoding::offsets && end % 8 != 0)
    if (get_bits(words, b.words, end, static_cast<unsigned>(8 - end % 8)) != 0) reject(failed);
}
