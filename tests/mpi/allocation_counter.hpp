// Counts the heap allocations a stretch of code makes, and the page faults it takes: the test
// of DCT-DP's steady state (test_steady_state.cpp). The executable replaces malloc and the
// global operator new (allocation_counter.cpp, compiled without sanitizers only: they replace
// both themselves) and, while counting, records every allocation whose caller is not MPI's
// (Open MPI's nonblocking collectives build a schedule per call, which is no allocation of dct's).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dct::test {

/// False where the allocation functions are not replaced (sanitizer builds): nothing counts.
bool allocation_counting_available();

/// What happened between start() and stop() on this rank.
struct AllocationCount {
  long allocations = 0;            ///< heap allocations by anything but MPI's libraries
  long page_faults = 0;            ///< minor and major faults of the process (getrusage)
  std::vector<std::string> where;  ///< the first allocations' callers (symbol, library)
};

void start_counting();
AllocationCount stop_counting();

}  // namespace dct::test
