// The compressed allreduce of one tensor: its error-feedback state and its algorithms.
// A persistent request owns one engine; DCT_Allreduce keeps one per drop-in key.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>

#include "core/compute_backend.hpp"
#include "core/config.hpp"
#include "core/request_engine.hpp"
#include "dct/dct.h"

namespace dct::detail {

/// Arguments of an allreduce as the user gave them, validated by `validate`.
struct AllreduceArgs {
  const void *sendbuf;
  void *recvbuf;
  MPI_Count count;
  MPI_Datatype datatype;
  MPI_Op op;
  MPI_Comm comm;

  /// Throws the documented code for the first bad argument; reads no buffer. `probe_comm`, a
  /// communicator whose errors return (a context's private one), asks MPI whether a derived
  /// datatype is committed.
  void validate(MPI_Comm probe_comm) const;
  /// 4 or 8 for the sums dct compresses (MPI_FLOAT, MPI_DOUBLE and Fortran's MPI_REAL,
  /// MPI_DOUBLE_PRECISION, MPI_REAL4, MPI_REAL8 with MPI_SUM), 0 for everything else.
  int compressed_element_size() const;
  bool compressed() const;
};

/// The engine for `args` (already validated): compressed for float/double sums, MPI's own
/// allreduce for everything else.
std::unique_ptr<RequestEngine> make_allreduce_engine(const AllreduceArgs &args,
                                                     const Config &config);

}  // namespace dct::detail
