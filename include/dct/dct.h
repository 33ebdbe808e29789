/**
 * @file dct.h
 * @brief The dct C ABI: compressed collectives for distributed training.
 * (Over 450 lines: the whole C ABI, 26 functions and their types, is one header, as nccl.h.)
 *
 * dct replaces `MPI_Allreduce` on gradients by a compressed allreduce implementing Dynamic
 * Communication Thresholding (DCT-DP, Gupta et al., KDD 2021): per tensor, every rank adds its
 * gradient to a *residual* (error feedback), sends only the entries whose magnitude reaches a
 * threshold `tau` (the value that keeps a `dct_density` fraction of the entries) and keeps the
 * rest for later calls. DCT-MP compresses the alltoallv of activations the same way.
 *
 * This header is the contract: per function what it does, its arguments' rules, its return
 * codes, whether it is collective. The settings (every `dct_*` info key and `DCT_*` environment
 * variable) are documented in docs/configuration.md. Conventions are MPI's: argument order,
 * persistent requests (`*_init`, `DCT_Start`, `DCT_Wait`, `DCT_Request_free`), integer return
 * codes, configuration through `MPI_Info`.
 *
 * Guarantees that hold for every entry point:
 * - A call that returns an error caused by its arguments (`DCT_ERR_ARG` ... `DCT_ERR_ACTIVE`)
 *   has changed nothing: neither the user's buffers nor any residual or counter.
 * - A collective that fails after it started (`DCT_ERR_MPI`, `DCT_ERR_PEER`,
 *   `DCT_ERR_MISMATCH`) loses no gradient mass: this call's contribution stays in the residual
 *   and is sent by a later call. After `DCT_ERR_PEER` or `DCT_ERR_MISMATCH` the receive buffer
 *   is left as it was (after `DCT_ERR_MPI` too, except with `dct_algorithm=dense`, whose
 *   reduction MPI runs in it). A rejected message fails the call on every rank with the
 *   `allgather` and `split` algorithms; with `recursive_doubling` only on the ranks whose
 *   partial sums depended on it (docs/reliability.md).
 * - No C++ exception crosses this interface.
 *
 * Threads: per communicator, as NCCL (docs/reliability.md). Under `MPI_THREAD_MULTIPLE`,
 * threads may call dct at the same time on different communicators (the communicator a request
 * was created on, or the one a call names). Calls on one communicator must not overlap: a call
 * that enters while another thread is inside dct on it returns `DCT_ERR_THREAD` at once and
 * changes nothing (the caller may retry; the thread inside is unaffected). A completion call
 * also progresses the calls in flight on other communicators that no thread is inside.
 * `DCT_Get_last_error`, `DCT_Error_string`, `DCT_Get_version`, `DCT_Algorithm_name`,
 * `DCT_Backend_name` and `DCT_Backend_compiled` may be called at any time from any thread. A
 * `DCT_Wait` holds its communicator until its call completes: threads that share one should
 * poll with `DCT_Test` and pause between polls and retries (the entry is a try-lock, not a fair
 * one: a thread that polls without pause can keep the other from starting its call).
 */
#ifndef DCT_H
#define DCT_H

/* C++: mpi.h without Open MPI's and MPICH's MPI-2 C++ bindings (removed in MPI 3.0), which need
 * MPI's C++ library at link time; a program that links only MPI's C library (as pkg-config's
 * and CMake's MPI C flags do) then links. Effective when dct.h comes before mpi.h; the CMake
 * target dct::dct and dct.pc define both for every translation unit. */
#if defined(__cplusplus) && !defined(OMPI_SKIP_MPICXX)
#define OMPI_SKIP_MPICXX 1
#endif
#if defined(__cplusplus) && !defined(MPICH_SKIP_MPICXX)
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <stddef.h>

#include "dct/dct_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Marks the symbols of the public ABI; everything else in libdct is hidden. */
#if defined(_WIN32)
#define DCT_EXPORT
#else
#define DCT_EXPORT __attribute__((visibility("default")))
#endif

/**
 * @defgroup errors Return codes
 * Every function returns `DCT_SUCCESS` or one of these codes, except three that cannot fail
 * and return a string that is never NULL (as NCCL's `ncclGetErrorString`):
 * `DCT_Algorithm_name`, `DCT_Backend_name` and `DCT_Get_last_error`. `DCT_Error_string`
 * turns a code into a fixed sentence; `DCT_Get_last_error` gives the detailed message of the
 * last failure on the calling thread.
 * @{
 */
