// dct-bench alltoallv: DCT-MP (DCT_Alltoallv_init and its backward) against MPI_Alltoallv of
// the dense blocks, in the same run, on the same buffers.
//
//   mpiexec -n 4 dct-bench alltoallv [--rows 512,2048,8192] [--d 64,256,1024]
//       [--keep 0.05,0.1,0.25] [--values fp16[,native,bf16]] [--select exact|laplace|threshold]
//       [--data gaussian|laplace] [--type float|double] [--iters 10] [--warmup 2]
//       [--compressor topk[,error_bounded]] [--error-bound 0.01[,0.05]]
//       [--lossless zstd|lz4|none|auto] [--codec-seconds 0.2]
//
// Shapes as in DLRM's model-parallel all-to-all: every rank holds a B x d activation block
// (B = --rows) and sends B/P rows to every rank, itself included; the backward sends the
// gradients of the same shapes the other way. Data: per rank, a pool of 2n N(0,1) (or
// Laplace(0,1) with --data laplace) values drawn once; every call's activations and gradients
// are n consecutive values of it from a random offset. Each call is timed alone after a
// barrier; the figures are the median over `iters` calls of the slowest rank's time (a median,
// because on a shared machine single calls stall for milliseconds). Columns:
//   fwd_x, bwd_x, both_x  bytes ratio: MPI_Alltoallv's bytes to other ranks (dense_bytes) over
//                         dct's (bytes_sent: headers, masks, values, padding, agreement), for
//                         the forward, the backward, and the two together
//   mpi_f_us, dct_f_us    time of one forward (MPI_Alltoallv, DCT-MP); mpi_b_us, dct_b_us the
//                         backward; time_x = (mpi_f + mpi_b) / (dct_f + dct_b)
//   kept                  achieved keep: entries sent / elements, mean over ranks (1 for
//                         error_bounded: every value arrives, within the bound)
//   comp                  the compressor (topk: the keep column is dct_keep; error_bounded:
//                         it is dct_error_bound, and dct_lossless is --lossless)
//   enc_GBs, dec_GBs      the codec alone on rank 0's send block, one core: GB/s of dense
//                         input encoded (top-k: selection + message; error_bounded: quantise
//                         + lossless stage) and decoded into the dense block (codec_bench.cpp)
//   codec_x               dense bytes / message bytes of that block (no MPI headers)
//   max_err               error_bounded: the largest DCT_Status.max_abs_error over ranks
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "codec_bench.hpp"
#include "dct/dct.h"

