// MPI's own allreduce: behind the request lifecycle for every call dct does not compress, and
// in pieces for the compressed engine's dense path.
#include "dp/passthrough.hpp"

#include <climits>
#include <cstddef>
#include <memory>
#include <utility>

#include "core/error.hpp"
#include "core/request_engine.hpp"

namespace dct::detail {
namespace {

int type_size(MPI_Datatype datatype) {
  int size = 0;
  const int rc = MPI_Type_size(datatype, &size);
  require(rc == MPI_SUCCESS, DCT_ERR_DATATYPE, "MPI_Type_size rejects the datatype");
  return size;
}

class PassthroughEngine final : public RequestEngine {
 public:
  PassthroughEngine(std::shared_ptr<CommContext> context, const AllreduceArgs &args)
      : RequestEngine(std::move(context), args.count, type_size(args.datatype), Config{}),
        datatype_(args.datatype),
        op_(args.op) {}

  void start(const void *send, void *recv) override {
    begin_call();
    send_ = send;
    recv_ = recv;
    launch();
  }

  bool blocking() const override { return true; }

 private:
  bool advance(bool) override {
    // sendbuf == recvbuf reduces in place, as the compressed path does (MPI itself calls the
    // aliasing erroneous, and Open MPI's check aborted through the communicator's handler).
    const void *send = send_ == recv_ && count_ > 0 ? MPI_IN_PLACE : send_;
    check_mpi(MPI_Allreduce(send, recv_, static_cast<int>(count_), datatype_, op_, comm()),
              "MPI_Allreduce");
    status_.algorithm = DCT_ALGORITHM_PASSTHROUGH;
    status_.nnz_sent = status_.nnz_received = count_;
    status_.density = 1.0;
    status_.bytes_sent = status_.bytes_received = status_.dense_bytes;
    return true;
  }
  void abandon() override {}

  MPI_Datatype datatype_;
  MPI_Op op_;
  const void *send_ = nullptr;
  void *recv_ = nullptr;
};

}  // namespace

void allreduce_in_chunks(const void *send, void *recv, MPI_Count count, MPI_Datatype datatype,
                         int element_size, MPI_Op op, MPI_Comm comm) {
  for (MPI_Count offset = 0; offset < count; offset += INT_MAX) {
    const int chunk = static_cast<int>(count - offset < INT_MAX ? count - offset : INT_MAX);
    const std::size_t shift = static_cast<std::size_t>(offset) * element_size;
    const void *chunk_send =
        send == MPI_IN_PLACE ? MPI_IN_PLACE : static_cast<const char *>(send) + shift;
    check_mpi(
        MPI_Allreduce(chunk_send, static_cast<char *>(recv) + shift, chunk, datatype, op, comm),
        "MPI_Allreduce");
  }
}

std::unique_ptr<RequestEngine> make_passthrough_engine(std::shared_ptr<CommContext> context,
                                                       const AllreduceArgs &args) {
  return std::make_unique<PassthroughEngine>(std::move(context), args);
}

}  // namespace dct::detail
