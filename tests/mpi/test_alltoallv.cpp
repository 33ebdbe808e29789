// Over 450 lines: one collective, forward and backward, against one reference.
// DCT-MP (DCT_Alltoallv_init and its backward) against an independent reference: the same
// rows masked here by plain sorting, then moved by MPI_Alltoallv of the dense blocks.
#include <cstdint>
#include <cstring>

#include "common.hpp"
#include "core/float16.hpp"
#include "core/test_hooks.hpp"
#include "dct/dct.hpp"
#include "mp/alltoallv.hpp"

namespace dct::test {
namespace {

using detail::ValueCoding;

constexpr float kSentinel = 42.0f;  // in receive gaps: neither MPI nor dct may write there

/// Counts and displacements of one alltoallv as every rank sees it, in elements. Blocks are
/// laid out in rank order with a one-row gap after each.
struct Shape {
  int d = 1;
  std::vector<int> sendcounts, sdispls, recvcounts, rdispls;
  int send_total = 0, recv_total = 0;  // buffer sizes, gaps included

  /// rows(i, j): rows rank i sends to rank j; must be the same function on every rank.
  template <typename Rows>
  Shape(int row_length, Rows rows) : d(row_length) {
    const int p = size(), me = rank();
    for (int j = 0; j < p; ++j) {
      sendcounts.push_back(rows(me, j) * d);
      sdispls.push_back(send_total);
      send_total += sendcounts.back() + d;
      recvcounts.push_back(rows(j, me) * d);
      rdispls.push_back(recv_total);
      recv_total += recvcounts.back() + d;
    }
  }
  /// The backward's shape: the forward's reversed.
  Shape reversed() const {
    Shape r = *this;
    std::swap(r.sendcounts, r.recvcounts);
    std::swap(r.sdispls, r.rdispls);
    std::swap(r.send_total, r.recv_total);
    return r;
  }
};

/// Uneven blocks, some empty: rank i sends (i + 2j + 1) % 4 rows to rank j.
int uneven_rows(int i, int j) {
  return (i + 2 * j + 1) % 4;
}

template <typename T>
T rounded(T value, ValueCoding coding) {
  if (coding == ValueCoding::native) return value;
  return detail::decode_value16<T>(detail::encode_value16(value, coding), coding);
}

const char *coding_name(ValueCoding coding) {
  return coding == ValueCoding::native ? "native" : coding == ValueCoding::fp16 ? "fp16" : "bf16";
}

/// Per row: the k columns of largest |x|, lower column first on ties.
template <typename T>
std::vector<char> exact_mask(const std::vector<T> &data, const Shape &s,
                             const std::vector<int> &counts, const std::vector<int> &displs,
                             std::size_t k) {
  std::vector<char> mask(data.size(), 0);
  for (std::size_t j = 0; j < counts.size(); ++j)
    for (int r = 0; r < counts[j] / s.d; ++r) {
      const std::size_t base = static_cast<std::size_t>(displs[j] + r * s.d);
      std::vector<int> order(static_cast<std::size_t>(s.d));
      for (int c = 0; c < s.d; ++c) order[c] = c;
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return std::abs(double(data[base + a])) > std::abs(double(data[base + b]));
      });
      for (std::size_t c = 0; c < k; ++c) mask[base + order[c]] = 1;
    }
  return mask;
}

/// Per element: |x| >= tau and x != 0.
template <typename T>
std::vector<char> threshold_mask(const std::vector<T> &data, double tau) {
  std::vector<char> mask(data.size(), 0);
  for (std::size_t i = 0; i < data.size(); ++i)
    mask[i] = data[i] != T(0) && std::abs(double(data[i])) >= tau;
  return mask;
}

/// MPI_Alltoallv of the masked (and rounded) dense blocks into a sentinel-filled buffer.
template <typename T>
std::vector<T> reference(const std::vector<T> &send, const std::vector<char> &mask, const Shape &s,
                         ValueCoding coding) {
  std::vector<T> masked(send.size(), T(0));
  for (std::size_t i = 0; i < send.size(); ++i)
    if (mask[i]) masked[i] = rounded(send[i], coding);
  std::vector<T> recv(static_cast<std::size_t>(s.recv_total), T(kSentinel));
  MPI_Alltoallv(masked.data(), s.sendcounts.data(), s.sdispls.data(), mpi_type<T>(), recv.data(),
                s.recvcounts.data(), s.rdispls.data(), mpi_type<T>(), MPI_COMM_WORLD);
  return recv;
}

/// The mask as the receivers see it (1 where a kept entry lands).
std::vector<char> moved_mask(const std::vector<char> &mask, const Shape &s) {
  std::vector<char> recv(static_cast<std::size_t>(s.recv_total), 0);
  MPI_Alltoallv(mask.data(), s.sendcounts.data(), s.sdispls.data(), MPI_CHAR, recv.data(),
                s.recvcounts.data(), s.rdispls.data(), MPI_CHAR, MPI_COMM_WORLD);
  return recv;
}

