#include "core/agreement.hpp"

#include <cstring>
#include <new>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "dct/dct.h"

namespace dct::detail {
namespace {

int code_of(const std::exception_ptr &error) {
  if (!error) return DCT_SUCCESS;
  try {
    std::rethrow_exception(error);
  } catch (const Error &e) {
    return e.code();
  } catch (const std::bad_alloc &) {
    return DCT_ERR_NO_MEMORY;
  } catch (...) {
    return DCT_ERR_INTERNAL;
  }
}

/// "what: ", or nothing when the caller's own name already heads the message.
std::string prefix(const char *what) {
  return what == nullptr || *what == '\0' ? std::string() : std::string(what) + ": ";
}

}  // namespace

void Fingerprint::add(const char *name, std::uint64_t value) {
  require(size_ < kCapacity, DCT_ERR_INTERNAL, "a fingerprint holds at most 16 fields");
  fields_[size_++] = {name, value};
}

void Fingerprint::add(const char *name, double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  add(name, bits);
}

void agree(MPI_Comm comm, int rank, std::exception_ptr local_error, const Fingerprint &fingerprint,
           const char *what) {
  // One MPI_MAX over [code, failing rank + 1, fields, ~fields]: the maximum of ~x is ~min(x),
  // so one reduction gives every field's minimum and maximum.
  const std::size_t n = fingerprint.size_;
  const int local_code = code_of(local_error);
  std::array<std::uint64_t, 2 + 2 * Fingerprint::kCapacity> words{}, agreed{};
  words[0] = static_cast<std::uint64_t>(local_code);
  words[1] = local_code != DCT_SUCCESS ? static_cast<std::uint64_t>(rank) + 1 : 0;
  for (std::size_t i = 0; i < n; ++i) {
    words[2 + i] = fingerprint.fields_[i].value;
    words[2 + n + i] = ~fingerprint.fields_[i].value;
  }
  // Nonblocking, the calls in flight progressing meanwhile: a peer may be waiting for this
  // rank's part of a call it started before this collective (issue 35).
  MPI_Request request = MPI_REQUEST_NULL;
  check_mpi(MPI_Iallreduce(words.data(), agreed.data(), static_cast<int>(2 + 2 * n), MPI_UINT64_T,
                           MPI_MAX, comm, &request),
            "MPI_Iallreduce");
  complete_progressing(request);
  const int code = static_cast<int>(agreed[0]);
  if (code != DCT_SUCCESS) {
    if (local_code == code) std::rethrow_exception(local_error);
    char text[DCT_MAX_ERROR_STRING] = {};
    int length = 0;
    DCT_Error_string(code, text, &length);
    fail(code, prefix(what) + "rank " + std::to_string(agreed[1] - 1) + " refused its arguments (" +
                   text + "); its DCT_Get_last_error says why");
  }
  std::string differ;
  for (std::size_t i = 0; i < n; ++i) {
    if (agreed[2 + i] == ~agreed[2 + n + i]) continue;
    differ += differ.empty() ? "" : ", ";
    differ += fingerprint.fields_[i].name;
  }
  require(differ.empty(), DCT_ERR_MISMATCH,
          prefix(what) + "ranks configured this collective differently (" + differ +
              "); every rank must pass the same values");
}

}  // namespace dct::detail
