// The DLRM and MLP models: forward, backward with per-layer allreduce starts, optimizer step.
#include "model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "embedding.hpp"
#include "layers.hpp"

namespace dlrm {
namespace {

/// Test samples evaluated per rank at a time (bounds the memory of the evaluation).
constexpr int kEvalChunk = 512;

/// The slice [begin, end) of `n` samples that rank `r` of `p` evaluates.
void slice(int n, int r, int p, int &begin, int &end) {
  begin = int(int64_t(n) * r / p);
  end = int(int64_t(n) * (r + 1) / p);
}

/// Shared by both models: the replicated MLPs' data-parallel bookkeeping.
struct Replicated {
  std::vector<Mlp *> mlps;
  std::vector<std::vector<int>> ids;  ///< Comm gradient id of every layer of every MLP.

  void bind(Comm &comm) {
    ids.assign(mlps.size(), {});
    for (size_t m = 0; m < mlps.size(); ++m) {
      for (Linear &layer : mlps[m]->layers())
        ids[m].push_back(comm.add_gradient(layer.grad.data(), int(layer.grad.size())));
      comm.end_block();
    }
  }
  void step(float lr, float momentum, float scale) {
    for (Mlp *mlp : mlps)
      for (Linear &layer : mlp->layers()) sgd_momentum(layer, lr, momentum, scale);
  }
  uint64_t checksum(uint64_t hash) const {
    for (const Mlp *mlp : mlps)
      for (const Linear &layer : mlp->layers())
        hash = fnv1a(layer.params.data(), layer.params.size() * sizeof(float), hash);
    return hash;
  }
  /// Every layer's parameters and SGD velocity (the state a checkpoint saves).
  void collect_state(std::vector<std::vector<float> *> &out) {
    for (Mlp *mlp : mlps)
      for (Linear &layer : mlp->layers()) {
        out.push_back(&layer.params);
        out.push_back(&layer.velocity);
      }
  }
  std::vector<int64_t> layer_counts() const {
    std::vector<int64_t> counts;
    for (const Mlp *mlp : mlps)
      for (const Linear &layer : mlp->layers()) counts.push_back(int64_t(layer.params.size()));
    return counts;
  }
};

/// 784-256-128-10 on the raw pixels, purely data parallel.
class MlpModel : public Model {
 public:
  MlpModel(const ModelConfig &config, const Split &train, const Split &test, MPI_Comm comm)
      : config_(config),
        train_(train),
        test_(test),
        comm_(comm),
        mlp_({kPixels, 256, 128, kClasses}, false, config.seed, 1) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &ranks_);
    replicated_.mlps = {&mlp_};
  }
  void bind(Comm &comm) override { replicated_.bind(comm); }

  double train_step(const int *global, Comm &comm, float lr_scale) override {
    const int b = config_.batch;
    const int *mine = global + size_t(rank_) * b;
    input_.resize(size_t(b) * kPixels);
    labels_.resize(size_t(b));
    for (int s = 0; s < b; ++s) {
      raw_features(train_, mine[s], &input_[size_t(s) * kPixels]);
      labels_[size_t(s)] = train_.labels[size_t(mine[s])];
    }
    const float *logits = mlp_.forward(input_.data(), b);
    dlogits_.resize(size_t(b) * kClasses);
    const double loss =
        softmax_cross_entropy(logits, labels_.data(), b, kClasses, dlogits_.data(), nullptr);
    mlp_.backward(dlogits_.data(), nullptr,
                  [&](int l) { comm.start(replicated_.ids[0][size_t(l)]); });
    comm.wait_all();
    replicated_.step(lr_scale * config_.lr, comm.applies_momentum() ? 0.0f : config_.momentum,
                     1.0f / float(ranks_));
    return loss;
  }

