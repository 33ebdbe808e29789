/**
 * @file dct.h
 * @brief The dct C ABI: compressed collectives for distributed training.
 *
 * dct replaces `MPI_Allreduce` on gradients by a compressed allreduce implementing Dynamic
 * Communication Thresholding (DCT-DP, Gupta et al., KDD 2021): per tensor, every rank adds its
 * gradient to a *residual* (error feedback), sends only the entries whose magnitude reaches a
 * threshold `tau`, and keeps the rest for later calls. `tau` is the value that keeps a
 * `dct_density` fraction of the entries: on every call by default (`dct_tau_control`), or
 * re-estimated every `dct_interval` calls and reused in between (the paper's schedule).
 *
 * This is the only header that C and Fortran see. It follows MPI's conventions: MPI argument
 * order, persistent requests (`*_init`, `DCT_Start`, `DCT_Wait`, `DCT_Request_free`), integer
 * return codes (`DCT_SUCCESS` or a `DCT_ERR_*` code), configuration through `MPI_Info`.
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
 * Threads: per communicator, as NCCL. Under `MPI_THREAD_MULTIPLE`, threads may call dct at
 * the same time on different communicators (the communicator a request was created on, or the
 * one a call names): each waits inside dct for its own peers while the others go on. Calls on
 * one communicator must not overlap in time (MPI needs `MPI_THREAD_SERIALIZED` for that much):
 * dct enforces it, a call that enters while another thread is inside dct on the same
 * communicator returns `DCT_ERR_THREAD` at once and changes nothing, so the caller may retry;
 * the thread inside is unaffected. Every completion call also progresses the calls in flight
 * on other communicators that no other thread is inside. `DCT_Get_last_error`,
 * `DCT_Error_string`, `DCT_Get_version`, `DCT_Algorithm_name`, `DCT_Backend_name` and
 * `DCT_Backend_compiled` may be called at any time from any thread. A `DCT_Wait` holds its
 * communicator until its call completes: threads that share one should poll with `DCT_Test`,
 * which never waits for other ranks on compressed calls (see `DCT_Test` for density 1), and
 * pause between polls and retries: the entry is a try-lock, not a fair one, so a thread that
 * polls without pause can keep the other from starting the call its own waits for.
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
 * `DCT_BACKEND_AUTO` and `DCT_BACKEND_KOKKOS` are always compiled. (Before 0.4 the answer was
 * the return value, which read like a code.)
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
 * @brief What one completed call did, as seen by the calling rank.
 *
 * Byte counts are *logical* payload bytes, independent of how MPI routes them: for the
 * allgather algorithm this rank's sparse message times the P-1 ranks that need it (sent) and
 * the other ranks' messages (received), plus the count exchange; for dense algorithms the
 * bandwidth-optimal ring volume `2(P-1)/P * count * sizeof(type)`. `dense_bytes` is that ring
 * volume for an uncompressed `MPI_Allreduce` of the same tensor, so `dense_bytes / bytes_sent`
 * is the traffic reduction.
 *
 * **Versioned** (as NCCL versions `ncclConfig_t`): the first three fields say which layout the
 * caller was compiled with, so that later versions can append fields without breaking binaries
 * built against an older dct.h, and arrays passed to `DCT_Waitall` keep their stride. Set them
 * with `DCT_STATUS_INITIALIZER` in C (`DCT_Status s = DCT_STATUS_INITIALIZER;`); in C++ every
 * `DCT_Status` sets them itself, and in Fortran every `type(dct_status)`. dct writes only the
 * fields that lie within the caller's `size` and never the header. A status whose `magic` is
 * not `DCT_STATUS_MAGIC` (an uninitialised one, or one of dct 0.3, which had no header), or
 * whose `size` is below this layout's (dct 0.4.0's) or not a multiple of 8, is refused with
 * `DCT_ERR_ARG` before the call does anything, so the caller can fix it and call again.
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
  MPI_Count nonfinite;         /**< (0.5) NaN and +-Inf entries this rank's compressed
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
 * Configuration keys, read from the `MPI_Info` passed to `DCT_Allreduce_init` (values are
 * strings); a key that is absent takes its default from the environment variable in brackets,
 * and then from the built-in default:
 * - `dct_density` [`DCT_DENSITY`], default `0.01`: fraction of entries sent per call, in (0, 1].
 *   With `1` the call is exactly `MPI_Allreduce` (same result bits).
 * - `dct_tau_control` [`DCT_TAU_CONTROL`], default `adaptive`: how `tau` follows the data.
 *   `adaptive`: every call sends its exact top `k = ceil(density * count)` entries by `|acc|`
 *   (ties at the k-th go to the lowest indices; NaN and Inf entries are sent on top), so the
 *   achieved density is the target on every call; the filter pass takes candidates above a
 *   floor aimed at 3k, the k largest are kept and the others stay in the residual (O(k) extra
 *   work); the floor is selected over the whole tensor on
 *   the first call and when fewer than k candidates come (`DCT_Status.tau_reestimated`).
 *   `fixed`: the paper's schedule, `tau` re-estimated every `dct_interval` calls and reused in
 *   between (the achieved density then drifts with error feedback: docs/configuration.md).
 * - `dct_density_warmup` [`DCT_DENSITY_WARMUP`], default `1,0` (off): `START,CALLS`, a
 *   sparsity warm-up (DGC's): call c < CALLS (counted from 0 over the request's life, so a
 *   checkpoint resumes the schedule) keeps max(density, START (density / START)^(c / CALLS))
 *   of the tensor, falling geometrically from START in (0, 1] to `dct_density`; then
 *   `dct_density`. The first calls, with an empty residual, send more (counted in the bytes of
 *   their status). CALLS must be equal on every rank; START may differ, like the density.
 *   With `dct_tau_control=fixed` the schedule applies at the re-estimations.
 * - `dct_interval` [`DCT_INTERVAL`], default `1000`: with `dct_tau_control=fixed`, calls
 *   between re-estimations of `tau`, an integer >= 1 (`tau` is estimated on the first call
 *   and then every `interval` calls).
 * - `dct_algorithm` [`DCT_ALGORITHM`], default `auto`: `auto`, `allgather`, `split`,
 *   `hierarchical`, `recursive_doubling` or `dense` (see `DCT_Algorithm`). Every algorithm
 *   gives the same sums of the same sent entries, added in its own order (bitwise equal where
 *   sums are exact). `hierarchical` needs 4 ranks or more and a group size dividing them (see
 *   `dct_group_size`); where none exists (a prime number of ranks) the call runs `split`, and
 *   `DCT_Status.algorithm` says so. `auto` considers it from 16 ranks. Drop-in calls
 *   (`DCT_Allreduce`, libdct_pmpi) run `split` instead: the hierarchy's communicators are made
 *   per persistent request, at `DCT_Allreduce_init`.
 * - `dct_group_size` [`DCT_GROUP_SIZE`], default `0`: the ranks per group of `hierarchical`.
 *   0: the ranks of a node when every node holds the same number (more than 1, fewer than
 *   all), else the divisor of the number of ranks nearest its square root, as consecutive
 *   ranks. A number > 1 groups that many consecutive ranks and must divide the number of ranks
 *   (`DCT_ERR_INFO` otherwise). A request that may run `hierarchical` holds two communicators
 *   more (`MPI_Comm_split`), made at `DCT_Allreduce_init`.
 * - `dct_momentum` [`DCT_MOMENTUM`], default `0` (off): momentum correction (Lin et al.,
 *   "Deep Gradient Compression", ICLR 2018) for SGD with momentum m in [0, 1): the request
 *   keeps each rank's velocity u = m u + sendbuf and compresses u (with error feedback)
 *   instead of the raw gradient, and zeroes u where an entry was sent (momentum factor
 *   masking). The result is then the summed update itself: the application applies it as
 *   plain SGD, without a momentum of its own (or keeps it: `dct_momentum_result` below).
 *   Costs two more tensors of memory per request.
 *   With density 1 the call is MPI_Allreduce of the velocities (no masking), i.e. dense
 *   momentum SGD. Checkpoints save and restore the velocity with the residual (format 4).
 *   A non-finite entry (NaN, +-Inf) of sendbuf is delivered once, in that call's result, and
 *   then forgotten: the next call reads a non-finite velocity entry as 0 (so does the
 *   `gradient` form below its last update), as a skipped step of dynamic loss scaling needs.
 * - `dct_momentum_result` [`DCT_MOMENTUM_RESULT`], default `update`: what a `dct_momentum`
 *   request returns. `update`: the summed update above, for plain SGD. `gradient`: for an
 *   application that keeps its optimizer's heavy-ball momentum m (b = m b + g; w -= lr b, as
 *   `torch.optim.SGD(momentum=m)` with dampening 0 and no Nesterov): the call returns
 *   r = update - m * (the last call's update), whose momentum b is the update itself, to
 *   rounding; `dct_momentum` must equal the optimizer's m. The compression, bytes and residual
 *   are the same as with `update`. One more tensor of memory (the last update, saved by
 *   checkpoints). At density 1 the call is MPI_Allreduce of the gradients, bit for bit. No
 *   effect without `dct_momentum`.
 * - `dct_result_density` [`DCT_RESULT_DENSITY`], default `1`: with `split` or `hierarchical`
 *   (or `auto`, which then picks the cheaper of the two), the owners of the index segments
 *   keep only the largest sums, about
 *   this fraction of `count` in all, and add the others to their own residual: the result
 *   stays sparse however many ranks contribute, and error feedback still conserves every
 *   input. Refused (`DCT_ERR_INFO`) with `allgather`, `recursive_doubling` or `dense`.
 * - `dct_alpha_us` [`DCT_ALPHA_US`], default `2`: network latency in microseconds, and
 *   `dct_beta_gbps` [`DCT_BETA_GBPS`], default `12.5`: bandwidth per rank in GB/s, the two
 *   parameters of the cost model behind `auto` (docs/algorithms.md; `dct-bench calibrate`
 *   measures them).
 * - `dct_values` [`DCT_VALUES`], default `native`: how kept values travel: `native` (the
 *   tensor's type), `fp16` or `bf16` (16 bits, round to nearest even; with `allgather` and
 *   `split`'s first stage, the stages that carry each rank's own entries). The rounding error
 *   stays in the sender's residual, so error feedback still conserves every input exactly;
 *   values beyond the 16-bit range are sent as its largest finite value and the rest waits.
 *   Partial sums (split's second stage, `recursive_doubling`) travel in the tensor's type.
 *   `sign` (DCT-DP only; `DCT_ERR_INFO` on `DCT_Alltoallv_init`): the scaled sign of
 *   EF-SignSGD. Each rank's kept entries travel as +-m, m the mean magnitude of its finite
 *   kept values (summed in double in chunks of 1024 entries, the same bits on the host and
 *   the GPU): one bit per entry and one m per block, about 2.5x more entries than fp16 for
 *   the same bytes; `acc - (+-m)` stays in the residual (conservation to one rounding per
 *   kept entry). A non-finite kept value makes m NaN or Inf, so that the sum is non-finite on
 *   every rank as with the other codings. Best with `dct_momentum` (docs/performance.md).
 *   Indices travel in the smallest of three codings for the block's (entries, range), which
 *   both sides know, so no header says which: Elias-Fano (about 2 + log2(1 / density) bits
 *   per entry: 8.6 at density 0.01), a bitmap of the range (above about a quarter of it), or
 *   32-bit offsets (only where Elias-Fano would need more).
 * - `dct_threshold` [`DCT_THRESHOLD`], default `exact`: `exact` (k-th largest, linear time) or
 *   `sampled`: `tau` from `dct_sample_size` [`DCT_SAMPLE_SIZE`], default `65536`, entries
 *   drawn one per stratum (1 to 16777216; the exact method when it is >= `count` / 32). Cost
 *   O(sample); achieved density within 4 sqrt((1 - d) / (d m)) of the target d (relative) for
 *   m samples (docs/kernels.md).
 * - `dct_backend` [`DCT_BACKEND`], default `auto`: where the kernels run (`DCT_Backend`):
 *   `auto`, `kokkos`, `cuda`, `hip`. Device buffers (CUDA or HIP pointers) are detected; the
 *   residual then lives on the device, where every algorithm selects, encodes, decodes and
 *   sums; the sparse algorithms pass only compressed blocks through the host (pinned staging
 *   buffers, reused across calls), or nothing with a GPU-aware MPI or `dct_transport=nccl`;
 *   dense stages the dense sum unless MPI is GPU-aware or `dct_transport=nccl` sums it, and
 *   density 1 unless MPI is GPU-aware. Not compiled:
 *   `DCT_ERR_NOT_COMPILED` from `DCT_Allreduce_init`.
 * - `dct_transport` [`DCT_TRANSPORT`], default `auto`: how a GPU request's blocks travel
 *   between ranks (persistent allreduce requests): `mpi`; `nccl`, device to device over an
 *   NCCL communicator made from the communicator at the first such init (one per
 *   communicator; the request's calls then run in their start order, once every rank started
 *   them), `DCT_ERR_NOT_COMPILED` where dct has no NCCL or NCCL cannot run on the ranks (two
 *   ranks on one GPU), `DCT_ERR_BUFFER` for host or HIP buffers; `auto`: `nccl` where it can
 *   run and every rank's buffers are CUDA memory, else `mpi`. Every algorithm uses it
 *   (hierarchical over one more NCCL communicator per tier of the request's hierarchy; dense's
 *   sum is NCCL's reduction, the same bits on every rank); density 1 (`MPI_Allreduce`'s bits)
 *   stays on MPI.
 * - `dct_name` [no variable], default empty: a name for the request (used by checkpoints).
 * - `dct_restart` [`DCT_RESTART`], default `strict`: what `DCT_Checkpoint_load` does with this
 *   request when the checkpoint was saved on another number of ranks: `strict` refuses the
 *   load (`DCT_ERR_CKPT_MISMATCH`), `redistribute` gives saved rank r's residual to rank
 *   r mod P (see the checkpoint group). Read at `DCT_Allreduce_init`, like every key (before
 *   0.4 the variable was read at the load and the key had no effect).
 *
 * `DCT_Request_get_info` reads back every key's value in force for a request, and
 * `DCT_Comm_get_info` those of the drop-in `DCT_Allreduce` on a communicator.
 *
 * Unknown keys that do not start with `dct_` are ignored (they may be meant for MPI); unknown
 * `dct_` keys are refused with `DCT_ERR_INFO`, so a typo never goes unnoticed.
 *
 * Semantics per call, on every rank: `acc = send + residual`; `tau` is the k-th largest finite
 * `|acc|` with `k = ceil(density * count)`, on every call (`adaptive`) or when due (`fixed`);
 * entries with `|acc| >= tau` and `acc != 0` are sent; `residual = acc - sent`; the result,
 * identical on all ranks, is the sum over ranks of the sent entries, added in rank order.
 * NaN and infinite entries are always sent, in addition to the k finite ones (they do not
 * count toward k and never make `tau` infinite), so they reach the result as with MPI (where
 * dynamic loss scaling sees them) and never stay in the residual.
 *
 * Datatypes and operations: `MPI_FLOAT` and `MPI_DOUBLE` (and Fortran's `MPI_REAL`,
 * `MPI_DOUBLE_PRECISION`, `MPI_REAL4`, `MPI_REAL8`) with `MPI_SUM` are compressed. Every
 * other combination is handed to `MPI_Allreduce` unchanged (`DCT_Status.algorithm` is then
 * `DCT_ALGORITHM_PASSTHROUGH`), so a code may route all its allreduces through dct, on dct's
 * duplicate of `comm`: a combination MPI refuses (`MPI_C_BOOL` with `MPI_SUM`) returns
 * `DCT_ERR_MPI` on every rank, whatever `comm`'s error handler. A derived datatype must be
 * committed (`DCT_ERR_DATATYPE` otherwise, at init).
 * @{
 */