typedef enum {
  DCT_SUCCESS = 0,              /**< The call completed. */
  DCT_ERR_ARG = 1,              /**< An argument is invalid (e.g. a NULL output pointer). */
  DCT_ERR_BUFFER = 2,           /**< A buffer is NULL while its count is positive. */
  DCT_ERR_COUNT = 3,            /**< Count negative or too large (see `DCT_MAX_COUNT`). */
  DCT_ERR_DATATYPE = 4,         /**< `MPI_DATATYPE_NULL` or a datatype MPI rejects. */
  DCT_ERR_OP = 5,               /**< `MPI_OP_NULL`. */
  DCT_ERR_COMM = 6,             /**< `MPI_COMM_NULL` or an inter-communicator. */
  DCT_ERR_INFO = 7,             /**< Unknown or unparsable configuration value (info or env). */
  DCT_ERR_REQUEST = 8,          /**< `DCT_REQUEST_NULL`, or a request already freed. */
  DCT_ERR_ACTIVE = 9,           /**< Request started and not yet completed (or not started). */
  DCT_ERR_MPI = 10,             /**< An MPI call failed; the message has MPI's error string. */
  DCT_ERR_PEER = 11,            /**< A peer's message failed validation; nothing was written. */
  DCT_ERR_MISMATCH = 12,        /**< Ranks disagree on the collective's count, datatype or
                                     configuration (every rank returns it). */
  DCT_ERR_NO_MEMORY = 13,       /**< Allocation failed. */
  DCT_ERR_NOT_INITIALIZED = 14, /**< MPI not initialized, or already finalized. */
  DCT_ERR_NOT_COMPILED = 15,    /**< The feature or backend was not compiled into this build. */
  DCT_ERR_INTERNAL = 16,        /**< A bug in dct: please report it with the message. */
  DCT_ERR_CKPT_NOT_FOUND = 17,  /**< No checkpoint file at the path. */
  DCT_ERR_CKPT_FORMAT = 18,     /**< The file is not HDF5, or not a dct checkpoint. */
  DCT_ERR_CKPT_VERSION = 19,    /**< The checkpoint's format version is not supported. */
  DCT_ERR_CKPT_MISMATCH = 20,   /**< A live request is missing from the checkpoint, or differs. */
  DCT_ERR_CKPT_CHECKSUM = 21,   /**< A rank's saved data does not match its checksum. */
  DCT_ERR_CKPT_TRUNCATED = 22,  /**< The file is HDF5 but cut short or damaged. */
  DCT_ERR_CKPT_IO = 23,         /**< Creating, writing or renaming the checkpoint failed. */
  DCT_ERR_THREAD = 24,          /**< Another thread is inside dct on this communicator. */
  DCT_ERR_LASTCODE = 24         /**< Largest code, for range checks. */
} DCT_Error;
/** @} */

/**
 * @defgroup version Version
 * The macros give the version of the headers compiled against (see `dct_config.h`:
 * `DCT_VERSION_MAJOR`, `DCT_VERSION_MINOR`, `DCT_VERSION_PATCH`, `DCT_VERSION_CODE`);
 * `DCT_Get_version` gives the version of the library linked at run time.
 * @{
 */
/** @brief Version of the library linked at run time. Any pointer may be NULL. */
DCT_EXPORT int DCT_Get_version(int *major, int *minor, int *patch);
/** @} */

/** @brief Algorithms of the sparse allreduce (`dct_algorithm` info key). */
typedef enum {
  DCT_ALGORITHM_AUTO = 0,        /**< Per call, the fastest of the others by a cost model. */
  DCT_ALGORITHM_ALLGATHER = 1,   /**< Allgatherv of (index, value) lists, local scatter-add. */
  DCT_ALGORITHM_DENSE = 2,       /**< Threshold-masked dense `MPI_Allreduce`. */
  DCT_ALGORITHM_PASSTHROUGH = 3, /**< Not compressed: the call was handed to MPI unchanged. */
  DCT_ALGORITHM_SPLIT = 4,       /**< Sparse reduce-scatter to segment owners, then gather. */
  DCT_ALGORITHM_RECURSIVE_DOUBLING = 5, /**< Pairwise sparse merges in log2(P) rounds. */
  /** split in two tiers: within groups of ranks (a node's, or `dct_group_size` consecutive
   *  ranks), then across groups; about 2(G + P/G) messages per rank instead of 2P. */
  DCT_ALGORITHM_HIERARCHICAL = 6
} DCT_Algorithm;

/**
 * @brief The name of an algorithm as the `dct_algorithm` key spells it ("auto", "allgather",
 * "dense"; "passthrough" for calls handed to MPI), or "unknown". Never NULL.
 */
DCT_EXPORT const char *DCT_Algorithm_name(int algorithm);

/**
 * @brief Where the compression kernels run (`dct_backend` info key).
 *
 * `auto` picks from where the buffers live: CUDA or HIP device memory (detected from pointer
 * attributes) goes to that GPU backend, host memory to Kokkos on the host. A backend that was
 * not compiled into this build answers `DCT_ERR_NOT_COMPILED` when it is asked for by name.
 */
typedef enum {
  DCT_BACKEND_AUTO = 0,   /**< From the buffers' memory space. */
  DCT_BACKEND_KOKKOS = 1, /**< Kokkos on its default host execution space (Serial, OpenMP). */
  DCT_BACKEND_CUDA = 2,   /**< Native CUDA kernels (CUB); device buffers. */
  DCT_BACKEND_HIP = 3     /**< Native HIP kernels (rocPRIM); device buffers. */
} DCT_Backend;

/**
 * @brief The name of a backend as the `dct_backend` key spells it ("auto", "kokkos", "cuda",
 * "hip"), or "unknown". Never NULL.
 */
DCT_EXPORT const char *DCT_Backend_name(int backend);

/**
 * @brief Whether `backend` was compiled into this library: `*compiled` = 1 or 0.
 * `DCT_BACKEND_AUTO` and `DCT_BACKEND_KOKKOS` are always compiled. Not collective.
 * @return `DCT_SUCCESS`, or `DCT_ERR_ARG` (`compiled` is NULL or `backend` is not a
 *         `DCT_Backend`).
 */
