// --trace-indices: kept indices of the DCT-DP requests, read back from the residual
// (trace.hpp says why that is exact), gathered to rank 0 and written as text.
#include "trace.hpp"

#include <cstdio>
#include <fstream>

namespace dlrm {

std::string IndexTrace::resolve(int64_t run_steps, bool compressed, const std::string &values,
                                bool momentum) {
  if (!compressed) return "needs a dct or eb mode (dense keeps every entry)";
  if (!values.empty() && values != "native")
    return "needs native values (a sent entry's residual is then exactly 0)";
  if (momentum) return "does not apply to --momentum-correction";
  if (!StepWindow::resolve(run_steps))
    return "the traced steps are not all in the run (" + std::to_string(steps) + " steps of " +
           std::to_string(run_steps) + " from step " + std::to_string(first) + ")";
  return "";
}

int64_t IndexTrace::record(int request, const std::vector<float> &acc,
                           const std::vector<float> &residual) {
  records.push_back(step);
  records.push_back(request);
  const size_t kept_at = records.size();
  records.push_back(0);
  for (size_t i = 0; i < acc.size(); ++i)
    if (acc[i] != 0.0f && residual[i] == 0.0f) records.push_back(int64_t(i));
  records[kept_at] = int64_t(records.size() - kept_at - 1);
  return records[kept_at];
}

void IndexTrace::gather(MPI_Comm comm) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  // Records stay small (about density x parameters x steps per rank): int counts suffice.
  const int mine = int(records.size());
  std::vector<int> sizes(static_cast<size_t>(ranks)), displs(static_cast<size_t>(ranks));
  MPI_Gather(&mine, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm);
  std::vector<int64_t> flat;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < ranks; ++r) {
      displs[size_t(r)] = total;
      total += sizes[size_t(r)];
    }
    flat.resize(size_t(total));
  }
  MPI_Gatherv(records.data(), mine, MPI_INT64_T, flat.data(), sizes.data(), displs.data(),
              MPI_INT64_T, 0, comm);
  if (rank == 0)
    for (int r = 0; r < ranks; ++r)
      all.emplace_back(flat.begin() + displs[size_t(r)],
                       flat.begin() + displs[size_t(r)] + sizes[size_t(r)]);
  taken = true;
}

bool IndexTrace::write(const std::string &path, const std::string &header) const {
  std::ofstream file(path);
  if (!file) {
    std::fprintf(stderr, "dct-dlrm: cannot write --trace-indices file %s\n", path.c_str());
    return false;
  }
  file << "# dct-dlrm --trace-indices: kept indices of the DCT-DP requests\n"
       << "# " << header << "\n"
       << "ranks " << all.size() << "\nmode " << mode << "\nsteps " << first << " " << steps
       << "\nrequests " << counts.size() << "\ncounts";
  for (int64_t count : counts) file << " " << count;
  file << "\n# step request rank kept index...\n";
  for (size_t r = 0; r < all.size(); ++r) {
    const std::vector<int64_t> &v = all[r];
    for (size_t at = 0; at + 2 < v.size();) {
      const int64_t kept = v[at + 2];
      file << v[at] << " " << v[at + 1] << " " << r << " " << kept;
      for (int64_t i = 0; i < kept; ++i) file << " " << v[at + 3 + size_t(i)];
      file << "\n";
      at += 3 + size_t(kept);
    }
  }
  file.flush();
  if (!file) {
    std::fprintf(stderr, "dct-dlrm: writing --trace-indices file %s failed\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace dlrm