template <typename T>
bool same_bits(const std::vector<T> &a, const std::vector<T> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T>
std::vector<T> random_rows(std::size_t n, int call, int seed = 0) {
  return gradient<T>(n, call, seed + 17);
}

MPI_Info make_info(int d, double keep, const char *select, ValueCoding coding,
                   int interval = 1000) {
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "dct_row_length", std::to_string(d).c_str());
  MPI_Info_set(info, "dct_keep", std::to_string(keep).c_str());
  MPI_Info_set(info, "dct_mp_select", select);
  MPI_Info_set(info, "dct_values", coding_name(coding));
  MPI_Info_set(info, "dct_interval", std::to_string(interval).c_str());
  return info;
}

/// A forward request and its backward, on buffers owned here.
template <typename T>
struct Pair {
  Shape fwd, bwd;
  std::vector<T> x, y, g, dx;  // forward send/recv, backward send/recv
  DCT_Request forward = DCT_REQUEST_NULL, backward = DCT_REQUEST_NULL;

  Pair(const Shape &shape, MPI_Info info)
      : fwd(shape),
        bwd(shape.reversed()),
        x(std::size_t(fwd.send_total)),
        y(std::size_t(fwd.recv_total), T(kSentinel)),
        g(std::size_t(bwd.send_total)),
        dx(std::size_t(bwd.recv_total), T(kSentinel)) {
    EXPECT_EQ(DCT_Alltoallv_init(x.data(), fwd.sendcounts.data(), fwd.sdispls.data(), y.data(),
                                 fwd.recvcounts.data(), fwd.rdispls.data(), mpi_type<T>(),
                                 MPI_COMM_WORLD, info, &forward),
              DCT_SUCCESS)
        << DCT_Get_last_error();
    EXPECT_EQ(DCT_Alltoallv_backward_init(forward, g.data(), bwd.sendcounts.data(),
                                          bwd.sdispls.data(), dx.data(), bwd.recvcounts.data(),
                                          bwd.rdispls.data(), &backward),
              DCT_SUCCESS)
        << DCT_Get_last_error();
  }
  ~Pair() {
    DCT_Request_free(&backward);
    DCT_Request_free(&forward);
  }
  DCT_Status run(DCT_Request &request) {
    DCT_Status status{};
    EXPECT_EQ(DCT_Start(&request), DCT_SUCCESS) << DCT_Get_last_error();
    EXPECT_EQ(DCT_Wait(&request, &status), DCT_SUCCESS) << DCT_Get_last_error();
    return status;
  }
};

/// Bytes of one forward message of `rows` rows keeping k each (exact selection).
std::int64_t exact_message_bytes(int rows, int d, std::size_t k, std::size_t value_bytes) {
  const std::size_t index = d <= 65536 ? 2 : 4, bitmap = (std::size_t(d) + 7) / 8;
  const std::size_t mask = bitmap < k * index ? bitmap : k * index;
  const std::size_t bytes = std::size_t(rows) * (k * value_bytes + mask);
  return std::int64_t((bytes + 7) / 8 * 8);
}

std::int64_t ring4() {
  return size() > 1 ? 2 * (size() - 1) * 4 / size() : 0;
}

