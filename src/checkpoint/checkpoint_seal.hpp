// The seal of a checkpoint file: a CRC-32 of the bytes HDF5 wrote, kept in the file's user block
// (docs/checkpoint-format.md, "The seal"). A load checks it with plain reads before HDF5 parses a
// single byte of the file's metadata: HDF5 trusts its metadata, and one flipped bit there crashed
// DCT_Checkpoint_load inside libhdf5 (docs/reliability.md, "Round 2").
//
// Seal 1 (`DCTSEAL1`, written by dct 0.3 to 0.5): a 512-byte user block, every byte after it
// sealed. Seal 2 (`DCTSEAL2`): a user block of 512 bytes or more (a power of two, as HDF5
// requires), and a list of skipped extents: the raw data of the residual and velocity datasets,
// whose rows carry their own CRC-32s (checked as a load reads them). HDF5 never parses raw data,
// so the seal still covers everything it does parse, and a load reads the data once instead of
// twice (issue 36).
//
// Private header of src/: include it from the checkpoint sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dct::detail {

/// The smallest user block (seal 1's only one; HDF5's smallest).
inline constexpr std::size_t kSealBytes = 512;
/// The largest user block a seal may declare (a bound on what a file makes a reader read).
inline constexpr std::uint64_t kMaxSealBytes = std::uint64_t(1) << 20;

/// The bytes [begin, end) of a file.
struct Extent {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  friend bool operator==(const Extent &a, const Extent &b) {
    return a.begin == b.begin && a.end == b.end;
  }
};

/// The user block a seal 2 with `skipped` extents needs (a power of two, >= kSealBytes).
std::uint64_t seal_user_block(std::size_t skipped);

/// seal_file on the calling process alone (tests, the fuzz harness: no MPI needed). A file
/// with a seal 2 keeps its user block and skipped extents (a test's edit through HDF5 moves no
/// dataset); any other gets a seal of `version` (1 or 2, nothing skipped) in a 512-byte user
/// block.
void seal_file(const std::string &path, int version = 2);

/// Collective over `comm`, once the HDF5 file at `path` (created with a user block of
/// `user_block` bytes) is complete and closed: every rank checksums its share of the sealed
/// bytes (those after the user block outside `skipped`: sorted, disjoint, inside the file), and
/// rank 0 writes the seal 2 into the user block. Throws DCT_ERR_CKPT_IO (on every rank: run it
/// inside run_agreed).
void seal_file(const std::string &path, MPI_Comm comm, int rank, int ranks,
               std::uint64_t user_block, const std::vector<Extent> &skipped);

/// What check_seal found.
enum class Seal {
  sealed,   ///< the seal holds: every sealed byte is as written
  unsealed  ///< no seal, and the file starts as an HDF5 file: one of format versions 1 and 2
};

/// Reads the sealed bytes of the file at `path` on the calling rank, without HDF5. Throws
/// DCT_ERR_CKPT_TRUNCATED when it is shorter than its seal says, DCT_ERR_CKPT_CHECKSUM when a
/// byte (or the seal) differs, DCT_ERR_CKPT_IO when it cannot be read.
Seal check_seal(const std::string &path);

// The same check shared by the ranks of a load, each reading its share of the sealed bytes:
// rank 0 reads the header (read_seal_header) and sends it to every rank (share_seal_header),
// every rank the CRC-32 of its share (crc_of_share), rank 0 joins them (combine_shares) and
// compares (require_seal_matches).

/// Throws DCT_ERR_CKPT_NOT_FOUND when nothing is at `path`, DCT_ERR_CKPT_FORMAT when it is not
/// a regular file (a FIFO or a device would block or read endlessly).
void require_regular_file(const std::string &path);

/// A file's seal, as its first bytes hold it (`seal` unsealed: formats 1 and 2).
struct SealHeader {
  Seal seal = Seal::unsealed;
  int version = 0;               ///< 1 or 2 (0 unsealed)
  std::uint64_t user_block = 0;  ///< bytes before HDF5's superblock
  std::uint64_t payload = 0;     ///< bytes after the user block
  std::uint32_t crc = 0;         ///< CRC-32 of the sealed bytes, in file order
  std::vector<Extent> skipped;   ///< seal 2: extents the seal leaves to the rows' CRCs
  /// The sealed extents: the payload less the skipped ones, in file order.
  std::vector<Extent> sealed() const;
};
/// Checks the seal itself and the file's length against it (the codes of check_seal).
SealHeader read_seal_header(const std::string &path);
/// Collective over `comm`: rank 0's `header` on every rank.
void share_seal_header(MPI_Comm comm, SealHeader &header);

/// The CRC-32 of rank `rank`'s share (of `ranks` equal ones) of the sealed bytes, in file
/// order, and the share's length.
struct SealShare {
  std::uint64_t crc = 0;
  std::uint64_t bytes = 0;
};
SealShare crc_of_share(const std::string &path, const SealHeader &header, int rank, int ranks);
/// Collective over `comm`: the CRC-32 of the whole sealed stream on rank 0 (0 on the others).
std::uint32_t combine_shares(MPI_Comm comm, int rank, int ranks, SealShare mine);
/// Throws DCT_ERR_CKPT_CHECKSUM unless `crc` is the one the seal holds.
void require_seal_matches(const std::string &path, const SealHeader &header, std::uint32_t crc);

}  // namespace dct::detail
