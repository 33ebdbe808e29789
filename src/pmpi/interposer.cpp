// libdct_pmpi: compresses the MPI_Allreduce calls of an unmodified MPI program.
//
//   DCT_PMPI=1 LD_PRELOAD=libdct_pmpi.so mpiexec -n 4 ./app
//
// Off unless DCT_PMPI=1. A call is compressed when it is a sum of MPI_FLOAT / MPI_DOUBLE (or
// Fortran REAL / DOUBLE PRECISION) of at least DCT_PMPI_MIN_COUNT elements on an
// intra-communicator; it then goes through DCT_Allreduce (state per communicator, receive
// buffer, count and datatype, released with the communicator). Every other call goes to MPI
// untouched, through its PMPI entry point, so MPI's own semantics and error handling apply.
//
// Fortran: Open MPI's Fortran bindings call PMPI_Allreduce directly, so the Fortran entry points
// are intercepted too: mpi_allreduce_ and its name-mangling variants (mpif.h, use mpi) and
// mpi_allreduce_f08_ (use mpi_f08). They compress when this MPI's Fortran MPI_IN_PLACE sentinel
// is known (Open MPI's mpi_fortran_in_place_, MPICH's MPIR_F_MPI_IN_PLACE once MPICH has set it)
// and forward the rest to the MPI's own Fortran entry point with the C entry points off (MPICH's
// binding calls MPI_Allreduce: the call must not be compressed or counted twice). A call whose
// sentinel is unknown is forwarded as it is: MPICH's binding then reaches MPI_Allreduce here, with
// MPI_IN_PLACE already translated. MPICH's mpi_f08 binding (mpi_allreduce_f08ts_) always does.
#include <dlfcn.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/drop_in_states.hpp"
#include "core/error.hpp"
#include "core/number_text.hpp"
#include "dct/dct.h"
#include "dp/allreduce.hpp"

#define DCT_PMPI_EXPORT extern "C" __attribute__((visibility("default")))

// Fortran entry points of the MPI library, resolved at run time if it has them.
extern "C" {
extern int mpi_fortran_in_place_ __attribute__((weak));  // Open MPI's Fortran MPI_IN_PLACE
extern void *MPIR_F_MPI_IN_PLACE __attribute__((weak));  // MPICH's: its address, set lazily
void pmpi_allreduce_(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *)
    __attribute__((weak));
void pmpi_allreduce_f08_(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *)
    __attribute__((weak));
}