DCT_EXPORT int DCT_Backend_compiled(int backend, int *compiled);

/** @brief Largest element count of a compressed tensor (indices are 32-bit on the wire). */
#define DCT_MAX_COUNT ((MPI_Count)4294967295LL)

/** @brief `DCT_Status.magic` of a status set up by `DCT_STATUS_INITIALIZER` ("DCTS"). */
#define DCT_STATUS_MAGIC 0x44435453u

/* C++ (14 or later) statuses set their header themselves; C and Fortran use the initializer. */
#ifdef __cplusplus
#define DCT_STATUS_DEFAULT_(value) = value
#else
#define DCT_STATUS_DEFAULT_(value)
#endif

/**
 * @brief What one completed call did, as seen by the calling rank. Byte counts are logical
 * payload bytes, independent of how MPI routes them (docs/configuration.md, "Status").
 *
 * **Versioned** (as NCCL versions `ncclConfig_t`): the first three fields say which layout the
 * caller was compiled with, so that later versions append fields without breaking binaries
 * built against an older dct.h, and arrays passed to `DCT_Waitall` keep their stride. C sets
 * them with `DCT_STATUS_INITIALIZER`; a C++ `DCT_Status` and a Fortran `type(dct_status)` set
 * them themselves. dct writes only the fields within the caller's `size`, never the header. A
 * status whose `magic` is not `DCT_STATUS_MAGIC`, or whose `size` is below this layout's or not a
 * multiple of 8, is refused with `DCT_ERR_ARG` before the call does anything.
 */
typedef struct DCT_Status {
  size_t size DCT_STATUS_DEFAULT_(sizeof(DCT_Status)); /**< `sizeof(DCT_Status)` as compiled. */
  unsigned int magic DCT_STATUS_DEFAULT_(DCT_STATUS_MAGIC);   /**< `DCT_STATUS_MAGIC`. */
  unsigned int version DCT_STATUS_DEFAULT_(DCT_VERSION_CODE); /**< `DCT_VERSION_CODE`. */
  MPI_Count count;                                            /**< Elements in the tensor. */
  MPI_Count nnz_sent;          /**< Entries this rank contributed in this call. */
  MPI_Count nnz_received;      /**< Entries received from the other ranks in this call. */
  MPI_Count bytes_sent;        /**< Logical bytes this rank sent in this call. */
  MPI_Count bytes_received;    /**< Logical bytes this rank received in this call. */
  MPI_Count dense_bytes;       /**< Bytes an uncompressed ring allreduce would send per rank. */
  double tau;                  /**< Threshold used in this call (0 when not compressed). */
  double density;              /**< Achieved density: `nnz_sent / count` (1 when dense). */
  int tau_reestimated;         /**< 1 if `tau` was re-estimated in this call, else 0. */
  int algorithm;               /**< `DCT_Algorithm` that was actually used. */
  MPI_Count calls;             /**< Calls completed on this request or drop-in state so far. */
  MPI_Count total_bytes_sent;  /**< Sum of `bytes_sent` over those calls. */
  MPI_Count total_dense_bytes; /**< Sum of `dense_bytes` over those calls. */
  double compression_ratio;    /**< `dense_bytes / bytes_sent` of this call (0 when nothing
                                    was sent to another rank, e.g. on one rank). */
  double max_abs_error;        /**< `dct_mp_compressor=error_bounded`: the largest |received -
                                    sent| over the values this rank sent in this call (0 when
                                    exact); 0 for every other request. */
  MPI_Count nonfinite;         /**< NaN and +-Inf entries this rank's compressed
                                    allreduce met in this call (of sendbuf plus residual, or of
                                    the velocity with `dct_momentum`), all of them sent, or -1
                                    where the call does not look at the entries: density 1,
                                    pass-through and DCT-MP requests. */
  /* Later versions append fields here (and only here). */
} DCT_Status;
#undef DCT_STATUS_DEFAULT_

/**
 * @brief Initialises a `DCT_Status` in C: header set, every field zero. For an array:
 * `for (i = 0; i < n; ++i) statuses[i] = (DCT_Status)DCT_STATUS_INITIALIZER;`.
 */
#define DCT_STATUS_INITIALIZER                                                                   \
  {                                                                                              \
    sizeof(DCT_Status), DCT_STATUS_MAGIC, DCT_VERSION_CODE, 0, 0, 0, 0, 0, 0, 0.0, 0.0, 0, 0, 0, \
        0, 0, 0.0, 0.0, 0                                                                        \
  }

/** @brief Pass as the status argument when the status is not wanted. */
#define DCT_STATUS_IGNORE ((DCT_Status *)0)

/** @brief Opaque handle of a persistent compressed collective; owns its residual. */
typedef struct DCT_Request_s *DCT_Request;
/** @brief The null request; what `DCT_Request_free` leaves in the handle. */
#define DCT_REQUEST_NULL ((DCT_Request)0)

