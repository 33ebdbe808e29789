// Reading and validating a dumped lookups file (format: lookups_file.hpp).
#include "lookups_file.hpp"

#include <climits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>

namespace dct::bench {
namespace {

constexpr std::size_t kHeaderBytes = 40;
constexpr std::uint64_t kMaxValues = std::uint64_t(1) << 36;  // 256 GiB of floats: a sanity cap

[[noreturn]] void bad(const std::string &path, const std::string &why) {
  throw std::invalid_argument(path + ": " + why);
}

std::uint32_t u32_at(const unsigned char *p) {
  return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 |
         std::uint32_t(p[3]) << 24;
}

bool little_endian() {
  const std::uint16_t probe = 1;
  unsigned char low = 0;
  std::memcpy(&low, &probe, 1);
  return low == 1;
}

}  // namespace

LookupsFile read_lookups(const std::string &path, bool with_values) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) bad(path, "cannot open");
  const std::streamoff size = file.tellg();
  file.seekg(0);
  unsigned char header[kHeaderBytes];
  if (size < std::streamoff(kHeaderBytes) ||
      !file.read(reinterpret_cast<char *>(header), kHeaderBytes))
    bad(path, "shorter than the 40-byte header: not a dct lookups file");
  if (std::memcmp(header, "DCTLOOKS", 8) != 0)
    bad(path, "no DCTLOOKS magic: not a dct lookups file (dct-dlrm --dump-lookups)");
  const std::uint32_t version = u32_at(header + 8), value_bytes = u32_at(header + 12);
  if (version != 1) bad(path, "format version " + std::to_string(version) + ", expected 1");
  if (value_bytes != 4)
    bad(path, std::to_string(value_bytes) + " bytes per value, expected 4 (float32)");
  if (u32_at(header + 36) != 0) bad(path, "reserved header field not 0");
  const char *names[5] = {"ranks", "steps", "rows", "d", "table columns"};
  std::uint32_t field[5];
  for (int i = 0; i < 5; ++i) {
    field[i] = u32_at(header + 16 + 4 * i);
    if (field[i] < 1 || field[i] > std::uint32_t(INT_MAX))
      bad(path, std::string(names[i]) + " " + std::to_string(field[i]) + " out of range");
  }
  LookupsFile out;
  out.ranks = int(field[0]), out.steps = int(field[1]), out.rows = int(field[2]);
  out.d = int(field[3]), out.table_columns = int(field[4]);
  if (out.d % out.table_columns != 0)
    bad(path, "table columns " + std::to_string(out.table_columns) + " do not divide d " +
                  std::to_string(out.d));
  // S x P x P x b x d values, each product checked against the cap before the next.
  std::uint64_t values = 1;
  for (std::uint64_t factor :
       {std::uint64_t(out.steps), std::uint64_t(out.ranks), std::uint64_t(out.ranks),
        std::uint64_t(out.rows), std::uint64_t(out.d)}) {
    if (values > kMaxValues / factor) bad(path, "header sizes too large");
    values *= factor;
  }
  const std::uint64_t expected = kHeaderBytes + 4 * values;
  if (std::uint64_t(size) != expected)
    bad(path, std::to_string(size) + " bytes, but its header implies " + std::to_string(expected) +
                  " (truncated or not a lookups file)");
  if (!with_values) return out;
  if (!little_endian()) bad(path, "lookups files are little-endian; this host is not");
  out.values.resize(std::size_t(values));
  if (!file.read(reinterpret_cast<char *>(out.values.data()), std::streamsize(4 * values)))
    bad(path, "read error");
  return out;
}

}  // namespace dct::bench
