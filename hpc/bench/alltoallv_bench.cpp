// Over 450 lines: every alltoallv baseline is timed beside dct in this one program.
// dct-bench alltoallv: DCT-MP (DCT_Alltoallv_init and its backward) against MPI_Alltoallv of
// the dense blocks, in the same run, on the same buffers.
//
//   mpiexec -n 4 dct-bench alltoallv [--rows 512,2048,8192] [--d 64,256,1024]
//       [--keep 0.05,0.1,0.25] [--values fp16[,native,bf16]] [--select exact|laplace|threshold]
//       [--data gaussian[,laplace,uniform,blocks]] [--blocks FILE] [--type float|double]
//       [--iters 10] [--warmup 2] [--compressor topk[,error_bounded]]
//       [--error-bound 0.01[,0.05]] [--lossless zstd[,lz4,none,auto]] [--table-columns N]
//       [--codec-seconds 0.2] [--json]
//
// Shapes as in DLRM's model-parallel all-to-all: every rank holds a B x d activation block
// (B = --rows) and sends B/P rows to every rank, itself included; the backward sends the
// gradients of the same shapes the other way. Data: per rank, a pool of 2n N(0,1) (or
// Laplace(0,1) with --data laplace, U(-1,1) with uniform) values drawn once; every call's
// activations and gradients are n consecutive values of it from a random offset.
// --blocks FILE: real embedding lookups dumped by `dct-dlrm --dump-lookups FILE` (format:
// lookups_file.hpp), run with as many ranks as the file has; the shape is the file's (B = P x
// steps x rows, d, and its table columns for error_bounded), and `--data blocks` sends rank r's
// blocks of every dumped step, step after step, to each peer, the same ones every call
// (default --data blocks,gaussian: the random rows have the file's shape); the backward's
// gradients stay N(0,1). Each call is timed alone after a barrier; the figures are the median
// over `iters` calls of the slowest rank's time (a median, because on a shared machine single
// calls stall for milliseconds). Columns (JSON: the same names, and `rows`, `d`, `data`, ...):
//   fwd_x, bwd_x, both_x  bytes ratio: MPI_Alltoallv's bytes to other ranks (dense_bytes) over
//                         dct's (bytes_sent: headers, masks, values, padding, agreement), for
//                         the forward, the backward, and the two together
//   mpi_f_us, dct_f_us    time of one forward (MPI_Alltoallv, DCT-MP); mpi_b_us, dct_b_us the
//                         backward; time_x = (mpi_f + mpi_b) / (dct_f + dct_b)
//   kept                  achieved keep: entries sent / elements, mean over ranks (1 for
//                         error_bounded: every value arrives, within the bound)
//   comp                  the compressor (topk: the keep column is dct_keep; error_bounded:
//                         it is dct_error_bound, `lossless` is dct_lossless and `tc` is
//                         dct_table_columns)
//   enc_GBs, dec_GBs      the codec alone on rank 0's send block, one core: GB/s of dense
//                         input encoded (top-k: selection + message; error_bounded: quantise
//                         + lossless stage, zstd for auto) and decoded into the dense block
//                         (codec_bench.cpp)
//   codec_x               dense bytes / message bytes of that block (no MPI headers)
//   max_err               error_bounded: the largest DCT_Status.max_abs_error over ranks
//   err_limit             error_bounded: the bound it must stay within, the largest
//                         bound x (max - min) of a table's block over calls and ranks
// (Past 400 lines: one command's options, data sources, timing loop and table; the codec timing
// is codec_bench.cpp's, the file reader lookups_file.cpp's.)
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "codec_bench.hpp"
#include "dct/dct.h"
#include "lookups_file.hpp"

