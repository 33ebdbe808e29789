// recursive_doubling (SparCML's sparse recursive doubling): in round r every rank exchanges
// what it has merged so far with the rank 2^r away and merges again, so that after log2(P)
// rounds every rank holds the sum. A message is a sparse list until the dense vector would be
// smaller; from then on the merge happens in a dense buffer, copied to the result at the end.
//
// P not a power of two: the first 2*(P - P') ranks pair up (P' the largest power of two
// <= P); the even one of each pair hands its entries to the odd one, sits out the rounds and
// receives the final sum. Every message is a size word (nonzeros, or -1 for dense) and then
// the payload. Both partners add the same two operands, so every rank ends with the same bits.
// A merge keeps the nonzero sums only: an index whose two values cancel leaves the list.
//
// A GPU request's partial sum stays on the device (Device below): its entries are encoded,
// decoded, merged and summed there, and only the encoded messages cross, in host memory
// (or none, where MPI reads device memory or a device transport carries them, queued on the
// request's stream between the encode and the merge: messages_on_device()). Its merge sums both
// lists into a dense buffer and selects the nonzeros (Backend primitives: two passes over n on the
// device, where the host merges the two lists), with the same bits and list sizes as the host.
// The two paths stay side by side in this file (absorb and absorb_on_device, encode_message
// and encode_message_on_device), so that each step can be read against its twin.
#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "core/peer_headers.hpp"
#include "dp/exchange/exchange.hpp"

namespace dct::detail {
namespace {

constexpr int kSizeTag = 1;
constexpr int kPayloadTag = 2;
constexpr std::int64_t kDense = -1;

template <typename T>
class RecursiveDoublingExchange final : public SparseExchange<T> {
  using Base = SparseExchange<T>;
  using Base::in_;
  using Base::pending_;
  using Base::traffic_;

 private:
  void prepare() override {
    const int p = in_.ranks;
    steps_.clear();
    dense_ = false;
    power_ = 1;
    while (power_ * 2 <= p) power_ *= 2;
    extra_ = p - power_;
    const std::size_t mine = static_cast<std::size_t>(in_.kept[in_.rank]);
    if (on_device()) {
      Backend &device = *in_.device;
      device_.list_idx.reserve_growing(device, mine);
      device_.list_val.reserve_growing(device, mine);
      device.copy(device_.list_idx.data(), in_.device_idx, mine * sizeof(WireIndex), in_.stream);
      device.copy(device_.list_val.data(), in_.device_val, mine * sizeof(T), in_.stream);
      device_.entries = mine;
    } else {
      wire::assign_growing(idx_, in_.idx, in_.idx + mine);
      wire::assign_growing(val_, in_.val, in_.val + mine);
    }
    // Steps: [fold-in], rounds, [fold-out]; each step is two stages (size, payload).
    if (in_.rank < 2 * extra_) {
      steps_.push_back(in_.rank % 2 == 0 ? Step{Role::send, in_.rank + 1}
                                         : Step{Role::receive_merge, in_.rank - 1});
    }
    if (in_.rank >= 2 * extra_ || in_.rank % 2 == 1) {
      const int virtual_rank = in_.rank < 2 * extra_ ? in_.rank / 2 : in_.rank - extra_;
      for (int mask = 1; mask < power_; mask *= 2) {
        const int partner = virtual_rank ^ mask;
        steps_.push_back(
            {Role::exchange_merge, partner < extra_ ? 2 * partner + 1 : partner + extra_});
      }
    }
    if (in_.rank < 2 * extra_) {
      steps_.push_back(in_.rank % 2 == 0 ? Step{Role::receive_replace, in_.rank + 1}
                                         : Step{Role::send, in_.rank - 1});
    }
  }

  enum class Role { send, receive_merge, receive_replace, exchange_merge };
  struct Step {
    Role role;
    int peer;
  };