  EvalResult evaluate() override {
    EvalResult result;
    int begin = 0, end = 0;
    slice(test_.count, rank_, ranks_, begin, end);
    for (int first = begin; first < end; first += kEvalChunk) {
      const int n = std::min(kEvalChunk, end - first);
      input_.resize(size_t(n) * kPixels);
      for (int s = 0; s < n; ++s) raw_features(test_, first + s, &input_[size_t(s) * kPixels]);
      const float *logits = mlp_.forward(input_.data(), n);
      int correct = 0;
      result.loss_sum += softmax_cross_entropy(logits, &test_.labels[size_t(first)], n, kClasses,
                                               nullptr, &correct);
      result.correct += correct;
    }
    return result;
  }
  uint64_t checksum() const override { return replicated_.checksum(fnv1a(nullptr, 0)); }
  std::vector<std::vector<float> *> state() override {
    std::vector<std::vector<float> *> out;
    replicated_.collect_state(out);
    return out;
  }
  std::vector<int64_t> dp_layer_counts() const override { return replicated_.layer_counts(); }

 private:
  ModelConfig config_;
  const Split &train_, &test_;
  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 1;
  Mlp mlp_;
  Replicated replicated_;
  std::vector<float> input_, dlogits_;
  std::vector<uint8_t> labels_;
};

/// An MLP's layer widths: input, hidden..., output.
std::vector<int> widths(int input, const std::vector<int> &hidden, int output) {
  std::vector<int> sizes{input};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(output);
  return sizes;
}

/// DLRM: bottom MLP 196-128-E, 16 tables of E sharded over the ranks, interaction, top MLP
/// (hidden widths from ModelConfig).
class DlrmModel : public Model {
 public:
  DlrmModel(const ModelConfig &config, const Split &train, const Split &test, MPI_Comm comm)
      : config_(config),
        train_(train),
        test_(test),
        comm_(comm),
        bottom_(widths(kDenseFeatures, config.bottom_hidden, config.emb_dim), true, config.seed, 2),
        top_(widths(interaction_width(kCategorical + 1, config.emb_dim), config.top_hidden,
                    kClasses),
             false, config.seed, 3),
        shard_(kCategorical, config.table_size, config.emb_dim, rank_of(comm), size_of(comm),
               config.seed),
        train_cat_(categorical_features(train, config.table_size)),
        test_cat_(categorical_features(test, config.table_size)) {
    rank_ = rank_of(comm);
    ranks_ = size_of(comm);
    d_ = shard_.row_length();
    replicated_.mlps = {&top_, &bottom_};
  }

  void bind(Comm &comm) override {
    replicated_.bind(comm);
    const size_t n = size_t(ranks_) * config_.batch * d_;
    fwd_send_.assign(n, 0.0f);
    fwd_recv_.assign(n, 0.0f);
    bwd_send_.assign(n, 0.0f);
    bwd_recv_.assign(n, 0.0f);
    comm.bind_alltoall(fwd_send_.data(), fwd_recv_.data(), bwd_send_.data(), bwd_recv_.data(),
                       config_.batch, d_);
  }