/**
 * @defgroup allreduce Compressed allreduce (DCT-DP)
 *
 * Configuration: the `MPI_Info` of `DCT_Allreduce_init` (string values); an absent key takes
 * its `DCT_*` environment variable, then its default (docs/configuration.md). Unknown keys that
 * start with `dct_` are refused (`DCT_ERR_INFO`); others are ignored (they may be MPI's).
 *
 * Per call, on every rank: `acc = send + residual`; `tau` is the k-th largest finite `|acc|`,
 * `k = ceil(density * count)`; the entries with `|acc| >= tau` and `acc != 0`, and every NaN and
 * infinity, are sent; `residual = acc - sent`; the result, the same on every rank, is the sum
 * over ranks of the sent entries. At density 1 the call is `MPI_Allreduce` itself, bit for bit.
 * `MPI_FLOAT` and `MPI_DOUBLE` (and Fortran's `MPI_REAL`, `MPI_DOUBLE_PRECISION`, `MPI_REAL4`,
 * `MPI_REAL8`) with `MPI_SUM` are compressed; every other combination is handed to
 * `MPI_Allreduce` unchanged (`DCT_ALGORITHM_PASSTHROUGH`), and one MPI refuses returns
 * `DCT_ERR_MPI` on every rank, whatever `comm`'s error handler.
 * @{
 */

/**
 * @brief Creates a persistent compressed allreduce, like `MPI_Allreduce_init` (MPI-4).
 * Collective over `comm`: every rank creates its matching requests in the same order.
 *
 * The buffers are bound to the request: every `DCT_Start` reads `sendbuf` and writes
 * `recvbuf`. The ranks agree here that every rank accepted its arguments and that the settings
 * that must match do (docs/reliability.md lists them); otherwise every rank returns the same
 * code and creates nothing: the largest code a rank's own checks gave (`DCT_Get_last_error`
 * names the rank), else `DCT_ERR_MISMATCH`. Only a bad `comm` is refused on its rank alone.
 *
 * @param sendbuf  Gradient to reduce, or `MPI_IN_PLACE` to take it from `recvbuf`.
 * @param recvbuf  Receives the sum over all ranks; not `MPI_IN_PLACE` (`DCT_ERR_BUFFER`).
 * @param count    Number of elements, 0 to `DCT_MAX_COUNT` for compressed types.
 * @param datatype Element type; a derived one must be committed (`DCT_ERR_DATATYPE`).
 * @param op       Reduction; only `MPI_SUM` is compressed.
 * @param comm     Intra-communicator; dct works on a private duplicate of it.
 * @param info     Configuration keys, or `MPI_INFO_NULL`.
 * @param request  Receives the new request.
 * @return `DCT_SUCCESS`, `DCT_ERR_BUFFER`, `DCT_ERR_COUNT`, `DCT_ERR_DATATYPE`, `DCT_ERR_OP`,
 *         `DCT_ERR_COMM`, `DCT_ERR_INFO`, `DCT_ERR_ARG` (request is NULL), `DCT_ERR_NO_MEMORY`,
 *         `DCT_ERR_NOT_COMPILED` (a `dct_backend` or `dct_transport` not in this build),
 *         `DCT_ERR_MISMATCH`, `DCT_ERR_NOT_INITIALIZED`.
 */
DCT_EXPORT int DCT_Allreduce_init(const void *sendbuf, void *recvbuf, MPI_Count count,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info,
                                  DCT_Request *request);

/**
 * @brief Starts one call of a persistent request: compresses `sendbuf` (updating the residual)
 * and posts the first exchange, without waiting for any other rank. Complete it with
 * `DCT_Wait`, `DCT_Test` or `DCT_Waitall`; every one of them progresses *all* calls in flight.
 *
 * Compressed requests (density below 1) may be started, and completed, in any order. Density-1
 * and passed-through requests must be started in the same order on every rank, as MPI requires
 * of `MPI_Start` (dct does not detect another order: docs/reliability.md), in any order
 * relative to compressed ones; such a call runs, blocking, in the first completion call after
 * every rank started it and every such call started before it on the communicator is complete.
 * Between `DCT_Start` and completion the buffers belong to dct.
 * @return `DCT_SUCCESS`, `DCT_ERR_REQUEST`, `DCT_ERR_ACTIVE` (already started; or a DCT-MP
 *         backward whose forward is started or has completed no call), `DCT_ERR_MPI`,
 *         `DCT_ERR_THREAD`, `DCT_ERR_NOT_INITIALIZED` (also after `MPI_Finalize`).
 */
DCT_EXPORT int DCT_Start(DCT_Request *request);

/**
 * @brief Completes a started request and writes the result into its `recvbuf`. Waits for the
 * other ranks' part of the call.
 * @param request The request; stays allocated and can be started again.
 * @param status  Receives what the call did, or `DCT_STATUS_IGNORE`.
 * @return `DCT_SUCCESS`, `DCT_ERR_REQUEST`, `DCT_ERR_ACTIVE` (not started), `DCT_ERR_MPI`,
 *         `DCT_ERR_PEER`, `DCT_ERR_MISMATCH`, `DCT_ERR_THREAD`. After an error the request is
 *         inactive again and this call's contribution is kept in the residual. `DCT_ERR_ARG`
 *         for a status without a valid header (see `DCT_Status`): then nothing happened, the
 *         request is still started.
 */
DCT_EXPORT int DCT_Wait(DCT_Request *request, DCT_Status *status);