namespace dct::bench {
namespace {

struct Options {
  std::vector<long long> rows = {512, 2048, 8192};
  std::vector<long long> d = {64, 256, 1024};
  std::vector<std::string> keep = {"0.05", "0.1", "0.25"};
  std::vector<std::string> values = {"fp16"};
  std::string select = "exact";
  std::string data = "gaussian";
  std::string type = "float";
  int iters = 10;
  int warmup = 2;
  std::vector<std::string> compressors = {"topk"};
  std::vector<std::string> error_bounds = {"0.01"};
  std::string lossless = "zstd";
  double codec_seconds = 0.2;
};

void check(int code, const char *what) {
  if (code != DCT_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + DCT_Get_last_error());
}

template <typename T>
std::vector<T> pool_of(std::size_t n, std::mt19937_64 &engine, bool laplace) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::exponential_distribution<double> exponential(1.0);
  std::vector<T> pool(n);
  for (T &x : pool) {
    if (laplace)
      x = static_cast<T>((engine() & 1 ? 1.0 : -1.0) * exponential(engine));
    else
      x = static_cast<T>(normal(engine));
  }
  return pool;
}

template <typename T>
void fill(std::vector<T> &v, const std::vector<T> &pool, std::mt19937_64 &engine) {
  const std::size_t offset = engine() % (pool.size() - v.size() + 1);
  std::copy(pool.begin() + std::ptrdiff_t(offset), pool.begin() + std::ptrdiff_t(offset + v.size()),
            v.begin());
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

/// Time of the slowest rank for one call of `body`, which starts after a barrier.
template <typename Body>
double timed(Body &&body) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  body();
  double elapsed = MPI_Wtime() - start, slowest = 0;
  MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

template <typename T>
void run_row(const Options &o, long long rows, long long d, const std::string &compressor,
             const std::string &keep, const std::string &values, int rank, int ranks) {
  const bool eb = compressor == "error_bounded";
  const MPI_Datatype type = sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE;
  const long long per_peer = rows / ranks;  // rows sent to each rank
  const std::vector<int> counts(static_cast<std::size_t>(ranks), int(per_peer * d));
  std::vector<int> displs(static_cast<std::size_t>(ranks));
  for (int j = 0; j < ranks; ++j) displs[std::size_t(j)] = int(j * per_peer * d);
  const std::size_t n = std::size_t(per_peer * d * ranks);
  std::vector<T> x(n), y(n), g(n), dx(n);
  std::mt19937_64 engine(7919u * unsigned(rank) + 17u);
  const std::vector<T> pool = pool_of<T>(2 * n, engine, o.data == "laplace");

  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "dct_row_length", std::to_string(d).c_str());
  MPI_Info_set(info, "dct_mp_compressor", compressor.c_str());
  if (eb) {
    MPI_Info_set(info, "dct_error_bound", keep.c_str());
    MPI_Info_set(info, "dct_lossless", o.lossless.c_str());
  } else {
    MPI_Info_set(info, "dct_keep", keep.c_str());
    MPI_Info_set(info, "dct_values", values.c_str());
    MPI_Info_set(info, "dct_mp_select", o.select.c_str());
  }
  DCT_Request forward = DCT_REQUEST_NULL, backward = DCT_REQUEST_NULL;
  check(DCT_Alltoallv_init(x.data(), counts.data(), displs.data(), y.data(), counts.data(),
                           displs.data(), type, MPI_COMM_WORLD, info, &forward),
        "DCT_Alltoallv_init");
  MPI_Info_free(&info);
  check(DCT_Alltoallv_backward_init(forward, g.data(), counts.data(), displs.data(), dx.data(),
                                    counts.data(), displs.data(), &backward),
        "DCT_Alltoallv_backward_init");

  std::vector<double> mpi_f, mpi_b, dct_f, dct_b;
  double kept = 0, max_error = 0;
  DCT_Status fs{}, bs{};
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    fill(x, pool, engine);
    fill(g, pool, engine);
    const double tf = timed([&] {
      MPI_Alltoallv(x.data(), counts.data(), displs.data(), type, y.data(), counts.data(),
                    displs.data(), type, MPI_COMM_WORLD);
    });
    const double tb = timed([&] {
      MPI_Alltoallv(g.data(), counts.data(), displs.data(), type, dx.data(), counts.data(),
                    displs.data(), type, MPI_COMM_WORLD);
    });
    const double df = timed([&] {
      check(DCT_Start(&forward), "DCT_Start");
      check(DCT_Wait(&forward, &fs), "DCT_Wait");
    });
    const double db = timed([&] {
      check(DCT_Start(&backward), "DCT_Start");
      check(DCT_Wait(&backward, &bs), "DCT_Wait");
    });
    if (i < o.warmup) continue;
    mpi_f.push_back(tf), mpi_b.push_back(tb), dct_f.push_back(df), dct_b.push_back(db);
    kept += fs.density;
    max_error = std::max(max_error, fs.max_abs_error);
  }
  // The codec alone, on this rank's first send block (one core).
  CodecFigures codec;
  if (rank == 0 && per_peer > 0) {
    const std::string coder = o.lossless == "auto" ? "zstd" : o.lossless;
    codec = eb ? error_bounded_figures(x.data(), std::size_t(per_peer), std::size_t(d),
                                       std::stod(keep), coder, o.codec_seconds)
               : topk_figures(x.data(), std::size_t(per_peer), std::size_t(d), std::stod(keep),
                              o.codec_seconds);
  }
  MPI_Allreduce(MPI_IN_PLACE, &max_error, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  DCT_Request_free(&backward);
  DCT_Request_free(&forward);

  // Bytes of the slowest (most loaded) rank; with these even shapes all ranks are alike.
  long long local[4] = {fs.dense_bytes, fs.bytes_sent, bs.dense_bytes, bs.bytes_sent}, most[4];
  MPI_Allreduce(local, most, 4, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  double kept_mean = 0;
  kept /= o.iters;
  MPI_Allreduce(&kept, &kept_mean, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  kept_mean /= ranks;
  if (rank != 0) return;
  const double us = 1e6;
  const double mf = median(mpi_f), mb = median(mpi_b), df = median(dct_f), db = median(dct_b);
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  std::printf(
      "%2d %5lld %5lld %5s %6s | %6.1f %6.1f %6.1f | %9.1f %9.1f %9.1f %9.1f %6.2f | %.4f | "
      "%-13s %7.3f %7.3f %7.1f %9.3g\n",
      ranks, rows, d, keep.c_str(), eb ? "-" : values.c_str(),
      ratio(double(most[0]), double(most[1])), ratio(double(most[2]), double(most[3])),
      ratio(double(most[0] + most[2]), double(most[1] + most[3])), mf * us, df * us, mb * us,
      db * us, ratio(mf + mb, df + db), kept_mean, compressor.c_str(), codec.encode_gbps,
      codec.decode_gbps, codec.ratio, max_error);
  std::fflush(stdout);
}

int run(const Options &o) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (rank == 0) {
    std::printf("# dct-bench alltoallv: %d ranks, %s, select %s, %s data, %d iters (+%d warmup)\n",
                ranks, o.type.c_str(), o.select.c_str(), o.data.c_str(), o.iters, o.warmup);
    std::printf(
        " P     B     d  keep values |  fwd_x  bwd_x both_x |  mpi_f_us  dct_f_us  "
        "mpi_b_us  dct_b_us time_x | kept   | comp          enc_GBs dec_GBs codec_x   max_err\n");
  }
  for (long long rows : o.rows)
    for (long long d : o.d)
      for (const std::string &compressor : o.compressors) {
        const bool eb = compressor == "error_bounded";
        const std::vector<std::string> params = eb ? o.error_bounds : o.keep;
        const std::vector<std::string> values = eb ? std::vector<std::string>{"-"} : o.values;
        for (const std::string &keep : params)
          for (const std::string &value : values) {
            if (rows < ranks) continue;
            if (o.type == "float")
              run_row<float>(o, rows, d, compressor, keep, value, rank, ranks);
            else
              run_row<double>(o, rows, d, compressor, keep, value, rank, ranks);
          }
      }
  return 0;
}

}  // namespace

Run add_alltoallv(CLI::App &app) {
  auto o = std::make_shared<Options>();
  CLI::App *command = app.add_subcommand(
      "alltoallv", "DCT-MP (forward and backward) against MPI_Alltoallv of the dense blocks");
  command->add_option("--rows", o->rows, "B: rows per rank, a comma list")
      ->delimiter(',')
      ->check(CLI::Range(1LL, 1LL << 40))
      ->capture_default_str();
  command->add_option("--d", o->d, "row lengths, a comma list")
      ->delimiter(',')
      ->check(CLI::Range(1LL, 1LL << 40))
      ->capture_default_str();
  command->add_option("--keep", o->keep, "dct_keep (topk), a comma list")
      ->delimiter(',')
      ->check(kUnitInterval)
      ->capture_default_str();
  command->add_option("--values", o->values, "dct_values (topk), a comma list")
      ->delimiter(',')
      ->check(CLI::IsMember({"native", "fp16", "bf16"}))
      ->capture_default_str();
  command->add_option("--select", o->select, "dct_mp_select (topk)")
      ->check(CLI::IsMember({"exact", "laplace", "threshold"}))
      ->capture_default_str();
  command->add_option("--data", o->data, "distribution of the activations and gradients")
      ->check(CLI::IsMember({"gaussian", "laplace"}))
      ->capture_default_str();
  add_timing_options(*command, o->type, o->iters, o->warmup);
  command->add_option("--compressor", o->compressors, "dct_mp_compressor, a comma list")
      ->delimiter(',')
      ->check(CLI::IsMember({"topk", "error_bounded"}))
      ->capture_default_str();
  command
      ->add_option("--error-bound", o->error_bounds,
                   "dct_error_bound (error_bounded; 0: lossless), a comma list")
      ->delimiter(',')
      ->check(kNonNegative)
      ->capture_default_str();
  command->add_option("--lossless", o->lossless, "dct_lossless (error_bounded)")
      ->check(CLI::IsMember({"zstd", "lz4", "none", "auto"}))
      ->capture_default_str();
  command->add_option("--codec-seconds", o->codec_seconds, "time budget of the codec figures")
      ->check(kPositive)
      ->capture_default_str();
  return [o] { return run(*o); };
}

}  // namespace dct::bench