namespace dct::detail {
namespace {

void arm_report();

/// The next definition of `name` after this library (the MPI's own), or nullptr.
void *next_symbol(const char *name) {
  return dlsym(RTLD_NEXT, name);
}

/// Set while dct itself runs: its own MPI calls must reach MPI, not this interposer.
thread_local bool inside_dct = false;

struct Tally {
  long long compressed = 0, passed = 0, bytes_sent = 0, dense_bytes = 0, entries = 0, elements = 0;
  long long whole = 0;  ///< through dct at dct_density=1: sent whole, as MPI_Allreduce
};
Tally tally;

/// This rank's DCT_PMPI* variables; a bad value disables the interposer with a message rather
/// than failing the application's MPI calls.
Config read_settings() {
  try {
    return Config::from(MPI_INFO_NULL, KnobUse::pmpi);
  } catch (const Error &e) {
    std::fprintf(stderr, "dct-pmpi: disabled: %s\n", e.what());
    return Config{};  // the defaults: interposer off
  }
}

/// The settings in force: agreed by every rank at MPI_Init (agree_at_init), else read on this
/// rank at its first call (an MPI started without passing through the hooks below).
Config &current_settings() {
  static Config config = read_settings();
  return config;
}
const Config &settings() {
  return current_settings();
}

int report_at_finalize(MPI_Comm, int, void *, void *) {
  // The drop-in states' totals outlive the contexts (whose finalize hook may have run first).
  const DropInTotals states = drop_in_totals();
  long long mine[10] = {tally.compressed, tally.passed,         tally.bytes_sent, tally.dense_bytes,
                        tally.entries,    tally.elements,       tally.whole,      states.made,
                        states.evicted,   states.evicted_unused};
  long long all[10] = {};
  double stranded = 0, peak = double(states.peak_bytes), peak_max = 0;
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Reduce(mine, all, 10, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  PMPI_Reduce(&states.evicted_mass, &stranded, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  PMPI_Reduce(&peak, &peak_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank != 0) return MPI_SUCCESS;
  // (Numbers formatted by to_chars: the application's LC_NUMERIC does not change the report.)
  if (all[6] > 0) {  // dct_density=1: no "1.0x less" that reads like compression (issue 37)
    std::fprintf(stderr,
                 "dct-pmpi: nothing compressed: %lld allreduce calls at dct_density=1 (sent "
                 "whole, as MPI_Allreduce), %lld passed to MPI unchanged\n",
                 all[6], all[1]);
    return MPI_SUCCESS;
  }
  std::fprintf(stderr,
               "dct-pmpi: %lld allreduce calls compressed, %lld passed to MPI unchanged; "
               "bytes sent %lld vs %lld for ring MPI_Allreduce (%sx less); achieved "
               "density %s\n",
               all[0], all[1], all[2], all[3],
               fixed(all[2] > 0 ? double(all[3]) / all[2] : 0.0, 1).c_str(),
               fixed(all[5] > 0 ? double(all[4]) / all[5] : 0.0, 5).c_str());
  // The error-feedback states behind those calls (issue 61: a receive buffer that moves every
  // call makes a state per call, and what each did not send is stranded in it).
  std::fprintf(stderr,
               "dct-pmpi: error-feedback states: %lld made (summed over ranks), %lld evicted "
               "(DCT_DROP_IN_LIMIT, DCT_DROP_IN_MEMORY), %lld of them used for one call only; "
               "residual mass never sent (sum of |residual| evicted): %s; largest memory of "
               "one rank's states %s MiB\n",
               all[7], all[8], all[9], decimal(stranded).c_str(),
               fixed(peak_max / (1 << 20), 1).c_str());
  if (all[0] > 0 && 2 * all[7] > all[0])
    std::fprintf(stderr,
                 "dct-pmpi: warning: most compressed calls met a receive buffer no earlier call "
                 "used, so their residuals were never sent: error feedback cannot work. Reduce "
                 "into the same buffer every step, or use a persistent request "
                 "(DCT_Allreduce_init)\n");
  return MPI_SUCCESS;
}

/// The drop-in's settings (DCT_DENSITY, DCT_ALGORITHM, ...), as DCT_Allreduce will read them;
/// `problem` gets the message of an invalid one.
bool drop_in_settings(Config &drop_in, std::string &problem) {
  try {
    drop_in = Config::from(MPI_INFO_NULL, KnobUse::drop_in);
    return true;
  } catch (const Error &e) {
    problem = e.what();
    return false;
  }
}

/// Rank 0's line at MPI_Init saying the interposer is on and what it does (a preload that
/// missed, or a setting that compresses nothing, would otherwise go unnoticed; issue 37).
void announce(const Config &config, const Config &drop_in) {
  if (config.pmpi_quiet) return;
  if (drop_in.density >= 1.0) {
    std::fprintf(stderr,
                 "dct-pmpi: on, but at dct_density=1: float/double sums of >= %lld elements go "
                 "through dct uncompressed, as MPI_Allreduce (DCT_PMPI_QUIET=1 hides this)\n",
                 config.pmpi_min_count);
    return;
  }
  std::string keys;
  for (const auto &[key, value] : drop_in.in_force(KnobUse::drop_in))
    keys += (keys.empty() ? "" : " ") + key.substr(4) + "=" + value;  // without "dct_"
  int major = 0, minor = 0, patch = 0;
  DCT_Get_version(&major, &minor, &patch);
  std::fprintf(stderr,
               "dct-pmpi: on (dct %d.%d.%d): MPI_Allreduce sums of float/double with >= %lld "
               "elements are compressed: %s (DCT_PMPI_QUIET=1 hides this)\n",
               major, minor, patch, config.pmpi_min_count, keys.c_str());
}

/// Right after MPI_Init: every rank of MPI_COMM_WORLD takes the same settings, or the
/// interposer stays off on every rank (a rank compressing where another calls MPI would wait
/// for ever; issue 35), and the report is armed on every rank, so that its reduction at
/// MPI_Finalize finds every rank in it.
void agree_at_init() {
  static bool agreed = false;
  if (agreed) return;
  agreed = true;
  Config &config = current_settings();
  // The drop-in's settings too: an invalid one would fail every compressed call (and abort the
  // program in MPI's error handler), so the interposer stays off instead, as for its own.
  Config drop_in;
  std::string problem;
  const bool valid = !config.pmpi_enabled || drop_in_settings(drop_in, problem);
  constexpr int n = 4;
  const long long mine[n] = {config.pmpi_enabled, config.pmpi_report, config.pmpi_min_count, valid};
  long long words[2 * n];  // max of each, then max of the negatives: -min
  for (int i = 0; i < n; ++i) {
    words[i] = mine[i];
    words[n + i] = -mine[i];
  }
  if (PMPI_Allreduce(MPI_IN_PLACE, words, 2 * n, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD) !=
      MPI_SUCCESS)
    return;
  bool same = true;
  for (int i = 0; i < n; ++i) same = same && words[i] == -words[n + i];
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!same || words[n + 3] == 0) {  // differing, or the drop-in's settings invalid somewhere
    if (rank == 0 && words[0] > 0) {
      if (!valid)
        std::fprintf(stderr, "dct-pmpi: disabled: %s\n", problem.c_str());
      else if (words[n + 3] == 0)
        std::fprintf(stderr, "dct-pmpi: disabled: a DCT_* setting is invalid on some ranks\n");
      else
        std::fprintf(stderr,
                     "dct-pmpi: disabled: DCT_PMPI, DCT_PMPI_REPORT or DCT_PMPI_MIN_COUNT differ "
                     "between ranks (or are invalid on some); every rank must set the same\n");
    }
    config = Config{};
    return;
  }
  if (!config.pmpi_enabled) return;
  if (rank == 0) announce(config, drop_in);
  arm_report();
}

/// The report hook, hung on MPI_COMM_SELF (deleted first thing in MPI_Finalize) once.
void arm_report() {
  static bool armed = false;
  if (armed || !settings().pmpi_report) return;
  armed = true;
  int keyval = MPI_KEYVAL_INVALID;
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, report_at_finalize, &keyval, nullptr);
  PMPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr);
}

bool should_compress(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                     MPI_Op op, MPI_Comm comm) {
  if (inside_dct || !settings().pmpi_enabled) return false;
  const AllreduceArgs args{sendbuf, recvbuf, count, datatype, op, comm};
  if (!args.compressed() || count < settings().pmpi_min_count || count > DCT_MAX_COUNT ||
      sendbuf == nullptr || recvbuf == nullptr || recvbuf == MPI_IN_PLACE || comm == MPI_COMM_NULL)
    return false;
  int inter = 1;
  // dct's own calls (a density-1 request of a program that also calls dct) are MPI's.
  return PMPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && !inter && !is_private(comm);
}

/// The compressed call; MPI error semantics for its failures (the communicator's handler).
int compressed_allreduce(const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm) {
  arm_report();
  inside_dct = true;
  int rc = DCT_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  DCT_Status status;
  if (rc == DCT_SUCCESS) rc = DCT_Allreduce_status(recvbuf, count, datatype, comm, &status);
  inside_dct = false;
  if (rc != DCT_SUCCESS) {
    std::fprintf(stderr, "dct-pmpi: %s\n", DCT_Get_last_error());
    PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);  // aborts under MPI_ERRORS_ARE_FATAL
    return MPI_ERR_OTHER;
  }
  if (status.algorithm == DCT_ALGORITHM_DENSE && status.density >= 1.0) {
    tally.whole += 1;
    return MPI_SUCCESS;
  }
  tally.compressed += 1;
  tally.bytes_sent += status.bytes_sent;
  tally.dense_bytes += status.dense_bytes;
  tally.entries += status.nnz_sent;
  tally.elements += status.count;
  return MPI_SUCCESS;
}