/// Forward and backward against the reference, exact selection, over two calls. With
/// `keep_by_rank`, odd ranks keep twice `keep` (ranks may differ in dct_keep): every message
/// then goes after a 48-byte header saying its shape.
template <typename T>
void check_exact(int d, double keep, ValueCoding coding, int (*rows)(int, int),
                 bool keep_by_rank = false) {
  if (keep_by_rank && rank() % 2 == 1) keep *= 2;
  const std::int64_t header = keep_by_rank ? 48 : 0;
  SCOPED_TRACE("d=" + std::to_string(d) + " keep=" + std::to_string(keep) +
               " values=" + coding_name(coding) + " type=" + (sizeof(T) == 4 ? "float" : "double"));
  MPI_Info info = make_info(d, keep, "exact", coding);
  Pair<T> pair(Shape(d, rows), info);
  MPI_Info_free(&info);
  const std::size_t k = static_cast<std::size_t>(std::ceil(keep * d - 1e-9));
  const std::size_t vb = coding == ValueCoding::native ? sizeof(T) : 2;
  for (int call = 0; call < 2; ++call) {
    overwrite(pair.x, random_rows<T>(pair.x.size(), call));
    overwrite(pair.g, random_rows<T>(pair.g.size(), call, 99));
    const DCT_Status f = pair.run(pair.forward);
    const std::vector<char> mask =
        exact_mask(pair.x, pair.fwd, pair.fwd.sendcounts, pair.fwd.sdispls, k);
    EXPECT_TRUE(same_bits(pair.y, reference(pair.x, mask, pair.fwd, coding))) << "call " << call;

    // Status: entries and bytes by the documented formula.
    std::int64_t rows_sent = 0, rows_received = 0, bytes_sent = 0, bytes_received = 0;
    std::int64_t dense = 0, grads_sent = 0, grads_received = 0, dense_back = 0;
    for (int j = 0; j < size(); ++j) {
      const int out = pair.fwd.sendcounts[j] / d, in = pair.fwd.recvcounts[j] / d;
      rows_sent += out;
      rows_received += in;
      if (j == rank()) continue;
      // Exact selection keeps k per row on every rank and the counts match: no 48-byte header
      // goes before the message (its size follows from the layout, agreed at init).
      bytes_sent += header + exact_message_bytes(out, d, k, vb);
      bytes_received += header + exact_message_bytes(in, d, k, vb);
      dense += std::int64_t(out) * d * std::int64_t(sizeof(T));
      grads_sent += std::int64_t((in * k * vb + 7) / 8 * 8);
      grads_received += std::int64_t((out * k * vb + 7) / 8 * 8);
      dense_back += std::int64_t(in) * d * std::int64_t(sizeof(T));
    }
    EXPECT_EQ(f.nnz_sent, rows_sent * std::int64_t(k));
    EXPECT_EQ(f.count, rows_sent * d);
    EXPECT_EQ(f.bytes_sent, bytes_sent + ring4());
    EXPECT_EQ(f.dense_bytes, dense);

    // Backward: the gradients at the entries this rank sent, zeros elsewhere, gaps untouched.
    const DCT_Status b = pair.run(pair.backward);
    const std::vector<char> arrived = moved_mask(mask, pair.fwd);
    EXPECT_TRUE(same_bits(pair.dx, reference(pair.g, arrived, pair.bwd, coding)))
        << "call " << call;
    if (keep_by_rank) continue;  // what arrives depends on the peers' k
    EXPECT_EQ(f.nnz_received, rows_received * std::int64_t(k));
    EXPECT_EQ(f.bytes_received, bytes_received + ring4());
    EXPECT_EQ(b.nnz_sent, rows_received * std::int64_t(k));
    EXPECT_EQ(b.nnz_received, rows_sent * std::int64_t(k));
    EXPECT_EQ(b.bytes_sent, grads_sent);
    EXPECT_EQ(b.bytes_received, grads_received);
    EXPECT_EQ(b.dense_bytes, dense_back);
  }
}

TEST(Alltoallv, ExactForwardBackwardFloat) {
  for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16, ValueCoding::bf16})
    for (int d : {1, 7, 64, 100})
      for (double keep : {0.05, 0.1, 0.25, 0.5, 1.0})
        check_exact<float>(d, keep, coding, uneven_rows);
}

TEST(Alltoallv, ExactForwardWithKeepDifferingByRank) {
  check_exact<float>(64, 0.05, ValueCoding::fp16, uneven_rows, true);
}

TEST(Alltoallv, ExactForwardBackwardDouble) {
  for (ValueCoding coding : {ValueCoding::native, ValueCoding::fp16})
    for (int d : {16, 64})
      for (double keep : {0.1, 0.75}) check_exact<double>(d, keep, coding, uneven_rows);
}

TEST(Alltoallv, RankThatSendsToNobody) {
  // Rank 1 sends no row to anyone (it still receives); rank 0 receives nothing from itself.
  auto rows = [](int i, int j) { return i == 1 || (i == 0 && j == 0) ? 0 : 3 + j; };
  check_exact<float>(32, 0.25, ValueCoding::native, rows);
  auto nothing = [](int, int) { return 0; };
  check_exact<float>(8, 0.5, ValueCoding::native, nothing);
}

TEST(Alltoallv, LargeRowsUseThirtyTwoBitIndices) {
  // d > 65536: 32-bit indices and counts; one row to each rank.
  check_exact<float>(70000, 0.0001, ValueCoding::bf16, [](int, int) { return 1; });
}

/// k = d/4 (a small buffer of the best) and k = d/2 (k-th largest, then an ordered scan).
class ExactTies : public ::testing::TestWithParam<int> {};
INSTANTIATE_TEST_SUITE_P(Alltoallv, ExactTies, ::testing::Values(16, 160));

