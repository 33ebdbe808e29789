#include "dp/call_message.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/wire.hpp"

namespace dct::detail {

std::byte *CallMessage::prepare(int ranks, int rank, std::size_t header_words,
                                std::size_t block_bytes, Backend *device) {
  ranks_ = ranks;
  rank_ = rank;
  header_words_ = header_words;
  block_bytes_ = block_bytes;
  blocks_on_device_ = device != nullptr && block_bytes > 0;
  slot_words_ = header_words + (blocks_on_device_ ? 0 : block_bytes / sizeof(std::uint64_t));
  wire::resize_growing(slots_, std::size_t(ranks) * slot_words_);
  if (blocks_on_device_) {
    device_blocks_.reserve_growing(*device, std::size_t(ranks) * block_bytes);
    return device_blocks_.data() + std::size_t(rank) * block_bytes;
  }
  return reinterpret_cast<std::byte *>(slots_.data() + std::size_t(rank) * slot_words_ +
                                       header_words);
}

void CallMessage::post(const std::int64_t *header, MPI_Comm comm) {
  std::uint64_t *mine = slots_.data() + std::size_t(rank_) * slot_words_;
  std::memcpy(mine, header, header_words_ * sizeof(std::int64_t));
  check_mpi(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, slots_.data(),
                           static_cast<int>(slot_words_), MPI_UINT64_T, comm, &requests_[0]),
            "MPI_Iallgather");
  if (blocks_on_device_)
    check_mpi(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, device_blocks_.data(),
                             wire::mpi_units(block_bytes_ / wire::kUnitBytes), MPI_UINT64_T, comm,
                             &requests_[1]),
              "MPI_Iallgather");
}

bool CallMessage::complete(bool block) {
  if (block) {
    check_mpi(MPI_Waitall(2, requests_, MPI_STATUSES_IGNORE), "MPI_Waitall");
    return true;
  }
  int done = 0;
  check_mpi(MPI_Testall(2, requests_, &done, MPI_STATUSES_IGNORE), "MPI_Testall");
  return done != 0;
}

const std::int64_t *CallMessage::headers() {
  wire::resize_growing(headers_, std::size_t(ranks_) * header_words_);
  for (int r = 0; r < ranks_; ++r)
    std::memcpy(headers_.data() + std::size_t(r) * header_words_,
                slots_.data() + std::size_t(r) * slot_words_, header_words_ * sizeof(std::int64_t));
  return headers_.data();
}

}  // namespace dct::detail