  double train_step(const int *global, Comm &comm, float lr_scale) override {
    const int b = config_.batch, all = b * ranks_;
    // Owner side: this shard's lookups for every rank's samples, block j for rank j.
    shard_.lookup(train_cat_.data(), kCategorical, global, all, fwd_send_.data());
    comm.forward();
    const int *mine = global + size_t(rank_) * b;
    labels_.resize(size_t(b));
    for (int s = 0; s < b; ++s) labels_[size_t(s)] = train_.labels[size_t(mine[s])];
    const float *logits = forward_local(train_, mine, b, fwd_recv_.data());
    dlogits_.resize(size_t(b) * kClasses);
    const double loss =
        softmax_cross_entropy(logits, labels_.data(), b, kClasses, dlogits_.data(), nullptr);

    // Backward: each MLP layer's allreduce starts as soon as its gradient exists.
    dinter_.resize(size_t(b) * top_.in());
    top_.backward(dlogits_.data(), dinter_.data(),
                  [&](int l) { comm.start(replicated_.ids[0][size_t(l)]); });
    const int vectors = kCategorical + 1, e = config_.emb_dim;
    dz_.resize(size_t(b) * vectors * e);
    interaction_backward(z_.data(), dinter_.data(), b, vectors, e, dz_.data());
    dbottom_.resize(size_t(b) * e);
    for (int s = 0; s < b; ++s) {
      const float *g = &dz_[size_t(s) * vectors * e];
      std::copy(g, g + e, &dbottom_[size_t(s) * e]);
      for (int t = 0; t < kCategorical; ++t)  // to the block of the table's owner
        std::copy(g + (1 + t) * e, g + (2 + t) * e, &bwd_send_[position(s, t, b)]);
    }
    bottom_.backward(dbottom_.data(), nullptr,
                     [&](int l) { comm.start(replicated_.ids[1][size_t(l)]); });
    comm.backward();
    // Each rank's gradients are of its mean loss; 1/P makes them the global batch's mean.
    shard_.update(train_cat_.data(), kCategorical, global, all, bwd_recv_.data(),
                  lr_scale * config_.emb_lr / float(ranks_));
    comm.wait_all();
    replicated_.step(lr_scale * config_.lr, comm.applies_momentum() ? 0.0f : config_.momentum,
                     1.0f / float(ranks_));
    return loss;
  }

  EvalResult evaluate() override {
    // Every rank evaluates its slice; owners serve lookups through a plain MPI_Alltoallv
    // (inference is not what DCT-MP compresses, and it stays out of the byte accounting).
    EvalResult result;
    std::vector<int> begin(static_cast<size_t>(ranks_)), end(static_cast<size_t>(ranks_));
    int longest = 0;
    for (int j = 0; j < ranks_; ++j) {
      slice(test_.count, j, ranks_, begin[size_t(j)], end[size_t(j)]);
      longest = std::max(longest, end[size_t(j)] - begin[size_t(j)]);
    }
    std::vector<int> samples, scounts(static_cast<size_t>(ranks_)),
        sdispls(static_cast<size_t>(ranks_)), rcounts(static_cast<size_t>(ranks_)),
        rdispls(static_cast<size_t>(ranks_));
    std::vector<float> send, recv;
    for (int offset = 0; offset < longest; offset += kEvalChunk) {
      samples.clear();
      std::vector<int> rows(static_cast<size_t>(ranks_));
      for (int j = 0; j < ranks_; ++j) {
        const int first = begin[size_t(j)] + offset;
        rows[size_t(j)] = std::max(0, std::min(kEvalChunk, end[size_t(j)] - first));
        for (int s = 0; s < rows[size_t(j)]; ++s) samples.push_back(first + s);
      }
      const int n = rows[size_t(rank_)];
      for (int j = 0, sd = 0, rd = 0; j < ranks_; ++j) {
        scounts[size_t(j)] = rows[size_t(j)] * d_;
        sdispls[size_t(j)] = sd;
        sd += scounts[size_t(j)];
        rcounts[size_t(j)] = n * d_;
        rdispls[size_t(j)] = rd;
        rd += rcounts[size_t(j)];
      }
      send.resize(samples.size() * size_t(d_) + 1);
      recv.resize(size_t(ranks_) * n * d_ + 1);
      shard_.lookup(test_cat_.data(), kCategorical, samples.data(), int(samples.size()),
                    send.data());
      MPI_Alltoallv(send.data(), scounts.data(), sdispls.data(), MPI_FLOAT, recv.data(),
                    rcounts.data(), rdispls.data(), MPI_FLOAT, comm_);
      if (n == 0) continue;
      std::vector<int> mine(static_cast<size_t>(n));
      for (int s = 0; s < n; ++s) mine[size_t(s)] = begin[size_t(rank_)] + offset + s;
      const float *logits = forward_local(test_, mine.data(), n, recv.data());
      int correct = 0;
      result.loss_sum += softmax_cross_entropy(logits, &test_.labels[size_t(mine[0])], n, kClasses,
                                               nullptr, &correct);
      result.correct += correct;
    }
    return result;
  }

