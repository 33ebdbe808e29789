// The embedding lookups that `dct-dlrm --dump-lookups FILE` writes and `dct-bench alltoallv
// --blocks FILE` reads. Format (little-endian; examples/dlrm/README.md, "Dumping the lookups"):
//
//   offset  size  field
//        0     8  magic "DCTLOOKS"
//        8     4  version: 1
//       12     4  bytes per value: 4 (IEEE float32)
//       16     4  ranks P (senders = receivers)
//       20     4  steps S (consecutive training steps)
//       24     4  rows b per block (the batch per rank)
//       28     4  d: values per row (the sender's tables side by side)
//       32     4  table columns: values per table in a row (dividing d)
//       36     4  reserved: 0
//       40        S x P x P x b x d float32: step, sender, receiver, row, column (row-major)
//
// The file is not trusted: every field is checked, the products are checked for overflow, and
// the file must be exactly as long as the header says.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dct::bench {

struct LookupsFile {
  int ranks = 0, steps = 0, rows = 0, d = 0, table_columns = 0;
  std::vector<float> values;  ///< empty when only the header was read

  /// Values of the block `sender` sent to `receiver` at `step` (rows x d, row-major).
  const float *block(int step, int sender, int receiver) const {
    return values.data() +
           ((std::size_t(step) * std::size_t(ranks) + std::size_t(sender)) * std::size_t(ranks) +
            std::size_t(receiver)) *
               std::size_t(rows) * std::size_t(d);
  }
};

/// Reads `path` (its values too when `with_values`); throws std::invalid_argument saying what is
/// wrong: cannot open, not a lookups file, unsupported version or value size, a field out of
/// range, table columns not dividing d, sizes overflowing, or a file of another length than its
/// header implies.
LookupsFile read_lookups(const std::string &path, bool with_values);

}  // namespace dct::bench
