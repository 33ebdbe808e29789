// Links the installed libdct from a C++-only project and checks one sum at density 1 against
// MPI_Allreduce, through the C++ layer. mpi.h comes first on purpose: without the
// *_SKIP_MPICXX definitions that dct::dct (or dct.pc) carries, Open MPI's mpi.h pulls in its
// C++ bindings and the link fails (undefined MPI::Comm::Comm()).
#include <mpi.h>

#include <array>
#include <cstdio>
#include <vector>

#include "dct/dct.hpp"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  bool ok = false;
  try {
    std::vector<float> x{1.0f, 2.0f, static_cast<float>(rank)}, sum(3), expected(3);
    dct::Info info;
    info.set("dct_density", "1");
    dct::AllreduceRequest request(x.data(), sum.data(), x.size(), MPI_COMM_WORLD, info.get());
    request();
    MPI_Allreduce(x.data(), expected.data(), 3, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    ok = sum == expected;
  } catch (const dct::Error &e) {
    std::fprintf(stderr, "dct: %s\n", e.what());
  }
  const std::array<int, 3> version = dct::version();
  if (rank == 0)
    std::printf("dct %d.%d.%d C++ consumer: %s\n", version[0], version[1], version[2],
                ok ? "ok" : "FAILED");
  MPI_Finalize();
  return ok ? 0 : 1;
}
