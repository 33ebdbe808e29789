#include "checkpoint.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <new>

#include "config.hpp"
#include "error.hpp"
#include "request_engine.hpp"
#include "request_table.hpp"
#include "runtime.hpp"
#include "test_hooks.hpp"

namespace dct::detail {
namespace {

constexpr const char *kFormatName = "dct-checkpoint";
// Version 2: a row's CRC-32 also covers its tau and the call counter (version 1: the
// residual only; still read, with tau and the counter range-checked).
constexpr std::int64_t kFormatVersion = 2;
constexpr std::int64_t kOldestReadableVersion = 1;
constexpr const char *kRequestsGroup = "requests";

/// Silences HDF5's error printing while dct calls it (dct reports errors itself), and gives
/// the application its own handler back afterwards.
class QuietHdf5 {
 public:
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &handler_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, handler_, data_); }
  QuietHdf5(const QuietHdf5 &) = delete;
  QuietHdf5 &operator=(const QuietHdf5 &) = delete;

 private:
  H5E_auto2_t handler_ = nullptr;
  void *data_ = nullptr;
};

/// Owns an HDF5 identifier; a negative identifier is an error reported with `code`.
class Handle {
 public:
  Handle(hid_t id, herr_t (*closer)(hid_t), int code, const std::string &what)
      : id_(id), close_(closer) {
    require(id >= 0, code, what);
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  hid_t get() const { return id_; }
  /// Closes now and reports failure: closing a parallel file is where its data is flushed.
  void close(int code, const std::string &what) {
    const herr_t rc = close_(id_);
    id_ = -1;
    require(rc >= 0, code, what);
  }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void check_h5(herr_t rc, int code, const std::string &what) {
  require(rc >= 0, code, what);
}

hid_t memory_type(int element_size) {
  return element_size == 4 ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
}
hid_t file_type(int element_size) {
  return element_size == 4 ? H5T_IEEE_F32LE : H5T_IEEE_F64LE;
}

// --- attributes ---------------------------------------------------------------------------

void write_attribute(hid_t object, const char *name, hid_t stored, hid_t memory,
                     const void *value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, DCT_ERR_CKPT_IO, "H5Screate failed");
  Handle attribute(H5Acreate2(object, name, stored, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                   H5Aclose, DCT_ERR_CKPT_IO, std::string("cannot create attribute ") + name);
  check_h5(H5Awrite(attribute.get(), memory, value), DCT_ERR_CKPT_IO,
           std::string("cannot write attribute ") + name);
}
void write_attribute(hid_t object, const char *name, std::int64_t value) {
  write_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}
void write_attribute(hid_t object, const char *name, double value) {
  write_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}
void write_attribute(hid_t object, const char *name, const std::string &value) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose, DCT_ERR_CKPT_IO, "H5Tcopy failed");
  check_h5(H5Tset_size(type.get(), std::max<std::size_t>(value.size(), 1)), DCT_ERR_CKPT_IO,
           "H5Tset_size failed");
  check_h5(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), DCT_ERR_CKPT_IO, "H5Tset_strpad failed");
  std::string padded = value;
  padded.resize(std::max<std::size_t>(value.size(), 1), '\0');
  write_attribute(object, name, type.get(), type.get(), padded.data());
}

Handle open_attribute(hid_t object, const char *name) {
  require(H5Aexists(object, name) > 0, DCT_ERR_CKPT_FORMAT,
          std::string("attribute '") + name + "' is missing");
  return Handle(H5Aopen(object, name, H5P_DEFAULT), H5Aclose, DCT_ERR_CKPT_FORMAT,
                std::string("cannot open attribute ") + name);
}
std::int64_t read_int(hid_t object, const char *name) {
  Handle attribute = open_attribute(object, name);
  std::int64_t value = 0;
  check_h5(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value), DCT_ERR_CKPT_FORMAT,
           std::string("cannot read attribute ") + name);
  return value;
}
double read_double(hid_t object, const char *name) {
  Handle attribute = open_attribute(object, name);
  double value = 0;
  check_h5(H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value), DCT_ERR_CKPT_FORMAT,
           std::string("cannot read attribute ") + name);
  return value;
}
std::string read_string(hid_t object, const char *name) {
  Handle attribute = open_attribute(object, name);
  Handle type(H5Aget_type(attribute.get()), H5Tclose, DCT_ERR_CKPT_FORMAT, "H5Aget_type failed");
  require(H5Tget_class(type.get()) == H5T_STRING && H5Tis_variable_str(type.get()) == 0,
          DCT_ERR_CKPT_FORMAT, std::string("attribute ") + name + " is not a fixed string");
  std::string value(H5Tget_size(type.get()), '\0');
  check_h5(H5Aread(attribute.get(), type.get(), value.data()), DCT_ERR_CKPT_FORMAT,
           std::string("cannot read attribute ") + name);
  value.resize(std::strlen(value.c_str()));
  return value;
}

