// A checkpoint row's CRC-32 beside its transfer. A load reads a row in pieces and computes the
// CRC-32 of each while it is still in cache: one pass over memory instead of two. Where a
// rank has a core to spare, a second thread computes the CRC-32s (of each piece as soon as it
// is read; of a save's row while it is written), so that a row costs about the larger of its
// transfer and its checksum instead of their sum, which cost about alike (measured:
// docs/performance.md, "Checkpoints: loads in cache-sized pieces").
//
// Private header of src/: include it from the checkpoint sources only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace dct::detail {

/// Fills `bytes` bytes at `data` with `move(offset, length)` over consecutive pieces (a read;
/// it returns false to stop early) and returns the CRC-32 of the bytes moved, continuing
/// `crc`. A throw from `move` ends the call with it, no thread left running. `threaded`:
/// CRC-32 on a second thread (where one starts; else in line).
std::uint32_t move_and_checksum(const std::byte *data, std::size_t bytes, std::uint32_t crc,
                                bool threaded,
                                const std::function<bool(std::size_t, std::size_t)> &move);

/// Runs `work` (writes of the bytes `checksum` covers, which neither changes) and returns
/// `checksum()`: on a second thread while `work` runs where `threaded` (and a thread starts),
/// else after it. Neither may throw.
std::uint32_t checksum_beside(bool threaded, const std::function<std::uint32_t()> &checksum,
                              const std::function<void()> &work);

}  // namespace dct::detail