/**
 * @brief Creates a persistent compressed allreduce, like `MPI_Allreduce_init` (MPI-4).
 *
 * Collective over `comm`: every rank creates its matching requests in the same order (a
 * compressed request duplicates `comm` for its own traffic). The buffers are bound to the request:
 * every `DCT_Start` reads `sendbuf` and writes `recvbuf`.
 *
 * The ranks agree here (one small `MPI_Allreduce`) that every rank accepted its arguments and
 * that they share what must match: `count`, the datatype's size, whether it is compressed,
 * density 1 or below, `dct_momentum`, and for compressed requests `dct_algorithm`,
 * `dct_values`, `dct_tau_control`, `dct_result_density`, `dct_group_size` (and with `auto`
 * the cost model's `dct_alpha_us`, `dct_beta_gbps`). Otherwise every rank returns the same
 * code and creates nothing: the largest code a rank's own checks gave (`DCT_Get_last_error`
 * names the rank), else `DCT_ERR_MISMATCH` naming the settings that differ. Other settings may
 * differ between ranks (densities below 1, `dct_interval`, `dct_threshold`, `dct_backend`).
 * Only a bad `comm` is refused on its rank alone (no peers to agree with).
 *
 * @param sendbuf  Gradient to reduce, or `MPI_IN_PLACE` to take it from `recvbuf`.
 * @param recvbuf  Receives the (compressed) sum over all ranks; not `MPI_IN_PLACE`
 *                 (`DCT_ERR_BUFFER`, as MPI defines it for the send buffer only).
 * @param count    Number of elements, 0 to `DCT_MAX_COUNT` for compressed types.
 * @param datatype Element type; see the group description for what is compressed.
 * @param op       Reduction; only `MPI_SUM` is compressed.
 * @param comm     Intra-communicator; dct works on a private duplicate of it.
 * @param info     Configuration keys (see above), or `MPI_INFO_NULL`.
 * @param request  Receives the new request.
 * @return `DCT_SUCCESS`, `DCT_ERR_BUFFER`, `DCT_ERR_COUNT`, `DCT_ERR_DATATYPE`, `DCT_ERR_OP`,
 *         `DCT_ERR_COMM`, `DCT_ERR_INFO`, `DCT_ERR_ARG` (request is NULL), `DCT_ERR_NO_MEMORY`,
 *         `DCT_ERR_NOT_INITIALIZED`.
 */
