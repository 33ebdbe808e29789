// The kernel tests' cases (tests/unit/test_kernels.cpp, test_selection.cpp): every backend of
// this build, the Kokkos backend on each execution space of its Kokkos and the native CUDA and HIP
// backends, for float and double; a case whose space or backend is missing, or has no device on
// this node, is skipped with a message. Data is prepared on the host and copied to the backend's
// memory.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/compute_backend.hpp"
#include "kokkos_spaces.hpp"

namespace dct::detail::test {

/// Where a case's kernels come from: the Kokkos backend on one execution space, or a native
/// GPU backend.
enum class Source {
  kokkos_serial,
  kokkos_openmp,
  kokkos_cuda,
  kokkos_hip,
  native_cuda,
  native_hip
};

template <Source S, typename T>
struct Case {
  static constexpr Source source = S;
  using Element = T;
};

inline const char *source_name(Source source) {
  switch (source) {
    case Source::kokkos_serial:
      return "kokkos_Serial";
    case Source::kokkos_openmp:
      return "kokkos_OpenMP";
    case Source::kokkos_cuda:
      return "kokkos_Cuda";
    case Source::kokkos_hip:
      return "kokkos_HIP";
    case Source::native_cuda:
      return "cuda";
    default:
      return "hip";
  }
}

/// The library's backend of this kind (nullptr when not compiled).
inline Backend *compiled_backend(DCT_Backend kind) {
  switch (kind) {
    case DCT_BACKEND_CUDA:
      return backends::cuda_backend();
    case DCT_BACKEND_HIP:
      return backends::hip_backend();
    default:
      return backends::kokkos_backend();
  }
}

inline Backend *source_backend(Source source) {
  switch (source) {
    case Source::native_cuda:
      return backends::cuda_backend();
    case Source::native_hip:
      return backends::hip_backend();
    default:
      return kokkos_space_backend(source_name(source) + std::strlen("kokkos_"));
  }
}

template <typename C>
class BackendTest : public ::testing::Test {
 protected:
  using Value = typename C::Element;

  void SetUp() override {
    backend_ = source_backend(C::source);
    const char *name = source_name(C::source);
    if (backend_ == nullptr) GTEST_SKIP() << name << " is not compiled in (or not in this Kokkos)";
    if (!backend_->available()) GTEST_SKIP() << name << " has no device here";
  }

  /// A copy of `host` in the backend's memory.
  template <typename U>
  BackendArray<U> upload(const std::vector<U> &host) {
    BackendArray<U> array(*backend_, host.size());
    backend_->copy(array.data(), host.data(), host.size() * sizeof(U), nullptr);
    return array;
  }
  template <typename U>
  std::vector<U> download(const BackendArray<U> &array, std::size_t n) {
    std::vector<U> host(n);
    backend_->copy(host.data(), array.data(), n * sizeof(U), nullptr);
    return host;
  }

  Value kth_largest(const std::vector<Value> *send, const std::vector<Value> &residual,
                    std::size_t k) {
    BackendArray<Value> s;
    if (send) s = upload(*send);
    const auto r = upload(residual);
    return backend_->kth_largest_abs(send ? s.data() : nullptr, r.data(), residual.size(), k,
                                     nullptr);
  }

  Backend *backend_ = nullptr;
};

using Cases =
    ::testing::Types<Case<Source::kokkos_serial, float>, Case<Source::kokkos_serial, double>,
                     Case<Source::kokkos_openmp, float>, Case<Source::kokkos_openmp, double>,
                     Case<Source::kokkos_cuda, float>, Case<Source::kokkos_cuda, double>,
                     Case<Source::kokkos_hip, float>, Case<Source::kokkos_hip, double>,
                     Case<Source::native_cuda, float>, Case<Source::native_cuda, double>,
                     Case<Source::native_hip, float>, Case<Source::native_hip, double>>;
struct CaseNames {
  template <typename C>
  static std::string GetName(int) {
    return std::string(source_name(C::source)) +
           (sizeof(typename C::Element) == 4 ? "_float" : "_double");
  }
};

template <typename T>
std::vector<T> normal(std::size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<double> distribution(0.0, scale);
  std::vector<T> v(n);
  for (T &x : v) x = static_cast<T>(distribution(engine));
  return v;
}

template <typename T>
T sorted_kth_largest_abs(const std::vector<T> &send, const std::vector<T> &residual,
                         std::size_t k) {
  std::vector<T> magnitudes(send.size());
  for (std::size_t i = 0; i < send.size(); ++i) magnitudes[i] = std::abs(send[i] + residual[i]);
  std::sort(magnitudes.begin(), magnitudes.end(), std::greater<T>());
  return magnitudes[k - 1];
}

template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// Runs `body` once per host SIMD tier of the selection pass this CPU has (the same bits are
/// expected from each), with the tier in the trace; the best tier is restored after.
inline void for_each_host_tier(const std::function<void()> &body) {
  for (int tier = 0; tier < host_simd_tiers(); ++tier) {
    SCOPED_TRACE("host SIMD tier " + std::to_string(tier));
    set_host_simd_tier(tier);
    body();
  }
  set_host_simd_tier(host_simd_tiers() - 1);
}

}  // namespace dct::detail::test
