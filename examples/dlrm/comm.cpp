// The dense (MPI) and dct strategies. Both account bytes the way DCT_Status documents them, so
// that the dense run is the reference of every ratio.
#include "comm.hpp"

#include <algorithm>
#include <stdexcept>

#include "dct/dct.hpp"

namespace dlrm {

void RatioStats::add(double value) {
  sum += value;
  min = std::min(min, value);
  max = std::max(max, value);
  ++calls;
}

int64_t ring_bytes(int64_t bytes, int ranks) {
  return ranks > 1 ? 2 * (ranks - 1) * bytes / ranks : 0;
}

int Comm::add_gradient(float *grad, int count) {
  if (sealed_) throw std::logic_error("Comm::add_gradient after the first start");
  // Into the last bucket: below the capacity if there is one, else only within a block.
  const bool fits = !buckets_.empty() && !(bucket_per_block_ && block_ended_) &&
                    (bucket_elements_ > 0 ? buckets_.back().elements + count <= bucket_elements_
                                          : bucket_per_block_);
  block_ended_ = false;
  if (!fits) buckets_.emplace_back();
  Bucket &bucket = buckets_.back();
  bucket.members.push_back({grad, count, bucket.elements});
  bucket.elements += count;
  where_.emplace_back(int(buckets_.size()) - 1, int(bucket.members.size()) - 1);
  return int(where_.size()) - 1;
}

void Comm::seal() {
  if (sealed_) return;
  for (Bucket &bucket : buckets_) {
    float *data = bucket.members.front().grad;
    if (bucket.members.size() > 1) {  // one member: summed in place, no copy
      bucket.buffer.assign(size_t(bucket.elements), 0.0f);
      data = bucket.buffer.data();
    }
    bucket.sum = add_sum(data, int(bucket.elements));
  }
  sealed_ = true;
}

std::vector<int64_t> Comm::sum_counts() {
  seal();
  std::vector<int64_t> counts;
  for (const Bucket &bucket : buckets_) counts.push_back(bucket.elements);
  return counts;
}

void Comm::start(int id) {
  seal();
  const auto [b, m] = where_.at(size_t(id));
  Bucket &bucket = buckets_[size_t(b)];
  const Member &member = bucket.members[size_t(m)];
  if (!bucket.buffer.empty())
    std::copy(member.grad, member.grad + member.count, &bucket.buffer[size_t(member.offset)]);
  if (++bucket.ready == int(bucket.members.size())) start_sum(bucket.sum);
}

void Comm::wait_all() {
  wait_sums();
  for (Bucket &bucket : buckets_) {
    const bool started = bucket.ready == int(bucket.members.size());
    if (started && !bucket.buffer.empty())
      for (const Member &member : bucket.members) {
        const float *sum = &bucket.buffer[size_t(member.offset)];
        std::copy(sum, sum + member.count, member.grad);
      }
    bucket.ready = 0;
  }
}

namespace {

/// Adds the time of one communication call to the stats, also when it throws.
class Timed {
 public:
  explicit Timed(CommStats &stats) : stats_(stats), start_(MPI_Wtime()) {}
  ~Timed() { stats_.seconds += MPI_Wtime() - start_; }
  Timed(const Timed &) = delete;
  Timed &operator=(const Timed &) = delete;

 private:
  CommStats &stats_;
  double start_;
};

int comm_size(MPI_Comm comm) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  return size;
}

/// Throws when MPI reports an error (the default handler aborts first; this is for others).
void check_mpi(int code, const char *what) {
  if (code != MPI_SUCCESS) throw std::runtime_error(std::string(what) + " failed");
}

/// Shapes of the model-parallel exchange: equal blocks of rows x d to every rank.
struct Layout {
  std::vector<int> counts, displs;
  int64_t dense_bytes = 0;  ///< To the other ranks only, as DCT_Status counts it.
  Layout(int ranks, int rows, int d) : counts(size_t(ranks), rows * d), displs(size_t(ranks)) {
    for (int j = 0; j < ranks; ++j) displs[size_t(j)] = j * rows * d;
    dense_bytes = int64_t(ranks - 1) * rows * d * int64_t(sizeof(float));
  }
};

/// MPI_Allreduce and MPI_Alltoallv; its bytes are the dense volumes by definition.
class DenseComm : public Comm {
 public:
  explicit DenseComm(MPI_Comm comm) : Comm(comm), ranks_(comm_size(comm)) {}