DCT_EXPORT int DCT_Allreduce_init(const void *sendbuf, void *recvbuf, MPI_Count count,
                                  MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info,
                                  DCT_Request *request);

/**
 * @brief Starts one call of a persistent request: compresses `sendbuf` (updating the
 * residual) and posts the first exchange, without waiting for any other rank. Complete it
 * with `DCT_Wait`, `DCT_Test` or `DCT_Waitall`.
 *
 * Like MPI's nonblocking collectives, the exchange advances when the application calls into
 * dct: every `DCT_Test`, `DCT_Wait`, `DCT_Waitall` or `DCT_Allreduce` progresses *all* calls in
 * flight, so a code can start the allreduce of one layer's gradients, compute the next layer
 * and call `DCT_Test` now and then. Several requests may be in flight on one communicator and
 * may be completed in any order. Compressed requests (density below 1) may also be started in
 * any order: each talks on its own communicator. Density-1 and passed-through requests must
 * be started in the same order on every rank, as MPI requires of `MPI_Start` on persistent
 * collectives; like MPI, dct does not detect another order (requests of equal count and
 * datatype then deliver each other's sums; docs/reliability.md says why). Their order
 * relative to compressed requests is free. At density 1 the call is `MPI_Allreduce` itself
 * (for its exact result bits): it runs, blocking, in the first completion call after every
 * rank has started it (a barrier posted at the start says so) and every density-1 or
 * passed-through call started before it on the communicator is complete.
 *
 * Between `DCT_Start` and completion the buffers belong to dct: do not touch them. dct calls
 * on one communicator must not overlap across threads (`DCT_ERR_THREAD`, see the top of
 * this file).
 * @return `DCT_SUCCESS`, `DCT_ERR_REQUEST`, `DCT_ERR_ACTIVE` (already started),
 *         `DCT_ERR_MPI`, `DCT_ERR_NOT_INITIALIZED`.
 */
