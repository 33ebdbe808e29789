#include "checkpoint/checkpoint_pieces.hpp"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include "checkpoint/checkpoint.hpp"

namespace dct::detail {
namespace {

// In line, a piece stays in the core's L2 (512 KiB and more) from its move to its CRC-32; on
// a second thread it is read from the shared L3, and larger pieces mean fewer hand-overs.
constexpr std::size_t kPiece = std::size_t(256) << 10;
constexpr std::size_t kThreadedPiece = std::size_t(1) << 20;

std::uint32_t in_line(const std::byte *data, std::size_t bytes, std::uint32_t crc,
                      const std::function<bool(std::size_t, std::size_t)> &move) {
  for (std::size_t at = 0; at < bytes; at += kPiece) {
    const std::size_t length = std::min(kPiece, bytes - at);
    if (!move(at, length)) break;
    crc = checksum(data + at, length, crc);
  }
  return crc;
}

/// The second thread's side: pieces handed over by the mover, checksummed in order.
class Checksummer {
 public:
  Checksummer(const std::byte *data, std::size_t bytes, std::uint32_t crc)
      : data_(data), bytes_(bytes), crc_(crc), thread_([this] { run(); }) {}
  ~Checksummer() { finish(false); }
  Checksummer(const Checksummer &) = delete;
  Checksummer &operator=(const Checksummer &) = delete;

  /// The first `bytes` bytes have moved.
  void moved(std::size_t bytes) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      moved_ = bytes;
    }
    ready_.notify_one();
  }
  /// Waits for the thread: the CRC-32 of every byte that moved (`complete`), or it stops
  /// where it is (a failed move: the CRC-32 is of no use).
  std::uint32_t finish(bool complete) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
      abandoned_ = !complete;
    }
    ready_.notify_one();
    if (thread_.joinable()) thread_.join();
    return crc_;
  }

 private:
  void run() {
    for (std::size_t at = 0; at < bytes_;) {
      std::size_t until = 0;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return moved_ > at || finished_; });
        if (abandoned_ || moved_ <= at) return;
        until = moved_;
      }
      crc_ = checksum(data_ + at, until - at, crc_);
      at = until;
    }
  }

  const std::byte *data_;
  std::size_t bytes_;
  std::uint32_t crc_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::size_t moved_ = 0;
  bool finished_ = false, abandoned_ = false;
  std::thread thread_;  // last: it starts once everything above is set
};

}  // namespace

std::uint32_t move_and_checksum(const std::byte *data, std::size_t bytes, std::uint32_t crc,
                                bool threaded,
                                const std::function<bool(std::size_t, std::size_t)> &move) {
  if (!threaded || bytes < 2 * kThreadedPiece) return in_line(data, bytes, crc, move);
  std::unique_ptr<Checksummer> checksummer;
  try {
    checksummer = std::make_unique<Checksummer>(data, bytes, crc);
  } catch (const std::system_error &) {  // no thread to be had: in line
    return in_line(data, bytes, crc, move);
  }
  std::size_t at = 0;
  for (; at < bytes; at += kThreadedPiece) {
    const std::size_t length = std::min(kThreadedPiece, bytes - at);
    if (!move(at, length)) break;  // (a throw: the destructor stops the thread)
    checksummer->moved(at + length);
  }
  return checksummer->finish(true);
}

std::uint32_t checksum_beside(bool threaded, const std::function<std::uint32_t()> &checksum,
                              const std::function<void()> &work) {
  std::uint32_t crc = 0;
  std::thread beside;
  if (threaded) {
    try {
      beside = std::thread([&] { crc = checksum(); });
    } catch (const std::system_error &) {  // no thread to be had: after the work
    }
  }
  work();
  if (!beside.joinable()) return checksum();
  beside.join();
  return crc;
}

}  // namespace dct::detail
