#include "mp/alltoallv_init.hpp"

#include <cstdint>
#include <exception>
#include <memory>
#include <utility>

#include "core/agreement.hpp"
#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/request_table.hpp"
#include "mp/alltoallv_exchange.hpp"
#include "mp/alltoallv_validate.hpp"
#include "mp/row_codec.hpp"

namespace dct::detail {
namespace {

template <typename Wide>
std::vector<Wide> widen(const int *values, int ranks) {
  return values != nullptr ? std::vector<Wide>(values, values + ranks) : std::vector<Wide>();
}

template <typename Wide>
const Wide *given(const std::vector<Wide> &values, bool was_given) {
  return was_given ? values.data() : nullptr;
}

}  // namespace

WidenedArrays::WidenedArrays(const int *sendcounts, const int *sdispls, const int *recvcounts,
                             const int *rdispls, int ranks)
    : sendcounts_(widen<MPI_Count>(sendcounts, ranks)),
      recvcounts_(widen<MPI_Count>(recvcounts, ranks)),
      sdispls_(widen<MPI_Aint>(sdispls, ranks)),
      rdispls_(widen<MPI_Aint>(rdispls, ranks)),
      given_{sendcounts != nullptr, sdispls != nullptr, recvcounts != nullptr, rdispls != nullptr} {
}

AlltoallvArgs WidenedArrays::args(const void *sendbuf, void *recvbuf, MPI_Datatype datatype,
                                  MPI_Comm comm) const {
  return AlltoallvArgs{sendbuf,
                       given(sendcounts_, given_[0]),
                       given(sdispls_, given_[1]),
                       recvbuf,
                       given(recvcounts_, given_[2]),
                       given(rdispls_, given_[3]),
                       datatype,
                       comm};
}

int alltoallv_forward_size(DCT_Request forward) {
  return RequestTable::instance().find(&forward).engine->context()->size();
}

void alltoallv_init(const AlltoallvArgs &args, MPI_Info info, DCT_Request *request,
                    const char *function) {
  // A bad communicator leaves no peers to agree with; every other refusal is agreed on.
  std::shared_ptr<CommContext> context = comm_context(args.comm);
  Config config;
  std::exception_ptr local_error;
  auto persistent = std::make_unique<PersistentRequest>();
  auto plan = std::make_shared<ExchangePlan>();
  bool needs_point_to_point = false;
  bool unnamed = false;
  try {
    require(request != nullptr, DCT_ERR_ARG, "request is NULL");
    config = Config::from(info, KnobUse::alltoallv);
    unnamed = config.name.empty();
    if (unnamed) config.name = context->default_alltoallv_name();
    validate_alltoallv(args, config);
    persistent->engine = make_alltoallv_engine(args, config, plan);
    needs_point_to_point = may_pass_int_counts(AlltoallvLayout(args, context->size()), config,
                                               persistent->engine->element_size());
  } catch (...) {
    local_error = std::current_exception();
  }
  // What every message's header is checked against too (DCT_ERR_MISMATCH at DCT_Wait).
  Fingerprint fingerprint;
  fingerprint.add("datatype size",
                  static_cast<std::uint64_t>(local_error ? 0 : persistent->engine->element_size()));
  fingerprint.add("dct_row_length", static_cast<std::uint64_t>(config.row_length));
  fingerprint.add("dct_values", static_cast<std::uint64_t>(config.values));
  // The compressor, and whether an error-bounded backward is compressed, decide which
  // collectives a call makes. The bounds, their schedule and the lossless coder are the
  // sender's alone (every message says how to decode it): ranks may differ in those.
  const bool error_bounded = config.mp_compressor == MpCompressor::error_bounded;
  fingerprint.add("dct_mp_compressor", static_cast<std::uint64_t>(config.mp_compressor));
  fingerprint.add("dct_backward_error_bound given",
                  std::uint64_t(error_bounded && config.error_bound.backward_bound >= 0));
  agree(context->shared_comm(), context->rank(), local_error, fingerprint, function);
  if (unnamed) context->take_default_alltoallv_name();
  // Every rank accepted: one path for everyone's messages (alltoallv_exchange.hpp).
  *plan = agree_exchange_plan(context->shared_comm(), needs_point_to_point);
  const bool exact_top_k =
      config.mp_compressor == MpCompressor::topk && config.mp_select == MpSelect::exact;
  plan->uniform_kept = agree_uniform_kept(
      context->shared_comm(), AlltoallvLayout(args, context->size()),
      exact_top_k ? mp::kept_per_row(config.keep, std::size_t(config.row_length)) : 0);
  persistent->sendbuf = args.sendbuf;
  persistent->recvbuf = args.recvbuf;
  *request = RequestTable::instance().insert(std::move(persistent));
}

void alltoallv_backward_init(DCT_Request forward, const AlltoallvArgs &args, DCT_Request *request) {
  require(request != nullptr, DCT_ERR_ARG, "request is NULL");
  PersistentRequest &pair = RequestTable::instance().find(&forward);
  const RequestEngine &engine = *pair.engine;
  auto persistent = std::make_unique<PersistentRequest>();
  persistent->engine = make_alltoallv_backward(engine, args);
  // Its own name for checkpoints: the forward's, ".backward", then ".backward.1", ...
  const int made = pair.backwards_made;
  persistent->engine->rename(engine.name() + ".backward" +
                             (made > 0 ? "." + std::to_string(made) : std::string()));
  pair.backwards_made += 1;
  persistent->sendbuf = args.sendbuf;
  persistent->recvbuf = args.recvbuf;
  *request = RequestTable::instance().insert(std::move(persistent));
}

}  // namespace dct::detail