  bool sends(const Step &s) const { return s.role == Role::send || s.role == Role::exchange_merge; }
  bool receives(const Step &s) const { return s.role != Role::send; }

  bool run_stage(int stage) override {
    const std::size_t step = static_cast<std::size_t>(stage / 2);
    if (step > 0 && stage % 2 == 0) absorb(steps_[step - 1]);
    if (step == steps_.size()) {
      if (stage % 2 == 1) return false;
      write_result();
      return true;
    }
    if (stage % 2 == 0)
      post_sizes(steps_[step]);
    else
      post_payloads(steps_[step]);
    return true;
  }

  // A GPU request whose entries lie on the device keeps its partial sum there.
  bool on_device() const { return in_.device_idx != nullptr; }
  std::size_t entries() const { return on_device() ? device_.entries : idx_.size(); }
  // Partial sums travel in full precision, as index lists or bitmaps of the whole tensor.
  wire::BlockFormat list_format(std::size_t entries) const {
    return wire::block_format<T>(entries, in_.count, ValueCoding::native);
  }
  std::size_t my_units() const {
    return dense_ ? wire::dense_units<T>(in_.count) : list_format(entries()).units();
  }

  void post_sizes(const Step &s) {
    my_size_ = dense_ ? kDense : static_cast<std::int64_t>(entries());
    if (receives(s)) {
      pending_.emplace_back();
      check_mpi(
          MPI_Irecv(&peer_size_, 1, MPI_INT64_T, s.peer, kSizeTag, in_.comm, &pending_.back()),
          "MPI_Irecv");
      traffic_.bytes_received += 8;
    }
    if (sends(s)) {
      pending_.emplace_back();
      check_mpi(MPI_Isend(&my_size_, 1, MPI_INT64_T, s.peer, kSizeTag, in_.comm, &pending_.back()),
                "MPI_Isend");
      traffic_.bytes_sent += 8;
    }
  }

  void post_payloads(const Step &s) {
    // A size we cannot bound would make us receive blindly: give up now.
    if (receives(s) && peer_size_ != kDense)
      peer::announced_entries(peer_size_, in_.count, s.peer, "entries for a tensor of");
    const std::size_t my_units = sends(s) ? this->my_units() : 0;
    const std::byte *outgoing = nullptr;
    if (sends(s))
      outgoing = on_device() ? encode_message_on_device(my_units) : encode_message(my_units);
    // My message encoded, and the last round's merge done with the buffer the peer's comes into
    // (the transport is queued behind them instead).
    const bool transported = in_.transport != nullptr && on_device();
    if (this->messages_on_device() && !transported) this->device_ready_for_mpi();
    std::byte *incoming = nullptr;
    std::size_t units = 0;
    if (receives(s)) {
      units = peer_size_ == kDense ? wire::dense_units<T>(in_.count)
                                   : list_format(static_cast<std::size_t>(peer_size_)).units();
      if (this->messages_on_device()) {
        device_.incoming.reserve_growing(*in_.device, units * wire::kUnitBytes);
        incoming = device_.incoming.data();
      } else {
        wire::size_buffer(incoming_, units);
        incoming = incoming_.data();
      }
      traffic_.bytes_received += static_cast<MPI_Count>(units * wire::kUnitBytes);
    }
    if (transported) {
      if (sends(s)) traffic_.bytes_sent += static_cast<MPI_Count>(my_units * wire::kUnitBytes);
      return in_.transport->sendrecv(outgoing, wire::mpi_units(my_units), incoming,
                                     wire::mpi_units(units), s.peer,
                                     in_.device->queue_of(in_.stream));
    }
    if (receives(s)) {
      pending_.emplace_back();
      check_mpi(MPI_Irecv(incoming, wire::mpi_units(units), MPI_UINT64_T, s.peer, kPayloadTag,
                          in_.comm, &pending_.back()),
                "MPI_Irecv");
    }
    if (sends(s)) {
      pending_.emplace_back();
      check_mpi(MPI_Isend(outgoing, wire::mpi_units(my_units), MPI_UINT64_T, s.peer, kPayloadTag,
                          in_.comm, &pending_.back()),
                "MPI_Isend");
      traffic_.bytes_sent += static_cast<MPI_Count>(my_units * wire::kUnitBytes);
    }
  }