DCT_EXPORT int DCT_Start(DCT_Request *request);

/**
 * @brief Completes a started request and writes the result into its `recvbuf`.
 * @param request The request; stays allocated and can be started again.
 * @param status  Receives what the call did, or `DCT_STATUS_IGNORE`.
 * @return `DCT_SUCCESS`, `DCT_ERR_REQUEST`, `DCT_ERR_ACTIVE` (not started), `DCT_ERR_MPI`,
 *         `DCT_ERR_PEER`, `DCT_ERR_MISMATCH`. After an error the request is inactive again
 *         and this call's contribution is kept in the residual. `DCT_ERR_ARG` for a status
 *         without a valid header (see `DCT_Status`): then nothing happened, the request is
 *         still started.
 */
DCT_EXPORT int DCT_Wait(DCT_Request *request, DCT_Status *status);

/**
 * @brief Progresses every call in flight once, and completes `request` if it is done.
 *
 * Never waits for other ranks on compressed calls: each posts or tests its nonblocking MPI
 * operations once. A density-1 or passed-through call is `MPI_Allreduce` itself (for its
 * exact result bits): once every call started before it is complete, the completion call
 * that finds it runs that `MPI_Allreduce`, which returns when every rank has entered it;
 * before that, `DCT_Test` returns `*flag = 0` without running it.
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
 * elements of the request's datatype, zeros for a request that keeps none (density 1, or not
 * compressed). For diagnostics and for checking error feedback: the sum over ranks of the
 * residuals plus every result delivered equals every input. The request must not be active.
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
 * @brief Sets the GPU stream the request's kernels and copies run on (`cudaStream_t` or
 * `hipStream_t`, passed as `void *`), from its next `DCT_Start` on. `NULL` (the default)
 * selects dct's own non-blocking stream, never the legacy default stream. Ignored on the host
 * (Kokkos backend). The request must not be active.
 *
 * Stream semantics (they differ from NCCL's, whose calls are only enqueued): **every dct call
 * that runs kernels blocks the host until they are done.** `DCT_Start` queues its kernels
 * after what the stream already holds and synchronizes the stream before it returns (so the
 * host waits for the application's earlier work on it too, and the compressed entries are
 * ready for MPI); the completion call that completes the request (`DCT_Wait`, `DCT_Test`
 * with `*flag` = 1, `DCT_Waitall`) writes `recvbuf` on the stream and synchronizes it before
 * it returns. When it returns, the result may be used from the host or any stream without an
 * event. Between `DCT_Start` and completion, work the application queues on the same stream
 * may run between dct's kernels: it must not touch the request's buffers.
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (NULL pointer), `DCT_ERR_REQUEST`, `DCT_ERR_ACTIVE`.
 */
