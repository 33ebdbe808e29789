// DCT-MP's error-bounded compressor (dct_mp_compressor=error_bounded) against MPI_Alltoallv
// of the same blocks: every received value within its table block's bound, exact cases bit
// for bit, the schedule and the automatic table-wise bounds, peers' messages validated.
#include <cstring>
#include <limits>

#include "common.hpp"
#include "core/test_hooks.hpp"
#include "dct/dct.hpp"
#include "mp/alltoallv.hpp"

namespace dct::test {
namespace {

constexpr float kSentinel = 42.0f;

/// Rank i sends (i + j) % 3 + 1 rows to rank j: uneven, never empty; blocks contiguous.
struct Blocks {
  int d;
  std::vector<int> sendcounts, sdispls, recvcounts, rdispls;
  int send_total = 0, recv_total = 0;
  explicit Blocks(int row_length, int scale = 1) : d(row_length) {
    for (int j = 0; j < size(); ++j) {
      sendcounts.push_back(scale * ((rank() + j) % 3 + 1) * d);
      sdispls.push_back(send_total);
      send_total += sendcounts.back();
      recvcounts.push_back(scale * ((j + rank()) % 3 + 1) * d);
      rdispls.push_back(recv_total);
      recv_total += recvcounts.back();
    }
  }
};

struct Info {
  MPI_Info info = MPI_INFO_NULL;
  explicit Info(std::initializer_list<std::pair<const char *, std::string>> keys) {
    MPI_Info_create(&info);
    for (const auto &[key, value] : keys) MPI_Info_set(info, key, value.c_str());
  }
  ~Info() { MPI_Info_free(&info); }
};

template <typename T>
std::vector<T> reference(const std::vector<T> &send, const Blocks &b) {
  std::vector<T> recv(std::size_t(b.recv_total));
  MPI_Alltoallv(send.data(), b.sendcounts.data(), b.sdispls.data(), mpi_type<T>(), recv.data(),
                b.recvcounts.data(), b.rdispls.data(), mpi_type<T>(), MPI_COMM_WORLD);
  return recv;
}

/// The largest |got - sent| / (bound * range) over every (sender, table) block received, with
/// `bounds[t]` the senders' relative bound of table t; non-finite values must be bit-equal.
template <typename T>
double worst_relative_error(const std::vector<T> &got, const std::vector<T> &sent, const Blocks &b,
                            int columns, const std::vector<double> &bounds) {
  double worst = 0;
  for (int j = 0; j < size(); ++j)
    for (int t = 0; t < b.d / columns; ++t) {
      double lo = HUGE_VAL, hi = -HUGE_VAL;
      const int rows = b.recvcounts[j] / b.d;
      auto at = [&](int r, int c) { return std::size_t(b.rdispls[j] + r * b.d + t * columns + c); };
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < columns; ++c)
          if (std::isfinite(double(sent[at(r, c)])))
            lo = std::min(lo, double(sent[at(r, c)])), hi = std::max(hi, double(sent[at(r, c)]));
      const double bound = bounds[std::size_t(t) % bounds.size()] * (hi - lo);
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < columns; ++c) {
          const T x = sent[at(r, c)], y = got[at(r, c)];
          if (!std::isfinite(double(x))) {
            EXPECT_EQ(std::memcmp(&x, &y, sizeof(T)), 0);
            continue;
          }
          const double error = std::fabs(double(y) - double(x));
          if (bound > 0)
            worst = std::max(worst, error / bound);
          else
            EXPECT_EQ(std::memcmp(&x, &y, sizeof(T)), 0) << "exact table";
        }
    }
  return worst;
}