/**
 * @brief Progresses every call in flight once, and completes `request` if it is done.
 *
 * Never waits for other ranks on compressed calls. A density-1, passed-through or DCT-MP call
 * is one blocking exchange: the completion call that finds it ready to run (every call started
 * before it complete) runs it, and returns when every rank has entered it; before that,
 * `DCT_Test` returns `*flag = 0`.
 * @param request The started request.
 * @param flag    Set to 1 if the call completed (its result is in `recvbuf`, the request is
 *                inactive and `status` is filled), else 0.
 * @param status  As for `DCT_Wait`, written only when `*flag` is 1; or `DCT_STATUS_IGNORE`.
 * @return The codes of `DCT_Wait`, and `DCT_ERR_ARG` if `flag` is NULL. An error completes the
 *         call (`*flag` is 1) as `DCT_Wait` would.
 */
DCT_EXPORT int DCT_Test(DCT_Request *request, int *flag, DCT_Status *status);

/** @brief Pass as the statuses argument of `DCT_Waitall` when they are not wanted. */
#define DCT_STATUSES_IGNORE ((DCT_Status *)0)

/**
 * @brief Completes `count` started requests, in whatever order they finish.
 *
 * Every request is completed even if some fail; the first failure (in array order) is
 * returned and `DCT_Get_last_error` names its index. As with `MPI_Waitall`,
 * `DCT_REQUEST_NULL` entries and requests that are not started (e.g. already completed by
 * `DCT_Test`) are skipped, with a zeroed status.
 * @param statuses Array of `count` statuses, or `DCT_STATUSES_IGNORE`. Its stride is
 *                 `statuses[0].size`: an array of a newer or older dct.h's `DCT_Status` works.
 *                 Every element needs a valid header of that same size, checked before any
 *                 request is waited for.
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (requests NULL with count > 0, count < 0, or a status
 *         without a valid header: then nothing happened), or the first code `DCT_Wait` would
 *         have returned for one of the requests.
 */
DCT_EXPORT int DCT_Waitall(int count, DCT_Request requests[], DCT_Status statuses[]);

/**
 * @brief Frees a request and its residual, and sets `*request` to `DCT_REQUEST_NULL`.
 *
 * Freeing a handle twice, or a copy of a freed handle, returns `DCT_ERR_REQUEST` (handles are
 * never reused). Callable after `MPI_Finalize`. Frees the request's duplicate communicator,
 * so every rank should eventually free its matching request (in any order).
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (request is NULL), `DCT_ERR_REQUEST`,
 *         `DCT_ERR_ACTIVE` (started and not waited for).
 */
DCT_EXPORT int DCT_Request_free(DCT_Request *request);

/**
 * @brief Copies this rank's residual (the gradient mass not sent yet) into `residual`: `count`
 * elements of the request's datatype, zeros for a request that keeps none (density 1, not
 * compressed, or DCT-MP, whose count is the sum of its `sendcounts`). For diagnostics and for
 * checking error feedback: the sum over ranks of the residuals plus every result delivered
 * equals every input. Not collective. The request must not be active.
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (NULL `residual` of a request whose count is positive),
 * `DCT_ERR_REQUEST`, `DCT_ERR_ACTIVE`.
 */
DCT_EXPORT int DCT_Request_get_residual(DCT_Request request, void *residual);

/**
 * @brief The configuration in force for `request`, like `MPI_Comm_get_info`: a new `MPI_Info`
 * holding every key that acts on this kind of request (the allreduce's keys, or DCT-MP's for a
 * forward or backward alltoallv request; a backward shows its forward's), each with the value
 * the request uses, whether it came from the info at init, a `DCT_*` variable or the default.
 * Values are spelt as the keys take them (numbers in the shortest form that reads back to the
 * same value), so the info can create an identical request. `dct_name` shows the default name
 * of an unnamed allreduce and is left out when empty. Not collective; the request may be
 * active. The caller frees `*info_used` with `MPI_Info_free`.
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (NULL pointer), `DCT_ERR_REQUEST`, `DCT_ERR_MPI`,
 *         `DCT_ERR_NOT_INITIALIZED`.
 */
DCT_EXPORT int DCT_Request_get_info(DCT_Request request, MPI_Info *info_used);

/**
 * @brief The configuration of the drop-in `DCT_Allreduce` on `comm`, as `DCT_Request_get_info`
 * gives a request's: the values agreed at the first compressed `DCT_Allreduce` on `comm`, or,
 * before it, what the `DCT_*` variables give now. Not collective. The caller frees
 * `*info_used` with `MPI_Info_free`.
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (NULL pointer), `DCT_ERR_COMM`, `DCT_ERR_INFO` (a bad
 *         `DCT_*` variable, before the first call), `DCT_ERR_MPI`, `DCT_ERR_NOT_INITIALIZED`.
 */
DCT_EXPORT int DCT_Comm_get_info(MPI_Comm comm, MPI_Info *info_used);

/**
 * @brief Sets the GPU stream (`cudaStream_t` or `hipStream_t`, as `void *`) the request's
 * kernels and copies run on from its next `DCT_Start`; `NULL` (the default) selects dct's own
 * non-blocking stream, never the legacy default stream. Ignored on the host. The request must
 * not be active. Not collective.
 *
 * Unlike NCCL's calls, **every dct call that runs kernels blocks the host until they are done**:
 * `DCT_Start` queues its kernels after the stream's earlier work and synchronizes the stream;
 * the completion call writes `recvbuf` on the stream and synchronizes it, so the result may be
 * used from the host or any stream without an event. Work the application queues on the stream
 * between `DCT_Start` and completion may run between dct's kernels: it must not touch the
 * request's buffers.
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (NULL pointer), `DCT_ERR_REQUEST`, `DCT_ERR_ACTIVE`.
 */