DCT_EXPORT int DCT_Request_set_stream(DCT_Request request, void *stream);

/**
 * @brief Drop-in replacement for `MPI_Allreduce` with the same arguments.
 *
 * The error-feedback state lives inside dct, one per (`comm`, `recvbuf`, `count`, `datatype`),
 * configured from the `DCT_*` environment variables, and is released when `comm` is freed or
 * at `MPI_Finalize`. The variables are read, and agreed on by every rank as by
 * `DCT_Allreduce_init`, at the first compressed `DCT_Allreduce` on `comm`; later changes to
 * them do not reach that communicator's states. Drop-in states are created on each rank
 * alone (a rank may meet a new `recvbuf` where another reuses one) and share one private
 * communicator per `comm`. Every call, compressed or handed to MPI, first agrees with the
 * other ranks (one small `MPI_Allreduce`) on whether each accepted its arguments, whether it is
 * compressed, the count and the datatype's size: a rank that errs, or whose call differs
 * (`MPI_FLOAT` on one rank, `MPI_INT` on another), fails the call on every rank with the same
 * code (`DCT_ERR_MISMATCH` for a difference) before any rank blocks, buffers untouched. At most
 * `DCT_DROP_IN_LIMIT` (default 16384) states are kept per `comm`: beyond, the least recently used
 * is evicted and its residual discarded (docs/configuration.md). A code that reduces into a new
 * buffer every step should use a persistent request instead, or its residuals would never be sent.
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
 * In model-parallel training, activations cross a model-parallel boundary through an
 * all-to-all (forward) and their gradients come back the same way (backward). DCT-MP sends,
 * for every row (sample) of every block, only the `dct_keep` fraction of its `d` columns
 * (neurons) of largest magnitude, with the row's mask; the receiver gets dense blocks with the
 * dropped entries set to zero, exactly where `MPI_Alltoallv` would have put the full blocks.
 * The backward request sends the gradients of the *same* entries only (no indices: both sides
 * kept the masks of the last forward call) and scatters them into dense gradient blocks with
 * zeros elsewhere. There is no error feedback: what is dropped is dropped (KDD'21, Alg. 2).
 *
 * Configuration keys (read by `DCT_Alltoallv_init`; environment defaults in brackets):
 * - `dct_row_length` [`DCT_ROW_LENGTH`], required: the row length `d`, an integer >= 1. Every
 *   count is a number of elements and a multiple of `d`; blocks are row-major.
 * - `dct_keep` [`DCT_KEEP`], default `0.05`: fraction of each row kept, in (0, 1].
 * - `dct_mp_select` [`DCT_MP_SELECT`], default `exact`:
 *   - `exact`: every row keeps exactly `k = ceil(keep * d)` entries (at least 1; a product
 *     within 1e-9 relative of an integer counts as that integer, so keep 0.1 with d = 30 keeps
 *     3), those of largest `|x|`; on equal `|x|` the lower column wins; NaN ranks above every
 *     number.
 *   - `laplace`: the paper's O(B d) estimate: `tau = b ln(1/keep)` with `b` the mean `|x|` over
 *     all rows this rank sends in the call (a Laplace fit), re-estimated every call; entries with
 *     `|x| >= tau` and `x != 0` are kept, so the count varies per row and the achieved keep
 *     drifts from the target with the data's distribution (docs/alltoallv.md gives numbers).
 *   - `threshold`: `tau` = the `ceil(keep * n)`-th largest `|x|` over the `n` elements this rank
 *     sends, re-estimated every `dct_interval` calls (as in DCT-DP); in between, with
 *     `dct_tau_control=adaptive` (the default) it is corrected after every call from the kept
 *     count and selected exactly again when a call keeps outside +-20% of the target, with
 *     `fixed` it is reused unchanged; entries with `|x| >= tau` and `x != 0` are kept.
 * - `dct_values` [`DCT_VALUES`], default `native`: how kept values travel, in both directions:
 *   `native` (the datatype itself, results bitwise equal to the masked input), `fp16` or `bf16`
 *   (rounded to nearest even; the receiver gets the rounded values).
 * - `dct_interval` [`DCT_INTERVAL`]: see the allreduce; used by `threshold` only (and by
 *   `error_bounded`: calls between measurements of the coders and of `auto` bounds).
 * - `dct_mp_compressor` [`DCT_MP_COMPRESSOR`], default `topk` (all of the above). With
 *   `error_bounded` (Feng et al., SC'24) the forward sends *every* value, quantised so that it
 *   arrives within `e = r * (max - min)` of what was sent (max and min over the finite values
 *   of its block: one table's columns of the rows sent to one peer), codes packed by LZ4 or
 *   zstd; NaN, infinities and values whose reconstruction would miss `e` arrive bit for bit,
 *   `r = 0` sends exactly. Its keys (docs/alltoallv.md):
 *   - `dct_error_bound` [`DCT_ERROR_BOUND`], default `0.01`: `r` in [0, 1]; or a comma-separated
 *     list, one per table of the rows this rank sends; or `auto[:CLASSES]`: per table the
 *     loosest class (default `0.05,0.03,0.01`) keeping 99% of its distinct rows distinct.
 *   - `dct_table_columns` [`DCT_TABLE_COLUMNS`], default `0` (one table: the row): columns per
 *     table, dividing `d`.
 *   - `dct_error_bound_schedule` [`DCT_ERROR_BOUND_SCHEDULE`], default `1,0`: `START,CALLS`,
 *     bounds multiplied by a factor going linearly from START to 1 over CALLS forward calls.
 *   - `dct_lossless` [`DCT_LOSSLESS`], default `auto`: `none`, `lz4`, `zstd`, or per message the
 *     largest modelled speed-up `1 / (1/CR + B (1/Tc + 1/Td))`, `B` = `dct_beta_gbps`.
 *   - `dct_backward_error_bound` [`DCT_BACKWARD_ERROR_BOUND`], default `none`: the backward
 *     sends its gradients uncompressed (as `MPI_Alltoallv`), or within this relative bound.
 *
 * Wire format of one rank's message to one peer: the kept values; per-row counts (16-bit,
 * 32-bit when d > 65535), omitted when all rows keep the same count; per row either a list of
 * 16-bit column indices (32-bit when d > 65536) or a bitmap of ceil(d/8) bytes, whichever is
 * smaller. Messages are padded to 8 bytes. Before the payload every pair of ranks exchanges a
 * 48-byte header (rows, d, value format, entries, uniform count, bytes), and after it the
 * ranks agree on success (one int allreduce), so that either every rank writes its blocks and
 * keeps the new masks or none does. The receiver validates every message before writing
 * anything: row counts (<= d, summing to the announced entries), indices (< d, strictly
 * increasing), bitmap popcounts (equal to the counts, no bit past d) and the exact length; a
 * bad message fails the call with `DCT_ERR_PEER` on every rank, disagreeing shapes (rows per
 * block, d, datatype or `dct_values`) with `DCT_ERR_MISMATCH`.
 *
 * Status fields (`DCT_Wait`): `count` = elements this rank sends (sum of `sendcounts`),
 * `nnz_sent` / `nnz_received` = entries kept in every block sent / received (this rank's own
 * block included), `density` = `nnz_sent / count` (the achieved keep), `tau` = the threshold
 * (laplace, threshold), `bytes_sent` / `bytes_received` = bytes to / from the other ranks
 * (headers, padded messages, agreement), `dense_bytes` = what `MPI_Alltoallv` of the dense
 * blocks would send to the other ranks; the block a rank sends to itself is not traffic.
 * `algorithm` is 0 (not meaningful here). `error_bounded`: `nnz_*` count every value
 * (`density` 1) and `max_abs_error` is the call's largest error over the values sent.
 *
 * Datatypes: `MPI_FLOAT`, `MPI_DOUBLE` and Fortran's `MPI_REAL`, `MPI_DOUBLE_PRECISION`,
 * `MPI_REAL4`, `MPI_REAL8`; every other datatype is refused with `DCT_ERR_DATATYPE` (a mask
 * by magnitude has no meaning for them: use `MPI_Alltoallv`). Host buffers only in this
 * version. `MPI_IN_PLACE` is not supported (`DCT_ERR_BUFFER`).
 *
 * Progress: a DCT-MP call is one blocking exchange, run by the first `DCT_Wait`, `DCT_Test`
 * or `DCT_Waitall` after `DCT_Start` once every call started before it has completed (the
 * same rule as an allreduce at density 1); `DCT_Start` itself only marks it started.
 * Checkpoints skip DCT-MP requests (they keep no error-feedback state), and
 * `DCT_Request_get_residual` on one writes `count` zeros (count = the sum of `sendcounts`).
 * @{
 */

