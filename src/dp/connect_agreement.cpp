#include "dp/connect_agreement.hpp"

#include <cstdint>

#include "core/error.hpp"

namespace dct::detail {

ConnectAgreement ConnectAgreement::reach(const ConnectOffer &mine, MPI_Comm comm) {
  // One MPI_MAX answers every question: a flag's maximum is "on some rank", and the maximum of
  // a negated count is minus its minimum, so the counts are alike where both maxima agree.
  enum Word { kMostKept, kNegatedFewestKept, kStaged, kMpiStages, kNotOnDevice, kWords };
  const bool on_device = mine.staged && mine.mpi_reads_device;
  std::int64_t words[kWords] = {};
  words[kMostKept] = std::int64_t(mine.predicted_kept);
  words[kNegatedFewestKept] = -std::int64_t(mine.predicted_kept);
  words[kStaged] = mine.staged ? 1 : 0;
  words[kMpiStages] = mine.staged && !on_device ? 1 : 0;
  words[kNotOnDevice] = on_device ? 0 : 1;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, words, kWords, MPI_INT64_T, MPI_MAX, comm),
            "MPI_Allreduce");
  ConnectAgreement agreed;
  const std::int64_t most = words[kMostKept], fewest = -words[kNegatedFewestKept];
  agreed.predicted_kept = most == fewest ? mine.predicted_kept : 0;
  agreed.any_staged = words[kStaged] != 0;
  agreed.any_mpi_stages = words[kMpiStages] != 0;
  agreed.all_blocks_on_device = words[kNotOnDevice] == 0;
  return agreed;
}

}  // namespace dct::detail
