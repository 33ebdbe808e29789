// Helpers of the MPI tests: test data, an independent reference of DCT-DP, a request's
// residual, and assertions that every rank takes together.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/request_table.hpp"
#include "dct/dct.h"

namespace dct::test {

inline int rank(MPI_Comm comm = MPI_COMM_WORLD) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}
inline int size(MPI_Comm comm = MPI_COMM_WORLD) {
  int s = 0;
  MPI_Comm_size(comm, &s);
  return s;
}

template <typename T>
MPI_Datatype mpi_type() {
  return sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE;
}

/// Gradient-like data, different on every rank and call.
template <typename T>
std::vector<T> gradient(std::size_t n, int call, int seed = 0) {
  std::mt19937_64 engine(1000003u * static_cast<unsigned>(rank()) + 7919u * call + seed);
  std::normal_distribution<double> distribution(0.0, 1.0);
  std::vector<T> v(n);
  for (T &x : v) x = static_cast<T>(distribution(engine));
  return v;
}

/// Copies `values` into `buffer` without reallocating it: persistent requests are bound to
/// the buffer's address (a move-assignment would free it under the request).
template <typename T>
void overwrite(std::vector<T> &buffer, const std::vector<T> &values) {
  std::copy(values.begin(), values.end(), buffer.begin());
}

/// Multiples of 1/1024 below 4 in magnitude: every sum in the tests below is exact.
template <typename T>
std::vector<T> dyadic_gradient(std::size_t n, int call) {
  std::mt19937_64 engine(4242u * static_cast<unsigned>(rank()) + 31u * call);
  std::uniform_int_distribution<int> distribution(-4095, 4095);
  std::vector<T> v(n);
  for (T &x : v) x = static_cast<T>(distribution(engine)) / T(1024);
  return v;
}

/// DCT-DP written as plainly as possible (sorting for the threshold), for one rank: the fixed
/// schedule (dct_tau_control=fixed) with `interval`; with interval 1 also what the adaptive
/// default sends (the exact top k of every call, ties to the lowest indices).
template <typename T>
struct ReferenceDct {
  ReferenceDct(std::size_t n, double target_density, long reestimation_interval)
      : residual(n, T(0)), density(target_density), interval(reestimation_interval) {}

  /// Returns what this rank sends, as a dense vector with zeros elsewhere.
  std::vector<T> step(const std::vector<T> &send) {
    const std::size_t n = residual.size();
    std::vector<T> acc(n), sent(n, T(0));
    for (std::size_t i = 0; i < n; ++i) acc[i] = send[i] + residual[i];
    reestimated = calls % interval == 0 && n > 0;
    // Between selections every entry at or above tau goes; a selection sends exactly the top k,
    // the lowest indices first among the entries equal to the k-th.
    std::size_t ties = n;
    if (reestimated) {
      std::vector<T> magnitudes(n);
      for (std::size_t i = 0; i < n; ++i) magnitudes[i] = std::abs(acc[i]);
      std::sort(magnitudes.begin(), magnitudes.end(), std::greater<T>());
      const auto k = std::clamp<std::size_t>(
          static_cast<std::size_t>(std::ceil(density * static_cast<double>(n))), 1, n);
      tau = magnitudes[k - 1];
      ties = k - static_cast<std::size_t>(std::count_if(magnitudes.begin(), magnitudes.end(),
                                                        [&](T m) { return m > tau; }));
    }
    nnz = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const bool tie = std::abs(acc[i]) == tau;
      if (tie && ties == 0) {
        residual[i] = acc[i];
        continue;
      }
      if (std::abs(acc[i]) >= tau && acc[i] != T(0)) {
        ties -= tie ? 1 : 0;
        sent[i] = acc[i];
        residual[i] = T(0);
        ++nnz;
      } else {
        residual[i] = acc[i];
      }
    }
    ++calls;
    return sent;
  }

  std::vector<T> residual;
  double density;
  long interval;
  long calls = 0;
  T tau = T(0);
  bool reestimated = false;
  std::size_t nnz = 0;
};

/// Sum over ranks, in rank order starting from zero, of every rank's `mine`.
template <typename T>
std::vector<T> sum_in_rank_order(const std::vector<T> &mine, MPI_Comm comm = MPI_COMM_WORLD) {
  const std::size_t n = mine.size();
  std::vector<T> all(n * static_cast<std::size_t>(size(comm)));
  MPI_Allgather(mine.data(), static_cast<int>(n), mpi_type<T>(), all.data(), static_cast<int>(n),
                mpi_type<T>(), comm);
  std::vector<T> sum(n, T(0));
  for (int r = 0; r < size(comm); ++r)
    for (std::size_t i = 0; i < n; ++i) sum[i] += all[static_cast<std::size_t>(r) * n + i];
  return sum;
}

