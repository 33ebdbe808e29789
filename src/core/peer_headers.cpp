#include "core/peer_headers.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"

namespace dct::detail::peer {

AllreduceAnnouncements read_allreduce_headers(const std::int64_t *headers, int ranks, int rank,
                                              std::int64_t count, std::int64_t value_bytes,
                                              std::int64_t *kept) {
  AllreduceAnnouncements sum;
  // The messages are formatted only on failure: this loop runs over every rank on every call.
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t *h = &headers[static_cast<std::size_t>(r) * allreduce::kWords];
    require(h[allreduce::kCount] == count && h[allreduce::kValueBytes] == value_bytes,
            DCT_ERR_MISMATCH, [&] {
              return "rank " + std::to_string(r) + " reduces " +
                     std::to_string(h[allreduce::kCount]) + " elements of " +
                     std::to_string(h[allreduce::kValueBytes]) + " bytes, rank " +
                     std::to_string(rank) + " reduces " + std::to_string(count) + " of " +
                     std::to_string(value_bytes);
            });
    require(h[allreduce::kKept] >= 0 && h[allreduce::kKept] <= count, DCT_ERR_PEER, [&] {
      return "rank " + std::to_string(r) + " announced " + std::to_string(h[allreduce::kKept]) +
             " entries for a tensor of " + std::to_string(count);
    });
    kept[r] = h[allreduce::kKept];
    sum.total_kept += double(h[allreduce::kKept]);
    sum.rebalance = sum.rebalance || h[allreduce::kRebalance] != 0;
  }
  return sum;
}

std::size_t announced_entries(std::int64_t announced, std::uint64_t bound, int peer,
                              const char *in_what) {
  require(announced >= 0 && static_cast<std::uint64_t>(announced) <= bound, DCT_ERR_PEER, [&] {
    return "rank " + std::to_string(peer) + " announced " + std::to_string(announced) + " " +
           in_what + " " + std::to_string(bound);
  });
  return static_cast<std::size_t>(announced);
}

std::size_t receive_bytes(std::int64_t announced, std::size_t max_bytes) {
  return announced >= 0 ? std::min(static_cast<std::size_t>(announced), max_bytes) : 0;
}

}  // namespace dct::detail::peer
