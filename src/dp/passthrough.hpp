// MPI's own allreduce: the engine of the calls dct does not compress (allreduce.hpp:
// AllreduceArgs::compressed), which carries no state between calls (checkpoints skip it), and
// the pieces the compressed engine's dense path (density 1) sends.
#pragma once

#include <mpi.h>

#include <memory>

#include "core/comm_context.hpp"
#include "core/request_engine.hpp"
#include "dp/allreduce.hpp"

namespace dct::detail {

std::unique_ptr<RequestEngine> make_passthrough_engine(std::shared_ptr<CommContext> context,
                                                       const AllreduceArgs &args);

/// MPI_Allreduce of `count` elements in pieces of at most INT_MAX (MPI-3 counts are int);
/// `send` may be MPI_IN_PLACE.
void allreduce_in_chunks(const void *send, void *recv, MPI_Count count, MPI_Datatype datatype,
                         int element_size, MPI_Op op, MPI_Comm comm);

}  // namespace dct::detail