template <typename T>
void forward_within_bounds(const char *lossless) {
  const Blocks b(24, 4);
  const std::vector<double> bounds = {0.01, 0.05, 0.002};
  std::vector<T> send = gradient<T>(std::size_t(b.send_total), 0);
  for (std::size_t i = 0; i < send.size(); ++i)
    if (i % 24 >= 16) send[i] *= T(1000);  // the third table lives on another scale
  std::vector<T> recv(std::size_t(b.recv_total), T(kSentinel));
  Info info({{"dct_row_length", "24"},
             {"dct_mp_compressor", "error_bounded"},
             {"dct_table_columns", "8"},
             {"dct_error_bound", "0.01,0.05,0.002"},
             {"dct_lossless", lossless},
             {"dct_beta_gbps", "0.125"}});
  AlltoallvRequest forward(send.data(), b.sendcounts.data(), b.sdispls.data(), recv.data(),
                           b.recvcounts.data(), b.rdispls.data(), MPI_COMM_WORLD, info.info);
  for (int call = 0; call < 3; ++call) {
    overwrite(send, gradient<T>(send.size(), call));
    const DCT_Status s = forward();
    const std::vector<T> expected = reference(send, b);
    const double worst = worst_relative_error(recv, expected, b, 8, bounds);
    EXPECT_LE(worst, 1.0);
    EXPECT_GT(worst, 0.5) << "the bound is used, not far tighter";
    EXPECT_GT(s.max_abs_error, 0.0);
    EXPECT_LE(s.max_abs_error, 0.05 * 20);
    EXPECT_EQ(s.count, MPI_Count(b.send_total));
    if (size() > 1) {
      EXPECT_GT(s.compression_ratio, 1.5) << lossless;
    }
  }
}

TEST(ErrorBounded, ForwardFloatWithinEveryTableBound) {
  for (const char *lossless : {"none", "lz4", "zstd", "auto"})
    forward_within_bounds<float>(lossless);
}

TEST(ErrorBounded, ForwardDoubleWithinEveryTableBound) {
  forward_within_bounds<double>("zstd");
}

TEST(ErrorBounded, BoundZeroAndSpecialValuesAreExact) {
  const Blocks b(8);
  std::vector<float> send = gradient<float>(std::size_t(b.send_total), 3);
  send[0] = std::numeric_limits<float>::quiet_NaN();
  send[1] = -std::numeric_limits<float>::infinity();
  send[2] = -0.0f;
  send[3] = std::numeric_limits<float>::denorm_min();
  std::vector<float> recv(std::size_t(b.recv_total), kSentinel), back(send.size(), kSentinel);
  Info info(
      {{"dct_row_length", "8"}, {"dct_mp_compressor", "error_bounded"}, {"dct_error_bound", "0"}});
  AlltoallvRequest forward(send.data(), b.sendcounts.data(), b.sdispls.data(), recv.data(),
                           b.recvcounts.data(), b.rdispls.data(), MPI_COMM_WORLD, info.info);
  auto backward =
      AlltoallvRequest::backward(forward, recv.data(), b.recvcounts.data(), b.rdispls.data(),
                                 back.data(), b.sendcounts.data(), b.sdispls.data());
  const DCT_Status s = forward();
  const std::vector<float> expected = reference(send, b);
  EXPECT_EQ(std::memcmp(recv.data(), expected.data(), recv.size() * sizeof(float)), 0);
  EXPECT_EQ(s.max_abs_error, 0.0);
  // The backward is uncompressed by default: MPI_Alltoallv's bits, dense bytes; its first call
  // also agrees on the path of its blocks (two 8-byte words, alltoallv_exchange.hpp).
  const MPI_Count agreement = size() > 1 ? 2 * (size() - 1) * 16 / size() : 0;
  for (int call = 0; call < 2; ++call) {
    std::fill(back.begin(), back.end(), kSentinel);
    const DCT_Status sb = backward();
    EXPECT_EQ(std::memcmp(back.data(), send.data(), send.size() * sizeof(float)), 0);
    EXPECT_EQ(sb.bytes_sent, sb.dense_bytes + (call == 0 ? agreement : 0)) << "call " << call;
  }
}

TEST(ErrorBounded, NonFiniteValuesArriveBitForBitWithinABound) {
  const Blocks b(16, 2);
  std::vector<double> send = gradient<double>(std::size_t(b.send_total), 4);
  for (std::size_t i = 0; i < send.size(); i += 7)
    send[i] = std::numeric_limits<double>::infinity();
  for (std::size_t i = 3; i < send.size(); i += 11) send[i] = std::nan("0x123");
  std::vector<double> recv(std::size_t(b.recv_total), kSentinel);
  Info info({{"dct_row_length", "16"},
             {"dct_mp_compressor", "error_bounded"},
             {"dct_error_bound", "0.02"}});
  AlltoallvRequest forward(send.data(), b.sendcounts.data(), b.sdispls.data(), recv.data(),
                           b.recvcounts.data(), b.rdispls.data(), MPI_COMM_WORLD, info.info);
  forward();
  EXPECT_LE(worst_relative_error(recv, reference(send, b), b, 16, {0.02}), 1.0);
}

