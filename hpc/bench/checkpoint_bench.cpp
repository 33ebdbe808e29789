// dct-bench checkpoint: DCT_Checkpoint_save/load against a plain parallel-HDF5 write/read of the
// same bytes, in the same run.
//
//   mpiexec -n 4 dct-bench checkpoint [--mib 256] [--iters 3] [--dir .] [--steps 4] [--cold]
//
// Every rank holds one float request of `mib` MiB of residual. The load is timed twice: into
// that request (a roll-back: its state must survive a failed load) and into new requests that
// have not run (a restart). Times are wall times from a barrier to a barrier (so the slowest
// rank counts), the median of `iters` (single
// runs on a VM have outliers of 2x that a mean carries; means before dct 0.6), each operation
// started after a sync (no writeback of an earlier operation's data in its time). The plain write
// is H5Fcreate + one collective H5Dwrite of each rank's row + H5Fclose; "+fsync" adds the fsync
// that dct does before renaming (durability), so dct / plain+fsync compares the same work. The
// plain write and read are also timed with independent MPI-IO (dct's default for the rows,
// DCT_CHECKPOINT_IO), and dct's rates are given over each plain mode; a save's last line is
// its ratio to the fastest plain write that also fsyncs.
//
// With --cold every read (plain and dct's) starts with its file evicted from the page cache
// (fsync, then posix_fadvise DONTNEED, untimed), as a requeued job on another node finds it:
// the read then waits for the storage. (tmpfs has no other copy to evict to: no effect there.
// A parallel file system's client may keep its own cache.)
//
// DCT_Checkpoint_isave is timed as a call (what training waits for) and with its wait right
// after (the whole save). Then what a checkpoint costs a training run: `steps` calls of the
// request (a training step's allreduce; each changes the residual) alone, after a blocking
// save, and between an isave and its wait; the added time over the steps alone is the
// checkpoint's cost to the run.
#include <fcntl.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.hpp"
#include "dct/dct.hpp"

namespace dct::bench {
namespace {

struct Options {
  long long mib = 256;
  int iters = 3;
  std::string dir = ".";
  int steps = 4;
  bool cold = false;
};

void check(bool ok, const char *what) {
  if (!ok) throw std::runtime_error(what);
}

/// Drops `path`'s pages from the page cache (they are clean after the sync: DONTNEED evicts).
void evict(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  check(fd >= 0 && ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0, "posix_fadvise");
  ::close(fd);
}

/// Wall time of `body` from a barrier to a barrier. Every operation starts with no dirty page
/// left by the one before (sync, untimed): otherwise the page cache's writeback of the
/// previous write (a plain write leaves its 4 x `mib` MiB dirty) lands in whatever runs next,
/// and a read or an fsync timed after a write pays for it. A non-empty `cold` file is then
/// evicted from the page cache (--cold).
double timed(const std::function<void()> &body, const std::string &cold = {}) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) ::sync();
  if (rank == 0 && !cold.empty()) evict(cold);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  body();
  MPI_Barrier(MPI_COMM_WORLD);
  return MPI_Wtime() - start;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n == 0 ? 0 : n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

void fsync_file(const std::string &path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  check(fd >= 0 && ::fsync(fd) == 0, "fsync");
  ::close(fd);
}

/// The plain parallel-HDF5 baseline: one [ranks, n] float dataset, each rank its row, with
/// collective or independent MPI-IO.
void plain_io(const std::string &path, std::vector<float> &row, int rank, int ranks, bool write,
              bool collective) {
  hid_t access = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_fapl_mpio(access, MPI_COMM_WORLD, MPI_INFO_NULL);
  hid_t file = write ? H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access)
                     : H5Fopen(path.c_str(), H5F_ACC_RDONLY, access);
  check(file >= 0, "plain HDF5 open");
  const hsize_t dims[2] = {static_cast<hsize_t>(ranks), row.size()};
  hid_t space = H5Screate_simple(2, dims, nullptr);
  hid_t dataset = write ? H5Dcreate2(file, "residual", H5T_IEEE_F32LE, space, H5P_DEFAULT,
                                     H5P_DEFAULT, H5P_DEFAULT)
                        : H5Dopen2(file, "residual", H5P_DEFAULT);
  const hsize_t start[2] = {static_cast<hsize_t>(rank), 0}, count[2] = {1, row.size()};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  const hsize_t n = row.size();
  hid_t row_space = H5Screate_simple(1, &n, nullptr);
  hid_t transfer = H5Pcreate(H5P_DATASET_XFER);
  H5Pset_dxpl_mpio(transfer, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT);
  const herr_t rc =
      write ? H5Dwrite(dataset, H5T_NATIVE_FLOAT, row_space, space, transfer, row.data())
            : H5Dread(dataset, H5T_NATIVE_FLOAT, row_space, space, transfer, row.data());
  check(rc >= 0, "plain HDF5 transfer");
  H5Pclose(transfer);
  H5Sclose(row_space);
  H5Sclose(space);
  H5Dclose(dataset);
  H5Fclose(file);
  H5Pclose(access);
}