template <typename T>
std::vector<T> mpi_sum(const std::vector<T> &mine, MPI_Comm comm = MPI_COMM_WORLD) {
  std::vector<T> sum(mine.size());
  MPI_Allreduce(mine.data(), sum.data(), static_cast<int>(mine.size()), mpi_type<T>(), MPI_SUM,
                comm);
  return sum;
}

template <typename T>
bool same_bits(const std::vector<T> &a, const std::vector<T> &b) {
  // memcmp's pointers must not be NULL even for 0 bytes (an empty vector's data() may be).
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// The residual a persistent request of `n` elements holds (zeros when it keeps none).
template <typename T>
std::vector<T> residual_of(DCT_Request request, std::size_t n) {
  std::vector<T> residual(n, T(-1));
  EXPECT_EQ(DCT_Request_get_residual(request, residual.data()), DCT_SUCCESS)
      << DCT_Get_last_error();
  return residual;
}

/// The engine behind a live request (its call counter: state dct.h does not show).
inline const detail::RequestEngine &engine_of(DCT_Request request) {
  return *detail::RequestTable::instance().find(&request).engine;
}

/// The state a live compressed request carries between calls (tau, velocity, last update).
inline const detail::EngineState &state_of(DCT_Request request) {
  return *engine_of(request).state();
}

/// The dct_momentum velocity of a request of `n` elements, as bits (empty when it keeps none).
template <typename T>
std::vector<T> velocity_of(DCT_Request request, std::size_t n) {
  const T *velocity = static_cast<const T *>(state_of(request).velocity());
  return velocity ? std::vector<T>(velocity, velocity + n) : std::vector<T>();
}

/// An MPI_Info with the given key/value pairs; freed by the caller.
/// A fresh path `<prefix>.np<P>/<name>.h5` in a directory every rank sees (the ranks of these
/// tests share one machine), one directory per test binary and rank count since ctest runs
/// them concurrently: rank 0 makes the directory and removes an old file, then all wait.
inline std::string scratch_path(const std::string &prefix, const std::string &name) {
  const std::string directory = prefix + ".np" + std::to_string(size());
  const std::string path = directory + "/" + name + ".h5";
  if (rank() == 0) {
    ::mkdir(directory.c_str(), 0755);
    std::remove(path.c_str());
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return path;
}

inline MPI_Info make_info(const std::vector<std::pair<std::string, std::string>> &pairs) {
  MPI_Info info;
  MPI_Info_create(&info);
  for (const auto &[key, value] : pairs) MPI_Info_set(info, key.c_str(), value.c_str());
  return info;
}

/// True on every rank iff `ok` is true on every rank.
inline bool all_ranks(bool ok, MPI_Comm comm = MPI_COMM_WORLD) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm);
  return all == 1;
}

/// `actual == expected` on every rank of `comm` (a collective). Where a test asserts ahead of a
/// collective, a failure on one rank must stop every rank: otherwise the others wait in the
/// collective until the watchdog kills the job, and the report names the hang, not the cause.
template <typename A, typename E>
::testing::AssertionResult on_all_ranks(const A &actual, const E &expected, const char *text,
                                        MPI_Comm comm = MPI_COMM_WORLD) {
  const bool ok = actual == expected;
  if (all_ranks(ok, comm)) return ::testing::AssertionSuccess();
  if (ok) return ::testing::AssertionFailure() << text << ": failed on another rank";
  return ::testing::AssertionFailure() << text << " = " << actual << ", expected " << expected
                                       << " (" << DCT_Get_last_error() << ")";
}