TEST_P(ExactTies, LowerColumnWins) {
  const int d = GetParam();
  const std::size_t k = d == 16 ? 4 : 80;
  MPI_Info info = make_info(d, d == 16 ? 0.25 : 0.5, "exact", ValueCoding::native);
  Pair<float> pair(Shape(d, uneven_rows), info);
  MPI_Info_free(&info);
  // Every row: magnitudes 1 and 2 only (signs mixed), so the top k are decided by ties.
  for (std::size_t i = 0; i < pair.x.size(); ++i)
    pair.x[i] = float((i * 7 + rank()) % 3 == 0 ? 2 : 1) * ((i % 2) ? -1.0f : 1.0f);
  pair.run(pair.forward);
  const std::vector<char> mask =
      exact_mask(pair.x, pair.fwd, pair.fwd.sendcounts, pair.fwd.sdispls, k);
  EXPECT_TRUE(same_bits(pair.y, reference(pair.x, mask, pair.fwd, ValueCoding::native)));
  // Every received row holds exactly k nonzeros.
  for (int j = 0; j < size(); ++j)
    for (int r = 0; r < pair.fwd.recvcounts[j] / d; ++r) {
      int nonzeros = 0;
      for (int c = 0; c < d; ++c)
        nonzeros += pair.y[std::size_t(pair.fwd.rdispls[j] + r * d + c)] != 0;
      EXPECT_EQ(nonzeros, int(k));
    }
}

/// laplace / threshold: the reference computes tau by the documented rule.
template <typename T>
double laplace_tau(const std::vector<T> &x, const Shape &s, double keep) {
  double sum = 0;
  std::size_t n = 0;
  for (std::size_t j = 0; j < s.sendcounts.size(); ++j)
    for (int i = 0; i < s.sendcounts[j]; ++i) {
      sum += std::abs(double(x[std::size_t(s.sdispls[j] + i)]));
      ++n;
    }
  return n ? sum / double(n) * std::log(1.0 / keep) : 0.0;
}

template <typename T>
double kth_tau(const std::vector<T> &x, const Shape &s, double keep) {
  std::vector<double> m;
  for (std::size_t j = 0; j < s.sendcounts.size(); ++j)
    for (int i = 0; i < s.sendcounts[j]; ++i)
      m.push_back(std::abs(double(x[std::size_t(s.sdispls[j] + i)])));
  if (m.empty()) return 0.0;
  std::sort(m.begin(), m.end(), std::greater<double>());
  const std::size_t k = std::max<std::size_t>(1, std::size_t(std::ceil(keep * double(m.size()))));
  return m[std::min(k, m.size()) - 1];
}

/// Zeroes the sent gaps so that the masks only cover block elements.
std::vector<char> within_blocks(std::vector<char> mask, const Shape &s) {
  std::vector<char> inside(mask.size(), 0);
  for (std::size_t j = 0; j < s.sendcounts.size(); ++j)
    for (int i = 0; i < s.sendcounts[j]; ++i) inside[std::size_t(s.sdispls[j] + i)] = 1;
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = mask[i] && inside[i];
  return mask;
}

TEST(Alltoallv, LaplaceSelection) {
  const int d = 64;
  const double keep = 0.1;
  MPI_Info info = make_info(d, keep, "laplace", ValueCoding::fp16);
  Pair<float> pair(Shape(d, uneven_rows), info);
  MPI_Info_free(&info);
  for (int call = 0; call < 2; ++call) {
    overwrite(pair.x, random_rows<float>(pair.x.size(), call));
    overwrite(pair.g, random_rows<float>(pair.g.size(), call, 5));
    const DCT_Status f = pair.run(pair.forward);
    const double tau = laplace_tau(pair.x, pair.fwd, keep);
    EXPECT_DOUBLE_EQ(f.tau, tau);
    const std::vector<char> mask = within_blocks(threshold_mask(pair.x, tau), pair.fwd);
    EXPECT_TRUE(same_bits(pair.y, reference(pair.x, mask, pair.fwd, ValueCoding::fp16)));
    pair.run(pair.backward);
    EXPECT_TRUE(same_bits(
        pair.dx, reference(pair.g, moved_mask(mask, pair.fwd), pair.bwd, ValueCoding::fp16)));
  }
}

// The adaptive control (the default) holds the achieved keep of `threshold` within +-25% of
// the target on every call while the activations shrink 10x, selecting exactly only when a
// call leaves the band; the reused tau alone would keep almost nothing by the end.
TEST(Alltoallv, ThresholdAdaptiveHoldsTheKeep) {
  const int d = 64, calls = 60;
  const double keep = 0.1;
  MPI_Info info = make_info(d, keep, "threshold", ValueCoding::native);
  Pair<float> pair(Shape(d, [](int, int) { return 32; }), info);  // k ~ 200 per peer
  MPI_Info_free(&info);
  int exact = 0;
  for (int call = 0; call < calls; ++call) {
    std::vector<float> x = random_rows<float>(pair.x.size(), call);
    const float scale = std::pow(10.0f, -float(call) / float(calls));
    for (float &v : x) v *= scale;
    overwrite(pair.x, x);
    const DCT_Status f = pair.run(pair.forward);
    exact += f.tau_reestimated;
    if (f.count == 0) continue;
    const double target = std::ceil(keep * double(f.count)) / double(f.count);
    EXPECT_NEAR(f.density / target, 1.0, 0.25) << "call " << call;
  }
  // A 3.8% drift per call keeps the count ~13% under target (drift / kGain): measured 10 to 14
  // exact selections in 60 calls at 1 to 5 ranks.
  EXPECT_TRUE(all_ranks(exact <= calls / 4)) << exact << " exact selections";
}

