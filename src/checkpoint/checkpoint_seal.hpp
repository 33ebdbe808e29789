// The seal of a checkpoint file: a CRC-32 of every byte HDF5 wrote, kept in the file's
// 512-byte user block (docs/checkpoint-format.md, version 3). A load checks it with plain reads
// before HDF5 parses a single byte of the file's metadata: HDF5 trusts its metadata, and one
// flipped bit there crashed DCT_Checkpoint_load inside libhdf5 (issue 35: 1 of 14,012 flips).
//
// Private header of src/: include it from the checkpoint sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
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

}  // namespace dct::detail