  uint64_t checksum() const override {
    const std::vector<float> &w = shard_.weights();
    return fnv1a(w.data(), w.size() * sizeof(float), replicated_.checksum(fnv1a(nullptr, 0)));
  }
  std::vector<std::vector<float> *> state() override {
    std::vector<std::vector<float> *> out;
    replicated_.collect_state(out);
    out.push_back(&shard_.weights());
    return out;
  }
  std::vector<int64_t> dp_layer_counts() const override { return replicated_.layer_counts(); }
  // fwd_send_ keeps the last step's lookups until the next step (evaluation has its own).
  const float *last_lookups() const override { return fwd_send_.data(); }
  int lookup_row_length() const override { return d_; }

 private:
  static int rank_of(MPI_Comm comm) {
    int r = 0;
    MPI_Comm_rank(comm, &r);
    return r;
  }
  static int size_of(MPI_Comm comm) {
    int p = 1;
    MPI_Comm_size(comm, &p);
    return p;
  }
  /// Offset of (sample s, global table t) in a buffer of P blocks of `rows` x d: the block of
  /// t's owner, local table t / P within the row.
  size_t position(int s, int t, int rows) const {
    const int owner = t % ranks_, local = t / ranks_;
    return (size_t(owner) * rows + s) * d_ + size_t(local) * config_.emb_dim;
  }
  /// Bottom MLP, interaction and top MLP for `n` samples whose lookups are in `lookups`
  /// (P blocks of n x d, as received). Keeps z_ for the backward.
  const float *forward_local(const Split &split, const int *samples, int n, const float *lookups) {
    const int e = config_.emb_dim, vectors = kCategorical + 1;
    dense_.resize(size_t(n) * kDenseFeatures);
    for (int s = 0; s < n; ++s)
      dense_features(split, samples[s], &dense_[size_t(s) * kDenseFeatures]);
    const float *z0 = bottom_.forward(dense_.data(), n);
    z_.resize(size_t(n) * vectors * e);
    for (int s = 0; s < n; ++s) {
      float *zs = &z_[size_t(s) * vectors * e];
      std::copy(z0 + size_t(s) * e, z0 + size_t(s + 1) * e, zs);
      for (int t = 0; t < kCategorical; ++t) {
        const float *src = lookups + position(s, t, n);
        std::copy(src, src + e, zs + (1 + t) * e);
      }
    }
    inter_.resize(size_t(n) * top_.in());
    interaction_forward(z_.data(), n, vectors, e, inter_.data());
    return top_.forward(inter_.data(), n);
  }

  ModelConfig config_;
  const Split &train_, &test_;
  MPI_Comm comm_;
  int rank_ = 0, ranks_ = 1, d_ = 0;
  Mlp bottom_, top_;
  EmbeddingShard shard_;
  std::vector<int32_t> train_cat_, test_cat_;
  Replicated replicated_;
  std::vector<float> fwd_send_, fwd_recv_, bwd_send_, bwd_recv_;
  std::vector<float> dense_, z_, inter_, dlogits_, dinter_, dz_, dbottom_;
  std::vector<uint8_t> labels_;
};

}  // namespace

float lr_scale(const std::string &schedule, int64_t step, int64_t steps) {
  if (schedule == "constant") return 1.0f;
  if (schedule == "cosine") {
    const double pi = std::acos(-1.0);
    return float(0.5 * (1.0 + std::cos(pi * double(step) / double(std::max<int64_t>(steps, 1)))));
  }
  throw std::invalid_argument("unknown learning-rate schedule '" + schedule +
                              "' (expected constant or cosine)");
}

std::unique_ptr<Model> make_model(const ModelConfig &config, const Split &train, const Split &test,
                                  MPI_Comm comm) {
  if (config.model == "mlp") return std::make_unique<MlpModel>(config, train, test, comm);
  if (config.model == "dlrm") return std::make_unique<DlrmModel>(config, train, test, comm);
  throw std::invalid_argument("unknown model '" + config.model + "' (expected dlrm or mlp)");
}

}  // namespace dlrm
