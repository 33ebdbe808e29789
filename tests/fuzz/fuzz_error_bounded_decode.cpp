// libFuzzer harness of the error-bounded decoder: any bytes, read as a message for a small
// shape, must be rejected or decoded without touching memory outside the rows (ASan/UBSan),
// and a rejected message must leave the rows as they were.
//
// Input: [rows - 1 (u8, mod 16)] [d - 1 (u8, mod 32)] [table count index (u8)] [0: float,
// 1: double (u8, mod 2)] [message...].
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "mp/error_bounded_codec.hpp"

namespace {

template <typename T>
void decode_once(const std::byte *message, std::size_t bytes, std::size_t nrows,
                 const dct::detail::eb::Tables &tables) {
  static dct::detail::eb::Workspace ws;
  std::vector<T> rows(nrows * tables.d, T(42));
  const std::string error = dct::detail::eb::decode(message, bytes, nrows, tables, rows.data(), ws);
  if (!error.empty())
    for (const T &x : rows)
      if (!(x == T(42))) std::abort();  // rejected, yet written
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
  if (size < 4) return 0;
  const std::size_t nrows = std::size_t(data[0] % 16) + 1, d = std::size_t(data[1] % 32) + 1;
  std::size_t columns = d, choice = data[2];  // the choice-th divisor of d (mod their count)
  std::vector<std::size_t> divisors;
  for (std::size_t c = 1; c <= d; ++c)
    if (d % c == 0) divisors.push_back(c);
  columns = divisors[choice % divisors.size()];
  const dct::detail::eb::Tables tables{d, columns};
  const auto *message = reinterpret_cast<const std::byte *>(data + 4);
  if (data[3] % 2 == 0)
    decode_once<float>(message, size - 4, nrows, tables);
  else
    decode_once<double>(message, size - 4, nrows, tables);
  return 0;
}
