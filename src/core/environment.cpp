#include "core/environment.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>

#include "core/config.hpp"

extern char **environ;

namespace dct::detail {
namespace {

std::string upper(std::string text) {
  for (char &c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

/// Optimal string alignment distance (Levenshtein plus swaps of neighbours).
std::size_t edit_distance(const std::string &a, const std::string &b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string nearest_name(const std::string &name, const std::vector<std::string> &known) {
  constexpr std::size_t most_edits = 2;
  std::string best;
  std::size_t best_distance = most_edits + 1;
  for (const std::string &candidate : known) {
    const std::size_t distance = edit_distance(upper(name), upper(candidate));
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

void report_misspelt_variables() {
  static std::atomic<bool> reported{false};
  if (reported.load()) return;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || reported.exchange(true)) return;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) return;
  std::vector<std::string> known;
  for (const KnobDescription &knob : knob_descriptions())
    if (knob.env_var != nullptr) known.emplace_back(knob.env_var);
  for (char **entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const char *equals = std::strchr(*entry, '=');
    if (equals == nullptr) continue;
    const std::string name(*entry, static_cast<std::size_t>(equals - *entry));
    if (upper(name).rfind("DCT_", 0) != 0 ||
        std::find(known.begin(), known.end(), name) != known.end())
      continue;
    const std::string nearest = nearest_name(name, known);
    if (!nearest.empty())
      std::fprintf(stderr,
                   "dct: environment variable %s is not one of dct's and is ignored: did you "
                   "mean %s? (docs/configuration.md lists them)\n",
                   name.c_str(), nearest.c_str());
  }
}

}  // namespace dct::detail
