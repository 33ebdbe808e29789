/**
 * @file comm.hpp
 * @brief The two communication strategies of the demo behind one interface: `dense` (plain
 * MPI_Allreduce and MPI_Alltoallv) and `dct` (DCT-DP persistent allreduces and DCT-MP
 * alltoallv), with the same byte and time accounting for both.
 */
#ifndef DCT_DLRM_COMM_HPP
#define DCT_DLRM_COMM_HPP

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trace.hpp"

namespace dlrm {

/** @brief Running min / mean / max of a per-call ratio (density or keep). */
struct RatioStats {
  double sum = 0.0, min = 1e300, max = -1e300;
  int64_t calls = 0;
  void add(double value);
};

/** @brief What the communication did since the last reset, on this rank. */
struct CommStats {
  double seconds = 0.0;            ///< Inside Start/Wait/Waitall/allreduce/alltoallv calls.
  int64_t dp_bytes_sent = 0;       ///< Data parallel: sum of DCT_Status.bytes_sent.
  int64_t dp_dense_bytes = 0;      ///< Sum of DCT_Status.dense_bytes (ring allreduce volume).
  int64_t mp_bytes_sent = 0;       ///< Model parallel, forward + backward.
  int64_t mp_dense_bytes = 0;      ///< What MPI_Alltoallv of the dense blocks sends.
  int64_t mp_fwd_bytes_sent = 0;   ///< The forward (embedding lookups) alone.
  int64_t mp_fwd_dense_bytes = 0;  ///< Its dense bytes.
  double mp_max_error = 0.0;       ///< Largest DCT_Status.max_abs_error of a forward call.
  RatioStats dp_density;           ///< Achieved density per allreduce call.
  RatioStats mp_keep;              ///< Achieved keep per forward alltoallv call.
};

/** @brief The knobs of the dct and eb modes; an empty string leaves the library's default. */
struct DctOptions {
  std::string density, keep, values, interval, mp_select, algorithm;
  std::string result_density;  ///< dct_result_density of DCT-DP (split's second selection)
  std::string density_warmup;  ///< dct_density_warmup of DCT-DP: START,CALLS
  std::string mp_values;       ///< dct_values of DCT-MP when it differs from `values`
  /** dct_momentum of the data-parallel requests: the library then applies the momentum. */
  std::string momentum;
  /** dct_momentum_result: `gradient` lets the optimizer keep its momentum (the library unrolls
   * it out of the sums). */
  std::string momentum_result;
  /** @brief eb mode (error-bounded embedding all-to-all): dct_error_bound,
   * dct_error_bound_schedule, dct_lossless, dct_beta_gbps of the MP request, and
   * dct_table_columns (the embedding dimension: one table per block of columns). */
  std::string error_bound, error_bound_schedule, lossless, beta_gbps, table_columns;
  std::string backward_error_bound;  ///< eb: dct_backward_error_bound (default: uncompressed)
};

/**
 * @brief One communication strategy. Data parallel: every gradient buffer is registered once
 * (`add_gradient`, in the same order on every rank), started as soon as it is complete
 * (`start`), and all of them completed by `wait_all`; the buffer then holds the sum over
 * ranks. Gradients registered one after the other are summed together in *buckets* of up to
 * `bucket_elements` floats (PyTorch DDP's gradient buckets): a bucket's sum starts when its
 * last gradient is complete, as one request, so that a compressed sum selects its entries
 * over the whole bucket. Model parallel: one pair of alltoallv shapes bound once
 * (`bind_alltoall`), run every step by `forward` and `backward`.
 */
class Comm {
 public:
  virtual ~Comm() = default;
  /**
   * @brief Bucket capacity in floats, before the first `add_gradient`: 0 (the default) sums
   * every gradient on its own; a gradient larger than the capacity gets a bucket of its own.
   */
  void set_bucket_elements(int64_t elements) { bucket_elements_ = elements; }
  /**
   * @brief Buckets per block, before the first `add_gradient`: every gradient registered
   * between two `end_block` calls (one MLP of the model) goes into one bucket, split further
   * only at the capacity of `set_bucket_elements` when that is not 0.
   */
  void set_bucket_per_block(bool on) { bucket_per_block_ = on; }
  /** @brief The gradients registered so far end a block (the model calls it after each MLP). */
  void end_block() { block_ended_ = true; }
  /** @brief Registers a gradient of `count` floats, summed over ranks in place; returns its id. */
  int add_gradient(float *grad, int count);
  /** @brief Marks gradient `id` complete (its buffer then belongs to the strategy until
   * `wait_all`); starts its bucket's sum when it was the bucket's last. */
  void start(int id);
  /** @brief Completes every started sum. */
  void wait_all();
  /** @brief Element counts of the data-parallel sums (one per bucket), in start order. */
  std::vector<int64_t> sum_counts();
  /**
   * @brief Binds the model-parallel exchange: `rows[j]` rows of `d` floats to and from every
   * rank j (blocks of equal shape both ways, contiguous in rank order). The forward sends
   * `fwd_send` into `fwd_recv`; the backward sends `bwd_send` (shaped as `fwd_recv`) into
   * `bwd_recv` (shaped as `fwd_send`).
   */
  virtual void bind_alltoall(const float *fwd_send, float *fwd_recv, const float *bwd_send,
                             float *bwd_recv, int rows_per_rank, int d) = 0;
  /** @brief One forward exchange of activations. */
  virtual void forward() = 0;
  /** @brief One backward exchange of their gradients. */
  virtual void backward() = 0;