TEST(Alltoallv, ThresholdReestimatedEveryInterval) {
  const int d = 32;
  const double keep = 0.2;
  MPI_Info info = make_info(d, keep, "threshold", ValueCoding::native, 2);
  MPI_Info_set(info, "dct_tau_control", "fixed");
  Pair<double> pair(Shape(d, uneven_rows), info);
  MPI_Info_free(&info);
  double tau = 0;
  for (int call = 0; call < 3; ++call) {
    overwrite(pair.x, random_rows<double>(pair.x.size(), call));
    const DCT_Status f = pair.run(pair.forward);
    const bool due = call % 2 == 0;
    EXPECT_EQ(f.tau_reestimated, due ? 1 : 0);
    if (due) tau = kth_tau(pair.x, pair.fwd, keep);
    EXPECT_DOUBLE_EQ(f.tau, tau) << "call " << call;
    const std::vector<char> mask = within_blocks(threshold_mask(pair.x, tau), pair.fwd);
    EXPECT_TRUE(same_bits(pair.y, reference(pair.x, mask, pair.fwd, ValueCoding::native)));
    overwrite(pair.g, random_rows<double>(pair.g.size(), call, 3));
    pair.run(pair.backward);
    EXPECT_TRUE(same_bits(
        pair.dx, reference(pair.g, moved_mask(mask, pair.fwd), pair.bwd, ValueCoding::native)));
  }
}

TEST(Alltoallv, MixedWithAllreduceInWaitall) {
  // An allreduce in flight and a DCT-MP call complete together, in any order.
  const int d = 8;
  MPI_Info info = make_info(d, 0.5, "exact", ValueCoding::native);
  Pair<float> pair(Shape(d, uneven_rows), info);
  MPI_Info_free(&info);
  overwrite(pair.x, random_rows<float>(pair.x.size(), 0));
  std::vector<float> grad = gradient<float>(1000, 0), sum(1000);
  DCT_Request reduce = DCT_REQUEST_NULL;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(grad.data(), sum.data(), 1000, MPI_FLOAT, MPI_SUM,
                                         MPI_COMM_WORLD, MPI_INFO_NULL, &reduce),
                      DCT_SUCCESS);
  DCT_Request both[2] = {reduce, pair.forward};
  ASSERT_ALL_RANKS_EQ(DCT_Start(&both[0]), DCT_SUCCESS);
  ASSERT_ALL_RANKS_EQ(DCT_Start(&both[1]), DCT_SUCCESS);
  EXPECT_EQ(DCT_Waitall(2, both, DCT_STATUSES_IGNORE), DCT_SUCCESS) << DCT_Get_last_error();
  const std::vector<char> mask =
      exact_mask(pair.x, pair.fwd, pair.fwd.sendcounts, pair.fwd.sdispls, 4);
  EXPECT_TRUE(same_bits(pair.y, reference(pair.x, mask, pair.fwd, ValueCoding::native)));
  DCT_Request_free(&reduce);
}

TEST(Alltoallv, CxxLayer) {
  const int d = 10;
  const Shape s(d, uneven_rows), b = s.reversed();
  std::vector<float> x = random_rows<float>(std::size_t(s.send_total), 3),
                     y(std::size_t(s.recv_total), kSentinel), g(std::size_t(b.send_total), 1.0f),
                     dx(std::size_t(b.recv_total), kSentinel);
  MPI_Info info = make_info(d, 0.3, "exact", ValueCoding::native);
  dct::AlltoallvRequest forward(x.data(), s.sendcounts.data(), s.sdispls.data(), y.data(),
                                s.recvcounts.data(), s.rdispls.data(), MPI_COMM_WORLD, info);
  MPI_Info_free(&info);
  auto backward =
      dct::AlltoallvRequest::backward(forward, g.data(), b.sendcounts.data(), b.sdispls.data(),
                                      dx.data(), b.recvcounts.data(), b.rdispls.data());
  try {
    backward();
    ADD_FAILURE() << "backward before forward accepted";
  } catch (const dct::Error &e) {
    EXPECT_EQ(e.code(), DCT_ERR_ACTIVE);
  }
  const DCT_Status status = forward();
  const std::vector<char> mask = exact_mask(x, s, s.sendcounts, s.sdispls, 3);
  EXPECT_TRUE(same_bits(y, reference(x, mask, s, ValueCoding::native)));
  EXPECT_EQ(status.nnz_sent * d, status.count * 3);
  backward();
  EXPECT_TRUE(same_bits(dx, reference(g, moved_mask(mask, s), b, ValueCoding::native)));
}

