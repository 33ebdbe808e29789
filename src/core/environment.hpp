// DCT_* environment variables that no knob reads: a misspelt one (DCT_DENSTY) would otherwise be
// ignored without a word, and the drop-in and PMPI users configure dct through the environment
// alone (issue 37). Unknown MPI_Info keys are refused instead (config.cpp).
#pragma once

#include <string>
#include <vector>

namespace dct::detail {

/// The name of `known` nearest to `name`, compared without case by optimal string alignment
/// (insertions, deletions, substitutions, swaps of neighbours), if it is at most 2 edits away;
/// else "". A name equal to a known one but for case gives that one.
std::string nearest_name(const std::string &name, const std::vector<std::string> &known);

/// Once per process, on rank 0 of MPI_COMM_WORLD (nothing while MPI is not running): every
/// environment variable named DCT_* (in any case) that is not a knob's variable but lies within
/// 2 edits of one, on stderr with the knob's name. Names further from every knob are dct's
/// tools' (DCT_BUILD_DIR, DCT_SIM_*, ...) or another program's, and are not reported.
void report_misspelt_variables();

}  // namespace dct::detail
