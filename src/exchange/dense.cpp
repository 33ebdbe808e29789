// dense: the kept entries scattered into a zero vector, summed by MPI's own allreduce.
// Bytes per rank: those of a ring allreduce, 2 (P-1)/P n s.
#include <climits>

#include "error.hpp"
#include "exchange.hpp"

namespace dct::detail {
namespace {

template <typename T>
class DenseExchange final : public SparseExchange<T> {
  using Base = SparseExchange<T>;
  using Base::in_;
  using Base::pending_;
  using Base::traffic_;

 public:
  explicit DenseExchange(MPI_Datatype datatype) : datatype_(datatype) {}

 private:
  bool run_stage(int stage) override {
    if (stage != 0) return false;
    const std::size_t mine = static_cast<std::size_t>(in_.kept[in_.rank]);
    kernels::fill_zero(in_.result, in_.count);
    kernels::scatter_add(in_.idx, in_.val, mine, in_.result);
    // MPI-3 counts are ints: one nonblocking allreduce per INT_MAX elements.
    for (std::size_t offset = 0; offset < in_.count; offset += INT_MAX) {
      const std::size_t left = in_.count - offset;
      const int chunk = static_cast<int>(left < std::size_t(INT_MAX) ? left : INT_MAX);
      pending_.emplace_back();
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, in_.result + offset, chunk, datatype_, MPI_SUM,
                               in_.comm, &pending_.back()),
                "MPI_Iallreduce");
    }
    const MPI_Count ring = in_.ranks > 1
                               ? 2 * static_cast<MPI_Count>(in_.ranks - 1) *
                                     static_cast<MPI_Count>(in_.count * sizeof(T)) / in_.ranks
                               : 0;
    traffic_.bytes_sent = traffic_.bytes_received = ring;
    traffic_.nnz_received = in_.ranks > 1 ? static_cast<MPI_Count>(in_.count) : 0;
    return true;
  }

  MPI_Datatype datatype_;
};

}  // namespace

template <typename T>
std::unique_ptr<SparseExchange<T>> make_dense_exchange(MPI_Datatype datatype) {
  return std::make_unique<DenseExchange<T>>(datatype);
}
template std::unique_ptr<SparseExchange<float>> make_dense_exchange(MPI_Datatype);
template std::unique_ptr<SparseExchange<double>> make_dense_exchange(MPI_Datatype);

}  // namespace dct::detail