// --- Bad input: a documented code and nothing changed --------------------------------------

int init(const Shape &s, const void *send, void *recv, MPI_Datatype type, MPI_Info info) {
  DCT_Request request = DCT_REQUEST_NULL;
  const int code =
      DCT_Alltoallv_init(send, s.sendcounts.data(), s.sdispls.data(), recv, s.recvcounts.data(),
                         s.rdispls.data(), type, MPI_COMM_WORLD, info, &request);
  EXPECT_EQ(request == DCT_REQUEST_NULL, code != DCT_SUCCESS);
  if (code == DCT_SUCCESS) DCT_Request_free(&request);
  return code;
}

TEST(AlltoallvBadInput, InitArguments) {
  const int d = 4;
  const Shape good(d, [](int, int) { return 2; });
  std::vector<float> send(std::size_t(good.send_total), 1.0f),
      recv(std::size_t(good.recv_total), kSentinel);
  const std::vector<float> recv_before = recv;
  MPI_Info info = make_info(d, 0.5, "exact", ValueCoding::native);
  EXPECT_EQ(init(good, send.data(), recv.data(), MPI_FLOAT, info), DCT_SUCCESS);

  Shape bad = good;  // a count that is not a multiple of d
  bad.sendcounts[0] += 1;
  EXPECT_EQ(init(bad, send.data(), recv.data(), MPI_FLOAT, info), DCT_ERR_COUNT);
  bad = good;
  bad.recvcounts[size() - 1] = -d;
  EXPECT_EQ(init(bad, send.data(), recv.data(), MPI_FLOAT, info), DCT_ERR_COUNT);
  bad = good;
  bad.rdispls[0] = -1;
  EXPECT_EQ(init(bad, send.data(), recv.data(), MPI_FLOAT, info), DCT_ERR_ARG);
  EXPECT_EQ(init(good, send.data(), recv.data(), MPI_INT, info), DCT_ERR_DATATYPE);
  EXPECT_EQ(init(good, send.data(), recv.data(), MPI_DATATYPE_NULL, info), DCT_ERR_DATATYPE);
  EXPECT_EQ(init(good, nullptr, recv.data(), MPI_FLOAT, info), DCT_ERR_BUFFER);
  EXPECT_EQ(init(good, MPI_IN_PLACE, recv.data(), MPI_FLOAT, info), DCT_ERR_BUFFER);
  EXPECT_EQ(init(good, send.data(), nullptr, MPI_FLOAT, info), DCT_ERR_BUFFER);
  for (const char *keep : {"0", "-0.1", "1.5", "nan", "x"}) {
    MPI_Info_set(info, "dct_keep", keep);
    EXPECT_EQ(init(good, send.data(), recv.data(), MPI_FLOAT, info), DCT_ERR_INFO) << keep;
  }
  MPI_Info_set(info, "dct_keep", "0.5");
  MPI_Info_set(info, "dct_mp_select", "topk");
  EXPECT_EQ(init(good, send.data(), recv.data(), MPI_FLOAT, info), DCT_ERR_INFO);
  MPI_Info_set(info, "dct_mp_select", "exact");
  MPI_Info_set(info, "dct_values", "fp8");
  EXPECT_EQ(init(good, send.data(), recv.data(), MPI_FLOAT, info), DCT_ERR_INFO);
  MPI_Info_set(info, "dct_values", "sign");  // needs error feedback, which DCT-MP has not
  EXPECT_EQ(init(good, send.data(), recv.data(), MPI_FLOAT, info), DCT_ERR_INFO);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("error feedback"), std::string::npos);
  MPI_Info_set(info, "dct_values", "fp16");
  MPI_Info_set(info, "dct_backend", "cuda");  // DCT-MP runs on the host only
  EXPECT_EQ(init(good, send.data(), recv.data(), MPI_FLOAT, info), DCT_ERR_NOT_COMPILED);
  MPI_Info_set(info, "dct_backend", "kokkos");
  EXPECT_EQ(init(good, send.data(), recv.data(), MPI_FLOAT, info), DCT_SUCCESS);
  MPI_Info_free(&info);
  EXPECT_EQ(init(good, send.data(), recv.data(), MPI_FLOAT, MPI_INFO_NULL), DCT_ERR_INFO)
      << "dct_row_length is required";
  EXPECT_NE(std::string(DCT_Get_last_error()).find("dct_row_length"), std::string::npos);
  info = make_info(d, 0.5, "exact", ValueCoding::native);
  DCT_Request request = DCT_REQUEST_NULL;
  EXPECT_EQ(DCT_Alltoallv_init(send.data(), nullptr, good.sdispls.data(), recv.data(),
                               good.recvcounts.data(), good.rdispls.data(), MPI_FLOAT,
                               MPI_COMM_WORLD, info, &request),
            DCT_ERR_ARG);
  EXPECT_EQ(DCT_Alltoallv_init(send.data(), good.sendcounts.data(), good.sdispls.data(),
                               recv.data(), good.recvcounts.data(), good.rdispls.data(), MPI_FLOAT,
                               MPI_COMM_NULL, info, &request),
            DCT_ERR_COMM);
  EXPECT_EQ(DCT_Alltoallv_init(send.data(), good.sendcounts.data(), good.sdispls.data(),
                               recv.data(), good.recvcounts.data(), good.rdispls.data(), MPI_FLOAT,
                               MPI_COMM_WORLD, info, nullptr),
            DCT_ERR_ARG);
  MPI_Info_free(&info);
  EXPECT_TRUE(same_bits(recv, recv_before));
}