DCT_EXPORT int DCT_Request_set_stream(DCT_Request request, void *stream);

/**
 * @brief Drop-in replacement for `MPI_Allreduce` with the same arguments. Collective over
 * `comm`, blocking.
 *
 * The error-feedback state lives inside dct, one per (`comm`, `recvbuf`, `count`, `datatype`),
 * configured from the `DCT_*` environment variables as read and agreed on at the first
 * compressed call on `comm`, and released when `comm` is freed or at `MPI_Finalize`. Every call
 * first agrees with the other ranks on its arguments: a rank that errs, or whose call differs,
 * fails the call on every rank with the same code (`DCT_ERR_MISMATCH` for a difference) before
 * any rank blocks, buffers untouched. The states per `comm` are bounded (`DCT_DROP_IN_LIMIT`,
 * `DCT_DROP_IN_MEMORY`): beyond, the least recently used is evicted and its residual discarded
 * (docs/configuration.md). A code that reduces into a new buffer every step should use a
 * persistent request instead.
 * @return The codes of `DCT_Allreduce_init`, `DCT_Start` and `DCT_Wait`.
 */
DCT_EXPORT int DCT_Allreduce(const void *sendbuf, void *recvbuf, MPI_Count count,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);

/**
 * @brief Status of the last `DCT_Allreduce` on (`comm`, `recvbuf`, `count`, `datatype`),
 * including the running totals, e.g. to report the bytes saved.
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (status NULL, without a valid header, or no such
 *         state), `DCT_ERR_COMM`.
 */
DCT_EXPORT int DCT_Allreduce_status(const void *recvbuf, MPI_Count count, MPI_Datatype datatype,
                                    MPI_Comm comm, DCT_Status *status);
/** @} */

/**
 * @defgroup alltoallv Compressed alltoallv of activations (DCT-MP)
 *
 * Model parallelism's all-to-all of activations (forward) and of their gradients (backward),
 * compressed (docs/alltoallv.md). The forward sends, per row (sample) of every block, the
 * `dct_keep` fraction of its `d` columns of largest magnitude with the row's mask; the receiver
 * gets dense blocks, zeros for the dropped entries, where `MPI_Alltoallv` would have put them.
 * The backward sends the gradients of the same entries only. No error feedback: what is dropped
 * is dropped. `dct_mp_compressor=error_bounded` sends every value within a relative bound.
 * Configuration as for the allreduce (docs/configuration.md); `dct_row_length` is required.
 *
 * A peer's bad message fails the call with `DCT_ERR_PEER` on every rank, disagreeing shapes
 * (rows per block, `d`, datatype or `dct_values`) with `DCT_ERR_MISMATCH`; either every rank
 * writes its blocks and keeps the new masks, or none does. Datatypes: `MPI_FLOAT`, `MPI_DOUBLE`
 * and Fortran's `MPI_REAL`, `MPI_DOUBLE_PRECISION`, `MPI_REAL4`, `MPI_REAL8` (else
 * `DCT_ERR_DATATYPE`: use `MPI_Alltoallv`). Host buffers only; no `MPI_IN_PLACE`
 * (`DCT_ERR_BUFFER`). A call is one blocking exchange, run by the first completion call after
 * `DCT_Start` once every call started before it has completed; `DCT_Start` only marks it
 * started.
 * @{
 */

/**
 * @brief Creates a persistent compressed alltoallv (DCT-MP forward), like `MPI_Alltoallv_init`.
 * Collective over `comm`.
 *
 * The arguments are `MPI_Alltoallv`'s (counts and displacements in elements, one per rank),
 * bound to the request: every `DCT_Start` reads `sendbuf` and writes `recvbuf`. The arrays are
 * copied; the buffers must stay valid. Neither this form nor `DCT_Alltoallv_init_c` needs
 * MPI-4: messages past MPI's `int` counts travel point to point (docs/alltoallv.md, "Large
 * counts").
 *
 * @param sendbuf    Blocks to send: `sendcounts[j]` elements at `sdispls[j]` go to rank j.
 * @param sendcounts Elements for each rank, >= 0 and multiples of `dct_row_length`.
 * @param sdispls    Displacements (elements) of the send blocks, >= 0.
 * @param recvbuf    Receives `recvcounts[j]` elements from rank j at `rdispls[j]`.
 * @param recvcounts Elements from each rank, >= 0 and multiples of `dct_row_length`; must be
 *                   what each rank sends here (else `DCT_Wait` returns `DCT_ERR_MISMATCH`).
 * @param rdispls    Displacements (elements) of the receive blocks, >= 0.
 * @param datatype   `MPI_FLOAT` or `MPI_DOUBLE` (or the Fortran equivalents).
 * @param comm       Intra-communicator.
 * @param info       Configuration keys; `dct_row_length` is required.
 * @param request    Receives the new request.
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (a NULL array or request, a negative displacement),
 *         `DCT_ERR_BUFFER` (NULL or `MPI_IN_PLACE` buffer with a positive total count, or GPU
 *         memory), `DCT_ERR_COUNT` (a count negative or not a multiple of `d`; with `_c`, also
 *         a block ending past what `MPI_Aint` addresses in bytes), `DCT_ERR_DATATYPE`,
 *         `DCT_ERR_COMM`, `DCT_ERR_INFO` (`dct_row_length` missing, `dct_keep` outside (0, 1],
 *         any bad value), `DCT_ERR_NOT_COMPILED` (`dct_backend` other than `auto` or
 *         `kokkos`: DCT-MP runs on the host), `DCT_ERR_NO_MEMORY`, `DCT_ERR_NOT_INITIALIZED`.
 */