void count_passed() {
  if (!inside_dct && settings().pmpi_enabled) {
    arm_report();
    tally.passed += 1;
  }
}

/// This MPI's Fortran MPI_IN_PLACE, or nullptr while it is unknown.
const void *fortran_in_place() {
  if (&mpi_fortran_in_place_ != nullptr) return &mpi_fortran_in_place_;
  if (&MPIR_F_MPI_IN_PLACE != nullptr) return MPIR_F_MPI_IN_PLACE;
  return nullptr;
}

/// Fortran: the C handles and buffers of a call, or false when this MPI's Fortran in-place
/// sentinel is unknown (then the call is forwarded untouched).
bool fortran_call(void *&sendbuf, const void *recvbuf, const MPI_Fint *datatype, const MPI_Fint *op,
                  const MPI_Fint *comm, MPI_Datatype &c_datatype, MPI_Op &c_op, MPI_Comm &c_comm) {
  const void *in_place = fortran_in_place();
  if (in_place == nullptr) return false;
  // MPI_IN_PLACE as the receive buffer is erroneous: MPI reports it (dct would write there).
  if (recvbuf == in_place) return false;
  if (sendbuf == in_place) sendbuf = MPI_IN_PLACE;
  c_datatype = MPI_Type_f2c(*datatype);
  c_op = MPI_Op_f2c(*op);
  c_comm = MPI_Comm_f2c(*comm);
  return true;
}

using FortranAllreduce = void (*)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                                  MPI_Fint *);

void fortran_allreduce(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype,
                       MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror, FortranAllreduce forward) {
  void *send = sendbuf;
  MPI_Datatype c_datatype;
  MPI_Op c_op;
  MPI_Comm c_comm;
  const bool known = fortran_call(send, recvbuf, datatype, op, comm, c_datatype, c_op, c_comm);
  if (known && should_compress(send, recvbuf, *count, c_datatype, c_op, c_comm)) {
    const int rc = compressed_allreduce(send, recvbuf, *count, c_datatype, c_op, c_comm);
    if (ierror) *ierror = rc;
    return;
  }
  if (forward == nullptr) {  // an MPI without this Fortran PMPI entry point: nothing to call
    count_passed();
    if (ierror) *ierror = MPI_ERR_OTHER;
    return;
  }
  if (!known) return forward(sendbuf, recvbuf, count, datatype, op, comm, ierror);
  count_passed();
  const bool outer = inside_dct;
  inside_dct = true;  // an MPI_Allreduce the binding may call is this call, already counted
  forward(sendbuf, recvbuf, count, datatype, op, comm, ierror);
  inside_dct = outer;
}

}  // namespace
}  // namespace dct::detail

