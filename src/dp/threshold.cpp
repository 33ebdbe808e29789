#include "dp/threshold.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/error.hpp"

namespace dct::detail {

template <typename T>
T sampled_kth_largest_abs(Backend &backend, const T *send, const T *residual, std::size_t n,
                          std::size_t k, std::size_t m, std::uint64_t seed, std::vector<T> &scratch,
                          Stream stream) {
  require(m >= 1 && m <= n && k >= 1 && k <= n, DCT_ERR_INTERNAL,
          "sampled_kth_largest_abs: bad sizes");
  scratch.resize(m);
  backend.gather_abs_sample(send, residual, n, m, seed, scratch.data(), stream);
  for (T &v : scratch)
    if (v != v) v = std::numeric_limits<T>::infinity();  // NaN ranks above everything
  std::size_t rank = static_cast<std::size_t>(std::ceil(double(k) * double(m) / double(n)));
  rank = rank < 1 ? 1 : (rank > m ? m : rank);
  std::nth_element(scratch.begin(), scratch.begin() + (rank - 1), scratch.end(), std::greater<T>());
  return scratch[rank - 1];
}
template float sampled_kth_largest_abs(Backend &, const float *, const float *, std::size_t,
                                       std::size_t, std::size_t, std::uint64_t,
                                       std::vector<float> &, Stream);
template double sampled_kth_largest_abs(Backend &, const double *, const double *, std::size_t,
                                        std::size_t, std::size_t, std::uint64_t,
                                        std::vector<double> &, Stream);

}  // namespace dct::detail
