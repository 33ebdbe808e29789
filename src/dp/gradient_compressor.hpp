// DCT-DP's compression of one allreduce request, with error feedback: each call takes
// acc = send + residual, keeps the entries the threshold control selects (dct_tau_control,
// tau_control.hpp), leaves acc - sent in the residual, and can put a call's entries back
// exactly when the call fails.
//
// A call is one pass over the tensor (Backend::select: acc into the residual, the candidates at
// or above a floor into a short list) and O(k) work on that list (Backend::trim_candidates:
// the exact top k, ties to the lowest indices, rounded for the wire, what stays home written
// back). Only when the floor let through fewer than k candidates does the call select over the
// tensor (take_top_k_of_tensor). Nothing is allocated once the lists have grown to what the
// calls need. It owns the request's residual, threshold and kept entries, in
// the backend's memory (with pinned host copies for GPU backends, which the exchanges read).
//
// The request's lifecycle (headers, algorithm, exchange, momentum, status) stays in
// allreduce.cpp; this is the part that decides which entries a rank sends.
//
// Private header of src/: include it from library sources only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "core/compute_backend.hpp"
#include "core/config.hpp"
#include "core/tau_control.hpp"
#include "dp/momentum.hpp"

namespace dct::detail {

template <typename T>
class GradientCompressor {
 public:
  /// `elements` > 0 allocates the residual (zeroed) on `backend`; `staged`: a GPU backend
  /// whose entries the exchanges read through host copies.
  GradientCompressor(Backend &backend, const Config &config, std::size_t elements, bool staged,
                     Stream stream);

  /// What one compress() decided, for the call's status.
  struct Selection {
    double tau = 0;            ///< the threshold of this call
    bool reestimated = false;  ///< tau was selected over the tensor on this call
  };

  /// Compresses `send` (elements() values in the backend's memory) on call number `call`, or
  /// with a `velocity` its update (velocity.out written: the selection pass makes it, unless the
  /// call estimates its threshold from it first). On return kept() entries are in
  /// kept_indices() and their host copies, and the residual holds acc - sent. If it throws, the
  /// residual holds what it held before (undo() done).
  Selection compress(const T *send, const VelocityUpdate<T> &velocity, MPI_Count call,
                     Stream stream);
  /// Puts the last compress()'s entries back into the residual (exactly: acc there again) and
  /// restores the threshold: the call did not happen. Idempotent.
  void undo(Stream stream);
  /// The call completed: the adaptive floor moves to what this call measured.
  void commit();

  std::size_t kept() const { return kept_; }
  /// NaN and +-Inf entries of acc in the last compress (the selection sends every one).
  std::size_t nonfinite() const { return nonfinite_; }
  /// The kept entries' indices in the backend's memory (the momentum mask uses them).
  const WireIndex *kept_indices() const { return idx_.data(); }
  /// The kept entries' values in the backend's memory: as they travel, except with
  /// dct_values=sign (there acc; the +-m that travel are wire_values()).
  const T *kept_values() const { return val_.data(); }
  /// The kept entries' values as they travel, in the backend's memory (what an exchange that
  /// encodes on the device reads).
  const T *wire_values() const {
    return config_.values == ValueCoding::sign ? sign_values_.data() : val_.data();
  }
  /// The kept entries as the exchanges read them, in host memory: indices, and the values
  /// that travel (dct_values=sign: +-m). GPU backends copy them to the host on first use in a
  /// call (an exchange that encodes on the device never asks).
  const WireIndex *host_indices() const {
    copy_entries_to_host();
    return staged_ ? idx_host_.data() : idx_.data();
  }
  const T *outgoing_values() const;

  /// The residual in the backend's memory (split's result budget adds to it), with every
  /// pending write done.
  T *residual(Stream stream);
  /// The residual in host memory (a copy for GPU backends), with every pending write done.
  const T *residual_on_host(Stream stream) const;
  /// fixed: the threshold; adaptive: the candidates' floor for the next call.
  double tau() const { return static_cast<double>(tau_); }
  /// A checkpoint's state: `residual` (host memory, elements() values) and `tau`.
  void restore(const void *residual, double tau, Stream stream);

