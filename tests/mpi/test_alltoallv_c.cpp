// The large-count variants DCT_Alltoallv_init_c and DCT_Alltoallv_backward_init_c (MPI-4's
// MPI_Count counts, MPI_Aint displacements): the same requests as the int forms, bit for bit;
// a displacement past INT_MAX elements, in a buffer mostly never touched; the point-to-point
// exchange that carries messages past MPI's int counts, at small sizes through a test hook,
// against MPI_Alltoallv; and the argument errors of the int forms.
#include <sys/mman.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common.hpp"
#include "core/test_hooks.hpp"
#include "dct/dct.hpp"

namespace dct::test {
namespace {

constexpr float kSentinel = 42.0f;

/// Counts and displacements of one alltoallv in both widths, in elements: blocks in rank
/// order, each followed by a gap of one row, from `offset` on.
struct Layout {
  std::vector<int> sendcounts, sdispls, recvcounts, rdispls;
  std::vector<MPI_Count> sendcounts_c, recvcounts_c;
  std::vector<MPI_Aint> sdispls_c, rdispls_c;
  std::size_t send_total = 0, recv_total = 0;

  template <typename Rows>
  Layout(int d, Rows rows, MPI_Aint offset = 0) {
    const int p = size(), me = rank();
    std::size_t send_at = 0, recv_at = 0;
    for (int j = 0; j < p; ++j) {
      const int out = rows(me, j) * d, in = rows(j, me) * d;
      sendcounts.push_back(out);
      recvcounts.push_back(in);
      sdispls.push_back(int(send_at));
      rdispls.push_back(int(recv_at));
      sendcounts_c.push_back(out);
      recvcounts_c.push_back(in);
      sdispls_c.push_back(offset + MPI_Aint(send_at));
      rdispls_c.push_back(offset + MPI_Aint(recv_at));
      send_at += std::size_t(out + d);
      recv_at += std::size_t(in + d);
    }
    send_total = std::size_t(offset) + send_at;
    recv_total = std::size_t(offset) + recv_at;
  }
  Layout reversed() const {
    Layout r = *this;
    std::swap(r.sendcounts, r.recvcounts);
    std::swap(r.sdispls, r.rdispls);
    std::swap(r.sendcounts_c, r.recvcounts_c);
    std::swap(r.sdispls_c, r.rdispls_c);
    std::swap(r.send_total, r.recv_total);
    return r;
  }
};

int uneven_rows(int i, int j) {
  return (i + 2 * j + 1) % 4;  // some blocks empty
}

int from_all_but_rank_1(int i, int j) {
  return i == 1 || (i == 0 && j == 0) ? 0 : 2 + j;
}

/// A forward request and its backward on buffers owned here, of the int or the _c form.
template <typename T>
struct Pair {
  Layout fwd, bwd;
  std::vector<T> x, y, g, dx;
  DCT_Request forward = DCT_REQUEST_NULL, backward = DCT_REQUEST_NULL;

