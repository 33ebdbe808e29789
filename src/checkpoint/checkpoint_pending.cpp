#include "checkpoint/checkpoint_pending.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "checkpoint/checkpoint.hpp"
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

void PendingSave::start(std::vector<SnapshotRow> rows) {
  rows_ = std::move(rows);
  writer_ = std::thread([this] { write_rows(); });
}

std::string PendingSave::join() {
  if (writer_.joinable()) writer_.join();
  rows_.clear();  // the snapshot's memory goes back before the collective half ends
  return error_;
}

void PendingSave::write_rows() {
  const int fd = ::open(temporary_.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    error_ = "cannot open " + temporary_ + " to write its rows: " + std::strerror(errno);
    return;
  }
  std::string failed;
  for (const SnapshotRow &row : rows_) {
    const std::size_t state_bytes = row.state.size() * sizeof(double);
    const std::uint32_t crc =
        row_checksum(row.residual.get(), row.residual ? row.bytes : 0, row.tau, row.calls,
                     row.velocity.get(), row.velocity ? row.bytes : 0, row.state.data(),
                     state_bytes, row.last_update.get(), row.last_update ? row.bytes : 0);
    // The file's checksum dataset is little-endian (H5T_STD_U32LE).
    const unsigned char stored[4] = {
        static_cast<unsigned char>(crc), static_cast<unsigned char>(crc >> 8),
        static_cast<unsigned char>(crc >> 16), static_cast<unsigned char>(crc >> 24)};
    bool ok = true;
    for (const auto &[part, at] : {std::pair{row.residual.get(), row.residual_at},
                                   std::pair{row.velocity.get(), row.velocity_at},
                                   std::pair{row.last_update.get(), row.last_update_at}})
      if (ok && part != nullptr) ok = write_all(fd, part, row.bytes, at);
    if (ok) ok = write_all(fd, stored, sizeof stored, row.checksum_at);
#ifdef DCT_TESTING
    testing::crash_in_checkpoint_writer(rank_);  // dies here, the rows half-written
    if (ok && testing::fail_in_checkpoint_writer(rank_)) {
      ok = false;
      errno = EIO;
    }
#endif
    if (!ok) {
      failed = "cannot write a row of " + temporary_ + ": " + std::strerror(errno);
      break;
    }
  }
  // Durable before the rename makes the file the checkpoint (the collective half's bytes are
  // synced by rank 0 at the wait, like a blocking save's).
  if (failed.empty() && ::fdatasync(fd) != 0)
    failed = "fsync of " + temporary_ + " failed: " + std::strerror(errno);
  ::close(fd);
  error_ = std::move(failed);
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