  int add_sum(float *grad, int count) override {
    grads_.push_back({grad, count});
    return int(grads_.size()) - 1;
  }
  // Blocking at start: MPI_Iallreduce may add in another order, and the dct run at density 1
  // (which is MPI_Allreduce) must give the same bits.
  void start_sum(int id) override {
    Timed timed(stats_);
    const Grad &g = grads_.at(size_t(id));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, g.data, g.count, MPI_FLOAT, MPI_SUM, comm_),
              "MPI_Allreduce");
    const int64_t bytes = ring_bytes(int64_t(g.count) * int64_t(sizeof(float)), ranks_);
    stats_.dp_bytes_sent += bytes;
    stats_.dp_dense_bytes += bytes;
    stats_.dp_density.add(1.0);
  }
  void wait_sums() override {}

  void bind_alltoall(const float *fwd_send, float *fwd_recv, const float *bwd_send, float *bwd_recv,
                     int rows_per_rank, int d) override {
    layout_ = std::make_unique<Layout>(ranks_, rows_per_rank, d);
    fwd_send_ = fwd_send;
    fwd_recv_ = fwd_recv;
    bwd_send_ = bwd_send;
    bwd_recv_ = bwd_recv;
  }
  void forward() override {
    exchange(fwd_send_, fwd_recv_);
    stats_.mp_keep.add(1.0);
    stats_.mp_fwd_bytes_sent += layout_->dense_bytes;
    stats_.mp_fwd_dense_bytes += layout_->dense_bytes;
  }
  void backward() override { exchange(bwd_send_, bwd_recv_); }

 private:
  struct Grad {
    float *data;
    int count;
  };
  void exchange(const float *send, float *recv) {
    Timed timed(stats_);
    const Layout &l = *layout_;
    check_mpi(MPI_Alltoallv(send, l.counts.data(), l.displs.data(), MPI_FLOAT, recv,
                            l.counts.data(), l.displs.data(), MPI_FLOAT, comm_),
              "MPI_Alltoallv");
    stats_.mp_bytes_sent += l.dense_bytes;
    stats_.mp_dense_bytes += l.dense_bytes;
  }
  int ranks_;
  std::vector<Grad> grads_;
  std::unique_ptr<Layout> layout_;
  const float *fwd_send_ = nullptr, *bwd_send_ = nullptr;
  float *fwd_recv_ = nullptr, *bwd_recv_ = nullptr;
};

/// Sets the dct_ keys that were given on the command line; the rest stays the library's default.
void set_given(dct::Info &info, const char *key, const std::string &value) {
  if (!value.empty()) info.set(key, value);
}

/// DCT-DP: one persistent request per gradient; DCT-MP: one forward/backward pair, top-k or
/// (`error_bounded`) every lookup within an error bound.
class DctComm : public Comm {
 public:
  DctComm(MPI_Comm comm, const DctOptions &options, bool error_bounded)
      : Comm(comm), options_(options), error_bounded_(error_bounded) {}

  int add_sum(float *grad, int count) override {
    dct::Info info;
    set_given(info, "dct_density", options_.density);
    set_given(info, "dct_density_warmup", options_.density_warmup);
    set_given(info, "dct_interval", options_.interval);
    set_given(info, "dct_values", options_.values);
    set_given(info, "dct_algorithm", options_.algorithm);
    set_given(info, "dct_result_density", options_.result_density);
    set_given(info, "dct_momentum", options_.momentum);
    set_given(info, "dct_momentum_result", options_.momentum_result);
    // Named, so that a checkpoint of this mode matches whatever ran before it in the process.
    set_given(info, "dct_name", "dp." + std::to_string(requests_.size()));
    requests_.emplace_back(static_cast<const float *>(nullptr), grad, size_t(count), comm_,
                           info.get());
    handles_.push_back(requests_.back().handle());
    statuses_.emplace_back();
    sums_.push_back({grad, count});
    return int(requests_.size()) - 1;
  }
  bool set_trace(IndexTrace *trace) override {
    trace_ = trace;
    if (trace_) {
      trace_->counts.clear();
      for (const Sum &sum : sums_) trace_->counts.push_back(sum.count);
      traced_.assign(sums_.size(), {});
    }
    return true;
  }
  void start_sum(int id) override {
    if (trace_ && trace_->active) {
      // Before the call (outside the timed part): acc = grad + residual, as the library forms it.
      const Sum &sum = sums_.at(size_t(id));
      std::vector<float> &acc = traced_.at(size_t(id));
      acc.resize(size_t(sum.count));
      dct::check(DCT_Request_get_residual(handles_.at(size_t(id)), acc.data()));
      for (int i = 0; i < sum.count; ++i) acc[size_t(i)] += sum.data[i];
    }
    Timed timed(stats_);
    requests_.at(size_t(id)).start();
  }
  bool applies_momentum() const override {
    return !options_.momentum.empty() && options_.momentum_result != "gradient";
  }
  void wait_sums() override {
    Timed timed(stats_);
    dct::check(DCT_Waitall(int(handles_.size()), handles_.data(), statuses_.data()));
    for (const DCT_Status &s : statuses_) {
      if (s.count == 0) continue;  // not started this step (a zeroed status)
      stats_.dp_bytes_sent += s.bytes_sent;
      stats_.dp_dense_bytes += s.dense_bytes;
      stats_.dp_density.add(s.density);
    }
    if (trace_ && trace_->active) record_trace();
  }