TEST(AlltoallvBadInput, BackwardBeforeForwardAndShapes) {
  const int d = 4;
  MPI_Info info = make_info(d, 0.5, "exact", ValueCoding::native);
  Pair<float> pair(Shape(d, uneven_rows), info);
  MPI_Info_free(&info);
  std::fill(pair.g.begin(), pair.g.end(), 3.0f);
  // No forward call completed yet: no masks.
  EXPECT_EQ(DCT_Start(&pair.backward), DCT_ERR_ACTIVE);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("backward before"), std::string::npos);
  EXPECT_TRUE(std::all_of(pair.dx.begin(), pair.dx.end(), [](float v) { return v == kSentinel; }));
  // Forward started: its backward must wait.
  overwrite(pair.x, random_rows<float>(pair.x.size(), 0));
  ASSERT_ALL_RANKS_EQ(DCT_Start(&pair.forward), DCT_SUCCESS);
  EXPECT_EQ(DCT_Start(&pair.backward), DCT_ERR_ACTIVE);
  ASSERT_ALL_RANKS_EQ(DCT_Wait(&pair.forward, DCT_STATUS_IGNORE), DCT_SUCCESS);
  pair.run(pair.backward);  // now fine

  // Shapes that are not the forward's reversed.
  const Shape &b = pair.bwd;
  DCT_Request request = DCT_REQUEST_NULL;
  std::vector<int> wrong = b.sendcounts;
  wrong[0] += d;
  EXPECT_EQ(
      DCT_Alltoallv_backward_init(pair.forward, pair.g.data(), wrong.data(), b.sdispls.data(),
                                  pair.dx.data(), b.recvcounts.data(), b.rdispls.data(), &request),
      DCT_ERR_COUNT);
  wrong = b.recvcounts;
  wrong[size() - 1] += d;
  EXPECT_EQ(DCT_Alltoallv_backward_init(pair.forward, pair.g.data(), b.sendcounts.data(),
                                        b.sdispls.data(), pair.dx.data(), wrong.data(),
                                        b.rdispls.data(), &request),
            DCT_ERR_COUNT);
  // An allreduce request, or a freed one, is no forward.
  std::vector<float> v(10);
  DCT_Request reduce = DCT_REQUEST_NULL;
  ASSERT_ALL_RANKS_EQ(DCT_Allreduce_init(v.data(), v.data(), 10, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                         MPI_INFO_NULL, &reduce),
                      DCT_SUCCESS);
  EXPECT_EQ(
      DCT_Alltoallv_backward_init(reduce, pair.g.data(), b.sendcounts.data(), b.sdispls.data(),
                                  pair.dx.data(), b.recvcounts.data(), b.rdispls.data(), &request),
      DCT_ERR_REQUEST);
  DCT_Request freed = reduce;
  DCT_Request_free(&reduce);
  EXPECT_EQ(
      DCT_Alltoallv_backward_init(freed, pair.g.data(), b.sendcounts.data(), b.sdispls.data(),
                                  pair.dx.data(), b.recvcounts.data(), b.rdispls.data(), &request),
      DCT_ERR_REQUEST);
  EXPECT_EQ(request, DCT_REQUEST_NULL);
}