/**
 * @brief Creates a persistent compressed alltoallv (DCT-MP forward), like `MPI_Alltoallv_init`.
 *
 * Collective over `comm`. The arguments are those of `MPI_Alltoallv` (counts and displacements
 * in elements of `datatype`, one per rank), bound to the request: every `DCT_Start` reads
 * `sendbuf` and writes `recvbuf`. The arrays are copied; the buffers must stay valid.
 * `recvbuf` receives dense blocks: the kept entries of every row, zeros elsewhere.
 *
 * Counts and displacements are `int`, as in MPI-3's `MPI_Alltoallv`; `DCT_Alltoallv_init_c`
 * takes them as MPI-4's `MPI_Alltoallv_c` does (`MPI_Count`, `MPI_Aint`), for blocks or
 * displacements past `INT_MAX` elements, and is otherwise the same request: this form widens
 * its arrays and runs the same checks and code. Neither needs MPI-4: messages that would
 * pass MPI's `int` counts (more than `INT_MAX` 8-byte units, 16 GiB, to or from one rank or
 * all together, as their largest possible size says) go as point-to-point messages of at most
 * `INT_MAX` units each; the ranks agree on that at init (one allreduce), and every other
 * request keeps `MPI_Alltoallv`.
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
 * @param info       Configuration keys (see the group); `dct_row_length` is required.
 * @param request    Receives the new request.
 * @return `DCT_SUCCESS`, `DCT_ERR_ARG` (a NULL array or request, a negative displacement),
 *         `DCT_ERR_BUFFER` (NULL or `MPI_IN_PLACE` buffer with a positive total count),
 *         `DCT_ERR_COUNT` (a count negative or not a multiple of `d`; with `_c`, also a block
 *         ending past what `MPI_Aint` addresses in bytes), `DCT_ERR_DATATYPE`,
 *         `DCT_ERR_COMM`, `DCT_ERR_INFO` (`dct_row_length` missing, `dct_keep` outside (0, 1],
 *         any bad value), `DCT_ERR_NOT_COMPILED` (`dct_backend` other than `auto` or
 *         `kokkos`: DCT-MP runs on the host), `DCT_ERR_NO_MEMORY`, `DCT_ERR_NOT_INITIALIZED`.
 *         `DCT_ERR_BUFFER` also for GPU memory (host buffers only in this version).
 */