  void bind_alltoall(const float *fwd_send, float *fwd_recv, const float *bwd_send, float *bwd_recv,
                     int rows_per_rank, int d) override {
    layout_ = std::make_unique<Layout>(comm_size(comm_), rows_per_rank, d);
    dct::Info info;
    set_given(info, "dct_row_length", std::to_string(d));
    set_given(info, "dct_keep", options_.keep);
    set_given(info, "dct_values",
              options_.mp_values.empty() ? options_.values : options_.mp_values);
    set_given(info, "dct_interval", options_.interval);
    set_given(info, "dct_mp_select", options_.mp_select);
    if (error_bounded_) {
      set_given(info, "dct_mp_compressor", "error_bounded");
      set_given(info, "dct_error_bound", options_.error_bound);
      set_given(info, "dct_error_bound_schedule", options_.error_bound_schedule);
      set_given(info, "dct_lossless", options_.lossless);
      set_given(info, "dct_beta_gbps", options_.beta_gbps);
      set_given(info, "dct_table_columns", options_.table_columns);
      set_given(info, "dct_backward_error_bound", options_.backward_error_bound);
    }
    const Layout &l = *layout_;
    forward_ = std::make_unique<dct::AlltoallvRequest>(fwd_send, l.counts.data(), l.displs.data(),
                                                       fwd_recv, l.counts.data(), l.displs.data(),
                                                       comm_, info.get());
    backward_ = std::make_unique<dct::AlltoallvRequest>(
        dct::AlltoallvRequest::backward(*forward_, bwd_send, l.counts.data(), l.displs.data(),
                                        bwd_recv, l.counts.data(), l.displs.data()));
  }
  void forward() override {
    const DCT_Status s = run(*forward_);
    stats_.mp_keep.add(s.density);
    stats_.mp_fwd_bytes_sent += s.bytes_sent;
    stats_.mp_fwd_dense_bytes += s.dense_bytes;
    stats_.mp_max_error = std::max(stats_.mp_max_error, s.max_abs_error);
  }
  void backward() override { run(*backward_); }

 private:
  DCT_Status run(dct::AlltoallvRequest &request) {
    Timed timed(stats_);
    const DCT_Status s = request();
    stats_.mp_bytes_sent += s.bytes_sent;
    stats_.mp_dense_bytes += s.dense_bytes;
    return s;
  }
  /// After the calls: entry i of a traced sum was kept iff acc != 0 and its residual is now 0.
  void record_trace() {
    std::vector<float> residual;
    for (size_t id = 0; id < traced_.size(); ++id) {
      std::vector<float> &acc = traced_[id];
      if (acc.empty()) continue;  // not started this step
      residual.resize(acc.size());
      dct::check(DCT_Request_get_residual(handles_[id], residual.data()));
      // The library's own count of the entries it sent must be what the residual shows.
      if (trace_->record(int(id), acc, residual) != statuses_[id].nnz_sent)
        throw std::runtime_error(
            "--trace-indices: the residual shows another number of kept "
            "entries than DCT_Status.nnz_sent");
      acc.clear();
    }
  }
  struct Sum {
    float *data;
    int count;
  };
  DctOptions options_;
  bool error_bounded_;
  std::vector<Sum> sums_;
  IndexTrace *trace_ = nullptr;
  std::vector<std::vector<float>> traced_;  ///< acc of each traced sum started this step
  std::vector<dct::AllreduceRequest> requests_;
  std::vector<DCT_Request> handles_;
  std::vector<DCT_Status> statuses_;
  std::unique_ptr<Layout> layout_;
  std::unique_ptr<dct::AlltoallvRequest> forward_, backward_;
};

}  // namespace

std::unique_ptr<Comm> make_comm(const std::string &mode, MPI_Comm comm, const DctOptions &options) {
  if (mode == "dense") return std::make_unique<DenseComm>(comm);
  if (mode == "dct" || mode == "eb") return std::make_unique<DctComm>(comm, options, mode == "eb");
  throw std::invalid_argument("unknown mode '" + mode + "' (expected dense, dct or eb)");
}

}  // namespace dlrm