using namespace dct::detail;

DCT_PMPI_EXPORT int MPI_Init(int *argc, char ***argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) agree_at_init();
  return rc;
}

DCT_PMPI_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) agree_at_init();
  return rc;
}

DCT_PMPI_EXPORT int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  if (should_compress(sendbuf, recvbuf, count, datatype, op, comm))
    return compressed_allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  count_passed();
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

// Not compressed yet: dct's allreduce does not progress in the background, and completing it
// inside MPI_Iallreduce could deadlock a correct program that communicates before its Wait.
DCT_PMPI_EXPORT int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                   MPI_Request *request) {
  count_passed();
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

// Fortran's MPI_INIT: Open MPI's binding calls PMPI_Init, past the C hook above. Each hook
// forwards to the MPI's own entry point of the same name (the next definition after this
// library: RTLD_NEXT), which exists wherever the program could link against the name; MPICH
// has mpi_init_f08_ but no pmpi_init_f08_.
#define DCT_FORTRAN_INIT(name)                                                              \
  DCT_PMPI_EXPORT void name(MPI_Fint *ierror) {                                             \
    static const auto forward = reinterpret_cast<void (*)(MPI_Fint *)>(next_symbol(#name)); \
    if (forward == nullptr) {                                                               \
      if (ierror) *ierror = MPI_ERR_OTHER;                                                  \
      return;                                                                               \
    }                                                                                       \
    forward(ierror);                                                                        \
    if (ierror == nullptr || *ierror == MPI_SUCCESS) agree_at_init();                       \
  }
#define DCT_FORTRAN_INIT_THREAD(name)                                                       \
  DCT_PMPI_EXPORT void name(MPI_Fint *required, MPI_Fint *provided, MPI_Fint *ierror) {     \
    static const auto forward =                                                             \
        reinterpret_cast<void (*)(MPI_Fint *, MPI_Fint *, MPI_Fint *)>(next_symbol(#name)); \
    if (forward == nullptr) {                                                               \
      if (ierror) *ierror = MPI_ERR_OTHER;                                                  \
      return;                                                                               \
    }                                                                                       \
    forward(required, provided, ierror);                                                    \
    if (ierror == nullptr || *ierror == MPI_SUCCESS) agree_at_init();                       \
  }
DCT_FORTRAN_INIT(mpi_init_)
DCT_FORTRAN_INIT(mpi_init__)
DCT_FORTRAN_INIT(mpi_init)
DCT_FORTRAN_INIT(MPI_INIT)
DCT_FORTRAN_INIT(mpi_init_f08_)
DCT_FORTRAN_INIT_THREAD(mpi_init_thread_)
DCT_FORTRAN_INIT_THREAD(mpi_init_thread__)
DCT_FORTRAN_INIT_THREAD(mpi_init_thread)
DCT_FORTRAN_INIT_THREAD(MPI_INIT_THREAD)
DCT_FORTRAN_INIT_THREAD(mpi_init_thread_f08_)
#undef DCT_FORTRAN_INIT
#undef DCT_FORTRAN_INIT_THREAD

#define DCT_FORTRAN_ALLREDUCE(name, forward)                                                   \
  DCT_PMPI_EXPORT void name(void *sendbuf, void *recvbuf, MPI_Fint *count, MPI_Fint *datatype, \
                            MPI_Fint *op, MPI_Fint *comm, MPI_Fint *ierror) {                  \
    fortran_allreduce(sendbuf, recvbuf, count, datatype, op, comm, ierror, forward);           \
  }
// mpif.h and `use mpi`, in every name mangling Fortran compilers use.
DCT_FORTRAN_ALLREDUCE(mpi_allreduce_, pmpi_allreduce_)
DCT_FORTRAN_ALLREDUCE(mpi_allreduce__, pmpi_allreduce_)
DCT_FORTRAN_ALLREDUCE(mpi_allreduce, pmpi_allreduce_)
DCT_FORTRAN_ALLREDUCE(MPI_ALLREDUCE, pmpi_allreduce_)
// `use mpi_f08` (Open MPI passes the handles' integer by reference, ierror may be absent).
DCT_FORTRAN_ALLREDUCE(mpi_allreduce_f08_, pmpi_allreduce_f08_)
#undef DCT_FORTRAN_ALLREDUCE