int run(const Options &o) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const std::size_t n = static_cast<std::size_t>(o.mib) << 18;  // floats in `mib` MiB
  std::vector<float> send(n), recv(n);
  for (std::size_t i = 0; i < n; ++i)
    send[i] = static_cast<float>((i * 2654435761u + rank) % 1000) - 500;
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "dct_name", "bench");
  auto request =
      std::make_unique<dct::AllreduceRequest>(send.data(), recv.data(), n, MPI_COMM_WORLD, info);
  (*request)();  // 99% of the gradient is now residual

  const std::string dct_path = o.dir + "/dct-bench-checkpoint.h5";
  const std::string plain_path = o.dir + "/dct-bench-plain.h5";
  std::vector<float> row(send);
  const std::string dct_read = o.cold ? dct_path : "", plain_read_path = o.cold ? plain_path : "";
  std::vector<double> save, load, plain_write, plain_fsync, plain_read, independent_write,
      independent_fsync, independent_read;
  for (int i = 0; i < o.iters; ++i) {
    save.push_back(timed([&] { dct::checkpoint_save(MPI_COMM_WORLD, dct_path); }));
    load.push_back(timed([&] { dct::checkpoint_load(MPI_COMM_WORLD, dct_path); }, dct_read));
    plain_write.push_back(timed([&] { plain_io(plain_path, row, rank, ranks, true, true); }));
    plain_fsync.push_back(timed([&] {
      plain_io(plain_path, row, rank, ranks, true, true);
      if (rank == 0) fsync_file(plain_path);
    }));
    plain_read.push_back(
        timed([&] { plain_io(plain_path, row, rank, ranks, false, true); }, plain_read_path));
    independent_write.push_back(
        timed([&] { plain_io(plain_path, row, rank, ranks, true, false); }));
    independent_fsync.push_back(timed([&] {
      plain_io(plain_path, row, rank, ranks, true, false);
      if (rank == 0) fsync_file(plain_path);
    }));
    independent_read.push_back(
        timed([&] { plain_io(plain_path, row, rank, ranks, false, false); }, plain_read_path));
  }
  // The asynchronous save, and what each kind of save costs training steps (per iteration:
  // medians are reported, this VM's step times vary between phases).
  std::vector<double> isave_call, isave_whole, alone, with_save, save_part, with_isave, isave_part,
      wait_part, steps_part;
  auto train = [&] {
    for (int s = 0; s < o.steps; ++s) (*request)();
  };
  for (int i = 0; i < o.iters; ++i) {
    DCT_Checkpoint pending = DCT_CHECKPOINT_NULL;
    isave_call.push_back(timed(
        [&] { dct::check(DCT_Checkpoint_isave(MPI_COMM_WORLD, dct_path.c_str(), &pending)); }));
    dct::check(DCT_Checkpoint_wait(&pending));
    isave_whole.push_back(timed([&] {
      dct::check(DCT_Checkpoint_isave(MPI_COMM_WORLD, dct_path.c_str(), &pending));
      dct::check(DCT_Checkpoint_wait(&pending));
    }));
    alone.push_back(timed(train));
    with_save.push_back(timed([&] {
      const double start = MPI_Wtime();
      dct::checkpoint_save(MPI_COMM_WORLD, dct_path);
      save_part.push_back(MPI_Wtime() - start);
      train();
    }));
    alone.push_back(timed(train));
    with_isave.push_back(timed([&] {
      const double start = MPI_Wtime();
      dct::CheckpointSave background(MPI_COMM_WORLD, dct_path);
      const double started = MPI_Wtime();
      train();
      const double trained = MPI_Wtime();
      background.wait();
      isave_part.push_back(started - start);
      steps_part.push_back(trained - started);
      wait_part.push_back(MPI_Wtime() - trained);
    }));
  }
  // A restart: the load into requests made and not run yet (their residual zeros, in memory
  // touched when they were made, as a restarted job's are).
  std::vector<double> restart;
  request.reset();
  for (int i = 0; i < o.iters; ++i) {
    dct::AllreduceRequest fresh(send.data(), recv.data(), n, MPI_COMM_WORLD, info);
    restart.push_back(timed([&] { dct::checkpoint_load(MPI_COMM_WORLD, dct_path); }, dct_read));
  }
  MPI_Info_free(&info);
  if (rank == 0) {
    std::remove(dct_path.c_str());
    std::remove(plain_path.c_str());
    const double gib = double(n) * sizeof(float) * ranks / double(1 << 30);
    auto rate = [&](const std::vector<double> &seconds) { return gib / median(seconds); };
    const char *io = std::getenv("DCT_CHECKPOINT_IO");
    const char *thread = std::getenv("DCT_CHECKPOINT_CHECKSUM_THREAD");
    std::printf(
        "# dct-bench checkpoint: %d ranks x %lld MiB of float residual (%.2f GiB), "
        "medians of %d iterations, in %s, reads %s, DCT_CHECKPOINT_IO=%s, "
        "DCT_CHECKPOINT_CHECKSUM_THREAD=%s\n",
        ranks, o.mib, gib, o.iters, o.dir.c_str(),
        o.cold ? "cold (file evicted from the page cache)" : "from the page cache",
        io ? io : "(default)", thread ? thread : "(default)");
    // dct's rates over the plain ones: a ratio of times, above 1 where dct is faster.
    auto baseline = [&](const char *name, const std::vector<double> &seconds) {
      std::printf("%-31s %8.3f\n", name, rate(seconds));
    };
    auto compared = [&](const char *name, const std::vector<double> &seconds,
                        std::initializer_list<const std::vector<double> *> plain) {
      std::printf("%-31s %8.3f", name, rate(seconds));
      for (const std::vector<double> *times : plain)
        std::printf(" %13.3f", median(*times) / median(seconds));
      std::printf("\n");
    };
    const bool collective_faster = median(plain_fsync) <= median(independent_fsync);
    const double fastest_fsync = std::min(median(plain_fsync), median(independent_fsync));
    auto against_fastest = [&](const char *name, const std::vector<double> &seconds) {
      std::printf("%-31s %8s %13.3f  (of the %s write + fsync, the fastest)\n", name, "",
                  fastest_fsync / median(seconds),
                  collective_faster ? "collective" : "independent");
    };
    std::printf("%-31s %8s %13s %13s %13s %13s\n", "operation", "GiB/s", "/ collective",
                "/ independent", "/ coll.+fsync", "/ indep.+fsync");
    baseline("plain HDF5 write, collective", plain_write);
    baseline("plain HDF5 write, independent", independent_write);
    baseline("plain collective write + fsync", plain_fsync);
    baseline("plain independent write + fsync", independent_fsync);
    const std::initializer_list<const std::vector<double> *> writes = {
        &plain_write, &independent_write, &plain_fsync, &independent_fsync};
    compared("DCT_Checkpoint_save", save, writes);
    against_fastest("  save / fastest plain + fsync", save);
    compared("DCT_Checkpoint_isave + wait", isave_whole, writes);
    against_fastest("  isave+wait / fastest + fsync", isave_whole);
    std::printf("%-31s %8s %13.3f  (%.4f s; save %.4f s)\n", "  the isave call alone", "",
                median(plain_write) / median(isave_call), median(isave_call), median(save));
    std::printf("%-31s %8s %13s %13s\n", "operation", "GiB/s", "/ collective", "/ independent");
    baseline("plain HDF5 read, collective", plain_read);
    baseline("plain HDF5 read, independent", independent_read);
    compared("DCT_Checkpoint_load", load, {&plain_read, &independent_read});
    compared("  into new requests (restart)", restart, {&plain_read, &independent_read});
    // What a checkpoint costs `steps` training steps (rank 0's parts), medians.
    const double steps = median(alone);
    std::printf("# training: %d steps (calls of the request), medians of %d\n", o.steps, o.iters);
    std::printf("%-30s %8.4f s\n", "steps alone", steps);
    std::printf("%-30s %8.4f s   blocked in the save %.4f s\n", "save, steps", median(with_save),
                median(save_part));
    std::printf("%-30s %8.4f s   blocked: isave %.4f s + wait %.4f s; steps %.4f s\n",
                "isave, steps, wait", median(with_isave), median(isave_part), median(wait_part),
                median(steps_part));
    std::printf("%-30s %8.4f s (save) %8.4f s (isave): %.3f of save's\n",
                "checkpoint's cost to training", median(with_save) - steps,
                median(with_isave) - steps,
                (median(with_isave) - steps) / (median(with_save) - steps));
  }
  return 0;
}

}  // namespace

Run add_checkpoint(CLI::App &app) {
  auto o = std::make_shared<Options>();
  CLI::App *command = app.add_subcommand(
      "checkpoint", "DCT_Checkpoint_save/load against a plain parallel-HDF5 write/read");
  command->add_option("--mib", o->mib, "MiB of float residual per rank")
      ->check(CLI::Range(1LL, 1LL << 30))
      ->capture_default_str();
  command->add_option("--iters", o->iters, "repetitions")
      ->check(CLI::Range(1, INT_MAX))
      ->capture_default_str();
  command->add_option("--dir", o->dir, "directory of the files")->capture_default_str();
  command->add_option("--steps", o->steps, "training steps between an isave and its wait")
      ->check(CLI::Range(0, INT_MAX))
      ->capture_default_str();
  command->add_flag("--cold", o->cold,
                    "evict each file from the page cache before it is read (a requeued job)");
  return [o] { return run(*o); };
}

}  // namespace dct::bench