  // My partial sum as it travels (`units` units): the dense sum, its last unit padded with
  // zeros, or the list's block.
  const std::byte *encode_message(std::size_t units) {
    wire::size_buffer(outgoing_, units);
    if (dense_) {
      std::memset(outgoing_.data(), 0, outgoing_.size());
      if (in_.count > 0) std::memcpy(outgoing_.data(), sum_.data(), in_.count * sizeof(T));
    } else {
      wire::encode_block(list_format(idx_.size()), idx_.data(), val_.data(), 0, outgoing_.data());
    }
    return outgoing_.data();
  }
  // The same bytes, made on the device; copied to the host unless MPI reads them there.
  const std::byte *encode_message_on_device(std::size_t units) {
    Backend &device = *in_.device;
    const std::size_t bytes = units * wire::kUnitBytes;
    device_.outgoing.reserve_growing(device, bytes);
    std::byte *out = device_.outgoing.data();
    if (dense_) {
      copy_dense_block(device, device_.sum.data(), in_.count, out, bytes, in_.stream);
    } else if (bytes > 0) {
      device.encode_block(list_format(device_.entries), device_.list_idx.data(),
                          device_.list_val.data(), 0, out, in_.stream);
    }
    if (this->messages_on_device()) return out;
    wire::size_buffer(outgoing_, units);
    device.copy(outgoing_.data(), out, bytes, in_.stream);
    return outgoing_.data();
  }

  // Merges (or, for the last step of a folded-out rank, replaces with) what the peer sent.
  void absorb(const Step &s) {
    if (!receives(s)) return;
    if (on_device()) return absorb_on_device(s);
    const std::byte *block = incoming_.data();
    if (peer_size_ == kDense) {
      traffic_.nnz_received += static_cast<MPI_Count>(in_.count);
      const T *theirs = reinterpret_cast<const T *>(block);  // a dense block: the values
      if (s.role == Role::receive_replace || !dense_) {
        // Mine (if any) is added on top of theirs: x + y has the same bits as y + x. The
        // lists are emptied, their storage kept for later calls.
        const bool mine = s.role != Role::receive_replace && !dense_;
        sum_.resize(in_.count);
        if (in_.count > 0) std::memcpy(sum_.data(), theirs, in_.count * sizeof(T));
        if (mine)
          in_.host->scatter_add(idx_.data(), val_.data(), idx_.size(), sum_.data(), nullptr);
        idx_.clear();
        val_.clear();
        dense_ = true;
        return;
      }
      for (std::size_t i = 0; i < in_.count; ++i) sum_[i] += theirs[i];
      return;
    }
    const std::size_t entries = static_cast<std::size_t>(peer_size_);
    wire::resize_growing(peer_idx_, entries);
    wire::resize_growing(peer_val_, entries);
    const WireIndex *idx = peer_idx_.data();
    const T *val = peer_val_.data();
    if (!wire::decode_block(list_format(entries), block, incoming_.size(), 0, peer_idx_.data(),
                            peer_val_.data())) {
      this->peer_error(s.peer, "indices out of range or out of order");
      return;
    }
    traffic_.nnz_received += static_cast<MPI_Count>(entries);
    if (s.role == Role::receive_replace) {
      wire::assign_growing(idx_, idx, idx + entries);
      wire::assign_growing(val_, val, val + entries);
      dense_ = false;
      return;
    }
    if (dense_) {
      in_.host->scatter_add(idx, val, entries, sum_.data(), nullptr);
      return;
    }
    merge_sparse(idx, val, entries);
    if (!wire::sparse_is_smaller<T>(idx_.size(), in_.count)) {
      sum_.resize(in_.count);
      in_.host->fill_zero(sum_.data(), in_.count, nullptr);
      in_.host->scatter_add(idx_.data(), val_.data(), idx_.size(), sum_.data(), nullptr);
      idx_.clear();
      val_.clear();
      dense_ = true;
    }
  }

