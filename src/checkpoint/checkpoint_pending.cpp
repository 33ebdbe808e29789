#include "checkpoint/checkpoint_pending.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint.hpp"
#include "checkpoint/checkpoint_pieces.hpp"
#include "core/test_hooks.hpp"

namespace dct::detail {
namespace {

std::mutex &registry_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::set<const PendingSave *> &registry() {
  static std::set<const PendingSave *> saves;
  return saves;
}

/// The buffers of the last save's snapshot, kept for the next one, with their sizes.
struct Staging {
  std::mutex mutex;
  std::vector<std::pair<std::size_t, std::unique_ptr<std::byte[]>>> buffers;
};
Staging &staging() {
  static Staging kept;
  return kept;
}

/// Gives `rows`' buffers back for the next save (only the last save's are kept: a training
/// run saves the same state every time).
void keep_staging(std::vector<FileRow> &rows) {
  const std::lock_guard<std::mutex> lock(staging().mutex);
  staging().buffers.clear();
  for (FileRow &row : rows)
    for (RowPart *part : {&row.residual, &row.velocity, &row.last_update})
      if (part->copy != nullptr) staging().buffers.emplace_back(row.bytes, std::move(part->copy));
}

/// All of `bytes` at `offset`, through short writes and signals; false (errno set) on failure.
bool write_all(int fd, const void *data, std::size_t bytes, std::uint64_t offset) {
  const auto *next = static_cast<const char *>(data);
  while (bytes > 0) {
    const ssize_t written = ::pwrite(fd, next, bytes, static_cast<off_t>(offset));
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      if (written == 0) errno = EIO;
      return false;
    }
    next += written;
    offset += std::uint64_t(written);
    bytes -= std::size_t(written);
  }
  return true;
}

}  // namespace

std::unique_ptr<std::byte[]> staging_buffer(std::size_t bytes) {
  {
    const std::lock_guard<std::mutex> lock(staging().mutex);
    auto &buffers = staging().buffers;
    for (auto kept = buffers.begin(); kept != buffers.end(); ++kept)
      if (kept->first == bytes) {
        std::unique_ptr<std::byte[]> buffer = std::move(kept->second);
        buffers.erase(kept);
        return buffer;
      }
  }
  return std::unique_ptr<std::byte[]>(new std::byte[bytes]);  // not zeroed: the copy fills it
}

PendingSave::PendingSave(std::shared_ptr<CommContext> context, MPI_Comm comm, int rank, int ranks,
                         std::string path, std::string temporary)
    : context_(std::move(context)),
      comm_(comm),
      rank_(rank),
      ranks_(ranks),
      path_(std::move(path)),
      temporary_(std::move(temporary)) {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  registry().insert(this);
}

PendingSave::~PendingSave() {
  if (writer_.joinable()) writer_.join();
  const std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(this);
}

void PendingSave::start(std::vector<FileRow> rows) {
  rows_ = std::move(rows);
  // (Its checksums in line: the writer already runs beside training.)
  writer_ = std::thread([this] { error_ = write_rows(temporary_, rank_, rows_, false); });
}

std::string PendingSave::join() {
  if (writer_.joinable()) writer_.join();
  keep_staging(rows_);
  rows_.clear();
  return error_;
}

std::string write_rows(const std::string &path, int rank, const std::vector<FileRow> &rows,
                       bool checksum_thread) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return "cannot open " + path + " to write its rows: " + std::strerror(errno);
  std::string failed;
  for (const FileRow &row : rows) {
    // Each part in one pwrite: ranks writing one file take its inode's lock in turn, and
    // pieces would hand it over hundreds of times (measured: docs/performance.md, "Checkpoints:
    // loads in cache-sized pieces").
    bool ok = true;
    int error = 0;  // errno of the failed write (the checksum thread's join comes after it)
    const std::uint32_t crc = checksum_beside(
        checksum_thread,
        [&] {
          auto bytes_of = [&](const RowPart &part) { return part.data ? row.bytes : 0; };
          return row_checksum(row.residual.data, bytes_of(row.residual), row.tau, row.calls,
                              row.velocity.data, bytes_of(row.velocity), row.state.data(),
                              row.state.size() * sizeof(double), row.last_update.data,
                              bytes_of(row.last_update));
        },
        [&] {
          for (const RowPart *part : {&row.residual, &row.velocity, &row.last_update}) {
            if (!ok || part->data == nullptr) continue;
            ok = write_all(fd, part->data, row.bytes, part->at);
            if (!ok) error = errno;
          }
        });
    const unsigned char stored[4] = {
        // H5T_STD_U32LE
        static_cast<unsigned char>(crc), static_cast<unsigned char>(crc >> 8),
        static_cast<unsigned char>(crc >> 16), static_cast<unsigned char>(crc >> 24)};
    if (ok) {
      ok = write_all(fd, stored, sizeof stored, row.checksum_at);
      if (!ok) error = errno;
    }
#ifdef DCT_TESTING
    testing::crash_in_checkpoint_writer(rank);  // dies here, the rows half-written
    if (ok && testing::fail_in_checkpoint_writer(rank)) {
      ok = false;
      error = EIO;
    }
#else
    (void)rank;
#endif
    if (!ok) {
      failed = "cannot write a row of " + path + ": " + std::strerror(error);
      break;
    }
  }
  // Durable before the rename makes the file the checkpoint (HDF5's bytes are synced by rank 0
  // before the rename).
  if (failed.empty() && ::fdatasync(fd) != 0)
    failed = "fsync of " + path + " failed: " + std::strerror(errno);
  ::close(fd);
  return failed;
}

bool is_pending_save(const PendingSave *save) {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  return registry().count(save) != 0;
}

std::shared_ptr<CommContext> pending_save_context(const PendingSave *save) {
  return save->context();
}

bool pending_save_to(const std::string &path) {
  const std::lock_guard<std::mutex> lock(registry_mutex());
  for (const PendingSave *save : registry())
    if (save->path() == path) return true;
  return false;
}

}  // namespace dct::detail
