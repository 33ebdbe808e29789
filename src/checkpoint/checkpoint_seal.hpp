// The seal of a checkpoint file: a CRC-32 of every byte HDF5 wrote, kept in the file's
// 512-byte user block (docs/checkpoint-format.md, version 3). A load checks it with plain reads
// before HDF5 parses a single byte of the file's metadata: HDF5 trusts its metadata, and one
// flipped bit there crashed DCT_Checkpoint_load inside libhdf5 (issue 35: 1 of 14,012 flips).
//
// Private header of src/: include it from the checkpoint sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace dct::detail {

/// Bytes at the head of a sealed file, before HDF5's superblock (H5Pset_userblock).
inline constexpr std::size_t kSealBytes = 512;

/// seal_file on the calling process alone (tests, the fuzz harness: no MPI needed).
void seal_file(const std::string &path);

/// Collective over `comm`, once the HDF5 file at `path` is complete and closed: every rank
/// checksums its share of the file's bytes after the user block, and rank 0 writes the seal
/// into it. Throws DCT_ERR_CKPT_IO (on every rank: run it inside run_agreed).
void seal_file(const std::string &path, MPI_Comm comm, int rank, int ranks);

/// What check_seal found.
enum class Seal {
  sealed,   ///< the seal holds: every byte is as written
  unsealed  ///< no seal, and the file starts as an HDF5 file: one of format versions 1 and 2
};

/// Reads the whole file at `path` on the calling rank, without HDF5. Throws
/// DCT_ERR_CKPT_TRUNCATED when it is shorter than its seal says, DCT_ERR_CKPT_CHECKSUM when a
/// byte (or the seal) differs, DCT_ERR_CKPT_IO when it cannot be read.
Seal check_seal(const std::string &path);

// The same check shared by the ranks of a load, each reading its share of the file: rank 0
// reads the header (read_seal_header), every rank the CRC-32 of its share (crc_of_share), rank
// 0 joins them (combine_shares) and compares (require_seal_matches).

/// Throws DCT_ERR_CKPT_NOT_FOUND when nothing is at `path`, DCT_ERR_CKPT_FORMAT when it is not
/// a regular file (a FIFO or a device would block or read endlessly).
void require_regular_file(const std::string &path);

/// A file's seal, as its first bytes hold it (`seal` unsealed: formats 1 and 2).
struct SealHeader {
  Seal seal = Seal::unsealed;
  std::uint64_t payload = 0;  ///< bytes after the user block
  std::uint32_t crc = 0;      ///< their CRC-32
};
/// Checks the seal itself and the file's length against it (the codes of check_seal).
SealHeader read_seal_header(const std::string &path);

/// The CRC-32 of rank `rank`'s share (of `ranks` equal ones) of the `payload` bytes after the
/// user block, and the share's length.
struct SealShare {
  std::uint64_t crc = 0;
  std::uint64_t bytes = 0;
};
SealShare crc_of_share(const std::string &path, std::uint64_t payload, int rank, int ranks);
/// Collective over `comm`: the CRC-32 of the whole payload on rank 0 (0 on the others).
std::uint32_t combine_shares(MPI_Comm comm, int rank, int ranks, SealShare mine);
/// Throws DCT_ERR_CKPT_CHECKSUM unless `crc` is the one the seal holds.
void require_seal_matches(const std::string &path, const SealHeader &header, std::uint32_t crc);

}  // namespace dct::detail