  /**
   * @brief Whether the summed gradients already carry the SGD momentum (dct_momentum: each
   * rank's velocity is compressed), so that the optimizer must not apply it again.
   */
  virtual bool applies_momentum() const { return false; }

  /**
   * @brief `--trace-indices`: while `trace->active`, every data-parallel sum records its kept
   * indices in `trace` (trace.hpp). Returns false for a strategy that keeps no indices (dense).
   */
  virtual bool set_trace(IndexTrace *trace) {
    (void)trace;
    return false;
  }

  CommStats &stats() { return stats_; }
  MPI_Comm comm() const { return comm_; }

 protected:
  explicit Comm(MPI_Comm comm) : comm_(comm) {}
  /** @brief Registers one sum over ranks of `count` floats in place; returns its id. */
  virtual int add_sum(float *data, int count) = 0;
  /** @brief Starts sum `id`. */
  virtual void start_sum(int id) = 0;
  /** @brief Completes every started sum. */
  virtual void wait_sums() = 0;

  MPI_Comm comm_;
  CommStats stats_;

 private:
  struct Member {
    float *grad;
    int count;
    int64_t offset;  ///< In its bucket.
  };
  struct Bucket {
    std::vector<Member> members;
    int64_t elements = 0;
    std::vector<float> buffer;  ///< Unused (empty) when the bucket has one member.
    int sum = -1;               ///< The strategy's id, once registered.
    int ready = 0;              ///< Members started this step (all: the sum was started).
  };
  /// Registers the buckets with the strategy (at the first start: sizes are then final).
  void seal();
  int64_t bucket_elements_ = 0;
  bool bucket_per_block_ = false, block_ended_ = false;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<int, int>> where_;  ///< Gradient id -> (bucket, member).
  bool sealed_ = false;
};

/** @brief `dense` (MPI), `dct` (DCT-DP + DCT-MP top-k) or `eb` (DCT-DP + the error-bounded
 * embedding all-to-all); throws dct::Error when the library refuses a knob. */
std::unique_ptr<Comm> make_comm(const std::string &mode, MPI_Comm comm, const DctOptions &options);

/** @brief Bytes an uncompressed ring allreduce of `bytes` sends per rank (DCT_Status). */
int64_t ring_bytes(int64_t bytes, int ranks);

}  // namespace dlrm

#endif