// --- datasets: one row or one element per rank ----------------------------------------------

/// Creates `name` with shape [ranks] + `row_shape` and writes this rank's row collectively.
void write_rank_row(hid_t group, const char *name, hid_t stored, hid_t memory, int ranks, int rank,
                    hsize_t row_length, bool matrix, const void *row, hid_t transfer) {
  const hsize_t dims[2] = {static_cast<hsize_t>(ranks), row_length};
  Handle space(H5Screate_simple(matrix ? 2 : 1, dims, nullptr), H5Sclose, DCT_ERR_CKPT_IO,
               "H5Screate_simple failed");
  Handle dataset(
      H5Dcreate2(group, name, stored, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose,
      DCT_ERR_CKPT_IO, std::string("cannot create dataset ") + name);
  const hsize_t start[2] = {static_cast<hsize_t>(rank), 0};
  const hsize_t count[2] = {1, row_length};
  check_h5(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
           DCT_ERR_CKPT_IO, "H5Sselect_hyperslab failed");
  const hsize_t elements = matrix ? row_length : 1;
  Handle row_space(H5Screate_simple(1, &elements, nullptr), H5Sclose, DCT_ERR_CKPT_IO,
                   "H5Screate_simple failed");
  check_h5(H5Dwrite(dataset.get(), memory, row_space.get(), space.get(), transfer, row),
           DCT_ERR_CKPT_IO, std::string("cannot write dataset ") + name);
}

/// Reads a whole 1-D dataset of `length` elements, checking its shape.
template <typename Value>
std::vector<Value> read_vector(hid_t group, const char *name, hid_t memory, hsize_t length) {
  Handle dataset(H5Dopen2(group, name, H5P_DEFAULT), H5Dclose, DCT_ERR_CKPT_FORMAT,
                 std::string("dataset '") + name + "' is missing");
  Handle space(H5Dget_space(dataset.get()), H5Sclose, DCT_ERR_CKPT_FORMAT, "H5Dget_space failed");
  hsize_t dims[2] = {0, 0};
  require(H5Sget_simple_extent_ndims(space.get()) == 1 &&
              H5Sget_simple_extent_dims(space.get(), dims, nullptr) == 1 && dims[0] == length,
          DCT_ERR_CKPT_FORMAT, std::string("dataset '") + name + "' has the wrong shape");
  std::vector<Value> values(length);
  check_h5(H5Dread(dataset.get(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()),
           DCT_ERR_CKPT_TRUNCATED, std::string("cannot read dataset ") + name);
  return values;
}

// --- agreement between ranks ---------------------------------------------------------------

/// Runs `body` on every rank; if it failed anywhere, every rank throws the same error: the
/// highest code, with the message of the lowest rank that has it.
void run_agreed(MPI_Comm comm, const std::function<void()> &body) {
  int code = DCT_SUCCESS;
  std::string message;
  try {
    body();
  } catch (const Error &e) {
    code = e.code();
    message = e.what();
  } catch (const std::bad_alloc &) {
    code = DCT_ERR_NO_MEMORY;
    message = "out of memory";
  } catch (const std::exception &e) {
    code = DCT_ERR_INTERNAL;
    message = e.what();
  }
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int mine[2] = {code, rank}, worst[2] = {0, 0};
  check_mpi(MPI_Allreduce(mine, worst, 1, MPI_2INT, MPI_MAXLOC, comm), "MPI_Allreduce");
  if (worst[0] == DCT_SUCCESS) return;
  int length = static_cast<int>(message.size());
  check_mpi(MPI_Bcast(&length, 1, MPI_INT, worst[1], comm), "MPI_Bcast");
  message.resize(static_cast<std::size_t>(length));
  check_mpi(MPI_Bcast(message.data(), length, MPI_CHAR, worst[1], comm), "MPI_Bcast");
  fail(worst[0], "rank " + std::to_string(worst[1]) + ": " + message);
}

std::vector<RequestEngine *> live_engines(const CommContext *context) {
  std::vector<RequestEngine *> engines;
  for (PersistentRequest *request : RequestTable::instance().on_context(context))
    if (request->engine->checkpointed()) engines.push_back(request->engine.get());
  std::sort(engines.begin(), engines.end(),
            [](const RequestEngine *a, const RequestEngine *b) { return a->name() < b->name(); });
  for (std::size_t i = 0; i < engines.size(); ++i) {
    const std::string &name = engines[i]->name();
    require(name.find('/') == std::string::npos && name != "." && name != "..", DCT_ERR_ARG,
            "request name '" + name + "' cannot name an HDF5 group (contains '/')");
    require(i == 0 || engines[i - 1]->name() != name, DCT_ERR_ARG,
            "two live requests are named '" + name + "': give them distinct dct_name values");
    require(!engines[i]->active(), DCT_ERR_ACTIVE,
            "request '" + name + "' is started: complete it with DCT_Wait first");
  }
  return engines;
}

bool has_residual(const RequestEngine &engine) {
  return engine.residual() != nullptr && engine.count() > 0;
}

/// The communicator dct works on for `user_comm`, and this rank's place in it.
struct Collective {
  std::shared_ptr<CommContext> context;
  MPI_Comm comm;
  int rank;
  int ranks;
};

Collective open_collective(MPI_Comm user_comm) {
  ensure_library_ready();
  std::shared_ptr<CommContext> context = comm_context(user_comm);
  require(context->comm() != MPI_COMM_NULL, DCT_ERR_NOT_INITIALIZED, "MPI was finalized");
  return Collective{context, context->comm(), context->rank(), context->size()};
}

/// The live requests, checked on every rank and the same on every rank: the collective HDF5
/// calls that follow need every rank to handle the same requests in the same order.
std::vector<RequestEngine *> agreed_engines(const Collective &c) {
  std::vector<RequestEngine *> engines;
  std::string manifest;
  run_agreed(c.comm, [&] {
    engines = live_engines(c.context.get());
    for (const RequestEngine *e : engines)
      manifest += e->name() + ' ' + std::to_string(e->count()) + ' ' +
                  std::to_string(e->element_size()) + ' ' + std::to_string(has_residual(*e)) + '\n';
  });
  const std::uint32_t mine = checksum(manifest.data(), manifest.size());
  std::uint32_t lowest = 0, highest = 0;
  check_mpi(MPI_Allreduce(&mine, &lowest, 1, MPI_UINT32_T, MPI_MIN, c.comm), "MPI_Allreduce");
  check_mpi(MPI_Allreduce(&mine, &highest, 1, MPI_UINT32_T, MPI_MAX, c.comm), "MPI_Allreduce");
  require(lowest == highest, DCT_ERR_CKPT_MISMATCH,
          "ranks hold different requests (names, counts or datatypes) on this communicator");
  return engines;
}

void sync_to_disk(const std::string &path, int code) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  require(fd >= 0, code, "cannot open " + path + " to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int error = errno;  // before close() may change it
  ::close(fd);
  require(rc == 0, code, "fsync of " + path + " failed: " + std::strerror(error));
}

/// Every rank must name the same file: ranks opening different files would wait for each
/// other in collective MPI-IO calls forever. One allreduce of the path's CRC-32 and its
/// complement gives the lowest and the highest CRC at once.
void agree_on_path(MPI_Comm comm, const std::string &path) {
  const std::uint32_t crc = checksum(path.data(), path.size());
  const std::uint32_t mine[2] = {crc, ~crc};
  std::uint32_t lowest[2] = {0, 0};
  check_mpi(MPI_Allreduce(mine, lowest, 2, MPI_UINT32_T, MPI_MIN, comm), "MPI_Allreduce");
  require(lowest[0] == ~lowest[1], DCT_ERR_ARG,
          "ranks passed different checkpoint paths (this rank: " + path + ")");
}

/// Open MPI before 5.0.10 (and 6.0.0) formats "<file name>.locktest.<rank>" into a 256-byte
/// stack buffer when its sharedfp/lockedfile component is considered at MPI_File_open, so a
/// long name aborts the process ("buffer overflow detected"; open-mpi/ompi#13565). HDF5's
/// MPI-IO driver opens the file through that path. dct never uses shared file pointers, so for
/// such a name it excludes the component (OMPI_MCA_sharedfp=^lockedfile, unless the variable
/// is set), which takes effect if Open MPI has not read the variable yet in this process; if
/// the component is still selectable, the name is refused with DCT_ERR_CKPT_IO, never opened.
void avoid_lockedfile_overflow(const std::string &name, int ranks) {
#if defined(OMPI_MAJOR_VERSION)
#if OMPI_MAJOR_VERSION < 5 ||                                                            \
    (OMPI_MAJOR_VERSION == 5 && OMPI_MINOR_VERSION == 0 && OMPI_RELEASE_VERSION < 10) || \
    (OMPI_MAJOR_VERSION == 6 && OMPI_MINOR_VERSION == 0 && OMPI_RELEASE_VERSION == 0)
  const std::size_t needed = name.size() + std::strlen(".locktest.") +
                             std::to_string(ranks > 0 ? ranks - 1 : 0).size() + 1;
  if (needed <= 256) return;
  const auto excluded = [](const std::string &selection) {
    const bool negated = !selection.empty() && selection[0] == '^';
    const bool named = selection.find("lockedfile") != std::string::npos;
    return selection.empty() ? false : negated == named;
  };
  // Open MPI reads the variable when it registers the framework (lazily); once registered,
  // MPI_T shows the value it took, which is what counts.
  if (std::getenv("OMPI_MCA_sharedfp") == nullptr) ::setenv("OMPI_MCA_sharedfp", "^lockedfile", 0);
  std::string selection = std::getenv("OMPI_MCA_sharedfp");
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS) {
    int index = -1;
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_get_index("sharedfp", &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      std::vector<char> value(static_cast<std::size_t>(std::max(count, 1)) + 1, '\0');
      if (MPI_T_cvar_read(handle, value.data()) == MPI_SUCCESS) selection = value.data();
      MPI_T_cvar_handle_free(&handle);
    }
    MPI_T_finalize();
  }
  require(excluded(selection), DCT_ERR_CKPT_IO,
          "the file name " + name + " (" + std::to_string(name.size()) +
              " characters) would overflow a buffer in this Open MPI's sharedfp/lockedfile "
              "component (fixed in 5.0.10): use a shorter path, or run with "
              "OMPI_MCA_sharedfp=^lockedfile");
#endif
#endif
  static_cast<void>(name);
  static_cast<void>(ranks);
}

std::string directory_of(const std::string &path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

void write_file(const std::string &path, MPI_Comm comm, int rank, int ranks,
                const std::vector<RequestEngine *> &engines) {
  QuietHdf5 quiet;
  Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  check_h5(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), DCT_ERR_CKPT_IO,
           "H5Pset_fapl_mpio failed");
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access.get()), H5Fclose,
              DCT_ERR_CKPT_IO, "cannot create " + path);
  write_attribute(file.get(), "format", std::string(kFormatName));
  write_attribute(file.get(), "format_version", kFormatVersion);
  write_attribute(file.get(), "dct_version",
                  std::to_string(DCT_VERSION_MAJOR) + "." + std::to_string(DCT_VERSION_MINOR) +
                      "." + std::to_string(DCT_VERSION_PATCH));
  write_attribute(file.get(), "ranks", static_cast<std::int64_t>(ranks));
  Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  check_h5(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE), DCT_ERR_CKPT_IO,
           "H5Pset_dxpl_mpio failed");
  Handle requests(H5Gcreate2(file.get(), kRequestsGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  H5Gclose, DCT_ERR_CKPT_IO, "cannot create group requests");
  for (const RequestEngine *engine : engines) {
    Handle group(
        H5Gcreate2(requests.get(), engine->name().c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
        H5Gclose, DCT_ERR_CKPT_IO, "cannot create group for " + engine->name());
    const Config &config = engine->config();
    const bool residual = has_residual(*engine);
    write_attribute(group.get(), "kind", std::string(engine->kind()));
    write_attribute(group.get(), "count", static_cast<std::int64_t>(engine->count()));
    write_attribute(group.get(), "element_size", static_cast<std::int64_t>(engine->element_size()));
    write_attribute(group.get(), "datatype",
                    std::string(engine->element_size() == 4 ? "float" : "double"));
    write_attribute(group.get(), "calls", static_cast<std::int64_t>(engine->calls()));
    write_attribute(group.get(), "density", config.density);
    write_attribute(group.get(), "interval", config.interval);
    write_attribute(group.get(), "algorithm", std::string(algorithm_name(config.algorithm)));
    write_attribute(group.get(), "has_residual", static_cast<std::int64_t>(residual));
    const double tau = engine->tau();
    const std::uint32_t crc = row_checksum(
        residual ? engine->residual() : nullptr,
        residual ? static_cast<std::size_t>(engine->count()) * engine->element_size() : 0, tau,
        static_cast<std::int64_t>(engine->calls()));
    if (residual) {
      write_rank_row(group.get(), "residual", file_type(engine->element_size()),
                     memory_type(engine->element_size()), ranks, rank,
                     static_cast<hsize_t>(engine->count()), true, engine->residual(),
                     transfer.get());
    }
    write_rank_row(group.get(), "tau", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, ranks, rank, 1, false,
                   &tau, transfer.get());
    write_rank_row(group.get(), "checksum", H5T_STD_U32LE, H5T_NATIVE_UINT32, ranks, rank, 1, false,
                   &crc, transfer.get());
  }
#ifdef DCT_TESTING
  testing::crash_in_checkpoint_save(rank);  // dies here, the file half-written
#endif
  requests.close(DCT_ERR_CKPT_IO, "closing group requests failed");
  file.close(DCT_ERR_CKPT_IO, "closing " + path + " failed");
}

}  // namespace