  void merge_sparse(const WireIndex *idx, const T *val, std::size_t entries) {
    merged_idx_.clear();
    merged_val_.clear();
    wire::reserve_growing(merged_idx_, idx_.size() + entries);
    wire::reserve_growing(merged_val_, idx_.size() + entries);
    std::size_t a = 0, b = 0;
    while (a < idx_.size() || b < entries) {
      if (b == entries || (a < idx_.size() && idx_[a] < idx[b])) {
        merged_idx_.push_back(idx_[a]);
        merged_val_.push_back(val_[a++]);
      } else if (a == idx_.size() || idx[b] < idx_[a]) {
        merged_idx_.push_back(idx[b]);
        merged_val_.push_back(val[b++]);
      } else {
        const T sum = val_[a++] + val[b++];
        if (sum == T(0)) continue;  // cancelled (NaN stays)
        merged_idx_.push_back(idx[b - 1]);
        merged_val_.push_back(sum);
      }
    }
    idx_.swap(merged_idx_);
    val_.swap(merged_val_);
  }

  // absorb()'s twin for a partial sum on the device, step for step: the same sums, in the same
  // order (mine + theirs), and the same list sizes.
  void absorb_on_device(const Step &s) {
    Backend &device = *in_.device;
    const std::size_t bytes = peer_size_ == kDense
                                  ? wire::dense_units<T>(in_.count) * wire::kUnitBytes
                                  : list_format(std::size_t(peer_size_)).units() * wire::kUnitBytes;
    const std::byte *block =
        this->messages_on_device()
            ? device_.incoming.data()
            : device_.staging.from_host(device, incoming_.data(), bytes, in_.stream);
    if (peer_size_ == kDense) {
      traffic_.nnz_received += static_cast<MPI_Count>(in_.count);
      const T *theirs = reinterpret_cast<const T *>(block);
      device_.sum.reserve_growing(device, in_.count);
      T *sum = device_.sum.data();
      if (s.role == Role::receive_replace || !dense_) {
        const bool mine = s.role != Role::receive_replace && !dense_;
        if (in_.count > 0) device.copy(sum, theirs, in_.count * sizeof(T), in_.stream);
        if (mine)
          device.scatter_add(device_.list_idx.data(), device_.list_val.data(), device_.entries, sum,
                             in_.stream);
        device_.entries = 0;
        dense_ = true;
        return;
      }
      device.add(theirs, sum, in_.count, in_.stream);  // the host's sum_[i] += theirs[i]
      return;
    }
    const std::size_t entries = static_cast<std::size_t>(peer_size_);
    device_.staging.reserve_entries(device, entries);
    WireIndex *idx = device_.staging.idx.data();
    T *val = device_.staging.val.data();
    if (!device.decode_block(list_format(entries), block, bytes, 0, idx, val, in_.stream)) {
      this->peer_error(s.peer, "indices out of range or out of order");
      return;
    }
    traffic_.nnz_received += static_cast<MPI_Count>(entries);
    if (s.role == Role::receive_replace) {
      device_.list_idx.reserve_growing(device, entries);
      device_.list_val.reserve_growing(device, entries);
      device.copy(device_.list_idx.data(), idx, entries * sizeof(WireIndex), in_.stream);
      device.copy(device_.list_val.data(), val, entries * sizeof(T), in_.stream);
      device_.entries = entries;
      dense_ = false;
      return;
    }
    if (dense_) {
      device.scatter_add(idx, val, entries, device_.sum.data(), in_.stream);
      return;
    }
    // Both lists summed in a dense buffer (+0, mine, theirs), then its nonzeros selected: the
    // host's merge. Where they are too many for a list, that buffer is the dense sum.
    const SparseList<T> lists[2] = {
        {device_.list_idx.data(), device_.list_val.data(), device_.entries}, {idx, val, entries}};
    const std::size_t capacity = device_.entries + entries;
    device_.sum.reserve_growing(device, in_.count);
    device.sum_lists(lists, 2, device_.sum.data(), 0, in_.count, in_.stream);
    device_.list_idx.reserve_growing(device, capacity);  // my list is in the sum now
    device_.list_val.reserve_growing(device, capacity);
    device_.entries = in_.count == 0
                          ? 0
                          : device
                                .select(nullptr, device_.sum.data(), in_.count, T(0), kEveryTie,
                                        device_.list_idx.data(), device_.list_val.data(), capacity,
                                        SparseList<T>{}, in_.stream)
                                .count;
    if (!wire::sparse_is_smaller<T>(device_.entries, in_.count)) {
      device_.entries = 0;
      dense_ = true;
    }
  }