/// ASSERT_EQ that every rank takes together (see on_all_ranks): use it, not ASSERT_EQ, for a
/// call every rank makes ahead of a collective. `actual` is evaluated once.
#define ASSERT_ALL_RANKS_EQ(actual, expected) \
  ASSERT_TRUE(::dct::test::on_all_ranks((actual), (expected), #actual))
/// EXPECT_EQ that every rank takes together (see on_all_ranks).
#define EXPECT_ALL_RANKS_EQ(actual, expected) \
  EXPECT_TRUE(::dct::test::on_all_ranks((actual), (expected), #actual))

/// Whether MPI provides MPI_THREAD_MULTIPLE (the tests that call dct from several threads skip
/// without it).
inline bool thread_multiple() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

/// Runs `checks` on rank 0 while another of its threads waits inside DCT_Wait for a call of
/// `request` that the other ranks start only afterwards; then lets that call complete on every
/// rank. `request` is a persistent request every rank created.
template <typename Checks>
void while_rank0_waits(DCT_Request &request, Checks &&checks) {
  std::atomic<bool> waiting{false};
  std::thread waiter;
  if (rank() == 0) {
    ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
    waiter = std::thread([&] {
      waiting = true;
      EXPECT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
    });
    while (!waiting) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // inside DCT_Wait by now
    checks();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank() != 0) {
    ASSERT_EQ(DCT_Start(&request), DCT_SUCCESS);
    ASSERT_EQ(DCT_Wait(&request, DCT_STATUS_IGNORE), DCT_SUCCESS);
  } else {
    waiter.join();
  }
}

/// Bytes of the header every compressed call exchanges with each peer (4 x int64).
constexpr MPI_Count kHeaderBytes = 32;

/// Bytes of the indices of a sparse block of `nnz` entries of a tensor of `count`: the smallest
/// of 32-bit offsets, a bitmap of the tensor, and an Elias-Fano code (l = floor(log2(count /
/// nnz)) low bits per entry plus nnz + (count - 1) / 2^l + 1 unary bits). Written from the
/// format's definition, apart from the library's encoder.
inline MPI_Count sparse_index_bytes(MPI_Count nnz, MPI_Count count) {
  if (nnz <= 0) return 0;
  int low = 0;
  while ((count >> (low + 1)) >= nnz) ++low;
  const MPI_Count elias_fano = (nnz * low + nnz + ((count - 1) >> low) + 1 + 7) / 8;
  return std::min({4 * nnz, (count + 7) / 8, elias_fano});
}

/// Bytes of one 8-byte-padded sparse block of `nnz` entries, values of `value_bytes`.
inline MPI_Count sparse_block_bytes(MPI_Count nnz, MPI_Count count, MPI_Count value_bytes) {
  return (nnz * value_bytes + sparse_index_bytes(nnz, count) + 7) / 8 * 8;
}

/// Rank 0's value of `value`, on every rank.
template <typename T>
T agreed(T value, MPI_Comm comm = MPI_COMM_WORLD) {
  MPI_Bcast(&value, sizeof(T), MPI_BYTE, 0, comm);
  return value;
}

/// Checks `result` against the sum over ranks of every rank's `sent`: bitwise where the
/// algorithm adds in rank order (allgather, split), to rounding for the others (recursive
/// doubling's pairwise order, MPI's reduce-scatter order for dense); and bitwise equal on every
/// rank in all cases.
template <typename T>
void expect_sum_of(const std::vector<T> &result, const std::vector<T> &sent,
                   DCT_Algorithm algorithm, const std::string &what,
                   MPI_Comm comm = MPI_COMM_WORLD) {
  {
    const std::vector<T> expected = sum_in_rank_order(sent, comm);
    if (algorithm == DCT_ALGORITHM_RECURSIVE_DOUBLING || algorithm == DCT_ALGORITHM_DENSE) {
      double worst = 0;
      for (std::size_t i = 0; i < result.size(); ++i)
        worst = std::max(worst, std::abs(double(result[i]) - double(expected[i])) /
                                    (1.0 + std::abs(double(expected[i]))));
      EXPECT_LT(worst, sizeof(T) == 4 ? 1e-5 : 1e-13) << what;
    } else {
      EXPECT_TRUE(same_bits(result, expected)) << what;
    }
  }
  std::vector<T> first(result);
  MPI_Bcast(first.data(), static_cast<int>(first.size() * sizeof(T)), MPI_BYTE, 0, comm);
  EXPECT_TRUE(all_ranks(same_bits(result, first), comm)) << what << ": ranks disagree";
}

/// Every byte some rank reports sent, some rank reports received.
inline void expect_bytes_balance(const DCT_Status &status, MPI_Comm comm = MPI_COMM_WORLD) {
  long long mine[2] = {static_cast<long long>(status.bytes_sent),
                       static_cast<long long>(status.bytes_received)};
  long long total[2] = {0, 0};
  MPI_Allreduce(mine, total, 2, MPI_LONG_LONG, MPI_SUM, comm);
  EXPECT_EQ(total[0], total[1]) << "bytes sent and received over all ranks";
}

}  // namespace dct::test
