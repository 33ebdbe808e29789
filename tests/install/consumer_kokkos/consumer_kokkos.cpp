// An application that owns Kokkos (initialized with its own settings) and passes a Kokkos
// View's data to dct: dct runs its kernels on the application's Kokkos and leaves it running.
#include <dct/dct.h>
#include <Kokkos_Core.hpp>

#include <cstdio>
#include <type_traits>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  constexpr int kThreads = 2;  // only a threaded host space uses it
#if KOKKOS_VERSION >= 30700
  Kokkos::initialize(Kokkos::InitializationSettings().set_num_threads(kThreads));
#else
  Kokkos::InitArguments settings;
  settings.num_threads = kThreads;
  Kokkos::initialize(settings);
#endif
  bool ok = true;
  {
    using Host = Kokkos::DefaultHostExecutionSpace;
    int expected = 1;
#if defined(KOKKOS_ENABLE_OPENMP)
    if (std::is_same_v<Host, Kokkos::OpenMP>) expected = kThreads;
#endif
    ok = Host().concurrency() == expected;  // the application's settings hold
    constexpr int n = 1 << 16;
    Kokkos::View<float *, Kokkos::HostSpace> gradient("gradient", n), sum("sum", n);
    Kokkos::parallel_for(
        Kokkos::RangePolicy<Host>(0, n), KOKKOS_LAMBDA(int i) { gradient(i) = float(i % 7); });
    Kokkos::fence();
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "dct_density", "1");
    DCT_Request request;
    int rc = DCT_Allreduce_init(gradient.data(), sum.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                info, &request);
    if (rc == DCT_SUCCESS) rc = DCT_Start(&request);
    if (rc == DCT_SUCCESS) rc = DCT_Wait(&request, DCT_STATUS_IGNORE);
    DCT_Request_free(&request);
    MPI_Info_free(&info);
    ok = ok && rc == DCT_SUCCESS;
    for (int i = 0; i < n && ok; ++i) ok = sum(i) == float(size * (i % 7));
    if (rank == 0)
      std::printf("Kokkos %d (%s, %d threads) with dct: %s\n", KOKKOS_VERSION, Host::name(),
                  Host().concurrency(), ok ? "ok" : "FAILED");
  }
  MPI_Finalize();
  ok = ok && Kokkos::is_initialized();  // dct left the application's Kokkos running
  Kokkos::finalize();
  return ok ? 0 : 1;
}