namespace dct::bench {
namespace {

struct Options {
  std::vector<long long> rows = {512, 2048, 8192};
  std::vector<long long> d = {64, 256, 1024};
  std::vector<std::string> keep = {"0.05", "0.1", "0.25"};
  std::vector<std::string> values = {"fp16"};
  std::string select = "exact";
  std::vector<std::string> data = {"gaussian"};
  std::string blocks_path;
  LookupsFile blocks;           // read in run()
  long long table_columns = 0;  // 0: the file's with --blocks, else d
  std::string type = "float";
  int iters = 10;
  int warmup = 2;
  std::vector<std::string> compressors = {"topk"};
  std::vector<std::string> error_bounds = {"0.01"};
  std::vector<std::string> lossless = {"zstd"};
  double codec_seconds = 0.2;
  bool json = false;
};

void check(int code, const char *what) {
  if (code != DCT_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + DCT_Get_last_error());
}

template <typename T>
std::vector<T> pool_of(std::size_t n, std::mt19937_64 &engine, const std::string &data) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::exponential_distribution<double> exponential(1.0);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<T> pool(n);
  for (T &x : pool) {
    if (data == "laplace")
      x = static_cast<T>((engine() & 1 ? 1.0 : -1.0) * exponential(engine));
    else if (data == "uniform")
      x = static_cast<T>(uniform(engine));
    else
      x = static_cast<T>(normal(engine));
  }
  return pool;
}

/// The error a block may carry: the largest bound x (max - min) over the finite values of each
/// table of each peer's block (what the library's absolute bound is, in double).
template <typename T>
double error_limit(const std::vector<T> &x, long long per_peer, long long d, long long columns,
                   double bound) {
  double limit = 0;
  const long long peers = per_peer > 0 ? (long long)(x.size()) / (per_peer * d) : 0;
  for (long long j = 0; j < peers; ++j)
    for (long long first = 0; first < d; first += columns) {
      double lo = HUGE_VAL, hi = -HUGE_VAL;
      for (long long r = 0; r < per_peer; ++r)
        for (long long c = first; c < first + columns; ++c) {
          const double v = double(x[std::size_t((j * per_peer + r) * d + c)]);
          if (!std::isfinite(v)) continue;
          lo = std::min(lo, v), hi = std::max(hi, v);
        }
      if (hi >= lo) limit = std::max(limit, bound * (hi - lo));
    }
  return limit;
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

/// One row of the grid: the shape, the data and the compressor's settings.
struct Row {
  long long rows = 0, d = 0, table_columns = 0;
  std::string data, compressor, keep, values, lossless;
};

template <typename T>
void run_row(const Options &o, const Row &row, int rank, int ranks, bool &first_json_row) {
  const bool eb = row.compressor == "error_bounded";
  const bool from_blocks = row.data == "blocks";
  const long long d = row.d;
  const MPI_Datatype type = sizeof(T) == 4 ? MPI_FLOAT : MPI_DOUBLE;
  const long long per_peer = row.rows / ranks;  // rows sent to each rank
  const std::vector<int> counts(static_cast<std::size_t>(ranks), int(per_peer * d));
  std::vector<int> displs(static_cast<std::size_t>(ranks));
  for (int j = 0; j < ranks; ++j) displs[std::size_t(j)] = int(j * per_peer * d);
  const std::size_t n = std::size_t(per_peer * d * ranks);
  std::vector<T> x(n), y(n), g(n), dx(n);
  std::mt19937_64 engine(7919u * unsigned(rank) + 17u);
  const std::vector<T> pool = pool_of<T>(2 * n, engine, from_blocks ? "gaussian" : row.data);
  if (from_blocks) {
    // To peer j: this rank's block for j of every dumped step, one after the other.
    const LookupsFile &f = o.blocks;
    for (int j = 0; j < ranks; ++j)
      for (int step = 0; step < f.steps; ++step) {
        const float *block = f.block(step, rank, j);
        const std::size_t at = std::size_t((j * per_peer + (long long)(step)*f.rows) * d);
        for (std::size_t v = 0; v < std::size_t(f.rows) * std::size_t(d); ++v)
          x[at + v] = static_cast<T>(block[v]);
      }
  }

  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "dct_row_length", std::to_string(d).c_str());
  MPI_Info_set(info, "dct_mp_compressor", row.compressor.c_str());
  if (eb) {
    MPI_Info_set(info, "dct_error_bound", row.keep.c_str());
    MPI_Info_set(info, "dct_lossless", row.lossless.c_str());
    MPI_Info_set(info, "dct_table_columns", std::to_string(row.table_columns).c_str());
  } else {
    MPI_Info_set(info, "dct_keep", row.keep.c_str());
    MPI_Info_set(info, "dct_values", row.values.c_str());
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
  double kept = 0, max_error = 0, err_limit = 0;
  DCT_Status fs{}, bs{};
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    if (!from_blocks) fill(x, pool, engine);
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
    if (eb && (i == o.warmup || !from_blocks))  // blocks: the same every call
      err_limit =
          std::max(err_limit, error_limit(x, per_peer, d, row.table_columns, std::stod(row.keep)));
  }
  // The codec alone, on this rank's first send block (one core).
  CodecFigures codec;
  if (rank == 0 && per_peer > 0) {
    const std::string coder = row.lossless == "auto" ? "zstd" : row.lossless;
    codec = eb ? error_bounded_figures(x.data(), std::size_t(per_peer), std::size_t(d),
                                       std::size_t(row.table_columns), std::stod(row.keep), coder,
                                       o.codec_seconds)
               : topk_figures(x.data(), std::size_t(per_peer), std::size_t(d), std::stod(row.keep),
                              o.codec_seconds);
  }
  double errors[2] = {max_error, err_limit};
  MPI_Allreduce(MPI_IN_PLACE, errors, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
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
  const double fwd_x = ratio(double(most[0]), double(most[1]));
  const double bwd_x = ratio(double(most[2]), double(most[3]));
  const double both_x = ratio(double(most[0] + most[2]), double(most[1] + most[3]));
  if (o.json) {
    nlohmann::ordered_json out = {
        {"ranks", ranks},
        {"rows", row.rows},
        {"d", d},
        {"data", row.data},
        {"type", o.type},
        {"compressor", row.compressor},
        {"keep", eb ? nlohmann::ordered_json() : nlohmann::ordered_json(std::stod(row.keep))},
        {"values", eb ? nlohmann::ordered_json() : nlohmann::ordered_json(row.values)},
        {"error_bound",
         eb ? nlohmann::ordered_json(std::stod(row.keep)) : nlohmann::ordered_json()},
        {"lossless", eb ? nlohmann::ordered_json(row.lossless) : nlohmann::ordered_json()},
        {"table_columns", eb ? row.table_columns : d},
        {"fwd_x", fwd_x},
        {"bwd_x", bwd_x},
        {"both_x", both_x},
        {"mpi_f_us", mf * us},
        {"dct_f_us", df * us},
        {"mpi_b_us", mb * us},
        {"dct_b_us", db * us},
        {"time_x", ratio(mf + mb, df + db)},
        {"kept", kept_mean},
        {"enc_GBs", codec.encode_gbps},
        {"dec_GBs", codec.decode_gbps},
        {"codec_x", codec.ratio},
        {"max_err", errors[0]},
        {"err_limit", errors[1]}};
    std::printf("%s  %s", first_json_row ? "" : ",\n", out.dump().c_str());
    first_json_row = false;
  } else {
    std::printf(
        "%2d %5lld %5lld %-8s %5s %6s | %6.1f %6.1f %6.1f | %9.1f %9.1f %9.1f %9.1f %6.2f | "
        "%.4f | %-13s %-4s %4lld %7.3f %7.3f %7.1f %9.3g %9.3g\n",
        ranks, row.rows, d, row.data.c_str(), row.keep.c_str(), eb ? "-" : row.values.c_str(),
        fwd_x, bwd_x, both_x, mf * us, df * us, mb * us, db * us, ratio(mf + mb, df + db),
        kept_mean, row.compressor.c_str(), eb ? row.lossless.c_str() : "-",
        eb ? row.table_columns : d, codec.encode_gbps, codec.decode_gbps, codec.ratio, errors[0],
        errors[1]);
  }
  std::fflush(stdout);
}

int run(Options &o) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<long long> rows_list = o.rows, d_list = o.d;
  if (!o.blocks_path.empty()) {
    // Validated by the option's check already; read again with the values. Every rank reads
    // the same file; they agree that all could before anyone goes on.
    std::string error;
    try {
      o.blocks = read_lookups(o.blocks_path, true);
    } catch (const std::exception &e) {
      error = e.what();
    }
    int ok = error.empty() ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) throw std::runtime_error(error.empty() ? "a rank could not read --blocks" : error);
    rows_list = {(long long)(ranks)*o.blocks.steps * o.blocks.rows};
    d_list = {o.blocks.d};
  }
  if (rank == 0 && o.json) std::printf("[\n");
  if (rank == 0 && !o.json) {
    std::printf("# dct-bench alltoallv: %d ranks, %s, select %s, %d iters (+%d warmup)%s%s\n",
                ranks, o.type.c_str(), o.select.c_str(), o.iters, o.warmup,
                o.blocks_path.empty() ? "" : ", blocks ", o.blocks_path.c_str());
    std::printf(
        " P     B     d data      keep values |  fwd_x  bwd_x both_x |  mpi_f_us  dct_f_us  "
        "mpi_b_us  dct_b_us time_x | kept   | comp          lossless tc enc_GBs dec_GBs "
        "codec_x   max_err err_limit\n");
  }
  bool first_json_row = true;
  for (long long rows : rows_list)
    for (long long d : d_list)
      for (const std::string &data : o.data)
        for (const std::string &compressor : o.compressors) {
          const bool eb = compressor == "error_bounded";
          Row row;
          row.rows = rows, row.d = d, row.data = data, row.compressor = compressor;
          row.table_columns = o.table_columns > 0      ? o.table_columns
                              : !o.blocks_path.empty() ? o.blocks.table_columns
                                                       : d;
          if (eb && d % row.table_columns != 0)
            throw std::invalid_argument("--table-columns " + std::to_string(row.table_columns) +
                                        " does not divide d " + std::to_string(d));
          const std::vector<std::string> params = eb ? o.error_bounds : o.keep;
          const std::vector<std::string> settings =
              eb ? o.lossless : o.values;  // lossless stages, or value codings
          for (const std::string &keep : params)
            for (const std::string &setting : settings) {
              if (rows < ranks) continue;
              row.keep = keep;
              (eb ? row.lossless : row.values) = setting;
              if (o.type == "float")
                run_row<float>(o, row, rank, ranks, first_json_row);
              else
                run_row<double>(o, row, rank, ranks, first_json_row);
            }
        }
  if (rank == 0 && o.json) std::printf("\n]\n");
  return 0;
}

}  // namespace

