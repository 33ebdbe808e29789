// Every test-only hook of the library, in one place. They exist only in the test build of the
// library (target dct_testing, compile definition DCT_TESTING, linked by tests/ only): the
// installed libdct and libdct_pmpi contain none of them, and a test that needs one does not
// compile against the release objects.
//
// - tamper_allreduce_indices, tamper_forward_message: damage outgoing messages on their way
//   (the receivers' validation must reject them; the sender's own state stays intact).
// - max_message_units: lowers the int-count limit DCT-MP's init checks message sizes against.
// - DCT_TEST_CRASH_IN_CHECKPOINT_SAVE=<rank> (environment): that rank ends with std::_Exit(42)
//   in the middle of a checkpoint save, the file half-written (crash safety).
//
// Private header of src/: include it from library sources and tests only.
#pragma once

#ifdef DCT_TESTING

#include <cstddef>

#include "kernels.hpp"

namespace dct::detail::testing {

/// When set, every compressed allreduce call hands it a copy of this rank's outgoing entry
/// indices, and the exchange sends that copy.
extern void (*tamper_allreduce_indices)(WireIndex *idx, std::size_t entries);

/// When set, called on every DCT-MP forward message (both compressors) this rank is about to
/// send, after encoding.
extern void (*tamper_forward_message)(int peer, std::byte *message, std::size_t bytes);

/// When positive, replaces INT_MAX as the most 8-byte units DCT-MP's messages may take
/// (alltoallv_validate.cpp): a test reaches the limit of MPI's int counts without 16 GiB.
extern std::size_t max_message_units;

/// Ends the process if DCT_TEST_CRASH_IN_CHECKPOINT_SAVE names `rank`.
void crash_in_checkpoint_save(int rank);

}  // namespace dct::detail::testing

#endif  // DCT_TESTING