DCT_EXPORT int DCT_Alltoallv_init(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                  void *recvbuf, const int recvcounts[], const int rdispls[],
                                  MPI_Datatype datatype, MPI_Comm comm, MPI_Info info,
                                  DCT_Request *request);

/**
 * @brief `DCT_Alltoallv_init` with MPI-4's large-count conventions (as `MPI_Alltoallv_c`):
 * counts are `MPI_Count` and displacements `MPI_Aint`, both in elements of `datatype`.
 *
 * The same request, checks and return codes as `DCT_Alltoallv_init`, for any count and
 * displacement >= 0 such that every block ends, in bytes, within what `MPI_Aint` addresses
 * (else `DCT_ERR_COUNT`); what remains is memory: the receive side stages the messages of one
 * call (about the compressed size, for `error_bounded` the dense one), and `threshold` selection
 * sorts the magnitudes of what it sends. Works with MPI-3 libraries (Open MPI 4.1): no
 * `MPI_Alltoallv_c` is called (see `DCT_Alltoallv_init`).
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
 * @param info       Configuration keys (see the group); `dct_row_length` is required.
 * @param request    Receives the new request.
 * @return As `DCT_Alltoallv_init`.
 */
DCT_EXPORT int DCT_Alltoallv_init_c(const void *sendbuf, const MPI_Count sendcounts[],
                                    const MPI_Aint sdispls[], void *recvbuf,
                                    const MPI_Count recvcounts[], const MPI_Aint rdispls[],
                                    MPI_Datatype datatype, MPI_Comm comm, MPI_Info info,
                                    DCT_Request *request);

