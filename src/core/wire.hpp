// How dct's messages travel: 8-byte units, the sparse block of (index, value) entries (values,
// then indices as offsets, a bitmap or an Elias-Fano code), the ring allreduce's byte count
// every status compares with, and buffers that grow without creeping. The allreduce's exchanges
// (dp/exchange/) encode and decode blocks; DCT-MP and the request engine count in its units.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/compute_backend.hpp"

namespace dct::detail::wire {

/// Messages travel in 8-byte units so that values stay aligned in every receive buffer.
constexpr std::size_t kUnitBytes = 8;

/// Units of a dense block of `elements` values, padded.
template <typename T>
std::size_t dense_units(std::size_t elements) {
  return (elements * sizeof(T) + kUnitBytes - 1) / kUnitBytes;
}

/// How the indices of a sparse block travel.
enum class IndexCoding : std::uint8_t {
  offsets,     ///< 32-bit offsets from the block's first index
  bitmap,      ///< one bit per index of the range
  elias_fano,  ///< ~2 + log2(range / entries) bits per entry (elias_fano.hpp)
};

/// How one sparse block travels: `entries` (index, value) pairs whose indices lie in a range
/// [begin, begin + range): [values][indices], padded to whole units. Values as `coding` says
/// (the sender already rounded them: wire_value; for `sign` every value is +-m, sent as m in
/// the tensor's type and one bit per entry, 1 = negative, padding bits zero); indices in the
/// smallest of the three IndexCoding forms for this (entries, range): Elias–Fano almost always, a
/// bitmap above about a quarter of the range, plain offsets only where Elias–Fano would need more
/// than 32 bits. Sender and receiver derive the format from what both know (entries, range,
/// coding): no header.
struct BlockFormat {
  std::size_t entries = 0;
  std::size_t range = 0;
  ValueCoding coding = ValueCoding::native;
  std::size_t native_bytes = 0;  ///< of one element of the tensor's type
  IndexCoding indices = IndexCoding::offsets;

  std::size_t values_bytes() const { return detail::values_bytes(coding, entries, native_bytes); }
  std::size_t index_bytes() const;
  std::size_t bytes() const { return values_bytes() + index_bytes(); }
  std::size_t units() const { return (bytes() + kUnitBytes - 1) / kUnitBytes; }
};

/// Bytes of each index coding for `entries` indices in a range of `range`.
std::size_t index_bytes(IndexCoding coding, std::size_t entries, std::size_t range);

template <typename T>
BlockFormat block_format(std::size_t entries, std::size_t range, ValueCoding coding) {
  BlockFormat format;
  format.entries = entries;
  format.range = range;
  format.coding = coding;
  format.native_bytes = sizeof(T);
  if (entries > 0) {  // the smallest; ties go to the simpler coding
    std::size_t best = index_bytes(IndexCoding::offsets, entries, range);
    for (IndexCoding candidate : {IndexCoding::bitmap, IndexCoding::elias_fano}) {
      const std::size_t bytes = index_bytes(candidate, entries, range);
      if (bytes < best) {
        best = bytes;
        format.indices = candidate;
      }
    }
  }
  return format;
}

/// A sparse block is sent when it is smaller than the dense one.
template <typename T>
bool sparse_is_smaller(std::size_t entries, std::size_t elements) {
  return block_format<T>(entries, elements, ValueCoding::native).bytes() < elements * sizeof(T);
}

/// Writes the block (format.units() units, padding zeroed). `idx` are absolute indices in
/// [begin, begin + format.range), strictly increasing; `val` already rounded for the coding.
template <typename T>
void encode_block(const BlockFormat &format, const WireIndex *idx, const T *val,
                  std::uint64_t begin, std::byte *out);

/// Reads a block of `in_bytes` received bytes into idx/val (format.entries each, absolute
/// indices) after validating it: the message holds the whole block, the indices strictly
/// increase and lie in [begin, begin + format.range), a bitmap or Elias–Fano code holds
/// exactly format.entries entries, and no padding bit is set. Returns false, with idx/val
/// unspecified, otherwise.
template <typename T>
bool decode_block(const BlockFormat &format, const std::byte *in, std::size_t in_bytes,
                  std::uint64_t begin, WireIndex *idx, T *val);

/// What decode_block checks of a block's indices, on a list this rank holds: strictly
/// increasing, in [begin, begin + range). One compare per entry, against a decode's unpacking.
inline bool indices_valid(const WireIndex *idx, std::size_t entries, std::uint64_t begin,
                          std::uint64_t range) {
  std::uint64_t next = begin;  // the least the next index may be
  for (std::size_t j = 0; j < entries; ++j) {
    if (idx[j] < next) return false;
    next = std::uint64_t(idx[j]) + 1;
  }
  return next <= begin + range;
}

/// Bytes per rank of a bandwidth-optimal (ring) allreduce of `bytes`: 2 (P-1)/P bytes.
inline MPI_Count ring_bytes(MPI_Count bytes, int ranks) {
  return ranks > 1 ? 2 * (ranks - 1) * bytes / ranks : 0;
}

/// `v.assign(size, value)` (or the range), its storage grown with room to spare (a quarter more
/// than asked, at least half more than it had) when it must grow: assign allocates exactly what
/// it needs, and sizes that creep up from call to call (split's segments after a re-balance,
/// recursive doubling's merged lists) allocated on each (tests/mpi/test_steady_state.cpp).
template <typename Vector>
void reserve_growing(Vector &v, std::size_t size) {
  if (size > v.capacity()) v.reserve(std::max(size + size / 4, v.capacity() + v.capacity() / 2));
}
template <typename Vector>
void assign_growing(Vector &v, std::size_t size, const typename Vector::value_type &value) {
  reserve_growing(v, size);
  v.assign(size, value);
}
template <typename Vector, typename Iterator>
void assign_growing(Vector &v, Iterator first, Iterator last) {
  reserve_growing(v, static_cast<std::size_t>(last - first));
  v.assign(first, last);
}
/// `v.resize(size)` with the same room to spare (resize grows from the size, not the capacity:
/// a vector shrunk by one call and grown past its capacity by the next got exactly that).
template <typename Vector>
void resize_growing(Vector &v, std::size_t size) {
  reserve_growing(v, size);
  v.resize(size);
}

/// Sizes a message buffer to `units` units, never to zero bytes: some MPIs (SimGrid's SMPI)
/// mishandle a null buffer even with a zero count.
inline void size_buffer(std::vector<std::byte> &buffer, std::size_t units) {
  resize_growing(buffer, (units > 0 ? units : 1) * kUnitBytes);
}

/// Units as the int MPI's v-collectives take; throws DCT_ERR_COUNT past INT_MAX.
int mpi_units(std::size_t units);

}  // namespace dct::detail::wire