  // The result is written only once the call succeeded: a rejected call leaves it as it was.
  // A GPU request's sparse sum goes to the device as its list, summed there (not n elements).
  void write_result() {
    this->finish();
    if (on_device()) {
      Backend &device = *in_.device;
      if (dense_) {
        if (in_.count > 0)
          device.copy(in_.result, device_.sum.data(), in_.count * sizeof(T), in_.stream);
        return;
      }
      const SparseList<T> sum{device_.list_idx.data(), device_.list_val.data(), device_.entries};
      device.sum_lists(&sum, 1, in_.result, 0, in_.count, in_.stream);
      traffic_.result_nnz = static_cast<MPI_Count>(device_.entries);
      return;
    }
    if (dense_) {
      if (in_.count == 0) return;
      if (in_.device != nullptr)
        in_.device->copy(in_.result, sum_.data(), in_.count * sizeof(T), in_.stream);
      else
        std::memcpy(in_.result, sum_.data(), in_.count * sizeof(T));
      return;
    }
    const SparseList<T> sum{idx_.data(), val_.data(), idx_.size()};
    if (in_.device != nullptr)
      device_.staging.sum_host_list(*in_.device, sum, in_.result, 0, in_.count, in_.stream);
    else
      in_.host->sum_lists(&sum, 1, in_.result, 0, in_.count, nullptr);
    traffic_.result_nnz = static_cast<MPI_Count>(idx_.size());
  }

  int power_ = 1;
  int extra_ = 0;
  std::vector<Step> steps_;
  bool dense_ = false;
  std::vector<WireIndex> idx_, merged_idx_;
  std::vector<T> val_, merged_val_;
  std::vector<WireIndex> peer_idx_;  // the peer's list, decoded and validated
  std::vector<T> peer_val_;
  std::vector<T> sum_;  // the dense partial sum, once dense_ (the result only at the end)
  std::int64_t my_size_ = 0;
  std::int64_t peer_size_ = 0;
  std::vector<std::byte> outgoing_, incoming_;
  // in_.device only: on_device(), the partial sum (a list, or dense in `sum`, which is also
  // the merges' buffer), the messages encoded and received there, and the peer's decoded
  // list; else the final sparse sum, copied over from the host.
  struct Device {
    BackendArray<WireIndex> list_idx;
    BackendArray<T> list_val;
    std::size_t entries = 0;
    BackendArray<T> sum;
    BackendArray<std::byte> outgoing, incoming;  // incoming: messages_on_device() only
    DeviceStaging<T> staging;
  } device_;
};

}  // namespace

template <typename T>
std::unique_ptr<SparseExchange<T>> make_recursive_doubling_exchange() {
  return std::make_unique<RecursiveDoublingExchange<T>>();
}
template std::unique_ptr<SparseExchange<float>> make_recursive_doubling_exchange();
template std::unique_ptr<SparseExchange<double>> make_recursive_doubling_exchange();

}  // namespace dct::detail