TEST(ErrorBounded, CompressedBackwardHasItsOwnBound) {
  const Blocks b(12, 20);
  std::vector<float> send = gradient<float>(std::size_t(b.send_total), 5);
  std::vector<float> recv(std::size_t(b.recv_total)), grad = gradient<float>(recv.size(), 6),
                                                      back(send.size(), kSentinel);
  Info info({{"dct_row_length", "12"},
             {"dct_mp_compressor", "error_bounded"},
             {"dct_table_columns", "4"},
             {"dct_backward_error_bound", "0.001"}});
  AlltoallvRequest forward(send.data(), b.sendcounts.data(), b.sdispls.data(), recv.data(),
                           b.recvcounts.data(), b.rdispls.data(), MPI_COMM_WORLD, info.info);
  auto backward =
      AlltoallvRequest::backward(forward, grad.data(), b.recvcounts.data(), b.rdispls.data(),
                                 back.data(), b.sendcounts.data(), b.sdispls.data());
  forward();
  const DCT_Status s = backward();
  // The backward's blocks are the forward's reversed: check against MPI's reversed exchange.
  Blocks r = b;
  std::swap(r.sendcounts, r.recvcounts);
  std::swap(r.sdispls, r.rdispls);
  std::swap(r.send_total, r.recv_total);
  const double worst = worst_relative_error(back, reference(grad, r), r, 4, {0.001});
  EXPECT_LE(worst, 1.0);
  EXPECT_GT(worst, 0.3);
  EXPECT_GT(s.max_abs_error, 0.0);
  if (size() > 1) {
    EXPECT_LT(s.bytes_sent, s.dense_bytes);
  }
}

TEST(ErrorBounded, ScheduleTightensTheBound) {
  const Blocks b(16, 16);
  std::vector<float> send(std::size_t(b.send_total)), recv(std::size_t(b.recv_total));
  Info info({{"dct_row_length", "16"},
             {"dct_mp_compressor", "error_bounded"},
             {"dct_error_bound", "0.01"},
             {"dct_error_bound_schedule", "3,4"}});
  AlltoallvRequest forward(send.data(), b.sendcounts.data(), b.sdispls.data(), recv.data(),
                           b.recvcounts.data(), b.rdispls.data(), MPI_COMM_WORLD, info.info);
  // Factor 3, 2.5, 2, 1.5, then 1 from the fifth call on.
  const double factors[] = {3, 2.5, 2, 1.5, 1, 1};
  for (int call = 0; call < 6; ++call) {
    overwrite(send, gradient<float>(send.size(), call));
    forward();
    const double worst =
        worst_relative_error(recv, reference(send, b), b, 16, {0.01 * factors[call]});
    EXPECT_LE(worst, 1.0) << "call " << call;
    EXPECT_GT(worst, 0.7) << "call " << call << ": the scheduled bound is used";
  }
}

TEST(ErrorBounded, AutomaticTableBoundsFollowTheRowsDistinctness) {
  // Table 0: rows that only differ by 1e-4 of the range (they collapse under 0.05 and 0.03,
  // not under 0.01... of the classes 0.05,0.03,0.001); table 1: random rows (loosest class).
  const Blocks b(8, 8);
  std::vector<float> send = gradient<float>(std::size_t(b.send_total), 7);
  for (int i = 0; i * 8 < b.send_total; ++i)
    for (int c = 0; c < 4; ++c)
      send[std::size_t(i * 8 + c)] = c == 0 && i % 2 ? 1.0f : 1e-4f * float(i % 5);
  std::vector<float> recv(std::size_t(b.recv_total));
  Info info({{"dct_row_length", "8"},
             {"dct_mp_compressor", "error_bounded"},
             {"dct_table_columns", "4"},
             {"dct_error_bound", "auto:0.03,0.05,0.0001"}});
  AlltoallvRequest forward(send.data(), b.sendcounts.data(), b.sdispls.data(), recv.data(),
                           b.recvcounts.data(), b.rdispls.data(), MPI_COMM_WORLD, info.info);
  forward();
  const std::vector<float> expected = reference(send, b);
  // Table 0 got 1e-4, table 1 got 0.05: within those, and table 1's error above 0.03's bound.
  EXPECT_LE(worst_relative_error(recv, expected, b, 4, {0.0001, 0.05}), 1.0);
  EXPECT_GT(worst_relative_error(recv, expected, b, 4, {1.0, 0.03}), 1.0);
}