 private:
  /// What one exact selection of the top k decided.
  struct TopK {
    double tau = 0;         ///< the k-th largest finite |acc| (the floor when none was cut)
    double next_floor = 0;  ///< adaptive: the candidates' floor for the next call
  };

  std::size_t elements() const { return elements_; }
  bool adaptive() const { return config_.tau_control == TauControl::adaptive; }
  T estimate(const T *send, std::size_t k, MPI_Count call);
  TopK take_top_k(const T *send, std::size_t k, std::size_t aim, T floor);
  TopK take_top_k_of_tensor(std::size_t k, std::size_t aim, std::size_t nonfinite);
  void take_all(const T *send, T threshold);
  void keep(std::size_t candidates, T tau, std::size_t limit, std::size_t kept);
  Selected select(const T *send, T threshold, std::size_t limit);
  /// The call's velocity update made now, by a pass of its own; returns what to compress.
  const T *update_velocity(const T *send);
  /// Whether kept entries leave a remainder (fp16, bf16, sign); native values leave none.
  bool rounds_remainders() const { return config_.values != ValueCoding::native; }
  void copy_entries_to_host() const;
  void quantise_signs();
  /// Does the pending writes into the residual now (outside the next selection pass).
  void write_pending(Stream stream) const;
  /// The pending writes as Backend::select takes them (nothing when there are none).
  SparseList<T> pending() const;
  void reserve_candidates(std::size_t entries);
  void reserve_kept(std::size_t entries);
  const T *host_values() const {
    copy_entries_to_host();
    return staged_ ? val_host_.data() : val_.data();
  }

  Backend *backend_;
  const Config &config_;
  std::size_t elements_;
  bool staged_;
  Stream stream_ = nullptr;     // of the operation in progress
  VelocityUpdate<T> velocity_;  // this call's, until a pass made it
  BackendArray<T> residual_;
  mutable std::vector<T> residual_host_;  // residual_on_host(), read back from the device
  std::vector<T> sample_;
  T tau_ = T(0);  // fixed: the threshold; adaptive: the candidates' floor
  T previous_tau_ = T(0);
  T next_floor_ = T(0);       // adaptive: the floor for the next call, once this one completes
  double call_tau_ = 0;       // this call's threshold (adaptive: the k-th largest |acc|)
  bool reestimated_ = false;  // this call selected tau over the tensor
  // dct_values=sign: what travels, in the backend's memory (its error goes to remainders_),
  // and its pinned host copy (staged_), made on first use in a call.
  BackendArray<T> sign_values_;
  mutable BackendArray<T> sign_values_host_;
  mutable bool signs_on_host_ = false;
  BackendArray<WireIndex> candidate_idx_;  // the selection pass's entries (idx, acc)
  BackendArray<T> candidate_val_;
  BackendArray<WireIndex> idx_;  // kept entries, in the backend's memory: (idx, wire value)
  BackendArray<T> val_;
  // What stays home of each kept entry (the coding's rounding error, sign's error; none for
  // native values, where it is 0). residual[idx_[j]] = remainders_[j] is written for the first
  // pending_ entries by the next call's selection pass, which reads those lines anyway: a
  // scatter of its own after this call missed the cache on each (docs/kernels.md, "The trim").
  BackendArray<T> remainders_;
  mutable std::size_t pending_ = 0;
  mutable bool pending_this_call_ = false;  // pending_ holds this call's entries (undo drops them)
  BackendArray<WireIndex> idx_host_;        // their pinned host copies (staged_ only)
  BackendArray<T> val_host_;
  mutable bool on_host_ = false;  // this call's entries are in idx_host_ / val_host_
  std::size_t kept_ = 0;
  std::size_t nonfinite_ = 0;
};

}  // namespace dct::detail
