// How a compressed allreduce request (allreduce.cpp) builds its exchanges: where each
// algorithm sums and encodes a GPU request's data (Placement), and the exchange objects it
// keeps per algorithm (ExchangeSet).
#pragma once

#include <mpi.h>

#include <memory>

#include "core/cost_model.hpp"
#include "dct/dct.h"
#include "dp/exchange/exchange.hpp"

namespace dct::detail {

/// Where a request's data lives during its exchanges; every field but `staged` and
/// `mpi_reads_device` is agreed between the ranks when the request connects.
struct Placement {
  bool staged = false;            ///< a GPU backend: the exchanges work on host copies
  bool mpi_reads_device = false;  ///< this rank's MPI accepts device memory
  bool any_staged = false;        ///< staged on some rank
  bool any_mpi_stages = false;    ///< staged and MPI not GPU-aware on some rank
  bool transport = false;  ///< a device transport carries the blocks (every rank's or none's)
  bool hierarchical_on_transport = false;  ///< the hierarchy's tiers have transports

  /// What auto charges for the sums' way to the device (cost_model.hpp), alike on every rank.
  Staging staging() const;
  /// Staged requests: the sparse exchanges sum on the device, into the user's buffer, from
  /// what they received (exchange.hpp: SparseInput::device); dense too where MPI reads device
  /// memory or the transport sums it, else it writes the sum in host memory, copied over at
  /// the end.
  bool sums_on_device(int algorithm) const;
  /// ... and every sparse exchange encodes this rank's blocks there too (recursive doubling
  /// also merges there), every value coding: then only compressed bytes cross between host
  /// and device, and none where MPI reads device memory. Dense, where it sums on the device,
  /// scatters this rank's entries there from where they were kept.
  bool encodes_on_device(int algorithm) const;
};

/// One exchange per algorithm, made on first use and reused across calls, with the segment
/// layouts split and hierarchical keep between calls.
template <typename T>
class ExchangeSet {
 public:
  /// The exchange for `algorithm` (dense, for any algorithm not sparse, sums `datatype`);
  /// hierarchical's runs on `hierarchy`, which must outlive this set.
  SparseExchange<T> &get(DCT_Algorithm algorithm, MPI_Datatype datatype,
                         const Hierarchy &hierarchy);
  /// After an MPI failure operations may still be pending on `exchange`'s buffers: it is
  /// leaked rather than let MPI write into freed memory, and never reused.
  void abandon(SparseExchange<T> *exchange);
  /// The segment boundaries, re-balanced (on every rank) by the next split or hierarchical call.
  void forget_layouts();

 private:
  SplitLayout layout_, group_layout_, cross_layout_;
  // Indexed by DCT_Algorithm.
  std::unique_ptr<SparseExchange<T>> exchanges_[DCT_ALGORITHM_HIERARCHICAL + 1];
};

}  // namespace dct::detail
