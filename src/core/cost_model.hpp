// The alpha-beta cost model behind dct_algorithm=auto.
//
// Every sparse algorithm is charged alpha per message on its critical path and 1/beta per
// byte this rank must receive; the model picks the cheapest. Its inputs are what every rank
// knows identically after the header exchange (P, n, value size, every rank's kept count), so
// every rank picks the same algorithm. Compute time is not modelled: the kernels cost the same
// for every algorithm except the decode, which is proportional to the bytes received anyway.
#pragma once

#include <cstdint>

#include "core/config.hpp"
#include "core/internal_api.hpp"
#include "dct/dct.h"

namespace dct::detail {

/// How a GPU request's sums reach the device buffers, as far as auto charges it
/// (ExchangeSize::host_result_seconds): the worst of every rank's, agreed on so that every rank
/// decides alike.
enum class Staging {
  none,  ///< host buffers: nothing to charge
  /// MPI through pinned host buffers: dense's n-element sum is written in host memory, and
  /// split's, hierarchical's and recursive doubling's sums cross from there as they travelled
  all,
  /// as `all`, but a device transport (dct_transport: NCCL) carries every algorithm but
  /// hierarchical device to device (its tiers could not have transports of their own): only
  /// hierarchical's sums cross
  transport,
  /// MPI reads device memory on every rank (GPU-aware): the sparse exchanges send and receive
  /// in place, and only dense is charged, whose reduction MPI libraries often run through
  /// host memory
  dense,
};

struct ExchangeSize {
  int ranks = 1;
  double count = 0;     ///< n, elements of the tensor
  int value_bytes = 4;  ///< of the tensor's type: 4 (float) or 8 (double)
  /// Wire bytes of each value a rank sends of its own entries (dct_values: 2 for fp16/bf16,
  /// 1/8 for sign; <= 0: value_bytes). Partial sums travel as value_bytes.
  double own_value_bytes = 0;
  double total_kept = 0;  ///< sum over ranks of the entries each sends
  /// Nonzeros of the sum, if known from an earlier call (split/recursive doubling measure it);
  /// <= 0: estimated as if the ranks chose their entries independently.
  double result_nonzeros = 0;
  /// split with dct_result_density: the entries the result may keep (<= 0: no bound).
  double result_budget = 0;
  /// hierarchical: ranks per group (0: no hierarchy; the algorithm is not a candidate).
  int group_size = 0;
  /// GPU buffers: seconds to write the n-element sum in host memory and copy it to the device,
  /// charged in full to dense; the sparse exchanges sum on the device from what they received,
  /// charged the share of it their sum crosses as (split's and hierarchical's gathered
  /// segments, recursive doubling's final list), and allgather nothing (its blocks cross
  /// compressed); each only where `staging` says its sum crosses. 0: host buffers.
  double host_result_seconds = 0;
  /// Which algorithms host_result_seconds is charged to (none: nobody).
  Staging staging = Staging::all;
};

/// What writing the sum in host memory and copying it to the device costs per byte of the
/// tensor, for staged GPU requests: about 10 GB/s (the host result is zeroed, summed into and
/// copied; measured: docs/internals.md, measured reasons).
constexpr double kHostResultBytesPerSecond = 10e9;

/// hierarchical's group size for `ranks` ranks: `requested` if > 0 (it must divide `ranks`:
/// DCT_ERR_INFO otherwise); else `node_size` when every node holds that many ranks, 1 < node_size <
/// ranks
/// (`node_size` 0: nodes differ); else the divisor of `ranks` nearest its square root, which
/// cuts each rank's messages from P - 1 to about 2 sqrt(P). 0 where no group size in
/// (1, ranks) exists.
DCT_INTERNAL_API int hierarchy_group_size(int ranks, int node_size, int requested);

/// auto considers hierarchical from this many ranks: below, it saves at most ~2 (P - 1) - 4
/// sqrt(P) latencies (docs/algorithms.md, "auto"), and each request would hold two more
/// communicators for it.
constexpr int kHierarchyMinRanks = 16;

/// Predicted seconds of one call of `algorithm` (allgather, split, hierarchical,
/// recursive_doubling, dense).
DCT_INTERNAL_API double predicted_seconds(DCT_Algorithm algorithm, const ExchangeSize &size,
                                          const NetworkModel &network);

/// The algorithm with the smallest predicted time; ties go to the first of dense, allgather,
/// split, recursive_doubling, hierarchical (a candidate where size.group_size > 0). With a
/// result budget only split and hierarchical are candidates (the others cannot bound it).
DCT_INTERNAL_API DCT_Algorithm cheapest_algorithm(const ExchangeSize &size,
                                                  const NetworkModel &network);

/// The algorithm of one call of the sparse allreduce, from what every rank knows identically
/// after the header exchange (so every rank decides alike): `config.algorithm`, auto resolved
/// by cheapest_algorithm (split or hierarchical whenever dct_result_density bounds the result:
/// the only ones that can), hierarchical replaced by split where there is no hierarchy
/// (`group_size` 0), then dense wherever the algorithm's messages would exceed what MPI's int
/// counts of 8-byte units can describe. `total_kept`: the entries all ranks send;
/// `result_nonzeros`: as in ExchangeSize. `staging`: how GPU buffers' sums reach the device
/// (ExchangeSize::host_result_seconds and staging).
DCT_INTERNAL_API DCT_Algorithm decide_algorithm(const Config &config, int ranks, double count,
                                                int value_bytes, double total_kept,
                                                double result_nonzeros,
                                                Staging staging = Staging::none,
                                                int group_size = 0);

/// The modelled speed-up of sending a message through a lossless coder rather than as it is
/// (Feng et al., SC'24): 1 / (1/ratio + B (1/compress + 1/decompress)), with B the model's
/// bandwidth and the coder's throughputs in bytes per second of uncompressed data. Above 1
/// the coder pays for its time on this network.
double lossless_speedup(double ratio, double compress_bytes_per_s, double decompress_bytes_per_s,
                        const NetworkModel &network);

/// Expected nonzeros of the sum of `ranks` sparse vectors of length `count` with `kept`
/// entries each, placed independently: count * (1 - (1 - kept/count)^ranks).
double expected_union(double count, double kept_per_rank, int ranks);

}  // namespace dct::detail