DCT_EXPORT int DCT_Alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                  void *recvbuf, const int recvcounts[], const int rdispls[],
                                  MPI_Datatype datatype, MPI_Comm comm, MPI_Info info,
                                  DCT_Request *request);

/**
 * @brief `DCT_Alltoallv_init` with MPI-4's large-count conventions (as `MPI_Alltoallv_c`):
 * counts `MPI_Count`, displacements `MPI_Aint`, in elements of `datatype`, any value >= 0 such
 * that every block ends, in bytes, within what `MPI_Aint` addresses (else `DCT_ERR_COUNT`).
 * The same request, arguments, checks and return codes as `DCT_Alltoallv_init`.
 */
DCT_EXPORT int DCT_Alltoallv_init_c(const void *sendbuf, const MPI_Count sendcounts[],
                                    const MPI_Aint sdispls[], void *recvbuf,
                                    const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                                    MPI_Datatype datatype, MPI_Comm comm, MPI_Info info,
                                    DCT_Request *request);

/**
 * @brief Creates the backward request paired with a forward `DCT_Alltoallv_init` request: the
 * gradients travel in the reverse direction, for the entries the last completed forward call
 * kept, and nothing else. Not collective; uses the forward's communicator and configuration,
 * and stays usable after the forward is freed (with the masks of its last call).
 *
 * Each `DCT_Start` reads, from every send block, the gradients at the entries the forward call
 * delivered to this rank, and writes dense receive blocks: the gradients at the entries this
 * rank sent in the forward call, zeros elsewhere. `DCT_Start` returns `DCT_ERR_ACTIVE` (and
 * changes nothing) while the forward is started, or before it completed any call.
 *
 * @param forward    A request of `DCT_Alltoallv_init`.
 * @param sendbuf    Gradients of the forward's received activations.
 * @param sendcounts The forward's `recvcounts`.
 * @param sdispls    Displacements of the send blocks (elements, >= 0; free).
 * @param recvbuf    Receives the gradients of the forward's sent activations.
 * @param recvcounts The forward's `sendcounts`.
 * @param rdispls    Displacements of the receive blocks (elements, >= 0; free).
 * @param request    Receives the new request.
 * @return `DCT_SUCCESS`, `DCT_ERR_REQUEST` (`forward` is not a live DCT-MP forward request),
 *         `DCT_ERR_COUNT` (shapes are not the forward's reversed), `DCT_ERR_ARG`,
 *         `DCT_ERR_BUFFER`, `DCT_ERR_NO_MEMORY`, `DCT_ERR_NOT_INITIALIZED`.
 */
DCT_EXPORT int DCT_Alltoallv_backward_init(DCT_Request forward, const void *sendbuf,
                                           const int sendcounts[], const int sdispls[],
                                           void *recvbuf, const int recvcounts[],
                                           const int rdispls[], DCT_Request *request);

/**
 * @brief `DCT_Alltoallv_backward_init` with MPI-4's large-count conventions: counts
 * `MPI_Count`, displacements `MPI_Aint`, in elements. `forward` may come from either
 * `DCT_Alltoallv_init` or `DCT_Alltoallv_init_c`. The same request, arguments, checks and
 * return codes as `DCT_Alltoallv_backward_init` (and `DCT_ERR_COUNT` for a block ending past
 * what `MPI_Aint` addresses in bytes).
 */
DCT_EXPORT int DCT_Alltoallv_backward_init_c(DCT_Request forward, const void *sendbuf,
                                             const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                                             void *recvbuf, const MPI_Count recvcounts[],
                                             const MPI_Aint rdispls[], DCT_Request *request);
/** @} */

/**
 * @defgroup checkpoint Checkpoints of the error-feedback state
 *
 * A checkpoint is one HDF5 file (docs/checkpoint-format.md) holding the state of every live
 * persistent request on a communicator (residuals, thresholds, call counters; DCT-MP requests'
 * counters and bounds but not their masks), so that a restarted job continues where it stopped.
 * Requests are matched by name: `dct_name`, or a default ("allreduce.N", "alltoallv.N",
 * "<forward>.backward") that is stable across runs of the same program. Drop-in `DCT_Allreduce`
 * states are not saved. Restarting on another number of ranks follows each request's
 * `dct_restart`: `strict` refuses it (`DCT_ERR_CKPT_MISMATCH`), `redistribute` preserves the sum
 * over ranks of the residuals (DCT-MP requests cannot restart so).
 * @{
 */

