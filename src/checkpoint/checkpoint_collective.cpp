#include "checkpoint/checkpoint_collective.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "checkpoint/checkpoint.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/request_engine.hpp"
#include "core/request_table.hpp"

namespace dct::detail {
namespace {

std::vector<RequestEngine *> live_engines(const CommContext *context) {
  std::vector<RequestEngine *> engines;
  for (PersistentRequest *request : RequestTable::instance().on_context(context))
    if (request->engine->state() != nullptr) engines.push_back(request->engine.get());
  std::sort(engines.begin(), engines.end(),
            [](const RequestEngine *a, const RequestEngine *b) { return a->name() < b->name(); });
  for (std::size_t i = 0; i < engines.size(); ++i) {
    const std::string &name = engines[i]->name();
    require(name.find('/') == std::string::npos && name != "." && name != "..", DCT_ERR_ARG,
            "request name '" + name +
                "' cannot name an HDF5 group ('.', '..' and names with "
                "'/' cannot)");
    require(i == 0 || engines[i - 1]->name() != name, DCT_ERR_ARG,
            "two live requests are named '" + name + "': give them distinct dct_name values");
    require(!engines[i]->active(), DCT_ERR_ACTIVE,
            "request '" + name + "' is started: complete it with DCT_Wait first");
  }
  return engines;
}

/// The live requests, checked on every rank and the same on every rank.
std::vector<RequestEngine *> agreed_engines(MPI_Comm comm, const CommContext *context) {
  std::vector<RequestEngine *> engines;
  std::string manifest;
  run_agreed(comm, [&] {
    engines = live_engines(context);
    for (const RequestEngine *e : engines)
      manifest += e->name() + ' ' + std::to_string(e->state()->counts_per_rank() ? 0 : e->count()) +
                  ' ' + std::to_string(e->element_size()) + ' ' + std::to_string(has_residual(*e)) +
                  ' ' + std::to_string(has_velocity(*e)) + ' ' +
                  std::to_string(has_last_update(*e)) + '\n';
  });
  const std::uint32_t mine = checksum(manifest.data(), manifest.size());
  std::uint32_t lowest = 0, highest = 0;
  check_mpi(MPI_Allreduce(&mine, &lowest, 1, MPI_UINT32_T, MPI_MIN, comm), "MPI_Allreduce");
  check_mpi(MPI_Allreduce(&mine, &highest, 1, MPI_UINT32_T, MPI_MAX, comm), "MPI_Allreduce");
  require(lowest == highest, DCT_ERR_CKPT_MISMATCH,
          "ranks hold different requests (names, counts or datatypes) on this communicator");
  return engines;
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

/// Whether this rank has a core to spare for its row checksums: it may run on two CPUs or
/// more, and its node has two or more online CPUs per rank of `comm` on it. Collective.
bool has_spare_core(MPI_Comm comm) {
  MPI_Comm node = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node),
            "MPI_Comm_split_type");
  int node_ranks = 1;
  check_mpi(MPI_Comm_size(node, &node_ranks), "MPI_Comm_size");
  check_mpi(MPI_Comm_free(&node), "MPI_Comm_free");
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  const int usable =
      ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 ? CPU_COUNT(&allowed) : 1;
  return usable >= 2 && ::sysconf(_SC_NPROCESSORS_ONLN) >= 2L * node_ranks;
}

}  // namespace

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

bool has_residual(const RequestEngine &engine) {
  return engine.state() != nullptr && engine.state()->residual() != nullptr && engine.count() > 0;
}

bool has_velocity(const RequestEngine &engine) {
  return engine.state() != nullptr && engine.state()->keeps_velocity();
}

bool has_last_update(const RequestEngine &engine) {
  return engine.state() != nullptr && engine.state()->keeps_last_update();
}

std::string directory_of(const std::string &path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

std::string canonical_path(const std::string &path) {
  const std::string name = path.substr(path.find_last_of('/') + 1);  // npos + 1 == 0
  char *resolved = ::realpath(directory_of(path).c_str(), nullptr);
  if (resolved == nullptr || name.empty() || name == "." || name == "..") {
    std::free(resolved);
    return path;
  }
  const std::string directory(resolved);
  std::free(resolved);
  return (directory == "/" ? "" : directory) + "/" + name;
}

Collective open_collective(MPI_Comm user_comm, const std::string &path) {
  ensure_library_ready();
  std::shared_ptr<CommContext> context = comm_context(user_comm);
  require(context->comm() != MPI_COMM_NULL, DCT_ERR_NOT_INITIALIZED, "MPI was finalized");
  const MPI_Comm comm = context->comm();
  agree_on_path(comm, path);
  // Rank 0's spelling is the file's on every rank: a directory that another rank cannot
  // resolve yet (made by rank 0 a moment ago, on a file system slow to show it) must not make
  // the ranks name two files.
  std::string file = context->rank() == 0 ? canonical_path(path) : std::string();
  int length = static_cast<int>(file.size());
  check_mpi(MPI_Bcast(&length, 1, MPI_INT, 0, comm), "MPI_Bcast");
  file.resize(static_cast<std::size_t>(length));
  check_mpi(MPI_Bcast(file.data(), length, MPI_CHAR, 0, comm), "MPI_Bcast");
  std::vector<RequestEngine *> engines = agreed_engines(comm, context.get());
  // Collective and independent transfers of one dataset on different ranks would hang.
  int collective_rows = 0;
  Config::ChecksumThread checksum_thread = Config::ChecksumThread::automatic;
  run_agreed(comm, [&] {
    const Config config = Config::from(MPI_INFO_NULL, KnobUse::checkpoint);
    collective_rows = config.checkpoint_collective_io;
    checksum_thread = config.checkpoint_checksum_thread;
  });
  const bool spare_core = has_spare_core(comm);  // collective: every rank asks
  int lowest = 0;
  check_mpi(MPI_Allreduce(&collective_rows, &lowest, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  run_agreed(comm, [&] {
    require(lowest == collective_rows, DCT_ERR_ARG,
            "ranks set DCT_CHECKPOINT_IO differently (this rank: " +
                std::string(collective_rows ? "collective" : "independent") + ")");
  });
  return Collective{std::move(file),
                    context,
                    comm,
                    context->rank(),
                    context->size(),
                    std::move(engines),
                    collective_rows != 0,
                    checksum_thread == Config::ChecksumThread::on ||
                        (checksum_thread == Config::ChecksumThread::automatic && spare_core)};
}

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
  // At the application's own thread level: Open MPI 4.1's MPI_T_init_thread sets the level of
  // the whole library, so MPI_THREAD_SINGLE here turned an MPI_THREAD_MULTIPLE program's MPI
  // single-threaded (MPI_Query_thread answered SINGLE afterwards; found in issue 35).
  int level = MPI_THREAD_SINGLE, provided = 0;
  MPI_Query_thread(&level);
  if (MPI_T_init_thread(level, &provided) == MPI_SUCCESS) {
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

}  // namespace dct::detail
