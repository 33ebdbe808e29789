// The README's first program in C++ (dct/dct.hpp): failures throw dct::Error with dct's code
// and message. README.md shows it whole, from the marker below (ctest readme.snippets keeps
// them equal; example.first.cxx runs it).
//
//   mpiexec -n 2 ./dct_first_cxx
// README begin
#include <dct/dct.hpp>

#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    std::vector<float> grad(1 << 20), grad_sum(grad.size());
    dct::Info info;
    info.set("dct_density", "0.01");
    dct::AllreduceRequest request(grad.data(), grad_sum.data(), grad.size(), MPI_COMM_WORLD,
                                  info.get());
    DCT_Status status{};
    for (int step = 0; step < 20; ++step) {
      for (std::size_t i = 0; i < grad.size(); ++i)  // your backward pass writes grad
        grad[i] = static_cast<float>((i * 79 + step * 1049 + rank) % 2001) - 1000;
      status = request();  // start + wait: was MPI_Allreduce(grad, grad_sum, ...)
      // your optimiser applies grad_sum
    }
    if (rank == 0)
      std::printf("dct: %lld calls, %.1fx fewer bytes than MPI_Allreduce, density %.4f\n",
                  static_cast<long long>(status.calls),
                  double(status.total_dense_bytes) / double(status.total_bytes_sent),
                  status.density);
  } catch (const dct::Error &e) {  // e.code(): the DCT_ERR_* code
    std::fprintf(stderr, "dct: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, e.code());
  }
  MPI_Finalize();
}
// README end
