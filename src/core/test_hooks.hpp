// Every test-only hook of the library, in one place. They exist only in the test build of the
// library (target dct_testing, compile definition DCT_TESTING, linked by tests/ only): the
// installed libdct and libdct_pmpi contain none of them, and a test that needs one does not
// compile against the release objects.
//
// - tamper_allreduce_indices, tamper_forward_message: damage outgoing messages on their way
//   (the receivers' validation must reject them; the sender's own state stays intact).
// - max_mpi_count: lowers the int-count limit past which DCT-MP's exchanges go point to point;
//   point_to_point_exchanges counts those exchanges.
// - emulated_gpu: the host emulation of the GPU code (tests/gpu_emulation) stands in for the
//   CUDA backend, so that whole requests on "device" buffers run where there is no GPU.
// - make_device_transport: a test's transport instead of NCCL (device_transport.hpp).
// - DCT_TEST_CRASH_IN_CHECKPOINT_SAVE=<rank> (environment): that rank ends with std::_Exit(42)
//   in the middle of a checkpoint save, the file half-written (crash safety).
//
// Private header of src/: include it from library sources and tests only.
#pragma once

#ifdef DCT_TESTING

#include <cstddef>
#include <memory>

#include "core/compute_backend.hpp"
#include "core/device_transport.hpp"

namespace dct::detail::testing {

/// When set, every compressed allreduce call hands it a copy of this rank's outgoing entry
/// indices, and the exchange sends that copy.
extern void (*tamper_allreduce_indices)(WireIndex *idx, std::size_t entries);

/// When set, called on every DCT-MP forward message (both compressors) this rank is about to
/// send, after encoding.
extern void (*tamper_forward_message)(int peer, std::byte *message, std::size_t bytes);

/// When set, the CUDA backend as backends::backend_for sees it (dct_backend=auto and =cuda): a
/// GpuBackend of tests/gpu_emulation, whose "device" memory is host memory it allocated. A
/// request on that memory then runs the GPU code path (device kernels, pinned staging, sums on
/// the device) end to end on a machine without a GPU.
extern Backend *emulated_gpu;

/// When set, makes the device transport of GPU requests (backends::make_device_transport)
/// instead of NCCL: with emulated_gpu, tests run the dct_transport=nccl path without a GPU.
extern std::unique_ptr<DeviceTransport> (*make_device_transport)(MPI_Comm comm);

/// When positive, replaces INT_MAX as the largest count or displacement DCT-MP passes to one
/// MPI call (alltoallv_exchange.hpp): past it, the exchanges go point to point in pieces of at
/// most this many items. Read at the inits (and at an uncompressed backward's first call): a
/// test runs the large-count path at small sizes, without 16 GiB.
extern std::size_t max_mpi_count;

/// Exchanges DCT-MP made point to point on this rank (what a test of that path checks ran).
extern std::size_t point_to_point_exchanges;

/// Ends the process if DCT_TEST_CRASH_IN_CHECKPOINT_SAVE names `rank`.
void crash_in_checkpoint_save(int rank);
/// Ends the process if DCT_TEST_CRASH_IN_CHECKPOINT_WRITER names `rank` (DCT_Checkpoint_isave's
/// writer thread, after its first row).
void crash_in_checkpoint_writer(int rank);
/// Whether DCT_TEST_FAIL_IN_CHECKPOINT_WRITER names `rank`: its writer then reports a failed
/// write (a full disk, an I/O error) after its first row.
bool fail_in_checkpoint_writer(int rank);

}  // namespace dct::detail::testing

#endif  // DCT_TESTING
