// libFuzzer harness of the allreduce's sparse block decoder (wire::decode_block: the values in
// the tensor's type or 16 bits, the indices as offsets, a bitmap or Elias–Fano), which reads
// what a peer sent. Any bytes must be rejected or decoded into indices that strictly increase
// within the block's range, without touching memory outside the message (ASan/UBSan).
//
// Input: [flags u8] [entries u16] [range u32] [begin u32] [rest].
//   flags bit 0: double (else float); bits 1-2: value coding (native, fp16, bf16; 3 = native);
//   bits 3-4: index coding (offsets, bitmap, Elias–Fano; 3 = block_format's choice; a bitmap
//   only up to a range of 2^20); bits 6-7: range scale;
//   bit 5: round trip: the rest seeds `entries` random indices and values, which are encoded,
//   decoded and compared; then one bit of the message (chosen by the seed) is flipped and the
//   result decoded once more. Otherwise the rest is the message itself.
// range is taken modulo 2^16 (+ 1) and scaled by 2^(5 * (flags >> 6)), entries modulo
// min(range, 4096) + 1 (fast executions), begin so that begin + range fits a 32-bit index.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "core/wire.hpp"
#include "fuzz_input.hpp"

namespace {

using dct::detail::ValueCoding;
using dct::detail::WireIndex;
namespace wire = dct::detail::wire;

/// Decodes `message`; if accepted, the indices must be strictly increasing in the range.
template <typename T>
bool decode_checked(const wire::BlockFormat &format, const std::vector<std::byte> &message,
                    std::uint64_t begin, std::vector<WireIndex> &idx, std::vector<T> &val) {
  idx.assign(format.entries, 0);
  val.assign(format.entries, T(0));
  if (!wire::decode_block(format, message.data(), message.size(), begin, idx.data(), val.data()))
    return false;
  for (std::size_t j = 0; j < format.entries; ++j)
    if (idx[j] < begin || idx[j] >= begin + format.range || (j > 0 && idx[j] <= idx[j - 1]))
      std::abort();  // accepted, yet out of range or out of order
  if (format.coding == ValueCoding::sign)
    for (std::size_t j = 1; j < format.entries; ++j) {
      const T a = std::fabs(val[j]), b = std::fabs(val[0]);   // NaN too: same bits
      if (std::memcmp(&a, &b, sizeof(T)) != 0) std::abort();  // two magnitudes in one block
    }
  return true;
}

template <typename T>
void round_trip(const wire::BlockFormat &format, std::uint64_t begin, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  // `entries` distinct offsets of the range (Floyd's sampling: O(entries), whatever the range).
  std::set<std::uint64_t> offsets;
  for (std::size_t j = format.range - format.entries; j < format.range; ++j) {
    const std::uint64_t pick = engine() % (j + 1);
    if (!offsets.insert(pick).second) offsets.insert(j);
  }
  std::vector<WireIndex> idx;
  for (std::uint64_t offset : offsets) idx.push_back(static_cast<WireIndex>(begin + offset));
  std::vector<T> val(format.entries);
  for (T &v : val)  // finite values of every magnitude from 2^-31 to 1
    v = dct::detail::wire_value(T(std::int32_t(engine())) * T(0x1p-31), format.coding);
  if (format.coding == ValueCoding::sign)  // one magnitude per block, as the sender makes it
    for (T &v : val) v = std::signbit(v) ? T(-0.375) : T(0.375);

  std::vector<std::byte> message;
  wire::size_buffer(message, format.units());  // as the exchanges size it: never empty
  wire::encode_block(format, idx.data(), val.data(), begin, message.data());
  std::vector<WireIndex> got_idx;
  std::vector<T> got_val;
  if (!decode_checked(format, message, begin, got_idx, got_val) || got_idx != idx ||
      (format.entries > 0 && std::memcmp(got_val.data(), val.data(), val.size() * sizeof(T))))
    std::abort();  // a valid block did not come back as it was
  if (message.empty()) return;
  const std::size_t bit = std::size_t(engine() % (message.size() * 8));
  message[bit / 8] ^= std::byte(1u << (bit % 8));
  decode_checked(format, message, begin, got_idx, got_val);
}

template <typename T>
void run(dct::fuzz::Input &in, unsigned flags, std::size_t entries, std::size_t range,
         std::uint64_t begin) {
  const ValueCoding coding = ValueCoding((flags >> 1) % 4);  // native, fp16, bf16, sign
  wire::BlockFormat format = wire::block_format<T>(entries, range, coding);
  const unsigned indices = (flags >> 3) % 4;
  // A forced bitmap over a huge range would spend the execution on its bytes.
  if (indices < 3 && entries > 0 &&
      !(wire::IndexCoding(indices) == wire::IndexCoding::bitmap && range > (1u << 20)))
    format.indices = wire::IndexCoding(indices);
  if (flags & 32) {
    round_trip<T>(format, begin, in.take<std::uint64_t>());
    return;
  }
  std::vector<WireIndex> idx;
  std::vector<T> val;
  decode_checked(format, in.rest(), begin, idx, val);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  dct::fuzz::Input in(data, size);
  const unsigned flags = in.take<std::uint8_t>();
  const std::size_t entries_word = in.take<std::uint16_t>();
  // Up to 2^16 + 1, times 2^0, 2^5, 2^10 or 2^15 (flags bits 6-7): every Elias–Fano low-bit
  // count up to 31 without spending each execution on a huge range.
  const std::size_t range = (std::size_t(in.take<std::uint32_t>() % (1u << 16)) + 1)
                            << (5 * (flags >> 6));
  const std::size_t entries = entries_word % (std::min<std::size_t>(range, 4096) + 1);
  const std::uint64_t begin = in.take<std::uint32_t>() % ((std::uint64_t(1) << 32) - range);
  if (flags & 1)
    run<double>(in, flags, entries, range, begin);
  else
    run<float>(in, flags, entries, range, begin);
  return 0;
}