  Pair(const Layout &layout, MPI_Info info, bool large)
      : fwd(layout),
        bwd(layout.reversed()),
        x(gradient<T>(fwd.send_total, 0, rank())),
        y(fwd.recv_total, T(kSentinel)),
        g(gradient<T>(bwd.send_total, 1, rank())),
        dx(bwd.recv_total, T(kSentinel)) {
    const Layout &f = fwd, &b = bwd;
    const int init = large
                         ? DCT_Alltoallv_init_c(x.data(), f.sendcounts_c.data(), f.sdispls_c.data(),
                                                y.data(), f.recvcounts_c.data(), f.rdispls_c.data(),
                                                mpi_type<T>(), MPI_COMM_WORLD, info, &forward)
                         : DCT_Alltoallv_init(x.data(), f.sendcounts.data(), f.sdispls.data(),
                                              y.data(), f.recvcounts.data(), f.rdispls.data(),
                                              mpi_type<T>(), MPI_COMM_WORLD, info, &forward);
    EXPECT_EQ(init, DCT_SUCCESS) << DCT_Get_last_error();
    const int back = large ? DCT_Alltoallv_backward_init_c(
                                 forward, g.data(), b.sendcounts_c.data(), b.sdispls_c.data(),
                                 dx.data(), b.recvcounts_c.data(), b.rdispls_c.data(), &backward)
                           : DCT_Alltoallv_backward_init(
                                 forward, g.data(), b.sendcounts.data(), b.sdispls.data(),
                                 dx.data(), b.recvcounts.data(), b.rdispls.data(), &backward);
    EXPECT_EQ(back, DCT_SUCCESS) << DCT_Get_last_error();
  }
  ~Pair() {
    DCT_Request_free(&backward);
    DCT_Request_free(&forward);
  }
  /// Both directions, `calls` times: every call's statuses and receive buffers, in order.
  std::vector<std::vector<unsigned char>> run(int calls) {
    std::vector<std::vector<unsigned char>> seen;
    auto bytes = [&](const void *p, std::size_t n) {
      const auto *b = static_cast<const unsigned char *>(p);
      seen.emplace_back(b, b + n);
    };
    for (int call = 0; call < calls; ++call) {
      overwrite(x, gradient<T>(x.size(), 2 + call, rank()));
      overwrite(g, gradient<T>(g.size(), 9 + call, rank()));
      for (DCT_Request *request : {&forward, &backward}) {
        DCT_Status status{};
        EXPECT_EQ(DCT_Start(request), DCT_SUCCESS) << DCT_Get_last_error();
        EXPECT_EQ(DCT_Wait(request, &status), DCT_SUCCESS) << DCT_Get_last_error();
        // The calls' own fields (the header says which struct layout this test compiled).
        bytes(&status.count, sizeof(status) - offsetof(DCT_Status, count));
      }
      bytes(y.data(), y.size() * sizeof(T));
      bytes(dx.data(), dx.size() * sizeof(T));
    }
    return seen;
  }
};

struct Config {
  const char *name;
  std::vector<std::pair<std::string, std::string>> keys;
};

std::vector<Config> configs(int d) {
  const std::string row = std::to_string(d);
  return {
      {"topk exact", {{"dct_row_length", row}, {"dct_keep", "0.3"}}},
      {"topk laplace fp16",
       {{"dct_row_length", row}, {"dct_mp_select", "laplace"}, {"dct_values", "fp16"}}},
      {"topk threshold", {{"dct_row_length", row}, {"dct_mp_select", "threshold"}}},
      {"error_bounded",
       {{"dct_row_length", row}, {"dct_mp_compressor", "error_bounded"}, {"dct_lossless", "lz4"}}},
      {"error_bounded, compressed backward",
       {{"dct_row_length", row},
        {"dct_mp_compressor", "error_bounded"},
        {"dct_backward_error_bound", "0.001"},
        {"dct_lossless", "none"}}},
  };
}

/// What the int and the _c forms of the same request deliver, call for call.
template <typename T, typename Rows>
void expect_same_as_int_form(int d, Rows rows, std::size_t max_mpi_count = 0) {
  for (const Config &config : configs(d)) {
    SCOPED_TRACE(std::string(config.name) + ", d=" + std::to_string(d) +
                 (sizeof(T) == 4 ? ", float" : ", double"));
    MPI_Info info = make_info(config.keys);
    const Layout layout(d, rows);
    std::vector<std::vector<unsigned char>> narrow, wide;
    {
      Pair<T> pair(layout, info, false);
      narrow = pair.run(2);
    }
    detail::testing::max_mpi_count = max_mpi_count;
    detail::testing::point_to_point_exchanges = 0;
    {
      Pair<T> pair(layout, info, true);
      wide = pair.run(2);
    }
    detail::testing::max_mpi_count = 0;
    // Every rank takes the same path; with a limit of one unit, any message passes it, and
    // both directions of both calls go point to point.
    const std::size_t p2p = detail::testing::point_to_point_exchanges;
    EXPECT_TRUE(all_ranks(p2p == 0 || p2p == 4)) << p2p;
    int p2p_anywhere = p2p > 0, anywhere = 0;
    MPI_Allreduce(MPI_IN_PLACE, &p2p_anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(p2p > 0, p2p_anywhere == 1) << "ranks took different paths";
    int nonempty = std::any_of(layout.sendcounts.begin(), layout.sendcounts.end(),
                               [](int c) { return c > 0; });
    MPI_Allreduce(&nonempty, &anywhere, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (max_mpi_count == 1) {
      EXPECT_EQ(p2p, anywhere ? 4u : 0u);
    }
    if (max_mpi_count == 0) {
      EXPECT_EQ(p2p, 0u);
    }
    MPI_Info_free(&info);
    ASSERT_EQ(narrow.size(), wide.size());
    for (std::size_t i = 0; i < narrow.size(); ++i)
      EXPECT_TRUE(all_ranks(narrow[i] == wide[i])) << "item " << i << " (status, status, y, dx)";
  }
}

TEST(AlltoallvC, SameBitsAndStatusAsTheIntForm) {
  expect_same_as_int_form<float>(8, uneven_rows);
  expect_same_as_int_form<double>(5, uneven_rows);
  expect_same_as_int_form<float>(16, from_all_but_rank_1);
  expect_same_as_int_form<float>(4, [](int, int) { return 0; });
}

/// The point-to-point exchange (messages past MPI's int counts) at small sizes: the limit
/// lowered to a few items on every rank, so that every message goes in several pieces. It must
/// deliver what MPI_Alltoallv delivers, bit for bit, statuses included.
TEST(AlltoallvC, PointToPointPiecesMatchAlltoallv) {
  for (std::size_t limit : {1u, 3u, 64u}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    expect_same_as_int_form<float>(8, uneven_rows, limit);
    expect_same_as_int_form<double>(12, from_all_but_rank_1, limit);
  }
}

/// Anonymous memory reserved, not committed: only the pages a test touches become resident.
template <typename T>
struct Sparse {
  T *data = nullptr;
  std::size_t bytes = 0;
  explicit Sparse(std::size_t elements) : bytes(elements * sizeof(T)) {
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data = p == MAP_FAILED ? nullptr : static_cast<T *>(p);
  }
  ~Sparse() {
    if (data != nullptr) munmap(data, bytes);
  }
};

/// Blocks placed past INT_MAX elements (8 GiB of floats) in buffers of more than 8 GiB of which
/// only the blocks and their gaps are ever touched: the values land where the displacements say,
/// forward and backward, and nothing else is written. Exact coding, so that what arrives is
/// what was sent: top-k keeping every entry, error-bounded with bound 0 and its uncompressed
/// backward (the dense blocks at these displacements: point to point, for real).
TEST(AlltoallvC, DisplacementsPastIntMax) {
  constexpr int d = 4;
  const MPI_Aint offset = MPI_Aint(INT_MAX) + 1000;
  const Layout layout(d, uneven_rows, offset), back = layout.reversed();
  Sparse<float> x(layout.send_total), y(layout.recv_total), g(back.send_total), dx(back.recv_total);
  ASSERT_TRUE(all_ranks(x.data && y.data && g.data && dx.data)) << "mmap of > 8 GiB failed";
  // Each rank's value of element i of its block for rank j, and the gaps (one row after each
  // block, and the row before the first) set to the sentinel.
  auto value = [](int from, int to, int i, int direction) {
    return float(1000 * direction + 100 * from + 10 * to) + 0.25f * float(i);
  };
  auto fill = [&](float *buffer, const std::vector<MPI_Count> &counts,
                  const std::vector<MPI_Aint> &displs, int direction, bool sending) {
    std::fill_n(buffer + offset - d, d, kSentinel);
    for (int j = 0; j < size(); ++j) {
      for (MPI_Count i = 0; i < counts[j]; ++i)
        buffer[displs[j] + i] = sending ? value(rank(), j, int(i), direction) : kSentinel;
      std::fill_n(buffer + displs[j] + counts[j], d, kSentinel);
    }
  };
  // Every element of every block and gap: what arrived from rank j, or the sentinel.
  auto check = [&](const float *buffer, const std::vector<MPI_Count> &counts,
                   const std::vector<MPI_Aint> &displs, int direction) {
    bool ok =
        std::all_of(buffer + offset - d, buffer + offset, [](float v) { return v == kSentinel; });
    for (int j = 0; j < size(); ++j) {
      for (MPI_Count i = 0; i < counts[j]; ++i)
        ok = ok && buffer[displs[j] + i] == value(j, rank(), int(i), direction);
      for (int i = 0; i < d; ++i) ok = ok && buffer[displs[j] + counts[j] + i] == kSentinel;
    }
    return ok;
  };
  for (const Config &config :
       {Config{"topk keeping all", {{"dct_row_length", "4"}, {"dct_keep", "1"}}},
        Config{"error_bounded exact",
               {{"dct_row_length", "4"},
                {"dct_mp_compressor", "error_bounded"},
                {"dct_error_bound", "0"}}}}) {
    SCOPED_TRACE(config.name);
    fill(x.data, layout.sendcounts_c, layout.sdispls_c, 1, true);
    fill(y.data, layout.recvcounts_c, layout.rdispls_c, 1, false);
    fill(g.data, back.sendcounts_c, back.sdispls_c, 2, true);
    fill(dx.data, back.recvcounts_c, back.rdispls_c, 2, false);
    MPI_Info info = make_info(config.keys);
    DCT_Request forward = DCT_REQUEST_NULL, backward = DCT_REQUEST_NULL;
    ASSERT_ALL_RANKS_EQ(
        DCT_Alltoallv_init_c(x.data, layout.sendcounts_c.data(), layout.sdispls_c.data(), y.data,
                             layout.recvcounts_c.data(), layout.rdispls_c.data(), MPI_FLOAT,
                             MPI_COMM_WORLD, info, &forward),
        DCT_SUCCESS);
    MPI_Info_free(&info);
    ASSERT_EQ(DCT_Alltoallv_backward_init_c(
                  forward, g.data, back.sendcounts_c.data(), back.sdispls_c.data(), dx.data,
                  back.recvcounts_c.data(), back.rdispls_c.data(), &backward),
              DCT_SUCCESS)
        << DCT_Get_last_error();
    detail::testing::point_to_point_exchanges = 0;
    for (DCT_Request *request : {&forward, &backward}) {
      ASSERT_ALL_RANKS_EQ(DCT_Start(request), DCT_SUCCESS);
      EXPECT_EQ(DCT_Wait(request, DCT_STATUS_IGNORE), DCT_SUCCESS) << DCT_Get_last_error();
    }
    EXPECT_TRUE(all_ranks(check(y.data, layout.recvcounts_c, layout.rdispls_c, 1)));
    EXPECT_TRUE(all_ranks(check(dx.data, back.recvcounts_c, back.rdispls_c, 2)));
    // The compressed messages are small (MPI_Alltoallv); the dense backward's displacements
    // are not.
    const bool dense_backward = std::string(config.name) == "error_bounded exact";
    EXPECT_EQ(detail::testing::point_to_point_exchanges, dense_backward ? 1u : 0u);
    DCT_Request_free(&backward);
    DCT_Request_free(&forward);
  }
}

// --- Bad input: the int forms' codes, on every rank, and nothing written ------------------

int agreed_code(int code) {
  int first = code;
  MPI_Bcast(&first, 1, MPI_INT, 0, MPI_COMM_WORLD);
  EXPECT_TRUE(all_ranks(code == first)) << "rank " << rank() << " returned " << code;
  return first;
}

TEST(AlltoallvCBadInput, ArgumentsRefusedAsTheIntForm) {
  constexpr int d = 4;
  const Layout good(d, [](int, int) { return 2; });
  std::vector<float> send(good.send_total, 1.0f), recv(good.recv_total, kSentinel);
  const std::vector<float> recv_before = recv;
  MPI_Info info = make_info({{"dct_row_length", "4"}});
  // `change` spoils rank 0's arguments only: every rank must return the same code.
  auto init = [&](auto change) {
    Layout l = good;
    const void *sendbuf = send.data();
    if (rank() == 0) change(l, sendbuf);
    DCT_Request request = DCT_REQUEST_NULL;
    const int code = agreed_code(
        DCT_Alltoallv_init_c(sendbuf, l.sendcounts_c.empty() ? nullptr : l.sendcounts_c.data(),
                             l.sdispls_c.empty() ? nullptr : l.sdispls_c.data(), recv.data(),
                             l.recvcounts_c.empty() ? nullptr : l.recvcounts_c.data(),
                             l.rdispls_c.empty() ? nullptr : l.rdispls_c.data(), MPI_FLOAT,
                             MPI_COMM_WORLD, info, &request));
    EXPECT_EQ(request == DCT_REQUEST_NULL, code != DCT_SUCCESS);
    DCT_Request_free(&request);
    return code;
  };
  EXPECT_EQ(init([](Layout &, const void *&) {}), DCT_SUCCESS);
  EXPECT_EQ(init([](Layout &l, const void *&) { l.sendcounts_c[0] = -d; }), DCT_ERR_COUNT);
  EXPECT_EQ(init([](Layout &l, const void *&) { l.recvcounts_c.back() += 1; }), DCT_ERR_COUNT);
  EXPECT_EQ(init([](Layout &l, const void *&) { l.rdispls_c[0] = -1; }), DCT_ERR_ARG);
  EXPECT_EQ(init([](Layout &l, const void *&) { l.sdispls_c.back() = -1; }), DCT_ERR_ARG);
  EXPECT_EQ(init([](Layout &l, const void *&) { l.sendcounts_c.clear(); }), DCT_ERR_ARG);
  EXPECT_EQ(init([](Layout &l, const void *&) { l.sdispls_c.clear(); }), DCT_ERR_ARG);
  EXPECT_EQ(init([](Layout &l, const void *&) { l.recvcounts_c.clear(); }), DCT_ERR_ARG);
  EXPECT_EQ(init([](Layout &l, const void *&) { l.rdispls_c.clear(); }), DCT_ERR_ARG);
  EXPECT_EQ(init([](Layout &, const void *&s) { s = nullptr; }), DCT_ERR_BUFFER);
  // Past what the int form can say, yet in range: fine. Past what MPI_Aint addresses: refused.
  EXPECT_EQ(init([](Layout &l, const void *&) { l.rdispls_c[0] = MPI_Aint(INT_MAX) * 4; }),
            DCT_SUCCESS);
  EXPECT_EQ(init([](Layout &l, const void *&) {
              l.rdispls_c[0] = std::numeric_limits<MPI_Aint>::max() / 4;
            }),
            DCT_ERR_COUNT);
  EXPECT_EQ(init([](Layout &l, const void *&) {
              l.sendcounts_c[0] = std::numeric_limits<MPI_Count>::max() / 8 * 4;
            }),
            DCT_ERR_COUNT);
  MPI_Info_free(&info);
  EXPECT_TRUE(same_bits(recv, recv_before));

  // The backward's: not collective, each rank's own.
  info = make_info({{"dct_row_length", "4"}, {"dct_keep", "0.5"}});
  DCT_Request forward = DCT_REQUEST_NULL;
  ASSERT_ALL_RANKS_EQ(
      DCT_Alltoallv_init_c(send.data(), good.sendcounts_c.data(), good.sdispls_c.data(),
                           recv.data(), good.recvcounts_c.data(), good.rdispls_c.data(), MPI_FLOAT,
                           MPI_COMM_WORLD, info, &forward),
      DCT_SUCCESS);
  MPI_Info_free(&info);
  const Layout b = good.reversed();
  std::vector<float> grad(b.send_total, 2.0f), dx(b.recv_total, kSentinel);
  const std::vector<float> dx_before = dx;
  auto backward = [&](DCT_Request fwd, auto change) {
    Layout l = b;
    change(l);
    DCT_Request request = DCT_REQUEST_NULL;
    const int code = DCT_Alltoallv_backward_init_c(
        fwd, grad.data(), l.sendcounts_c.empty() ? nullptr : l.sendcounts_c.data(),
        l.sdispls_c.empty() ? nullptr : l.sdispls_c.data(), dx.data(),
        l.recvcounts_c.empty() ? nullptr : l.recvcounts_c.data(),
        l.rdispls_c.empty() ? nullptr : l.rdispls_c.data(), &request);
    EXPECT_EQ(request == DCT_REQUEST_NULL, code != DCT_SUCCESS);
    DCT_Request_free(&request);
    return code;
  };
  EXPECT_EQ(backward(forward, [](Layout &) {}), DCT_SUCCESS);
  EXPECT_EQ(backward(forward, [](Layout &l) { l.sendcounts_c[0] = -d; }), DCT_ERR_COUNT);
  EXPECT_EQ(backward(forward, [](Layout &l) { l.recvcounts_c[0] += d; }), DCT_ERR_COUNT);
  EXPECT_EQ(backward(forward, [](Layout &l) { l.sdispls_c[0] = -1; }), DCT_ERR_ARG);
  EXPECT_EQ(backward(forward, [](Layout &l) { l.rdispls_c.clear(); }), DCT_ERR_ARG);
  EXPECT_EQ(backward(forward, [](Layout &l) { l.sendcounts_c.clear(); }), DCT_ERR_ARG);
  EXPECT_EQ(backward(DCT_REQUEST_NULL, [](Layout &) {}), DCT_ERR_REQUEST);
  EXPECT_EQ(
      DCT_Alltoallv_backward_init_c(forward, grad.data(), b.sendcounts_c.data(), b.sdispls_c.data(),
                                    dx.data(), b.recvcounts_c.data(), b.rdispls_c.data(), nullptr),
      DCT_ERR_ARG);
  EXPECT_TRUE(same_bits(dx, dx_before));
  DCT_Request_free(&forward);
}

/// The C++ layer takes MPI_Count/MPI_Aint arrays as the _c form does, vectors too.
TEST(AlltoallvC, CxxLayer) {
  constexpr int d = 6;
  const Layout l(d, uneven_rows), b = l.reversed();
  std::vector<float> x = gradient<float>(l.send_total, 4, rank()), y(l.recv_total, kSentinel),
                     y_int(l.recv_total, kSentinel), g = gradient<float>(b.send_total, 5, rank()),
                     dx(b.recv_total, kSentinel), dx_int(b.recv_total, kSentinel);
  MPI_Info info = make_info({{"dct_row_length", "6"}, {"dct_keep", "0.5"}});
  dct::AlltoallvRequest forward(x.data(), l.sendcounts_c, l.sdispls_c, y.data(), l.recvcounts_c,
                                l.rdispls_c, MPI_COMM_WORLD, info);
  dct::AlltoallvRequest forward_int(x.data(), l.sendcounts.data(), l.sdispls.data(), y_int.data(),
                                    l.recvcounts.data(), l.rdispls.data(), MPI_COMM_WORLD, info);
  MPI_Info_free(&info);
  auto backward =
      dct::AlltoallvRequest::backward(forward, g.data(), b.sendcounts_c.data(), b.sdispls_c.data(),
                                      dx.data(), b.recvcounts_c.data(), b.rdispls_c.data());
  auto backward_int = dct::AlltoallvRequest::backward(
      forward_int, g.data(), b.sendcounts, b.sdispls, dx_int.data(), b.recvcounts, b.rdispls);
  forward();
  forward_int();
  backward();
  backward_int();
  EXPECT_TRUE(same_bits(y, y_int));
  EXPECT_TRUE(same_bits(dx, dx_int));
  try {  // a vector shorter than the communicator is refused, not read past
    std::vector<MPI_Count> short_counts(l.sendcounts_c.begin(), l.sendcounts_c.end() - 1);
    dct::AlltoallvRequest::backward(forward, g.data(), short_counts, b.sdispls_c, dx.data(),
                                    b.recvcounts_c, b.rdispls_c);
    ADD_FAILURE() << "a short vector was accepted";
  } catch (const dct::Error &e) {
    EXPECT_EQ(e.code(), DCT_ERR_COUNT);
  }
}

}  // namespace
}  // namespace dct::test
