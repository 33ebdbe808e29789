// The C ABI: argument checks and the handle table, every entry point inside guarded()
// (guarded.hpp); DCT-MP's inits and the checkpoints are in c_api_mp.cpp. Just over 400 lines:
// every DCT-DP entry point, each a few lines, and the fingerprints their agreements share.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>

#include "api/guarded.hpp"
#include "checkpoint/checkpoint.hpp"
#include "core/agreement.hpp"
#include "core/comm_context.hpp"
#include "core/compute_backend.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/request_table.hpp"
#include "core/status.hpp"
#include "dct/dct.h"
#include "dp/allreduce.hpp"
#include "mp/alltoallv.hpp"

namespace dct::detail {
namespace {

const char *const error_strings[] = {
    "success",
    "invalid argument",
    "NULL buffer with a positive count",
    "count negative or too large",
    "invalid datatype",
    "invalid reduction operation",
    "invalid communicator (MPI_COMM_NULL or an inter-communicator)",
    "invalid configuration value (MPI_Info key or DCT_* environment variable)",
    "invalid request (null, or already freed)",
    "request in the wrong state (already started, or not started)",
    "an MPI call failed",
    "a message from a peer failed validation",
    "ranks disagree on the collective's count or datatype",
    "out of memory",
    "MPI is not initialized, or already finalized",
    "feature or backend not compiled into this build",
    "internal error in dct",
    "checkpoint file not found",
    "not a dct checkpoint (not HDF5, or another layout)",
    "unsupported checkpoint format version",
    "checkpoint does not match the live requests",
    "checkpoint checksum mismatch",
    "checkpoint file truncated or damaged",
    "checkpoint I/O failed",
    "another thread is inside dct on this communicator (calls on one must not overlap)",
};
static_assert(sizeof(error_strings) / sizeof(error_strings[0]) == DCT_ERR_LASTCODE + 1,
              "one string per DCT_Error code");

/// The size of one element of the call's (valid) datatype, as the fingerprints compare it.
int datatype_bytes(const AllreduceArgs &args) {
  int bytes = args.compressed_element_size();
  if (bytes == 0) check_mpi(MPI_Type_size(args.datatype, &bytes), "MPI_Type_size");
  return bytes;
}

/// What the ranks of one allreduce must share (docs/reliability.md): the settings that change
/// what travels or how the ranks decide it. Densities of compressed requests may differ.
Fingerprint allreduce_fingerprint(const AllreduceArgs &args, const Config &config) {
  const int type_bytes = datatype_bytes(args);
  const bool compressed = args.compressed() && config.density < 1.0;
  const bool modelled = compressed && config.algorithm == DCT_ALGORITHM_AUTO;
  Fingerprint fingerprint;
  fingerprint.add("count", static_cast<std::uint64_t>(args.count));
  fingerprint.add("datatype size", static_cast<std::uint64_t>(type_bytes));
  fingerprint.add("compressed datatype and op", std::uint64_t(args.compressed()));
  fingerprint.add("dct_density 1 or below", std::uint64_t(compressed));
  fingerprint.add("dct_momentum", args.compressed() ? config.momentum : 0.0);
  fingerprint.add(
      "dct_momentum_result",
      std::uint64_t(args.compressed() && config.momentum > 0.0 ? int(config.momentum_result) : 0));
  fingerprint.add("dct_algorithm", std::uint64_t(compressed ? config.algorithm : 0));
  fingerprint.add("dct_group_size", std::uint64_t(compressed ? config.group_size : 0));
  fingerprint.add("dct_values", std::uint64_t(compressed ? int(config.values) : 0));
  fingerprint.add("dct_transport", std::uint64_t(compressed ? int(config.transport) : 0));
  fingerprint.add("dct_density_warmup calls",
                  std::uint64_t(compressed ? config.density_warmup.calls : 0));
  fingerprint.add("dct_tau_control", std::uint64_t(compressed ? int(config.tau_control) : 0));
  fingerprint.add("dct_result_density", compressed ? config.result_density : 0.0);
  fingerprint.add("dct_alpha_us", modelled ? config.network.alpha_us : 0.0);
  fingerprint.add("dct_beta_gbps", modelled ? config.network.beta_gbps : 0.0);
  return fingerprint;
}

/// What the ranks of one DCT_Allreduce call must share before any of them blocks: the path
/// (compressed or MPI's), the count, the datatype's size and whether the buffers are device
/// memory (each rank's state decides the algorithm alone, charging device buffers' staging:
/// cost_model.hpp). Agreed on every call (one small MPI_Allreduce), since drop-in states are
/// made and evicted on each rank alone.
Fingerprint drop_in_call_fingerprint(const AllreduceArgs &args, bool valid) {
  const int type_bytes = valid ? datatype_bytes(args) : 0;
  const bool compressed = valid && args.compressed();
  Fingerprint fingerprint;
  fingerprint.add("compressed datatype and op", std::uint64_t(compressed));
  fingerprint.add("count", static_cast<std::uint64_t>(valid ? args.count : 0));
  fingerprint.add("datatype size", static_cast<std::uint64_t>(type_bytes));
  fingerprint.add("buffers in device memory",
                  std::uint64_t(compressed && args.count > 0 &&
                                backends::backend_for(args.recvbuf, DCT_BACKEND_AUTO).kind() !=
                                    DCT_BACKEND_KOKKOS));
  return fingerprint;
}

/// The drop-in states' configuration on `context`: at the first compressed DCT_Allreduce on
/// it (a call every rank makes) read from the environment and agreed on by every rank.
std::shared_ptr<const Config> drop_in_config(CommContext &context, const AllreduceArgs &args) {
  {
    std::lock_guard<std::recursive_mutex> lock(library_mutex());
    if (context.drop_in_config) return context.drop_in_config;
  }
  auto config = std::make_shared<Config>();
  std::exception_ptr local_error;
  Fingerprint fingerprint;
  try {
    *config = Config::from(MPI_INFO_NULL, KnobUse::drop_in);
    fingerprint = allreduce_fingerprint(args, *config);
  } catch (...) {
    local_error = std::current_exception();
    fingerprint = allreduce_fingerprint(args, Config{});  // same fields, values unused
  }
  agree(context.shared_comm(), context.rank(), local_error, fingerprint,
        "DCT_Allreduce (DCT_* variables)");
  std::lock_guard<std::recursive_mutex> lock(library_mutex());
  context.drop_in_config = config;
  return config;
}

/// A new MPI_Info holding `values` (keys with empty values are left out: MPI_Info_set refuses
/// them); the caller frees it.
MPI_Info info_of(const std::vector<std::pair<std::string, std::string>> &values) {
  MPI_Info info = MPI_INFO_NULL;
  check_mpi(MPI_Info_create(&info), "MPI_Info_create");
  for (const auto &[key, value] : values) {
    if (value.empty()) continue;
    const int code = MPI_Info_set(info, key.c_str(), value.c_str());
    if (code != MPI_SUCCESS) MPI_Info_free(&info);
    check_mpi(code, "MPI_Info_set");
  }
  return info;
}

}  // namespace
}  // namespace dct::detail

