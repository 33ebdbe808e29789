// The simulator's --index-sets (hpc/sim/sim_allreduce.cpp): which entries of each rank's
// gradient are large, i.e. which indices dct keeps, and how they overlap across ranks.
#ifndef DCT_SIM_INDEX_SETS_HPP
#define DCT_SIM_INDEX_SETS_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

/// --index-sets: which indices of each rank's gradient are large, i.e. which ones dct keeps.
///   independent  each rank maps the shared random values at its own rotation (the default):
///                kept sets independent across ranks
///   shared       every rank maps them unrotated: identical gradients and kept sets
///   classes:W1:X1,W2:X2,...  index i is in class c with probability W_c (a hash of i, the
///                same on every rank) and each rank makes it large with probability X_c,
///                independently of the other ranks (a hash of i and the rank); the weights sum
///                to 1, and sum W_c X_c is the fraction of large entries per rank (meant to be
///                the density: hpc/sim/overlap.py fits the classes to measured kept indices)
struct IndexClasses {
  enum Kind { kIndependent, kShared, kClasses } kind = kIndependent;
  std::vector<double> cumulative, keep;  // classes: upper end of each class in [0, 1), X_c
  std::string error;

  bool parse(const std::string &text) {
    *this = IndexClasses{};
    if (text == "independent" || text == "shared") {
      kind = text == "shared" ? kShared : kIndependent;
      return true;
    }
    const std::string prefix = "classes:";
    if (text.compare(0, prefix.size(), prefix) != 0) {
      error = "expected independent, shared or classes:W:X,...";
      return false;
    }
    kind = kClasses;
    std::stringstream in(text.substr(prefix.size()));
    double total = 0.0;
    for (std::string item; std::getline(in, item, ',');) {
      double w = -1.0, x = -1.0;
      char colon = 0;
      std::stringstream pair(item);
      if (!(pair >> w >> colon >> x) || colon != ':' || !pair.eof() || w < 0.0 || x < 0.0 ||
          x > 1.0) {
        error = "class '" + item + "' is not W:X with W >= 0 and X in [0, 1]";
        return false;
      }
      total += w;
      cumulative.push_back(total);
      keep.push_back(x);
    }
    if (keep.empty() || std::fabs(total - 1.0) > 1e-6) {
      error = "the class weights must sum to 1";
      return false;
    }
    cumulative.back() = 1.0;
    return true;
  }

  /// classes: makes the entries this rank draws large in `values` (n of them, in place):
  /// 4 + |v|, above twice any other, so that they stay the kept ones on the second call too,
  /// when the others carry their first call's residual; the rest become small (v / 4).
  void apply(unsigned seed, int rank, float *values, long long n) const {
    const std::uint64_t salt = mix(seed), rank_salt = mix(salt + 1 + static_cast<unsigned>(rank));
    for (long long i = 0; i < n; ++i) {
      const std::uint64_t h = mix(salt ^ static_cast<std::uint64_t>(i));  // the index's class
      const std::size_t c = static_cast<std::size_t>(
          std::upper_bound(cumulative.begin(), cumulative.end(), unit(h)) - cumulative.begin());
      const float v = values[i];
      const bool large = unit(mix(h ^ rank_salt)) < keep[std::min(c, keep.size() - 1)];
      values[i] = large ? std::copysign(4.0f + std::fabs(v), v) : v / 4;
    }
  }

 private:
  static std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  static double unit(std::uint64_t x) {                        // [0, 1)
    return static_cast<double>(x >> 11) / 9007199254740992.0;  // 2^53
  }
};

#endif