TEST(AlltoallvBadInput, DisagreeingCountsFailOnEveryRankAndKeepTheMasks) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  const int d = 8;
  MPI_Info info = make_info(d, 0.25, "exact", ValueCoding::native);
  Pair<float> pair(Shape(d, uneven_rows), info);
  overwrite(pair.x, random_rows<float>(pair.x.size(), 0));
  pair.run(pair.forward);
  const std::vector<float> y_before = pair.y;
  // Rank 0 expects one more row from rank 1 than rank 1 sends.
  Shape lying(d, uneven_rows);
  if (rank() == 0) lying.recvcounts[1] += d;
  std::vector<float> y(std::size_t(lying.recv_total + d), kSentinel);
  DCT_Request request = DCT_REQUEST_NULL;
  ASSERT_ALL_RANKS_EQ(
      DCT_Alltoallv_init(pair.x.data(), lying.sendcounts.data(), lying.sdispls.data(), y.data(),
                         lying.recvcounts.data(), lying.rdispls.data(), MPI_FLOAT, MPI_COMM_WORLD,
                         info, &request),
      DCT_SUCCESS);
  MPI_Info_free(&info);
  ASSERT_ALL_RANKS_EQ(DCT_Start(&request), DCT_SUCCESS);
  EXPECT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_ERR_MISMATCH) << DCT_Get_last_error();
  EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return v == kSentinel; }));
  DCT_Request_free(&request);
  // The pair's masks are those of its own last call: its backward still matches.
  overwrite(pair.g, random_rows<float>(pair.g.size(), 0, 1));
  pair.run(pair.backward);
  const std::vector<char> mask =
      exact_mask(pair.x, pair.fwd, pair.fwd.sendcounts, pair.fwd.sdispls, 2);
  EXPECT_TRUE(same_bits(
      pair.dx, reference(pair.g, moved_mask(mask, pair.fwd), pair.bwd, ValueCoding::native)));
  EXPECT_TRUE(same_bits(pair.y, y_before));
}

/// Rank 0 damages its message to rank 1 (the first index or bitmap byte of its first row).
struct Tamper {
  static inline std::size_t mask_offset = 0;  // where the first row's mask starts
  static inline int how = 0;                  // 0: index past d, 1: unsorted, 2: extra bit
  static void apply(int peer, std::byte *message, std::size_t bytes) {
    if (rank() != 0 || peer != 1 || bytes <= mask_offset + 3) return;
    std::byte *mask = message + mask_offset;
    if (how == 0) {
      const std::uint16_t past = 1000;
      std::memcpy(mask, &past, 2);
    } else if (how == 1) {
      std::swap(mask[0], mask[2]), std::swap(mask[1], mask[3]);
    } else {
      mask[0] ^= std::byte(0xff);  // the popcount no longer matches the count
    }
  }
};

TEST(AlltoallvBadInput, TamperedMessageRejectedOnEveryRank) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  // d = 1000, keep 0.005: 5 indices per row (10 bytes < the 125-byte bitmap); d = 64, keep 0.5:
  // 32 per row, a bitmap of 8 bytes. Uniform counts: the masks follow the values directly.
  struct Case {
    int d;
    double keep;
    int how;
    const char *why;
  };
  for (const Case c : {Case{1000, 0.005, 0, "index past d"}, Case{1000, 0.005, 1, "increasing"},
                       Case{64, 0.5, 2, "bitmap"}}) {
    SCOPED_TRACE(c.why);
    MPI_Info info = make_info(c.d, c.keep, "exact", ValueCoding::fp16);
    Pair<float> pair(Shape(c.d, [](int, int) { return 2; }), info);
    MPI_Info_free(&info);
    overwrite(pair.x, random_rows<float>(pair.x.size(), 0));
    const std::size_t k = std::size_t(std::ceil(c.keep * c.d - 1e-9));
    Tamper::mask_offset = 2 * k * 2;  // two rows of k fp16 values
    Tamper::how = c.how;
    detail::testing::tamper_forward_message = Tamper::apply;
    ASSERT_ALL_RANKS_EQ(DCT_Start(&pair.forward), DCT_SUCCESS);
    const int code = DCT_Wait(&pair.forward, DCT_STATUS_IGNORE);
    const std::string message = DCT_Get_last_error();
    detail::testing::tamper_forward_message = nullptr;
    EXPECT_EQ(code, DCT_ERR_PEER) << message;
    if (rank() == 1) {
      EXPECT_NE(message.find(c.why), std::string::npos) << message;
    }
    EXPECT_TRUE(std::all_of(pair.y.begin(), pair.y.end(), [](float v) { return v == kSentinel; }));
    // Nothing was kept: the backward still has no masks; an intact call then works.
    EXPECT_EQ(DCT_Start(&pair.backward), DCT_ERR_ACTIVE);
    pair.run(pair.forward);
    const std::vector<char> mask =
        exact_mask(pair.x, pair.fwd, pair.fwd.sendcounts, pair.fwd.sdispls, k);
    EXPECT_TRUE(same_bits(pair.y, reference(pair.x, mask, pair.fwd, ValueCoding::fp16)));
  }
}

}  // namespace
}  // namespace dct::test