Run add_alltoallv(CLI::App &app) {
  auto o = std::make_shared<Options>();
  CLI::App *command = app.add_subcommand(
      "alltoallv", "DCT-MP (forward and backward) against MPI_Alltoallv of the dense blocks");
  CLI::Option *rows = command->add_option("--rows", o->rows, "B: rows per rank, a comma list")
                          ->delimiter(',')
                          ->check(CLI::Range(1LL, 1LL << 40))
                          ->capture_default_str();
  CLI::Option *d = command->add_option("--d", o->d, "row lengths, a comma list")
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
  CLI::Option *data =
      command
          ->add_option("--data", o->data,
                       "the activations, a comma list: gaussian N(0,1), laplace, uniform "
                       "U(-1,1), blocks (--blocks FILE; default with it: blocks,gaussian)")
          ->delimiter(',')
          ->check(CLI::IsMember({"gaussian", "laplace", "uniform", "blocks"}))
          ->capture_default_str();
  // The file is checked here (header, sizes, rank count), so that a bad one is a usage error.
  const CLI::Validator lookups_file(
      [](std::string &path) -> std::string {
        try {
          const LookupsFile f = read_lookups(path, false);
          int ranks = 1;
          MPI_Comm_size(MPI_COMM_WORLD, &ranks);
          if (f.ranks != ranks)
            return path + ": dumped from " + std::to_string(f.ranks) + " ranks, run with " +
                   std::to_string(ranks);
          if ((long long)(f.ranks) * f.steps * f.rows * f.d > INT_MAX)
            return path + ": more than INT_MAX values per rank";
        } catch (const std::exception &e) {
          return e.what();
        }
        return {};
      },
      "FILE");
  command
      ->add_option("--blocks", o->blocks_path,
                   "embedding lookups dumped by dct-dlrm --dump-lookups (run with its rank "
                   "count; sets B, d and the table columns)")
      ->check(lookups_file)
      ->excludes(rows)
      ->excludes(d);
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
  command->add_option("--lossless", o->lossless, "dct_lossless (error_bounded), a comma list")
      ->delimiter(',')
      ->check(CLI::IsMember({"zstd", "lz4", "none", "auto"}))
      ->capture_default_str();
  command
      ->add_option("--table-columns", o->table_columns,
                   "dct_table_columns (error_bounded; default: the --blocks file's, else d)")
      ->check(CLI::Range(1LL, 1LL << 40));
  command->add_option("--codec-seconds", o->codec_seconds, "time budget of the codec figures")
      ->check(kPositive)
      ->capture_default_str();
  command->add_flag("--json", o->json, "one JSON array of rows instead of the table");
  command->callback([o, data] {
    const bool blocks_data = std::find(o->data.begin(), o->data.end(), "blocks") != o->data.end();
    if (o->blocks_path.empty() && blocks_data)
      throw CLI::ValidationError("--data", "blocks needs --blocks FILE");
    if (!o->blocks_path.empty() && data->count() == 0) o->data = {"blocks", "gaussian"};
  });
  return [o] { return run(*o); };
}

}  // namespace dct::bench
