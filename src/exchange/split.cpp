#include "split.hpp"

namespace dct::detail {

template <typename T>
std::unique_ptr<SparseExchange<T>> make_split_exchange(SplitLayout &layout) {
  return std::make_unique<SplitExchange<T>>(layout);
}
template std::unique_ptr<SparseExchange<float>> make_split_exchange(SplitLayout &);
template std::unique_ptr<SparseExchange<double>> make_split_exchange(SplitLayout &);

}  // namespace dct::detail