using namespace dct::detail;

extern "C" {

int DCT_Get_version(int *major, int *minor, int *patch) {
  if (major) *major = DCT_VERSION_MAJOR;
  if (minor) *minor = DCT_VERSION_MINOR;
  if (patch) *patch = DCT_VERSION_PATCH;
  return DCT_SUCCESS;
}

int DCT_Error_string(int code, char *string, int *resultlen) {
  if (string == nullptr || resultlen == nullptr || code < 0 || code > DCT_ERR_LASTCODE)
    return DCT_ERR_ARG;
  const int written = std::snprintf(string, DCT_MAX_ERROR_STRING, "%s", error_strings[code]);
  *resultlen = written < DCT_MAX_ERROR_STRING ? written : DCT_MAX_ERROR_STRING - 1;
  return DCT_SUCCESS;
}

const char *DCT_Get_last_error(void) {
  return last_error.c_str();
}

const char *DCT_Algorithm_name(int algorithm) {
  return algorithm_name(algorithm);
}

const char *DCT_Backend_name(int backend) {
  return backend_name(backend);
}

int DCT_Backend_compiled(int backend, int *compiled) {
  return guarded(__func__, [&] {
    require(compiled != nullptr, DCT_ERR_ARG, "compiled is NULL");
    switch (backend) {
      case DCT_BACKEND_AUTO:
      case DCT_BACKEND_KOKKOS:
        *compiled = 1;
        return;
      case DCT_BACKEND_CUDA:
        *compiled = backends::cuda_backend() != nullptr;
        return;
      case DCT_BACKEND_HIP:
        *compiled = backends::hip_backend() != nullptr;
        return;
    }
    fail(DCT_ERR_ARG, "backend " + std::to_string(backend) + " is not a DCT_Backend");
  });
}

int DCT_Allreduce_init(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, MPI_Info info, DCT_Request *request) {
  return guarded(__func__, [&] {
    ensure_library_ready();
    // A bad communicator leaves no peers to agree with; every other refusal is agreed on.
    std::shared_ptr<CommContext> context = comm_context(comm);
    const ContextEntry entry(*context);
    const AllreduceArgs args{sendbuf, recvbuf, count, datatype, op, comm};
    Fingerprint fingerprint;
    std::exception_ptr local_error;
    auto persistent = std::make_unique<PersistentRequest>();
    bool unnamed = false;
    try {
      require(request != nullptr, DCT_ERR_ARG, "request is NULL");
      args.validate(context->shared_comm());
      Config config = Config::from(info, KnobUse::allreduce);
      fingerprint = allreduce_fingerprint(args, config);
      unnamed = config.name.empty();
      if (unnamed) config.name = context->default_name();
      persistent->engine = make_allreduce_engine(args, config);
    } catch (...) {
      local_error = std::current_exception();
      // The same fields as every other rank's; their values do not matter once one failed.
      fingerprint = allreduce_fingerprint({nullptr, nullptr, 0, MPI_FLOAT, MPI_SUM, comm}, {});
    }
    agree(context->shared_comm(), context->rank(), local_error, fingerprint, nullptr);
    persistent->engine->connect(true);
    if (unnamed) context->take_default_name();
    persistent->sendbuf = sendbuf;
    persistent->recvbuf = recvbuf;
    *request = RequestTable::instance().insert(std::move(persistent));
  });
}

int DCT_Start(DCT_Request *request) {
  return guarded(__func__, [&] {
    require_mpi_running();  // after MPI_Finalize: a code, not MPI's abort
    const RequestEntry entry(request);
    PersistentRequest &r = entry.request();
    const KernelTurn kernels;
    r.engine->start(r.sendbuf, r.recvbuf);
  });
}

int DCT_Wait(DCT_Request *request, DCT_Status *status) {
  return guarded(__func__, [&] {
    if (status) check_status(status, "status");
    require_mpi_running();
    const RequestEntry entry(request);
    DCT_Status full;
    entry.engine().wait(status ? &full : nullptr);
    if (status) deliver_status(full, status);
  });
}

int DCT_Test(DCT_Request *request, int *flag, DCT_Status *status) {
  return guarded(__func__, [&] {
    require(flag != nullptr, DCT_ERR_ARG, "flag is NULL");
    *flag = 0;
    if (status) check_status(status, "status");
    require_mpi_running();
    const RequestEntry entry(request);
    RequestEngine &engine = entry.engine();
    const bool started = engine.active();
    DCT_Status full;
    try {
      *flag = engine.test(status ? &full : nullptr) ? 1 : 0;
    } catch (...) {
      if (started && !engine.active()) *flag = 1;  // the call completed with an error
      throw;
    }
    if (status && *flag) deliver_status(full, status);
  });
}

int DCT_Waitall(int count, DCT_Request requests[], DCT_Status statuses[]) {
  int first_error = DCT_SUCCESS;
  std::string first_message;
  // The caller's layout gives the array's stride (dct.h: DCT_Status is versioned).
  const std::size_t stride = count > 0 && statuses ? statuses[0].size : 0;
  const int checked = guarded(__func__, [&] {
    require(count >= 0, DCT_ERR_ARG, "count is negative");
    require(count == 0 || requests != nullptr, DCT_ERR_ARG, "requests is NULL");
    for (int i = 0; i < count && statuses; ++i) {
      check_status(status_at(statuses, stride, i), "statuses", i);
      require(status_at(statuses, stride, i)->size == stride, DCT_ERR_ARG,
              [&] { return status_name("statuses", i) + ".size differs from statuses[0].size"; });
    }
  });
  if (checked != DCT_SUCCESS) return checked;
  for (int i = 0; i < count; ++i) {
    DCT_Status *status = statuses ? status_at(statuses, stride, i) : DCT_STATUS_IGNORE;
    if (status) deliver_status(DCT_Status{}, status);
    if (requests[i] == DCT_REQUEST_NULL || !started(requests[i])) continue;
    const int code = DCT_Wait(&requests[i], status);
    if (code != DCT_SUCCESS && first_error == DCT_SUCCESS) {
      first_error = code;
      first_message = "request " + std::to_string(i) + ": " + last_error;
    }
  }
  last_error = first_message.empty() ? std::string() : "DCT_Waitall: " + first_message;
  return first_error;
}

int DCT_Request_free(DCT_Request *request) {
  return guarded(__func__, [&] {
    require(request != nullptr, DCT_ERR_ARG, "request is NULL");
    const RequestEntry entry(request);
    RequestTable::instance().erase(*request);
    *request = DCT_REQUEST_NULL;
  });
}

int DCT_Request_get_residual(DCT_Request request, void *residual) {
  return guarded(__func__, [&] {
    const RequestEntry entry(&request);
    const RequestEngine &engine = entry.engine();
    // NULL with nothing to write, as MPI takes buffers of count 0 (the property test's find).
    require(residual != nullptr || engine.count() == 0, DCT_ERR_ARG, "residual is NULL");
    const KernelTurn kernels;
    require(!engine.active(), DCT_ERR_ACTIVE, "request is started: complete it first");
    const std::size_t bytes = static_cast<std::size_t>(engine.count()) * engine.element_size();
    if (bytes == 0) return;
    const void *kept = engine.state() != nullptr ? engine.state()->residual() : nullptr;
    if (kept != nullptr)
      std::memcpy(residual, kept, bytes);
    else
      std::memset(residual, 0, bytes);
  });
}

int DCT_Request_get_info(DCT_Request request, MPI_Info *info_used) {
  return guarded(__func__, [&] {
    require(info_used != nullptr, DCT_ERR_ARG, "info_used is NULL");
    ensure_library_ready();
    const RequestEntry entry(&request);
    const RequestEngine &engine = entry.engine();
    const unsigned use = is_alltoallv(engine) ? KnobUse::alltoallv : KnobUse::allreduce;
    *info_used = info_of(engine.config().in_force(use));
  });
}

int DCT_Comm_get_info(MPI_Comm comm, MPI_Info *info_used) {
  return guarded(__func__, [&] {
    require(info_used != nullptr, DCT_ERR_ARG, "info_used is NULL");
    const std::shared_ptr<CommContext> context = find_comm_context(comm);
    std::optional<ContextEntry> entry;
    if (context) entry.emplace(*context);
    std::shared_ptr<const Config> config;
    {
      std::lock_guard<std::recursive_mutex> lock(library_mutex());
      if (context) config = context->drop_in_config;
    }
    // Before the first compressed DCT_Allreduce on comm: what it would read now.
    if (!config)
      config = std::make_shared<const Config>(Config::from(MPI_INFO_NULL, KnobUse::drop_in));
    *info_used = info_of(config->in_force(KnobUse::drop_in));
  });
}

int DCT_Request_set_stream(DCT_Request request, void *stream) {
  return guarded(__func__, [&] {
    const RequestEntry entry(&request);
    entry.engine().set_stream(stream);
  });
}

int DCT_Allreduce(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm) {
  return guarded(__func__, [&] {
    const AllreduceArgs args{sendbuf, recvbuf, count, datatype, op, comm};
    // A bad communicator leaves no peers to agree with; every other refusal is agreed on, and
    // so is which path the call takes: a rank in MPI's call while another is in dct's
    // compressed exchange would wait for ever (issue 35).
    ensure_library_ready();
    std::shared_ptr<CommContext> context = comm_context(comm);
    const ContextEntry entry(*context);
    std::exception_ptr local_error;
    try {
      args.validate(context->shared_comm());
    } catch (...) {
      local_error = std::current_exception();
    }
    agree(context->shared_comm(), context->rank(), local_error,
          drop_in_call_fingerprint(args, local_error == nullptr), nullptr);
    if (!args.compressed()) {  // no state to keep: exactly MPI's call (aliased: in place)
      // On the duplicate for traffic that completes within the call (the agreement's), whose
      // errors return: a pair MPI refuses (MPI_C_BOOL with MPI_SUM, MPI_FLOAT with MPI_MAXLOC)
      // is DCT_ERR_MPI on every rank (the arguments were agreed), not an abort through the
      // user communicator's MPI_ERRORS_ARE_FATAL.
      const void *send = sendbuf == recvbuf && count > 0 ? MPI_IN_PLACE : sendbuf;
      check_mpi(MPI_Allreduce(send, recvbuf, static_cast<int>(count), datatype, op,
                              context->shared_comm()),
                "MPI_Allreduce");
      return;
    }
    const std::shared_ptr<const Config> config = drop_in_config(*context, args);
    RequestEngine &engine = context->drop_in.acquire(
        {args.recvbuf, args.count, args.datatype}, config->drop_in_limit, config->drop_in_memory,
        [&] { return make_allreduce_engine(args, *config); });
    {
      const KernelTurn kernels;
      engine.start(sendbuf, recvbuf);
    }
    engine.wait(DCT_STATUS_IGNORE);
  });
}

int DCT_Allreduce_status(const void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Comm comm,
                         DCT_Status *status) {
  return guarded(__func__, [&] {
    require(status != nullptr, DCT_ERR_ARG, "status is NULL");
    check_status(status, "status");
    std::shared_ptr<CommContext> context = find_comm_context(comm);
    std::optional<ContextEntry> entry;
    if (context) entry.emplace(*context);
    std::lock_guard<std::recursive_mutex> lock(library_mutex());
    const DropInKey key{recvbuf, count, datatype};
    const RequestEngine *engine = context ? context->drop_in.find(key) : nullptr;
    require(engine != nullptr, DCT_ERR_ARG,
            "no DCT_Allreduce state for this (comm, recvbuf, count, datatype)" +
                (context && context->drop_in.evicted() > 0
                     ? "; " + std::to_string(context->drop_in.evicted()) +
                           " states were evicted on this communicator (DCT_DROP_IN_LIMIT, "
                           "DCT_DROP_IN_MEMORY)"
                     : std::string()));
    deliver_status(engine->last_status(), status);
  });
}

}  // extern "C"
