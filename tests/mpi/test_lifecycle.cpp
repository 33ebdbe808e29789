// Who starts and stops Kokkos, and what dct does after MPI_Finalize. Its own main, since it
// runs MPI_Init/MPI_Finalize itself. Argument: "library" (dct starts Kokkos and must stop it
// at MPI_Finalize) or "application" (the application owns Kokkos; dct must leave it running).
#include <mpi.h>
#include <Kokkos_Core.hpp>

#include <cstdio>
#include <cstring>
#include <vector>

#include "dct/dct.h"

namespace {

int failures = 0;

void check(bool ok, const char *what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main(int argc, char **argv) {
  const bool application_owns_kokkos = argc > 1 && std::strcmp(argv[1], "application") == 0;
  if (application_owns_kokkos) Kokkos::initialize(argc, argv);
  MPI_Init(&argc, &argv);

  std::vector<float> gradient(4096, 1.0f), sum(4096);
  check(DCT_Allreduce(gradient.data(), sum.data(), 4096, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) ==
            DCT_SUCCESS,
        "DCT_Allreduce");
  check(Kokkos::is_initialized(), "Kokkos is running while dct is in use");
  DCT_Request leftover, started;
  check(DCT_Allreduce_init(gradient.data(), sum.data(), 4096, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           MPI_INFO_NULL, &leftover) == DCT_SUCCESS,
        "DCT_Allreduce_init");
  // Started before MPI_Finalize and never completed (DCT_Wait then aborted in MPI).
  check(DCT_Allreduce_init(gradient.data(), sum.data(), 4096, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           MPI_INFO_NULL, &started) == DCT_SUCCESS &&
            DCT_Start(&started) == DCT_SUCCESS,
        "DCT_Start of a request left in flight");
  MPI_Barrier(MPI_COMM_WORLD);  // every rank started it: MPI_Finalize may complete its traffic

  MPI_Finalize();

  check(Kokkos::is_initialized() == application_owns_kokkos,
        application_owns_kokkos ? "dct left the application's Kokkos running"
                                : "dct finalized the Kokkos it started at MPI_Finalize");
  check(DCT_Start(&leftover) == DCT_ERR_NOT_INITIALIZED, "DCT_Start after MPI_Finalize");
  check(DCT_Allreduce(gradient.data(), sum.data(), 4096, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) ==
            DCT_ERR_NOT_INITIALIZED,
        "DCT_Allreduce after MPI_Finalize");
  check(DCT_Wait(&started, DCT_STATUS_IGNORE) == DCT_ERR_NOT_INITIALIZED,
        "DCT_Wait after MPI_Finalize");
  int flag = 1;
  check(DCT_Test(&started, &flag, DCT_STATUS_IGNORE) == DCT_ERR_NOT_INITIALIZED && flag == 0,
        "DCT_Test after MPI_Finalize");
  DCT_Request both[] = {started, leftover};
  check(DCT_Waitall(2, both, DCT_STATUSES_IGNORE) == DCT_ERR_NOT_INITIALIZED,
        "DCT_Waitall after MPI_Finalize");
  check(DCT_Request_free(&leftover) == DCT_SUCCESS, "DCT_Request_free after MPI_Finalize");
  if (application_owns_kokkos) Kokkos::finalize();
  std::printf("%s: %d failure(s)\n", application_owns_kokkos ? "application" : "library", failures);
  return failures == 0 ? 0 : 1;
}
