// The quantiser and its validating decoder (error_bounded_coders.cpp: the lossless stage).
// Compiled with -ffp-contract=off (CMakeLists.txt): the encoder checks every reconstruction
// with the very expression the decoder evaluates, so neither may be fused differently. Encoder
// and decoder stay side by side: each check of the decoder mirrors a rule of the encoder, and
// a peer's message is validated field by field.
#include "mp/error_bounded_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>
#include <type_traits>
#include <unordered_set>

#include "core/error.hpp"
#include "mp/error_bounded_avx512.hpp"

namespace dct::detail::eb {

HostSimd best_simd() {
#if defined(DCT_EB_AVX512)
  return best_host_simd(true);
#else
  return best_host_simd(false);
#endif
}
HostSimd simd = best_simd();

namespace {

struct TableHeader {
  double offset = 0.0;
  double step = 0.0;
  std::uint32_t levels = 0;  // 0: the table travels exactly, in its own type
  std::uint32_t outliers = 0;
};

template <typename V>
void put(std::byte *&at, V value) {
  std::memcpy(at, &value, sizeof value);
  at += sizeof value;
}
template <typename V>
V get(const std::byte *&at) {
  V value;
  std::memcpy(&value, at, sizeof value);
  at += sizeof value;
  return value;
}

std::size_t code_bytes(std::uint32_t levels) {
  return levels <= 255 ? 1 : 2;
}
std::uint32_t escape(std::uint32_t levels) {
  return levels <= 255 ? 255u : 65535u;
}

/// The one reconstruction formula, shared by the encoder's check and the decoder.
template <typename T>
T reconstruct(double offset, double step, std::uint32_t code) {
  return static_cast<T>(offset + static_cast<double>(code) * step);
}

/// The body bytes of one table of `values` values.
template <typename T>
std::size_t table_body_bytes(const TableHeader &h, std::size_t values) {
  return h.levels == 0 ? values * sizeof(T)
                       : values * code_bytes(h.levels) + std::size_t(h.outliers) * sizeof(T);
}

/// Appends the table's values exactly.
template <typename T>
void put_exact(const T *rows, std::size_t nrows, std::size_t d, std::size_t first,
               std::size_t columns, std::vector<std::byte> &body) {
  const std::size_t at = body.size();
  body.resize(at + nrows * columns * sizeof(T));
  std::byte *out = body.data() + at;
  for (std::size_t r = 0; r < nrows; ++r, out += columns * sizeof(T))
    std::memcpy(out, rows + r * d + first, columns * sizeof(T));
}

/// Quantises one table; returns false (body untouched) when sending it exactly is as small.
template <typename T, typename Code>
bool put_codes(const T *rows, std::size_t nrows, std::size_t d, std::size_t first,
               std::size_t columns, double bound, TableHeader &h, std::vector<std::byte> &body,
               QuantizeReport &report) {
  const std::size_t values = nrows * columns;
  const std::size_t at = body.size();
  body.resize(at + values * sizeof(Code));
  std::byte *codes = body.data() + at;          // written bytewise: tables need not be aligned
  static thread_local std::vector<T> outliers;  // kept between calls
  if (outliers.size() < values) outliers.resize(values + values / 4);
  std::size_t outlier_count = 0;
  const Code mark = static_cast<Code>(escape(h.levels));
  const double inverse = h.step > 0 ? 1.0 / h.step : 0.0;
  const double top = double(h.levels - 1);
  double worst = 0.0;
  for (std::size_t r = 0; r < nrows; ++r) {
    const T *row = rows + r * d + first;
    std::size_t c = 0;
#if defined(DCT_EB_AVX512)
    if constexpr (std::is_same_v<T, float>) {
      if (simd == HostSimd::avx512) {
        c = avx512::codes<Code>({h.offset, h.step, inverse, top, bound}, row, columns, mark, codes,
                                outliers.data(), outlier_count, worst);
        codes += c * sizeof(Code);
      }
    }
#endif
    for (; c < columns; ++c) {
      const double x = static_cast<double>(row[c]);
      const double q = std::min(std::max(std::nearbyint((x - h.offset) * inverse), 0.0), top);
      const std::uint32_t code = std::isfinite(x) ? static_cast<std::uint32_t>(q) : 0;
      const double error = std::fabs(double(reconstruct<T>(h.offset, h.step, code)) - x);
      if (error <= bound) {  // false for NaN and infinities
        const Code value = static_cast<Code>(code);
        std::memcpy(codes, &value, sizeof value);
        worst = std::max(worst, error);
      } else {
        std::memcpy(codes, &mark, sizeof mark);
        outliers[outlier_count++] = row[c];
      }
      codes += sizeof(Code);
    }
  }
  h.outliers = static_cast<std::uint32_t>(outlier_count);
  if (values * sizeof(Code) + outlier_count * sizeof(T) >= values * sizeof(T)) {
    body.resize(at);
    return false;
  }
  body.resize(at + values * sizeof(Code) + outlier_count * sizeof(T));
  if (outlier_count > 0)
    std::memcpy(body.data() + at + values * sizeof(Code), outliers.data(),
                outlier_count * sizeof(T));
  report.outliers += outlier_count;
  report.max_error = std::max(report.max_error, worst);
  return true;
}

/// The finite minimum and maximum of a table block (lo > hi when it has no finite value); a
/// zero bound is +0 whatever the order the zeros came in.
template <typename T>
void finite_range(const T *rows, std::size_t nrows, std::size_t d, std::size_t first,
                  std::size_t columns, double &lo, double &hi) {
  T low = std::numeric_limits<T>::infinity(), high = -low;
  for (std::size_t r = 0; r < nrows; ++r) {
    const T *row = rows + r * d + first;
    std::size_t c = 0;
#if defined(DCT_EB_AVX512)
    if constexpr (std::is_same_v<T, float>) {
      if (simd == HostSimd::avx512) c = avx512::finite_range(row, columns, low, high);
    }
#endif
    for (; c < columns; ++c) {
      if (!std::isfinite(row[c])) continue;
      low = row[c] < low ? row[c] : low;
      high = row[c] > high ? row[c] : high;
    }
  }
  lo = low == T(0) ? 0.0 : static_cast<double>(low);
  hi = high == T(0) ? 0.0 : static_cast<double>(high);
}

/// The quantiser of a block with relative bound `relative`: levels 0 when it must be exact.
TableHeader plan_table(double lo, double hi, double relative, double &bound) {
  TableHeader h;
  bound = 0.0;
  if (relative <= 0.0 || !(lo <= hi)) return h;  // exact, or nothing finite to quantise
  const double range = hi - lo;
  bound = relative * range;
  if (!std::isfinite(bound) || !std::isfinite(2.0 * bound)) return h;  // huge double ranges
  h.offset = lo;
  if (bound == 0.0) {  // a constant block: one level, reconstructed exactly
    h.levels = 1;
    return h;
  }
  h.step = 2.0 * bound;
  const double levels = std::floor(range / h.step + 0.5) + 1.0;
  if (!(levels <= double(kMaxLevels))) {
    h = TableHeader{};
    return h;
  }
  h.levels = static_cast<std::uint32_t>(levels);
  return h;
}

}  // namespace

std::size_t max_message_bytes(std::size_t rows, std::size_t d, std::size_t tables,
                              std::size_t value_bytes) {
  if (rows == 0) return 0;
  return kMessageHeaderBytes + tables * kTableHeaderBytes + rows * d * value_bytes;
}

template <typename T>
QuantizeReport quantize(const T *rows, std::size_t nrows, const Tables &tables,
                        const double *bounds, Workspace &ws) {
  QuantizeReport report;
  const std::size_t count = tables.count(), columns = tables.columns;
  ws.body.clear();
  ws.headers.resize(count * kTableHeaderBytes);
  std::byte *header = ws.headers.data();
  for (std::size_t t = 0; t < count; ++t) {
    const std::size_t first = t * columns;
    double lo = 0, hi = 0, bound = 0;
    finite_range(rows, nrows, tables.d, first, columns, lo, hi);
    TableHeader h = plan_table(lo, hi, bounds[t], bound);
    bool quantised = false;
    if (h.levels > 0 && nrows > 0) {
      quantised = code_bytes(h.levels) == 1
                      ? put_codes<T, std::uint8_t>(rows, nrows, tables.d, first, columns, bound, h,
                                                   ws.body, report)
                      : put_codes<T, std::uint16_t>(rows, nrows, tables.d, first, columns, bound, h,
                                                    ws.body, report);
    }
    if (!quantised) {
      h = TableHeader{};
      put_exact(rows, nrows, tables.d, first, columns, ws.body);
      report.exact_tables += 1;
    }
    put(header, h.offset);
    put(header, h.step);
    put(header, h.levels);
    put(header, h.outliers);
  }
  return report;
}

std::size_t pack(Coder &coder, Workspace &ws, std::byte *out) {
  std::byte *at = out;
  const std::size_t tables = ws.headers.size() / kTableHeaderBytes;
  std::byte *payload = out + kMessageHeaderBytes + ws.headers.size();
  std::size_t written = 0;
  if (coder != Coder::none && !ws.body.empty())  // only what is strictly smaller is kept
    written = ws.compress(coder, ws.body.data(), ws.body.size(), payload, ws.body.size() - 1);
  if (written == 0) {
    coder = Coder::none;
    written = ws.compress(Coder::none, ws.body.data(), ws.body.size(), payload, ws.body.size());
  }
  put(at, static_cast<std::uint8_t>(coder));
  put(at, std::uint8_t{0});
  put(at, std::uint16_t{0});
  put(at, static_cast<std::uint32_t>(tables));
  put(at, static_cast<std::uint64_t>(ws.body.size()));
  if (!ws.headers.empty()) std::memcpy(at, ws.headers.data(), ws.headers.size());
  return kMessageHeaderBytes + ws.headers.size() + written;
}

template <typename T>
std::string decode(const std::byte *message, std::size_t bytes, std::size_t nrows,
                   const Tables &tables, T *rows, Workspace &ws) {
  if (nrows == 0) return bytes == 0 ? "" : "a message for zero rows is not empty";
  const std::size_t count = tables.count(), columns = tables.columns, values = nrows * columns;
  if (bytes < kMessageHeaderBytes + count * kTableHeaderBytes)
    return "message of " + std::to_string(bytes) + " bytes is shorter than its headers";
  const std::byte *at = message;
  const auto coder = get<std::uint8_t>(at);
  const auto zero8 = get<std::uint8_t>(at);
  const auto zero16 = get<std::uint16_t>(at);
  const auto announced_tables = get<std::uint32_t>(at);
  const auto body_bytes = get<std::uint64_t>(at);
  if (coder >= kCoders) return "unknown lossless coder " + std::to_string(coder);
  if (zero8 != 0 || zero16 != 0) return "reserved header bytes are not zero";
  if (announced_tables != count)
    return "message has " + std::to_string(announced_tables) + " tables, expected " +
           std::to_string(count);
  std::vector<TableHeader> headers(count);
  std::size_t expected = 0;
  for (TableHeader &h : headers) {
    h.offset = get<double>(at);
    h.step = get<double>(at);
    h.levels = get<std::uint32_t>(at);
    h.outliers = get<std::uint32_t>(at);
    if (h.levels == 0 && (h.offset != 0.0 || h.step != 0.0 || h.outliers != 0))
      return "an exact table carries quantiser parameters";
    if (h.levels > kMaxLevels) return "levels " + std::to_string(h.levels) + " exceed 65535";
    if (!std::isfinite(h.offset) || !std::isfinite(h.step) || h.step < 0.0)
      return "table offset or step is not a finite non-negative number";
    if (h.outliers > values) return "more outliers than values";
    expected += table_body_bytes<T>(h, values);
  }
  if (expected > nrows * tables.d * sizeof(T))
    return "tables announce a body larger than the rows sent exactly";
  if (body_bytes != expected)
    return "body of " + std::to_string(body_bytes) + " bytes announced, tables describe " +
           std::to_string(expected);
  ws.body.resize(expected);
  if (!ws.decompress(static_cast<Coder>(coder), at, bytes - std::size_t(at - message),
                     ws.body.data(), expected))
    return std::string(coder_name(static_cast<Coder>(coder))) +
           " payload does not decompress to the announced body";
  // Validate every code before writing anything.
  const std::byte *body = ws.body.data();
  for (const TableHeader &h : headers) {
    if (h.levels > 0) {
      std::size_t marks = 0;
      const std::uint32_t mark = escape(h.levels);
      for (std::size_t i = 0; i < values; ++i) {
        std::uint32_t code = 0;
        if (code_bytes(h.levels) == 1)
          code = std::uint32_t(body[i]);
        else
          std::memcpy(&code, body + 2 * i, 2);  // little-endian host
        if (code == mark)
          ++marks;
        else if (code >= h.levels)
          return "code " + std::to_string(code) + " outside the table's " +
                 std::to_string(h.levels) + " levels";
      }
      if (marks != h.outliers)
        return std::to_string(marks) + " outlier codes, " + std::to_string(h.outliers) +
               " outliers announced";
    }
    body += table_body_bytes<T>(h, values);
  }
  body = ws.body.data();
  for (std::size_t t = 0; t < count; ++t) {
    const TableHeader &h = headers[t];
    const std::size_t first = t * columns;
    if (h.levels == 0) {
      for (std::size_t r = 0; r < nrows; ++r)
        std::memcpy(rows + r * tables.d + first, body + r * columns * sizeof(T),
                    columns * sizeof(T));
    } else {
      const std::size_t width = code_bytes(h.levels);
      const std::uint32_t mark = escape(h.levels);
      const std::byte *outlier = body + values * width;
      for (std::size_t r = 0, i = 0; r < nrows; ++r) {
        T *row = rows + r * tables.d + first;
        for (std::size_t c = 0; c < columns; ++c, ++i) {
          std::uint32_t code = 0;
          if (width == 1)
            code = std::uint32_t(body[i]);
          else
            std::memcpy(&code, body + 2 * i, 2);
          if (code == mark) {
            std::memcpy(row + c, outlier, sizeof(T));
            outlier += sizeof(T);
          } else {
            row[c] = reconstruct<T>(h.offset, h.step, code);
          }
        }
      }
    }
    body += table_body_bytes<T>(h, values);
  }
  return "";
}

template <typename T>
void count_distinct(const T *rows, std::size_t nrows, std::size_t d, std::size_t first,
                    std::size_t columns, double bound, std::size_t &distinct,
                    std::size_t &surviving) {
  double lo = 0, hi = 0, absolute = 0;
  finite_range(rows, nrows, d, first, columns, lo, hi);
  const TableHeader h = plan_table(lo, hi, bound, absolute);
  std::unordered_set<std::string_view> originals;
  for (std::size_t r = 0; r < nrows; ++r)
    originals.emplace(reinterpret_cast<const char *>(rows + r * d + first), columns * sizeof(T));
  distinct += originals.size();
  if (h.levels == 0) {  // sent exactly: every distinct row survives
    surviving += originals.size();
    return;
  }
  std::unordered_set<std::string> quantised;
  std::string codes(columns * sizeof(std::uint32_t), '\0');
  for (std::size_t r = 0; r < nrows; ++r) {
    const T *row = rows + r * d + first;
    for (std::size_t c = 0; c < columns; ++c) {
      const double x = static_cast<double>(row[c]);
      std::uint32_t code = std::numeric_limits<std::uint32_t>::max();  // NaN, infinities
      if (std::isfinite(x) && h.step > 0)
        code = static_cast<std::uint32_t>(std::nearbyint((x - h.offset) / h.step));
      else if (std::isfinite(x))
        code = 0;  // a constant block
      std::memcpy(codes.data() + c * sizeof code, &code, sizeof code);
    }
    quantised.insert(codes);
  }
  surviving += quantised.size();
}

#define DCT_EB_INSTANTIATE(T)                                                                      \
  template QuantizeReport quantize<T>(const T *, std::size_t, const Tables &, const double *,      \
                                      Workspace &);                                                \
  template std::string decode<T>(const std::byte *, std::size_t, std::size_t, const Tables &, T *, \
                                 Workspace &);                                                     \
  template void count_distinct<T>(const T *, std::size_t, std::size_t, std::size_t, std::size_t,   \
                                  double, std::size_t &, std::size_t &);
DCT_EB_INSTANTIATE(float)
DCT_EB_INSTANTIATE(double)
#undef DCT_EB_INSTANTIATE

}  // namespace dct::detail::eb