TEST(ErrorBoundedBadInput, Keys) {
  const Blocks b(8);
  std::vector<float> send(std::size_t(b.send_total)), recv(std::size_t(b.recv_total));
  DCT_Request request = DCT_REQUEST_NULL;
  for (std::initializer_list<std::pair<const char *, std::string>> keys :
       {std::initializer_list<std::pair<const char *, std::string>>{{"dct_table_columns", "3"}},
        {{"dct_error_bound", "0.1,0.2,0.3"}, {"dct_table_columns", "4"}},
        {{"dct_error_bound", "-1"}},
        {{"dct_error_bound", "auto:"}},
        {{"dct_error_bound_schedule", "0.5,10"}},
        {{"dct_lossless", "brotli"}},
        {{"dct_mp_compressor", "sz3"}}}) {
    Info info(keys);
    MPI_Info_set(info.info, "dct_row_length", "8");
    MPI_Info_set(info.info, "dct_mp_compressor",
                 keys.begin()->first == std::string("dct_mp_compressor") ? "sz3" : "error_bounded");
    EXPECT_EQ(DCT_Alltoallv_init(send.data(), b.sendcounts.data(), b.sdispls.data(), recv.data(),
                                 b.recvcounts.data(), b.rdispls.data(), MPI_FLOAT, MPI_COMM_WORLD,
                                 info.info, &request),
              DCT_ERR_INFO)
        << keys.begin()->first << "=" << keys.begin()->second;
  }
}

TEST(ErrorBoundedBadInput, DamagedMessageRejectedOnEveryRankNothingWritten) {
  if (size() < 2) GTEST_SKIP() << "needs two ranks";
  const Blocks b(8, 2);
  std::vector<float> send = gradient<float>(std::size_t(b.send_total), 8);
  std::vector<float> recv(std::size_t(b.recv_total), kSentinel);
  Info info(
      {{"dct_row_length", "8"}, {"dct_mp_compressor", "error_bounded"}, {"dct_lossless", "zstd"}});
  AlltoallvRequest forward(send.data(), b.sendcounts.data(), b.sdispls.data(), recv.data(),
                           b.recvcounts.data(), b.rdispls.data(), MPI_COMM_WORLD, info.info);
  // Damage rank 0's message to rank 1: the coder, the table count, the body size, the
  // outlier count, zstd's magic number (changes the format can see; a changed offset or a
  // payload byte may still decode, within no bound: zstd frames carry no checksum here).
  struct Tamper {
    static std::size_t &at() {
      static std::size_t position = 0;
      return position;
    }
    static void apply(int peer, std::byte *message, std::size_t bytes) {
      if (rank() == 0 && peer == 1 && bytes > 0) message[at() % bytes] ^= std::byte{0x5a};
    }
  };
  for (std::size_t at : {0, 4, 8, 12, 36, 40}) {
    Tamper::at() = at;
    detail::testing::tamper_forward_message = Tamper::apply;
    DCT_Request handle = forward.handle();
    ASSERT_ALL_RANKS_EQ(DCT_Start(&handle), DCT_SUCCESS);
    const int waited = DCT_Wait(&handle, DCT_STATUS_IGNORE);
    detail::testing::tamper_forward_message = nullptr;
    EXPECT_EQ(waited, DCT_ERR_PEER) << "byte " << at << ": " << DCT_Get_last_error();
    EXPECT_EQ(recv, std::vector<float>(recv.size(), kSentinel)) << "byte " << at;
  }
  forward();  // and the request works again
  EXPECT_LE(worst_relative_error(recv, reference(send, b), b, 8, {0.01}), 1.0);
}

}  // namespace
}  // namespace dct::test
