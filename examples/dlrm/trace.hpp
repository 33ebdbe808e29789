/**
 * @file trace.hpp
 * @brief `--trace-indices`: the kept indices of every DCT-DP request in some training steps of
 * the first compressed mode, gathered to rank 0 and written as text (examples/dlrm/README.md,
 * "Tracing the kept indices"), to measure how much the ranks' kept sets overlap.
 *
 * The library does not hand out the indices it sends; they are read back from its public
 * diagnostic `DCT_Request_get_residual`. With error feedback and native values an entry is sent
 * whole and its residual becomes exactly 0, while an entry that stays keeps its whole
 * accumulated value: entry i was kept by the call iff `acc[i] = grad[i] + residual_before[i]`
 * is non-zero and `residual_after[i] == 0`. (Entries with acc = 0 are never sent: the library
 * keeps only non-zero entries.) So the trace needs `dct_values=native` and no `dct_momentum`.
 */
#ifndef DCT_DLRM_TRACE_HPP
#define DCT_DLRM_TRACE_HPP

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "step_window.hpp"

namespace dlrm {

/** @brief What is traced and, on rank 0 after `gather`, every rank's records. */
struct IndexTrace : StepWindow {  // the steps traced (resolved before the run)
  bool taken = false;           ///< Set on every rank once a mode has traced (only the first does).
  bool active = false;          ///< The step being trained is traced (set by run_mode).
  int64_t step = 0;             ///< That step's number.
  std::string mode;             ///< The traced mode.
  std::vector<int64_t> counts;  ///< Elements of every request, in registration order.
  /// This rank's records: step, request, kept entries K, then the K indices (ascending).
  std::vector<int64_t> records;
  /// On rank 0 after gather: every rank's records, rank after rank.
  std::vector<std::vector<int64_t>> all;

  /**
   * @brief Before the run: resolves `first` (0: the last `steps` of `run_steps`) and returns
   * why the trace cannot be taken ("" if it can): no compressed mode, values other than
   * native, momentum correction, or steps outside the run.
   */
  std::string resolve(int64_t run_steps, bool compressed, const std::string &values, bool momentum);
  /** @brief Appends one record: the entries with acc != 0 and residual_after == 0; returns
   * their number. */
  int64_t record(int request, const std::vector<float> &acc, const std::vector<float> &residual);
  /** @brief Collective: gathers every rank's records to rank 0; marks the trace taken. */
  void gather(MPI_Comm comm);
  /** @brief Rank 0: writes the text file; false (with a message) if it cannot. */
  bool write(const std::string &path, const std::string &header) const;
};

}  // namespace dlrm

#endif