std::uint32_t row_checksum(const void *residual, std::size_t bytes, double tau,
                           std::int64_t calls) {
  std::uint32_t crc = checksum(residual, bytes);
  std::byte tail[16];  // little endian on every machine dct runs on, as the file is
  std::memcpy(tail, &tau, 8);
  std::memcpy(tail + 8, &calls, 8);
  return checksum(tail, sizeof tail, crc);
}

std::uint32_t checksum(const void *data, std::size_t bytes, std::uint32_t start) {
  uLong crc = start;  // crc32(0L, Z_NULL, 0), the initial CRC, is 0
  const auto *p = static_cast<const Bytef *>(data);
  while (bytes > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(bytes, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    bytes -= chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

void checkpoint_save(MPI_Comm user_comm, const std::string &path) {
  const Collective c = open_collective(user_comm);
  const MPI_Comm comm = c.comm;
  const int rank = c.rank, ranks = c.ranks;
  agree_on_path(comm, path);
  const std::vector<RequestEngine *> engines = agreed_engines(c);
  run_agreed(comm, [&] {
    for (const RequestEngine *engine : engines)
      require(engine->config().momentum == 0.0, DCT_ERR_ARG,
              "request '" + engine->name() +
                  "' uses dct_momentum, whose velocity checkpoints do not hold yet");
  });

  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  int length = static_cast<int>(temporary.size());
  check_mpi(MPI_Bcast(&length, 1, MPI_INT, 0, comm), "MPI_Bcast");
  temporary.resize(static_cast<std::size_t>(length));
  check_mpi(MPI_Bcast(temporary.data(), length, MPI_CHAR, 0, comm), "MPI_Bcast");

  try {
    run_agreed(comm, [&] { avoid_lockedfile_overflow(temporary, ranks); });
    run_agreed(comm, [&] { write_file(temporary, comm, rank, ranks, engines); });
    // Only a complete, closed file takes the checkpoint's name.
    run_agreed(comm, [&] {
      if (rank != 0) return;
      sync_to_disk(temporary, DCT_ERR_CKPT_IO);
      const int renamed = std::rename(temporary.c_str(), path.c_str());
      const int error = errno;  // read before the message is built
      require(renamed == 0, DCT_ERR_CKPT_IO,
              "cannot rename " + temporary + " to " + path + ": " + std::strerror(error));
      sync_to_disk(directory_of(path), DCT_ERR_CKPT_IO);
    });
  } catch (...) {
    if (rank == 0) std::remove(temporary.c_str());
    throw;
  }
}

namespace {

/// Staging memory for a loaded residual, in transparent huge pages where the kernel offers
/// them: first-touch page faults dominate a load into fresh memory (measured on the CI VM:
/// 180 ms per 64 MiB with 4 KiB pages, 60 ms with huge pages).
class StagingBuffer {
 public:
  explicit StagingBuffer(std::size_t bytes) {
    constexpr std::size_t kHugePage = std::size_t(2) << 20;
    void *memory = nullptr;
    if (bytes == 0 || ::posix_memalign(&memory, kHugePage, bytes) != 0) throw std::bad_alloc();
    ::madvise(memory, bytes, MADV_HUGEPAGE);  // advice only: failure just means small pages
    data_ = static_cast<std::byte *>(memory);
  }
  ~StagingBuffer() { std::free(data_); }
  StagingBuffer(const StagingBuffer &) = delete;
  StagingBuffer &operator=(const StagingBuffer &) = delete;
  std::byte *data() const { return data_; }

 private:
  std::byte *data_ = nullptr;
};

/// What a load will install into one engine, prepared before anything is touched.
struct PendingState {
  RequestEngine *engine;
  const SavedRequest *saved;
  std::vector<int> rows;  // saved ranks whose residuals this rank takes
  std::unique_ptr<StagingBuffer> residual;
  double tau;
};

/// The saved rows this rank takes on a restart: its own (same ranks), or every saved rank r
/// with r mod ranks == rank (redistribute).
std::vector<int> rows_for(int rank, int ranks, int saved_ranks, bool redistribute) {
  if (!redistribute) return {rank};
  std::vector<int> rows;
  for (int r = rank; r < saved_ranks; r += ranks) rows.push_back(r);
  return rows;
}

/// Checks `engine` against the checkpoint's metadata (no data is read).
PendingState plan(const CheckpointReader &reader, RequestEngine *engine, int rank, int ranks,
                  bool redistribute) {
  const SavedRequest *saved = reader.find(engine->name());
  require(saved != nullptr, DCT_ERR_CKPT_MISMATCH,
          "request '" + engine->name() + "' is not in the checkpoint");
  require(saved->kind == engine->kind(), DCT_ERR_CKPT_MISMATCH,
          "request '" + engine->name() + "' is an " + engine->kind() +
              " request, the checkpoint holds an " + saved->kind + " one");
  require(saved->count == engine->count() && saved->element_size == engine->element_size(),
          DCT_ERR_CKPT_MISMATCH,
          "request '" + engine->name() + "' has " + std::to_string(engine->count()) +
              " elements of " + std::to_string(engine->element_size()) +
              " bytes, the checkpoint has " + std::to_string(saved->count) + " of " +
              std::to_string(saved->element_size));
  require(saved->has_residual == has_residual(*engine), DCT_ERR_CKPT_MISMATCH,
          "request '" + engine->name() +
              "' keeps a residual in one run and not in the other "
              "(density 1 on one side?)");
  return PendingState{engine, saved, rows_for(rank, ranks, reader.ranks(), redistribute), nullptr,
                      saved->tau[static_cast<std::size_t>(rank % reader.ranks())]};
}

/// Reads this rank's rows of every planned residual with collective reads: every rank makes
/// the same calls (`max_rows` per request), and a failing row is remembered, not thrown, so
/// that no rank is left waiting in a collective read.
template <typename T>
void read_rows(const CheckpointReader &reader, PendingState &state, std::size_t max_rows,
               std::exception_ptr &failure) {
  const std::size_t n = static_cast<std::size_t>(state.saved->count);
  state.residual = std::make_unique<StagingBuffer>(n * sizeof(T));
  T *result = reinterpret_cast<T *>(state.residual->data());
  std::unique_ptr<T[]> row(state.rows.size() > 1 ? new T[n] : nullptr);
  std::vector<double> sum(state.rows.size() > 1 ? n : 0, 0.0);
  for (std::size_t k = 0; k < max_rows; ++k) {
    const int saved_rank = k < state.rows.size() ? state.rows[k] : -1;
    T *into = state.rows.size() == 1 ? result : row.get();  // one row: straight in, exact
    try {
      reader.read_residual(*state.saved, saved_rank, into);
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
    if (saved_rank >= 0 && state.rows.size() > 1)
      for (std::size_t i = 0; i < n; ++i) sum[i] += row[i];
  }
  if (state.rows.empty()) std::fill(result, result + n, T(0));
  if (state.rows.size() > 1)  // rows merged onto this rank: added in double, rounded once
    for (std::size_t i = 0; i < n; ++i) result[i] = static_cast<T>(sum[i]);
}

}  // namespace

void checkpoint_load(MPI_Comm user_comm, const std::string &path) {
  const Collective c = open_collective(user_comm);
  const MPI_Comm comm = c.comm;
  const int rank = c.rank, ranks = c.ranks;
  agree_on_path(comm, path);
  const std::vector<RequestEngine *> engines = agreed_engines(c);
  // Rank 0 looks first, so that a missing or foreign file never reaches collective HDF5 calls.
  run_agreed(comm, [&] {
    if (rank == 0) CheckpointReader probe(path, MPI_COMM_SELF);
  });
  run_agreed(comm, [&] { avoid_lockedfile_overflow(path, ranks); });
  std::unique_ptr<CheckpointReader> reader;
  std::vector<PendingState> pending;
  bool redistribute = false;  // the same ranks map to themselves either way
  run_agreed(comm, [&] {
    reader = std::make_unique<CheckpointReader>(path, comm);
    redistribute = reader->ranks() != ranks;
    // Each request's own dct_restart (from its info, else DCT_RESTART at its init) decides.
    for (const RequestEngine *engine : engines)
      require(!redistribute || engine->config().redistribute_on_restart, DCT_ERR_CKPT_MISMATCH,
              "the checkpoint was saved on " + std::to_string(reader->ranks()) +
                  " ranks and this job has " + std::to_string(ranks) + ": request '" +
                  engine->name() +
                  "' has dct_restart=strict (set dct_restart=redistribute in its MPI_Info, or "
                  "DCT_RESTART=redistribute before creating it, to restart on another rank "
                  "count)");
    for (RequestEngine *engine : engines)
      pending.push_back(plan(*reader, engine, rank, ranks, redistribute));
  });
  run_agreed(comm, [&] {
    const std::size_t max_rows = (reader->ranks() + ranks - 1) / ranks;
    std::exception_ptr failure;
    for (PendingState &state : pending) {
      if (!state.saved->has_residual) continue;
      if (state.saved->element_size == 4)
        read_rows<float>(*reader, state, redistribute ? max_rows : 1, failure);
      else
        read_rows<double>(*reader, state, redistribute ? max_rows : 1, failure);
    }
    if (failure) std::rethrow_exception(failure);
  });
  // Everything is validated on every rank: now, and only now, the state changes.
  for (const PendingState &state : pending)
    state.engine->restore(state.residual ? state.residual->data() : nullptr, state.tau,
                          state.saved->calls);
}

// --- reader -------------------------------------------------------------------------------

CheckpointReader::CheckpointReader(const std::string &path, MPI_Comm comm) {
  QuietHdf5 quiet;
  struct stat info {};
  const int found = ::stat(path.c_str(), &info);
  const int error = errno;  // read before the message is built
  require(found == 0, DCT_ERR_CKPT_NOT_FOUND,
          "no checkpoint at " + path + ": " + std::strerror(error));
  // Opening a FIFO or a device would block or read endlessly.
  require(S_ISREG(info.st_mode), DCT_ERR_CKPT_FORMAT, path + " is not a regular file");
  require(H5Fis_hdf5(path.c_str()) > 0, DCT_ERR_CKPT_FORMAT, path + " is not an HDF5 file");
  Handle access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  collective_ = comm != MPI_COMM_SELF;
  if (collective_)
    check_h5(H5Pset_fapl_mpio(access.get(), comm, MPI_INFO_NULL), DCT_ERR_CKPT_IO,
             "H5Pset_fapl_mpio failed");
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.get());
  require(file_ >= 0, DCT_ERR_CKPT_TRUNCATED,
          path + " is an HDF5 file that HDF5 cannot open: truncated or damaged");
  try {
    require(H5Aexists(file_, "format") > 0 && read_string(file_, "format") == kFormatName,
            DCT_ERR_CKPT_FORMAT, path + " is an HDF5 file but not a dct checkpoint");
    format_version_ = static_cast<int>(read_int(file_, "format_version"));
    require(format_version_ >= kOldestReadableVersion && format_version_ <= kFormatVersion,
            DCT_ERR_CKPT_VERSION,
            path + " has checkpoint format version " + std::to_string(format_version_) +
                "; this dct reads versions " + std::to_string(kOldestReadableVersion) + " to " +
                std::to_string(kFormatVersion));
    dct_version_ = read_string(file_, "dct_version");
    ranks_ = static_cast<int>(read_int(file_, "ranks"));
    require(ranks_ >= 1, DCT_ERR_CKPT_FORMAT, "ranks attribute is not positive");

    Handle requests(H5Gopen2(file_, kRequestsGroup, H5P_DEFAULT), H5Gclose, DCT_ERR_CKPT_FORMAT,
                    "group 'requests' is missing");
    H5G_info_t group_info;
    check_h5(H5Gget_info(requests.get(), &group_info), DCT_ERR_CKPT_FORMAT, "H5Gget_info failed");
    for (hsize_t i = 0; i < group_info.nlinks; ++i) {
      const ssize_t length = H5Lget_name_by_idx(requests.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i,
                                                nullptr, 0, H5P_DEFAULT);
      require(length > 0, DCT_ERR_CKPT_FORMAT, "cannot read a request name");
      SavedRequest saved;
      saved.name.assign(static_cast<std::size_t>(length) + 1, '\0');
      H5Lget_name_by_idx(requests.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, saved.name.data(),
                         saved.name.size(), H5P_DEFAULT);
      saved.name.resize(static_cast<std::size_t>(length));
      Handle group(H5Gopen2(requests.get(), saved.name.c_str(), H5P_DEFAULT), H5Gclose,
                   DCT_ERR_CKPT_FORMAT, "cannot open request " + saved.name);
      saved.kind = read_string(group.get(), "kind");
      saved.count = read_int(group.get(), "count");
      saved.element_size = static_cast<int>(read_int(group.get(), "element_size"));
      require(saved.count >= 0 && (saved.element_size == 4 || saved.element_size == 8),
              DCT_ERR_CKPT_FORMAT, "request " + saved.name + " has an invalid count or type");
      saved.calls = read_int(group.get(), "calls");
      saved.density = read_double(group.get(), "density");
      saved.interval = read_int(group.get(), "interval");
      saved.algorithm = read_string(group.get(), "algorithm");
      saved.has_residual = read_int(group.get(), "has_residual") != 0;
      saved.tau =
          read_vector<double>(group.get(), "tau", H5T_NATIVE_DOUBLE, static_cast<hsize_t>(ranks_));
      saved.checksums = read_vector<std::uint32_t>(group.get(), "checksum", H5T_NATIVE_UINT32,
                                                   static_cast<hsize_t>(ranks_));
      require(saved.calls >= 0, DCT_ERR_CKPT_FORMAT,
              "request " + saved.name + " has a negative call counter");
      for (int r = 0; r < ranks_; ++r) {
        const double tau = saved.tau[static_cast<std::size_t>(r)];
        require(std::isfinite(tau) && tau >= 0, DCT_ERR_CKPT_FORMAT,
                "request " + saved.name + " has an invalid threshold for rank " +
                    std::to_string(r) + ": " + std::to_string(tau));
        if (!saved.has_residual && format_version_ >= 2)  // no data to read: check now
          require(row_checksum(nullptr, 0, tau, saved.calls) ==
                      saved.checksums[static_cast<std::size_t>(r)],
                  DCT_ERR_CKPT_CHECKSUM,
                  "the threshold or call counter of '" + saved.name + "' saved by rank " +
                      std::to_string(r) + " does not match its checksum: the file is corrupt");
      }
      if (saved.has_residual) {
        Handle dataset(H5Dopen2(group.get(), "residual", H5P_DEFAULT), H5Dclose,
                       DCT_ERR_CKPT_FORMAT, "request " + saved.name + " has no residual");
        Handle space(H5Dget_space(dataset.get()), H5Sclose, DCT_ERR_CKPT_FORMAT,
                     "H5Dget_space failed");
        hsize_t dims[2] = {0, 0};
        require(H5Sget_simple_extent_ndims(space.get()) == 2 &&
                    H5Sget_simple_extent_dims(space.get(), dims, nullptr) == 2 &&
                    dims[0] == static_cast<hsize_t>(ranks_) &&
                    dims[1] == static_cast<hsize_t>(saved.count),
                DCT_ERR_CKPT_FORMAT,
                "the residual of " + saved.name + " does not have the shape [ranks, count]");
      }
      requests_.push_back(std::move(saved));
    }
  } catch (...) {
    H5Fclose(file_);
    file_ = -1;
    throw;
  }
}

CheckpointReader::~CheckpointReader() {
  if (file_ >= 0) {
    QuietHdf5 quiet;
    H5Fclose(file_);
  }
}

const SavedRequest *CheckpointReader::find(const std::string &name) const {
  for (const SavedRequest &saved : requests_)
    if (saved.name == name) return &saved;
  return nullptr;
}

void CheckpointReader::read_residual(const SavedRequest &request, int rank, void *out) const {
  QuietHdf5 quiet;
  require(request.has_residual && rank >= -1 && rank < ranks_, DCT_ERR_INTERNAL,
          "read_residual: no such row");
  const std::string where = std::string(kRequestsGroup) + "/" + request.name + "/residual";
  Handle dataset(H5Dopen2(file_, where.c_str(), H5P_DEFAULT), H5Dclose, DCT_ERR_CKPT_FORMAT,
                 "cannot open " + where);
  Handle space(H5Dget_space(dataset.get()), H5Sclose, DCT_ERR_CKPT_FORMAT, "H5Dget_space failed");
  const hsize_t elements = static_cast<hsize_t>(request.count);
  Handle row_space(H5Screate_simple(1, &elements, nullptr), H5Sclose, DCT_ERR_CKPT_IO,
                   "H5Screate_simple failed");
  if (rank >= 0) {
    const hsize_t start[2] = {static_cast<hsize_t>(rank), 0};
    const hsize_t count[2] = {1, elements};
    check_h5(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
             DCT_ERR_CKPT_FORMAT, "H5Sselect_hyperslab failed");
  } else {  // a collective read in which this rank takes nothing
    check_h5(H5Sselect_none(space.get()), DCT_ERR_CKPT_FORMAT, "H5Sselect_none failed");
    check_h5(H5Sselect_none(row_space.get()), DCT_ERR_CKPT_FORMAT, "H5Sselect_none failed");
  }
  Handle transfer(H5Pcreate(H5P_DATASET_XFER), H5Pclose, DCT_ERR_CKPT_IO, "H5Pcreate failed");
  if (collective_)
    check_h5(H5Pset_dxpl_mpio(transfer.get(), H5FD_MPIO_COLLECTIVE), DCT_ERR_CKPT_IO,
             "H5Pset_dxpl_mpio failed");
  check_h5(H5Dread(dataset.get(), memory_type(request.element_size), row_space.get(), space.get(),
                   transfer.get(), out),
           DCT_ERR_CKPT_TRUNCATED,
           "cannot read " + where + " of saved rank " + std::to_string(rank));
  if (rank < 0) return;
  const std::size_t bytes = static_cast<std::size_t>(request.count) * request.element_size;
  const std::uint32_t crc =
      format_version_ >= 2
          ? row_checksum(out, bytes, request.tau[static_cast<std::size_t>(rank)], request.calls)
          : checksum(out, bytes);
  require(crc == request.checksums[static_cast<std::size_t>(rank)], DCT_ERR_CKPT_CHECKSUM,
          "the residual, threshold or call counter of '" + request.name + "' saved by rank " +
              std::to_string(rank) + " does not match its checksum: the file is corrupt");
}

}  // namespace dct::detail