/**
 * @brief Saves every live persistent request on `comm` into `path`. Collective over `comm`.
 *
 * Laid out with parallel HDF5 in a temporary file in the same directory (each rank then writes
 * its rows with POSIX I/O: `DCT_CHECKPOINT_IO`, docs/configuration.md), which is renamed to
 * `path` only once every rank has written and synced and the file is closed: a crash at any
 * moment leaves the previous checkpoint at `path` intact. No request may be active (started,
 * not waited), and no `DCT_Checkpoint_isave` to `path` pending (`DCT_ERR_ACTIVE`).
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (NULL path, duplicate request names), `DCT_ERR_ACTIVE`,
 *         `DCT_ERR_CKPT_MISMATCH` (ranks hold different requests), `DCT_ERR_CKPT_IO`,
 *         `DCT_ERR_NOT_COMPILED` (built without HDF5), `DCT_ERR_COMM`, `DCT_ERR_MPI`. Every
 *         rank returns the same code.
 */
DCT_EXPORT int DCT_Checkpoint_save(MPI_Comm comm, const char *path);

/**
 * @brief Restores every live persistent request on `comm` from `path`. Collective over `comm`.
 *
 * The whole file is validated (format, version, ranks, every live request present with the same
 * count and datatype, every checksum) before any state is touched; on any error every rank
 * returns the same code and all residuals, thresholds and counters stay as they were. Requests
 * in the file that are not live are ignored.
 * @return `DCT_SUCCESS`, `DCT_ERR_CKPT_NOT_FOUND`, `DCT_ERR_CKPT_FORMAT`,
 *         `DCT_ERR_CKPT_VERSION`, `DCT_ERR_CKPT_MISMATCH`, `DCT_ERR_CKPT_CHECKSUM`,
 *         `DCT_ERR_CKPT_TRUNCATED`, `DCT_ERR_ACTIVE`,
 *         `DCT_ERR_ARG`, `DCT_ERR_NOT_COMPILED`, `DCT_ERR_COMM`, `DCT_ERR_MPI`.
 */
DCT_EXPORT int DCT_Checkpoint_load(MPI_Comm comm, const char *path);

/** @brief An asynchronous checkpoint save between `DCT_Checkpoint_isave` and
 * `DCT_Checkpoint_wait` (opaque). */
typedef struct DCT_Checkpoint_s *DCT_Checkpoint;

/** @brief The handle of no save (what `DCT_Checkpoint_wait` leaves). */
#define DCT_CHECKPOINT_NULL ((DCT_Checkpoint)0)

/**
 * @brief Starts saving every live persistent request on `comm` into `path`, and returns while
 * a thread of this process writes the file. Collective over `comm`.
 *
 * The checkpoint holds the state at this call (copied first): the requests may be started,
 * waited, loaded or freed at once. Once `DCT_Checkpoint_wait` has succeeded the file holds the
 * bytes `DCT_Checkpoint_save` here would have written, under the same crash safety (it takes
 * the name `path` only at the wait). The writer thread calls neither MPI nor HDF5 (any thread
 * level will do) and writes with POSIX I/O. No other save to `path` may be pending
 * (`DCT_ERR_ACTIVE`); every save must be waited for before `comm` is freed and before
 * `MPI_Finalize`.
 * @param checkpoint Receives the save's handle (`DCT_CHECKPOINT_NULL` on failure).
 * @return The codes of `DCT_Checkpoint_save`, the same on every rank; on failure no save is
 *         pending and no file was made.
 */
DCT_EXPORT int DCT_Checkpoint_isave(MPI_Comm comm, const char *path, DCT_Checkpoint *checkpoint);

/**
 * @brief Completes an asynchronous save: waits for this rank's rows to be written and synced,
 * seals the file and gives it its name. Collective over the save's communicator; sets
 * `*checkpoint` to `DCT_CHECKPOINT_NULL` whatever the outcome.
 * @return `DCT_SUCCESS`, or on every rank the same error (`DCT_ERR_CKPT_IO` when a rank's
 *         rows could not be written: a full disk), the previous checkpoint at the path left as
 *         it was and the temporary file removed; `DCT_ERR_ARG` for a NULL pointer or a handle
 *         that is not a pending save of this process (`DCT_CHECKPOINT_NULL`, one already
 *         waited).
 */
DCT_EXPORT int DCT_Checkpoint_wait(DCT_Checkpoint *checkpoint);
/** @} */

/**
 * @defgroup diagnostics Errors
 * @{
 */
/**
 * @brief Writes a fixed description of `code` into `string`, like `MPI_Error_string`.
 * @param code      A `DCT_Error` value.
 * @param string    At least `DCT_MAX_ERROR_STRING` characters.
 * @param resultlen Receives the length written, without the terminating NUL.
 * @return `DCT_SUCCESS`, or `DCT_ERR_ARG` for an unknown code or NULL pointers.
 */
DCT_EXPORT int DCT_Error_string(int code, char *string, int *resultlen);

/** @brief Size of the buffer `DCT_Error_string` needs. */
#define DCT_MAX_ERROR_STRING 256

/**
 * @brief The detailed message of the last failed call on the calling thread (which argument,
 * which value, which rank), or "" if none failed. Valid until the next dct call on the thread.
 */
DCT_EXPORT const char *DCT_Get_last_error(void);
/** @} */

#ifdef __cplusplus
}
#endif

#endif /* DCT_H */
