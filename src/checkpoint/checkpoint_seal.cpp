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

#include "core/error.hpp"

namespace dct::detail {
namespace {

constexpr char kMagic[8] = {'D', 'C', 'T', 'S', 'E', 'A', 'L', '1'};
constexpr unsigned char kHdf5Signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
constexpr std::size_t kChunk = std::size_t(1) << 20;

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

/// CRC-32 of [begin, end) of the file.
std::uint32_t crc_of(int fd, std::uint64_t begin, std::uint64_t end, const std::string &path) {
  std::vector<unsigned char> buffer(
      static_cast<std::size_t>(std::min<std::uint64_t>(end - begin, kChunk)));
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::uint64_t at = begin; at < end;) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(end - at, kChunk));
    const std::size_t got = read_at(fd, buffer.data(), want, at, path);
    require(got == want, DCT_ERR_CKPT_TRUNCATED, path + " ends before its seal says");
    crc = crc32(crc, buffer.data(), static_cast<uInt>(got));
    at += got;
  }
  return static_cast<std::uint32_t>(crc);
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

std::uint32_t header_crc(const unsigned char *header) {
  return static_cast<std::uint32_t>(crc32(crc32(0L, Z_NULL, 0), header, 20));
}

/// Writes the seal of a payload of `payload` bytes whose CRC-32 is `crc` into `path`'s head.
void write_seal(const std::string &path, std::uint64_t payload, std::uint32_t crc) {
  unsigned char header[kSealBytes] = {};
  std::memcpy(header, kMagic, sizeof kMagic);
  put_u64(header + 8, payload);
  put_u32(header + 16, crc);
  put_u32(header + 20, header_crc(header));
  const File file(path, O_WRONLY);
  const ssize_t written = ::pwrite(file.fd(), header, kSealBytes, 0);
  const int error = errno;
  require(written == static_cast<ssize_t>(kSealBytes), DCT_ERR_CKPT_IO,
          "cannot write the seal of " + path + ": " + std::strerror(error));
}

std::uint64_t size_of(const std::string &path) {
  struct stat info {};
  const int rc = ::stat(path.c_str(), &info);
  const int error = errno;
  require(rc == 0, DCT_ERR_CKPT_IO, "cannot stat " + path + ": " + std::strerror(error));
  require(static_cast<std::uint64_t>(info.st_size) >= kSealBytes, DCT_ERR_CKPT_IO,
          path + " is shorter than its user block");
  return static_cast<std::uint64_t>(info.st_size);
}

}  // namespace

void seal_file(const std::string &path) {
  const std::uint64_t size = size_of(path);
  std::uint32_t crc = 0;
  {
    const File file(path, O_RDONLY);
    crc = crc_of(file.fd(), kSealBytes, size, path);
  }
  write_seal(path, size - kSealBytes, crc);
}

SealShare crc_of_share(const std::string &path, std::uint64_t payload, int rank, int ranks) {
  const std::uint64_t share = (payload + std::uint64_t(ranks) - 1) / std::uint64_t(ranks);
  const std::uint64_t begin = kSealBytes + std::min(payload, share * std::uint64_t(rank));
  const std::uint64_t end = kSealBytes + std::min(payload, share * (std::uint64_t(rank) + 1));
  const File file(path, O_RDONLY);
  return SealShare{crc_of(file.fd(), begin, end, path), end - begin};
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

void seal_file(const std::string &path, MPI_Comm comm, int rank, int ranks) {
  // Rank 0's size, read before any rank may fail: every rank takes the Bcast.
  std::uint64_t size = 0;
  std::exception_ptr failure;
  if (rank == 0) {
    try {
      size = size_of(path);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  check_mpi(MPI_Bcast(&size, 1, MPI_UINT64_T, 0, comm), "MPI_Bcast");
  if (failure) std::rethrow_exception(failure);
  require(size >= kSealBytes, DCT_ERR_CKPT_IO, path + " is shorter than its user block");
  // Each rank its share of the payload; rank 0 joins the shares in rank order.
  const std::uint64_t payload = size - kSealBytes;
  const std::uint32_t crc =
      combine_shares(comm, rank, ranks, crc_of_share(path, payload, rank, ranks));
  if (rank == 0) write_seal(path, payload, crc);
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
  unsigned char header[kSealBytes + 8] = {};
  const std::size_t got = read_at(file.fd(), header, sizeof header, 0, path);
  if (std::memcmp(header, kMagic, sizeof kMagic) != 0) {
    // A file HDF5 would take for its own from the first byte: no seal (versions 1 and 2).
    if (got >= 8 && std::memcmp(header, kHdf5Signature, 8) == 0) return SealHeader{};
    // HDF5's signature behind a user block: a sealed file whose seal was damaged.
    require(!(got >= kSealBytes + 8 && std::memcmp(header + kSealBytes, kHdf5Signature, 8) == 0),
            DCT_ERR_CKPT_CHECKSUM, path + ": its seal is damaged");
    fail(DCT_ERR_CKPT_FORMAT, path + " is not an HDF5 file");
  }
  require(got >= kSealBytes, DCT_ERR_CKPT_TRUNCATED, path + " ends inside its seal");
  require(get_u32(header + 20) == header_crc(header), DCT_ERR_CKPT_CHECKSUM,
          path + ": its seal is damaged");
  const std::uint64_t payload = get_u64(header + 8);
  struct stat info {};
  require(::fstat(file.fd(), &info) == 0, DCT_ERR_CKPT_IO, "cannot stat " + path);
  const std::uint64_t size = static_cast<std::uint64_t>(info.st_size);
  require(size >= kSealBytes + payload, DCT_ERR_CKPT_TRUNCATED,
          path + " holds " + std::to_string(size) + " bytes, its seal says " +
              std::to_string(kSealBytes + payload) + ": truncated");
  require(size == kSealBytes + payload, DCT_ERR_CKPT_CHECKSUM,
          path + " holds more bytes than its seal says");
  return SealHeader{Seal::sealed, payload, get_u32(header + 16)};
}

void require_seal_matches(const std::string &path, const SealHeader &header, std::uint32_t crc) {
  require(crc == header.crc, DCT_ERR_CKPT_CHECKSUM,
          path + ": its bytes do not match its seal (the file was damaged after it was saved)");
}

Seal check_seal(const std::string &path) {
  const SealHeader header = read_seal_header(path);
  if (header.seal == Seal::sealed)
    require_seal_matches(path, header, crc_of_share(path, header.payload, 0, 1).crc);
  return header.seal;
}

}  // namespace dct::detail
