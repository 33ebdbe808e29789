// The MPI datatypes whose sums dct compresses, and their element sizes: one list for DCT-DP and
// DCT-MP.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

namespace dct::detail {

/// 4 or 8 for MPI_FLOAT, MPI_DOUBLE and Fortran's MPI_REAL, MPI_DOUBLE_PRECISION, MPI_REAL4,
/// MPI_REAL8 (IEEE binary32/binary64 wherever dct runs); 0 for every other datatype.
inline int floating_element_size(MPI_Datatype datatype) {
  if (datatype == MPI_DATATYPE_NULL) return 0;
  if (datatype == MPI_FLOAT || datatype == MPI_REAL || datatype == MPI_REAL4) return 4;
  if (datatype == MPI_DOUBLE || datatype == MPI_DOUBLE_PRECISION || datatype == MPI_REAL8) return 8;
  return 0;
}

}  // namespace dct::detail
