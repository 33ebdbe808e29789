#include "checkpoint/checkpoint_seal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "core/error.hpp"

namespace dct::detail {
namespace {

constexpr char kMagic1[8] = {'D', 'C', 'T', 'S', 'E', 'A', 'L', '1'};
constexpr char kMagic2[8] = {'D', 'C', 'T', 'S', 'E', 'A', 'L', '2'};
constexpr unsigned char kHdf5Signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
constexpr std::size_t kChunk = std::size_t(1) << 20;
// Seal 1: magic, payload (u64), CRC (u32), CRC of bytes 0-19 (u32), in a 512-byte user block.
// Seal 2: magic, user block (u64), payload (u64), CRC (u32), n (u32), n x (begin u64,
// length u64), CRC of everything before it (u32).
constexpr std::size_t kHeader2Fixed = 32;
constexpr std::size_t kExtentBytes = 16;

/// A file descriptor closed on every path.
class File {
 public:
  File(const std::string &path, int flags) : fd_(::open(path.c_str(), flags)) {
    const int error = errno;
    require(fd_ >= 0, DCT_ERR_CKPT_IO, "cannot open " + path + ": " + std::strerror(error));
  }
  ~File() { ::close(fd_); }
  File(const File &) = delete;
  File &operator=(const File &) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

/// Exactly `bytes` bytes at `offset` (fewer only at the end of the file: returns how many).
std::size_t read_at(int fd, void *into, std::size_t bytes, std::uint64_t offset,
                    const std::string &path) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(fd, static_cast<char *>(into) + done, bytes - done,
                                static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    const int error = errno;
    require(got >= 0, DCT_ERR_CKPT_IO, "cannot read " + path + ": " + std::strerror(error));
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

/// Continues `crc` over [begin, end) of the file, through `buffer`.
std::uint32_t crc_of(int fd, std::uint32_t crc, Extent bytes, std::vector<unsigned char> &buffer,
                     const std::string &path) {
  for (std::uint64_t at = bytes.begin; at < bytes.end;) {
    const std::size_t want =
        static_cast<std::size_t>(std::min<std::uint64_t>(bytes.end - at, kChunk));
    if (buffer.size() < want) buffer.resize(want);
    const std::size_t got = read_at(fd, buffer.data(), want, at, path);
    require(got == want, DCT_ERR_CKPT_TRUNCATED, path + " ends before its seal says");
    crc = checksum(buffer.data(), got, crc);
    at += got;
  }
  return crc;
}

void put_u64(unsigned char *at, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<unsigned char>(value >> (8 * i));
}
void put_u32(unsigned char *at, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<unsigned char>(value >> (8 * i));
}
std::uint64_t get_u64(const unsigned char *at) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | at[i];
  return value;
}
std::uint32_t get_u32(const unsigned char *at) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = value << 8 | at[i];
  return value;
}

/// Writes `header`'s seal into the head of `path` (its user block).
void write_seal(const std::string &path, const SealHeader &header) {
  std::vector<unsigned char> bytes(
      header.version == 1 ? kSealBytes : kHeader2Fixed + kExtentBytes * header.skipped.size() + 4);
  if (header.version == 1) {
    std::memcpy(bytes.data(), kMagic1, sizeof kMagic1);
    put_u64(&bytes[8], header.payload);
    put_u32(&bytes[16], header.crc);
    put_u32(&bytes[20], checksum(bytes.data(), 20));
  } else {
    std::memcpy(bytes.data(), kMagic2, sizeof kMagic2);
    put_u64(&bytes[8], header.user_block);
    put_u64(&bytes[16], header.payload);
    put_u32(&bytes[24], header.crc);
    put_u32(&bytes[28], static_cast<std::uint32_t>(header.skipped.size()));
    std::size_t at = kHeader2Fixed;
    for (const Extent &extent : header.skipped) {
      put_u64(&bytes[at], extent.begin);
      put_u64(&bytes[at + 8], extent.end - extent.begin);
      at += kExtentBytes;
    }
    put_u32(&bytes[at], checksum(bytes.data(), at));
  }
  require(bytes.size() <= header.user_block, DCT_ERR_INTERNAL,
          "the seal of " + path + " does not fit its user block");
  const File file(path, O_WRONLY);
  const ssize_t written = ::pwrite(file.fd(), bytes.data(), bytes.size(), 0);
  const int error = errno;
  require(written == static_cast<ssize_t>(bytes.size()), DCT_ERR_CKPT_IO,
          "cannot write the seal of " + path + ": " + std::strerror(error));
}

std::uint64_t size_of(int fd, const std::string &path) {
  struct stat info {};
  const int rc = ::fstat(fd, &info);
  const int error = errno;
  require(rc == 0, DCT_ERR_CKPT_IO, "cannot stat " + path + ": " + std::strerror(error));
  return static_cast<std::uint64_t>(info.st_size);
}

/// The seal at the head of the open file, its own CRC checked; nothing checked against the
/// file's length but that it holds the seal.
SealHeader parse_seal(int fd, const std::string &path) {
  unsigned char head[kSealBytes + 8] = {};
  const std::size_t got = read_at(fd, head, sizeof head, 0, path);
  const bool one = std::memcmp(head, kMagic1, 8) == 0, two = std::memcmp(head, kMagic2, 8) == 0;
  if (!one && !two) {
    // A file HDF5 would take for its own from the first byte: no seal (versions 1 and 2).
    if (got >= 8 && std::memcmp(head, kHdf5Signature, 8) == 0) return SealHeader{};
    // HDF5's signature behind a user block (where HDF5 looks: 512, 1024, ... bytes in): a
    // sealed file whose seal was damaged.
    for (std::uint64_t at = kSealBytes; at <= kMaxSealBytes; at *= 2) {
      unsigned char signature[8] = {};
      require(
          read_at(fd, signature, 8, at, path) < 8 || std::memcmp(signature, kHdf5Signature, 8) != 0,
          DCT_ERR_CKPT_CHECKSUM, path + ": its seal is damaged");
    }
    fail(DCT_ERR_CKPT_FORMAT, path + " is not an HDF5 file");
  }
  require(got >= kSealBytes, DCT_ERR_CKPT_TRUNCATED, path + " ends inside its seal");
  SealHeader header;
  header.seal = Seal::sealed;
  if (one) {
    require(get_u32(head + 20) == checksum(head, 20), DCT_ERR_CKPT_CHECKSUM,
            path + ": its seal is damaged");
    header.version = 1;
    header.user_block = kSealBytes;
    header.payload = get_u64(head + 8);
    header.crc = get_u32(head + 16);
    return header;
  }
  // Seal 2: its sizes are checked before they size a read; a damaged one fails its CRC.
  const std::uint64_t user_block = get_u64(head + 8);
  const std::uint64_t skipped = get_u32(head + 28);
  const bool sane = user_block >= kSealBytes && user_block <= kMaxSealBytes &&
                    (user_block & (user_block - 1)) == 0 &&
                    kHeader2Fixed + kExtentBytes * skipped + 4 <= user_block;
  require(sane, DCT_ERR_CKPT_CHECKSUM, path + ": its seal is damaged");
  std::vector<unsigned char> bytes(kHeader2Fixed + kExtentBytes * skipped + 4);
  require(read_at(fd, bytes.data(), bytes.size(), 0, path) == bytes.size(), DCT_ERR_CKPT_TRUNCATED,
          path + " ends inside its seal");
  const std::size_t end = bytes.size() - 4;
  require(get_u32(&bytes[end]) == checksum(bytes.data(), end), DCT_ERR_CKPT_CHECKSUM,
          path + ": its seal is damaged");
  header.version = 2;
  header.user_block = user_block;
  header.payload = get_u64(&bytes[16]);
  header.crc = get_u32(&bytes[24]);
  for (std::size_t i = 0; i < skipped; ++i) {  // checked by valid_extents (a wrap: end < begin)
    const std::uint64_t begin = get_u64(&bytes[kHeader2Fixed + kExtentBytes * i]);
    const std::uint64_t length = get_u64(&bytes[kHeader2Fixed + kExtentBytes * i + 8]);
    header.skipped.push_back(Extent{begin, begin + length});
  }
  return header;
}

/// Whether `skipped` is in order, disjoint, nonempty and inside [begin, end).
bool valid_extents(const std::vector<Extent> &skipped, std::uint64_t begin, std::uint64_t end) {
  for (const Extent &extent : skipped) {
    if (extent.begin < begin || extent.end <= extent.begin || extent.end > end) return false;
    begin = extent.end;
  }
  return true;
}

}  // namespace

std::uint64_t seal_user_block(std::size_t skipped) {
  std::uint64_t bytes = kSealBytes;
  while (bytes < kHeader2Fixed + kExtentBytes * skipped + 4) bytes *= 2;
  return bytes;
}

std::vector<Extent> SealHeader::sealed() const {
  std::vector<Extent> extents;
  std::uint64_t at = user_block;
  for (const Extent &skip : skipped) {
    if (skip.begin > at) extents.push_back(Extent{at, skip.begin});
    at = skip.end;
  }
  if (user_block + payload > at) extents.push_back(Extent{at, user_block + payload});
  return extents;
}

void seal_file(const std::string &path, int version) {
  require(version == 1 || version == 2, DCT_ERR_INTERNAL, "seal_file: no such seal version");
  SealHeader header;
  std::uint64_t size = 0;
  {
    const File file(path, O_RDONLY);
    size = size_of(file.fd(), path);
    try {
      header = parse_seal(file.fd(), path);
    } catch (const Error &) {  // no seal yet, or a damaged one: a new one
      header = SealHeader{};
    }
    if (!valid_extents(header.skipped, header.user_block, size)) header = SealHeader{};
    require(version == 2 || header.user_block <= kSealBytes, DCT_ERR_INTERNAL,
            "seal_file: a seal 1 needs a 512-byte user block");
    if (header.version != 2 || version != 2) header = SealHeader{};
    header.version = version;
    if (header.user_block == 0) header.user_block = kSealBytes;
    require(size >= header.user_block, DCT_ERR_CKPT_IO, path + " is shorter than its user block");
    header.payload = size - header.user_block;
    std::vector<unsigned char> buffer;
    std::uint32_t crc = 0;
    for (const Extent &extent : header.sealed()) crc = crc_of(file.fd(), crc, extent, buffer, path);
    header.crc = crc;
  }
  write_seal(path, header);
}

SealShare crc_of_share(const std::string &path, const SealHeader &header, int rank, int ranks) {
  const std::vector<Extent> sealed = header.sealed();
  std::uint64_t total = 0;
  for (const Extent &extent : sealed) total += extent.end - extent.begin;
  // This rank's bytes [low, high) of the sealed stream, found in the file's sealed extents.
  const std::uint64_t share = (total + std::uint64_t(ranks) - 1) / std::uint64_t(ranks);
  const std::uint64_t low = std::min(total, share * std::uint64_t(rank));
  const std::uint64_t high = std::min(total, share * (std::uint64_t(rank) + 1));
  const File file(path, O_RDONLY);
  std::vector<unsigned char> buffer;
  std::uint32_t crc = 0;
  std::uint64_t stream = 0;  // where `extent` starts in the stream
  for (const Extent &extent : sealed) {
    const std::uint64_t length = extent.end - extent.begin;
    const std::uint64_t from = std::max(low, stream), to = std::min(high, stream + length);
    if (from < to)
      crc = crc_of(file.fd(), crc,
                   Extent{extent.begin + (from - stream), extent.begin + (to - stream)}, buffer,
                   path);
    stream += length;
  }
  return SealShare{crc, high - low};
}

std::uint32_t combine_shares(MPI_Comm comm, int rank, int ranks, SealShare mine) {
  const std::uint64_t words[2] = {mine.crc, mine.bytes};
  std::vector<std::uint64_t> all(rank == 0 ? 2 * std::size_t(ranks) : 0);
  check_mpi(MPI_Gather(words, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, 0, comm), "MPI_Gather");
  uLong crc = crc32(0L, Z_NULL, 0);
  for (int r = 0; r < (rank == 0 ? ranks : 0); ++r)  // the shares in rank order
    crc = crc32_combine(crc, static_cast<uLong>(all[2 * std::size_t(r)]),
                        static_cast<z_off_t>(all[2 * std::size_t(r) + 1]));
  return static_cast<std::uint32_t>(crc);
}

void seal_file(const std::string &path, MPI_Comm comm, int rank, int ranks,
               std::uint64_t user_block, const std::vector<Extent> &skipped) {
  // Rank 0's size, read before any rank may fail: every rank takes the Bcast.
  std::uint64_t size = 0;
  std::exception_ptr failure;
  if (rank == 0) {
    try {
      const File file(path, O_RDONLY);
      size = size_of(file.fd(), path);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  check_mpi(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, comm), "MPI_Bcast");
  if (failure) std::rethrow_exception(failure);
  require(size >= user_block, DCT_ERR_CKPT_IO, path + " is shorter than its user block");
  SealHeader header{Seal::sealed, 2, user_block, size - user_block, 0, skipped};
  require(valid_extents(skipped, user_block, size), DCT_ERR_INTERNAL,
          "the extents left out of the seal of " + path + " are invalid");
  // Each rank its share of the sealed bytes; rank 0 joins the shares in rank order.
  header.crc = combine_shares(comm, rank, ranks, crc_of_share(path, header, rank, ranks));
  if (rank == 0) write_seal(path, header);
}

void require_regular_file(const std::string &path) {
  struct stat info {};
  const int found = ::stat(path.c_str(), &info);
  const int error = errno;  // read before the message is built
  require(found == 0, DCT_ERR_CKPT_NOT_FOUND,
          "no checkpoint at " + path + ": " + std::strerror(error));
  // Opening a FIFO or a device would block or read endlessly.
  require(S_ISREG(info.st_mode), DCT_ERR_CKPT_FORMAT, path + " is not a regular file");
}

SealHeader read_seal_header(const std::string &path) {
  const File file(path, O_RDONLY);
  const SealHeader header = parse_seal(file.fd(), path);
  if (header.seal == Seal::unsealed) return header;
  const std::uint64_t size = size_of(file.fd(), path);
  const std::uint64_t sealed_size = header.user_block + header.payload;
  require(size >= header.user_block && size - header.user_block >= header.payload,
          DCT_ERR_CKPT_TRUNCATED,
          path + " holds " + std::to_string(size) + " bytes, its seal says " +
              std::to_string(header.user_block) + " + " + std::to_string(header.payload) +
              ": truncated");
  require(size == sealed_size, DCT_ERR_CKPT_CHECKSUM,
          path + " holds more bytes than its seal says");
  require(valid_extents(header.skipped, header.user_block, sealed_size), DCT_ERR_CKPT_FORMAT,
          path + ": its seal lists invalid extents");
  return header;
}

void share_seal_header(MPI_Comm comm, SealHeader &header) {
  std::uint64_t words[6] = {std::uint64_t(header.seal == Seal::sealed),
                            std::uint64_t(header.version),
                            header.user_block,
                            header.payload,
                            header.crc,
                            header.skipped.size()};
  check_mpi(MPI_Bcast(words, 6, MPI_UINT64_T, 0, comm), "MPI_Bcast");
  std::vector<std::uint64_t> extents(2 * words[5]);
  for (std::size_t i = 0; i < header.skipped.size(); ++i) {
    extents[2 * i] = header.skipped[i].begin;
    extents[2 * i + 1] = header.skipped[i].end;
  }
  check_mpi(MPI_Bcast(extents.data(), static_cast<int>(extents.size()), MPI_UINT64_T, 0, comm),
            "MPI_Bcast");
  header = SealHeader{words[0] ? Seal::sealed : Seal::unsealed,
                      static_cast<int>(words[1]),
                      words[2],
                      words[3],
                      static_cast<std::uint32_t>(words[4]),
                      {}};
  for (std::size_t i = 0; i < words[5]; ++i)
    header.skipped.push_back(Extent{extents[2 * i], extents[2 * i + 1]});
}

void require_seal_matches(const std::string &path, const SealHeader &header, std::uint32_t crc) {
  require(crc == header.crc, DCT_ERR_CKPT_CHECKSUM,
          path + ": its bytes do not match its seal (the file was damaged after it was saved)");
}

Seal check_seal(const std::string &path) {
  const SealHeader header = read_seal_header(path);
  if (header.seal == Seal::sealed)
    require_seal_matches(path, header,
                         static_cast<std::uint32_t>(crc_of_share(path, header, 0, 1).crc));
  return header.seal;
}

}  // namespace dct::detail
