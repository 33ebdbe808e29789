// Agreement at the collective inits: every rank learns whether every other rank accepted its
// arguments and configured the collective the same way, so that a disagreement ends in the
// same error on every rank instead of a hang, a crash or a silently wrong sum later.
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <exception>
#include <string>

namespace dct::detail {

/// The settings every rank of one collective must share, each a named 64-bit word. Every rank
/// adds the same fields in the same order (a setting that does not apply is added as 0). Held
/// in place (at most kCapacity fields): the drop-in call agrees on every call and allocates
/// nothing in its steady state.
class Fingerprint {
 public:
  static constexpr std::size_t kCapacity = 16;
  void add(const char *name, std::uint64_t value);
  void add(const char *name, double value);
  std::size_t size() const { return size_; }

 private:
  friend void agree(MPI_Comm, int, std::exception_ptr, const Fingerprint &, const char *);
  struct Field {
    const char *name;
    std::uint64_t value;
  };
  std::array<Field, kCapacity> fields_{};
  std::size_t size_ = 0;
};

/// Collective over `comm` (one MPI_Allreduce of 2 + 2 * fields 64-bit words): `local_error`
/// is what this rank's own checks threw (nullptr: none). Returns normally on every rank when
/// no rank failed and every field is equal on all ranks; otherwise throws on every rank the
/// same code: the largest code any rank's checks gave (this rank's message if it was its own),
/// else DCT_ERR_MISMATCH naming the fields that differ. `what` names the collective
/// (nullptr or "": the message goes out under the calling function's name alone).
void agree(MPI_Comm comm, int rank, std::exception_ptr local_error, const Fingerprint &fingerprint,
           const char *what);

}  // namespace dct::detail
