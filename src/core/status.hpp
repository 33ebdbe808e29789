// The versioned DCT_Status of dct.h at the C boundary: callers' statuses are checked before a
// call does anything, and written only as far as the caller's layout reaches.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "dct/dct.h"

namespace dct::detail {

/// The smallest caller layout accepted: 0.4.0's, the first with a header. Fields are only
/// ever appended, so every later layout starts with this one.
constexpr std::size_t kStatusMinSize = 128;
/// A larger `size` is damage, not a future layout.
constexpr std::size_t kStatusMaxSize = 4096;
constexpr std::size_t kStatusBody = offsetof(DCT_Status, count);
static_assert(sizeof(MPI_Count) != 8 ||
                  (offsetof(DCT_Status, nonfinite) == kStatusMinSize && kStatusBody == 16),
              "DCT_Status: append fields after nonfinite and keep 0.4.0's layout in front");

/// The name of a caller's status in messages: `what`, or `what[index]` for index >= 0.
inline std::string status_name(const char *what, int index) {
  return index < 0 ? std::string(what) : std::string(what) + "[" + std::to_string(index) + "]";
}

/// Throws DCT_ERR_ARG unless `status` (not NULL) carries a header dct can trust. `what`
/// (`index`): its name in the message (status_name).
inline void check_status(const DCT_Status *status, const char *what, int index = -1) {
  require(status->magic == DCT_STATUS_MAGIC, DCT_ERR_ARG, [&] {
    return status_name(what, index) +
           " is not initialised: set it with DCT_STATUS_INITIALIZER (dct.h; statuses of dct 0.3 "
           "and older have no header)";
  });
  require(status->size >= kStatusMinSize && status->size <= kStatusMaxSize &&
              status->size % alignof(DCT_Status) == 0,
          DCT_ERR_ARG, [&] {
            return status_name(what, index) + ".size = " + std::to_string(status->size) +
                   " is not a DCT_Status layout (" + std::to_string(kStatusMinSize) + " to " +
                   std::to_string(kStatusMaxSize) + " bytes, a multiple of " +
                   std::to_string(alignof(DCT_Status)) + ")";
          });
}

/// Writes the fields of `full` that lie within the caller's `out->size`; the header and any
/// field of a newer layout than this library's stay as they are.
inline void deliver_status(const DCT_Status &full, DCT_Status *out) {
  const std::size_t end = out->size < sizeof(DCT_Status) ? out->size : sizeof(DCT_Status);
  std::memcpy(reinterpret_cast<char *>(out) + kStatusBody,
              reinterpret_cast<const char *>(&full) + kStatusBody, end - kStatusBody);
}

/// Element `i` of a caller's array of statuses whose layout is `stride` bytes.
inline DCT_Status *status_at(DCT_Status *array, std::size_t stride, int i) {
  return reinterpret_cast<DCT_Status *>(reinterpret_cast<char *>(array) +
                                        stride * static_cast<std::size_t>(i));
}

}  // namespace dct::detail