/**
 * @brief Creates the backward request paired with a forward `DCT_Alltoallv_init` request: the
 * gradients travel in the reverse direction, for the entries the last completed forward call
 * kept, and nothing else.
 *
 * The backward's send blocks have the shapes of the forward's receive blocks and vice versa:
 * `sendcounts` must equal the forward's `recvcounts` and `recvcounts` the forward's
 * `sendcounts` (displacements are free). Each `DCT_Start` reads, from every send block, the
 * gradients at the entries the forward call delivered to this rank, sends only those values
 * (coded as the forward's `dct_values`), and writes dense receive blocks: the gradients at the
 * entries this rank sent in the forward call, zeros elsewhere. Not collective; uses the
 * forward's communicator and configuration, and stays usable after the forward is freed
 * (with the masks of its last call).
 *
 * `DCT_Start` on it returns `DCT_ERR_ACTIVE` (and changes nothing) while the forward request is
 * started, or before the forward completed any call (no masks yet).
 *
 * @param forward    A request of `DCT_Alltoallv_init`.
 * @param sendbuf    Gradients of the forward's received activations.
 * @param sendcounts The forward's `recvcounts`.
 * @param sdispls    Displacements of the send blocks (elements, >= 0).
 * @param recvbuf    Receives the gradients of the forward's sent activations.
 * @param recvcounts The forward's `sendcounts`.
 * @param rdispls    Displacements of the receive blocks (elements, >= 0).
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
 * `DCT_Alltoallv_init` or `DCT_Alltoallv_init_c`, and so may a backward of either form pair
 * with it.
 *
 * The same request, checks and return codes as `DCT_Alltoallv_backward_init` (and
 * `DCT_ERR_COUNT` for a block ending past what `MPI_Aint` addresses in bytes). The messages
 * travel as the forward's do. An `error_bounded` backward sent uncompressed moves the dense
 * blocks at these displacements: its first call agrees with the other ranks (one allreduce)
 * whether they pass MPI's `int` counts, and then sends them point to point.
 *
 * @param forward    A request of `DCT_Alltoallv_init` or `DCT_Alltoallv_init_c`.
 * @param sendbuf    Gradients of the forward's received activations.
 * @param sendcounts The forward's `recvcounts`.
 * @param sdispls    Displacements of the send blocks (elements, >= 0).
 * @param recvbuf    Receives the gradients of the forward's sent activations.
 * @param recvcounts The forward's `sendcounts`.
 * @param rdispls    Displacements of the receive blocks (elements, >= 0).
 * @param request    Receives the new request.
 * @return As `DCT_Alltoallv_backward_init`.
 */
DCT_EXPORT int DCT_Alltoallv_backward_init_c(DCT_Request forward, const void *sendbuf,
                                             const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                                             void *recvbuf, const MPI_Count recvcounts[],
                                             const MPI_Aint rdispls[], DCT_Request *request);
/** @} */

/**
 * @defgroup checkpoint Checkpoints of the error-feedback state
 *
 * A checkpoint is one HDF5 file (format: docs/checkpoint-format.md) holding, for every live
 * persistent request on a communicator, its residual on every rank, its threshold and its call
 * counter, so that a restarted job continues exactly where it stopped. Requests are matched by
 * name: the `dct_name` info key, or by default "allreduce.N" where N counts the persistent
 * requests created on that communicator (stable across runs of the same program). DCT-MP
 * requests are saved too (format 5): their call counter, threshold, and per rank the count
 * sent, the forward calls completed and the error-bounded tables' bounds; unnamed ones are
 * "alltoallv.N" (counted apart) and "<forward>.backward" (".backward.1", ...). Their masks are
 * not saved: after a load a backward needs its forward's next call first (`DCT_ERR_ACTIVE`),
 * and they cannot restart on another number of ranks. Drop-in
 * `DCT_Allreduce` states are keyed by buffer addresses, which do not survive a restart, and are
 * not saved; use persistent requests for state that must be restartable.
 *
 * Restart on another number of ranks is governed per request by its `dct_restart` key (or
 * `DCT_RESTART` when it was created): `strict` (default) refuses it, the load failing with
 * `DCT_ERR_CKPT_MISMATCH` if any live request is strict; `redistribute` gives saved rank r's
 * residual to new rank r mod P, so
 * that the sum over ranks of the residuals is preserved: exactly when the new job has at least
 * as many ranks, and up to one rounding per element (the rows merged onto a rank are added in
 * double precision) when it has fewer.
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
 * the file is written. Collective over `comm`.
 *
 * The checkpoint holds the state of the call: the requests may be started, waited, loaded or
 * freed at once, and training goes on while a thread of this process writes the rows (the
 * residuals, velocities and last updates, copied first: that copy, about one pass over the
 * state, and the file's HDF5 metadata are what the call costs). The file, once
 * `DCT_Checkpoint_wait` has succeeded, holds the same bytes as `DCT_Checkpoint_save` at this
 * call would have written, under the same crash safety: it takes the name `path` only at the
 * wait, once complete and synced, and a crash at any moment before leaves the previous
 * checkpoint at `path`. The copy's buffers are kept after the wait for the next isave
 * (faulting in fresh memory for every copy cost more than the copy, measured). The writer thread
 * calls neither MPI nor HDF5 (any MPI thread level will do); it writes with POSIX I/O whatever
 * `DCT_CHECKPOINT_IO` says.
 *
 * No other save to `path` may be pending in the process (`DCT_ERR_ACTIVE`, and
 * `DCT_Checkpoint_save` to `path` meanwhile too). Every started save must be completed by
 * `DCT_Checkpoint_wait` before `comm` is freed and before `MPI_Finalize`.
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
