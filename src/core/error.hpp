// Internal error type: C++ code throws dct::detail::Error, the C entry points turn it into a
// return code plus the thread's last-error message (see c_api.cpp).
#pragma once

#include <mpi.h>

#include <exception>
#include <string>
#include <type_traits>
#include <utility>

#include "dct/dct.h"

namespace dct::detail {

class Error : public std::exception {
 public:
  Error(int code, std::string message) : code_(code), message_(std::move(message)) {}
  int code() const noexcept { return code_; }
  const char *what() const noexcept override { return message_.c_str(); }

 private:
  int code_;
  std::string message_;
};

[[noreturn]] inline void fail(int code, const std::string &message) {
  throw Error(code, message);
}

/// Throws Error(code, message) unless `condition` holds. A message that must be formatted
/// (std::to_string, concatenation) is passed as a callable returning it, built only when the
/// check fails: the checks run on every call, some once per rank of a call, and formatting
/// their messages eagerly cost more than the calls' own work on small tensors (measured:
/// docs/performance.md, "Per-call overhead at small sizes"). A literal or an existing string
/// is passed as it is.
inline void require(bool condition, int code, const char *message) {
  if (!condition) fail(code, message);
}
inline void require(bool condition, int code, const std::string &message) {
  if (!condition) fail(code, message);
}
template <typename Message,
          typename = std::enable_if_t<std::is_invocable_r_v<std::string, Message &>>>
inline void require(bool condition, int code, Message &&message) {
  if (!condition) fail(code, message());
}

/// Throws DCT_ERR_MPI with MPI's own error string when an MPI call did not succeed.
inline void check_mpi(int mpi_rc, const char *call) {
  if (mpi_rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(mpi_rc, text, &length);
  fail(DCT_ERR_MPI, std::string(call) + " failed: " + text);
}

}  // namespace dct::detail
