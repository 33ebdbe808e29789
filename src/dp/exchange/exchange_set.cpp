#include "dp/exchange/exchange_set.hpp"

namespace dct::detail {

Staging Placement::staging() const {
  if (!any_staged) return Staging::none;
  if (transport)  // dense's sum too; hierarchical's tiers where they have one
    return hierarchical_on_transport || !any_mpi_stages ? Staging::none : Staging::transport;
  return any_mpi_stages ? Staging::all : Staging::dense;
}

bool Placement::sums_on_device(int algorithm) const {
  return staged && (algorithm != DCT_ALGORITHM_DENSE || transport || mpi_reads_device);
}

bool Placement::encodes_on_device(int algorithm) const {
  if (algorithm == DCT_ALGORITHM_DENSE) return sums_on_device(algorithm);
  if (algorithm != DCT_ALGORITHM_ALLGATHER && algorithm != DCT_ALGORITHM_SPLIT &&
      algorithm != DCT_ALGORITHM_HIERARCHICAL && algorithm != DCT_ALGORITHM_RECURSIVE_DOUBLING)
    return false;
  return staged;
}

template <typename T>
SparseExchange<T> &ExchangeSet<T>::get(DCT_Algorithm algorithm, MPI_Datatype datatype,
                                       const Hierarchy &hierarchy) {
  std::unique_ptr<SparseExchange<T>> &slot = exchanges_[algorithm];
  if (!slot) {
    switch (algorithm) {
      case DCT_ALGORITHM_ALLGATHER:
        slot = make_allgather_exchange<T>();
        break;
      case DCT_ALGORITHM_SPLIT:
        slot = make_split_exchange<T>(layout_);
        break;
      case DCT_ALGORITHM_HIERARCHICAL:
        slot = make_hierarchical_exchange<T>(hierarchy, group_layout_, cross_layout_);
        break;
      case DCT_ALGORITHM_RECURSIVE_DOUBLING:
        slot = make_recursive_doubling_exchange<T>();
        break;
      default:
        slot = make_dense_exchange<T>(datatype);
    }
  }
  return *slot;
}

template <typename T>
void ExchangeSet<T>::abandon(SparseExchange<T> *exchange) {
  if (exchange == nullptr || exchange->idle()) return;
  for (auto &slot : exchanges_)
    if (slot.get() == exchange) static_cast<void>(slot.release());
}

template <typename T>
void ExchangeSet<T>::forget_layouts() {
  for (SplitLayout *layout : {&layout_, &group_layout_, &cross_layout_}) layout->boundaries.clear();
}

template class ExchangeSet<float>;
template class ExchangeSet<double>;

}  // namespace dct::detail
