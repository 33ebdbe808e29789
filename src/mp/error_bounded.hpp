// DCT-MP's second compressor, `dct_mp_compressor=error_bounded` (Feng et al., SC'24): the
// forward alltoallv sends every value within a relative error bound of its table block's
// range, quantised and packed losslessly (error_bounded_codec.hpp); the backward goes
// uncompressed, or with its own bound (`dct_backward_error_bound`).
//
// Levels of adaptation, all decided by the sender alone (the receiver reads everything it
// needs from the message, so ranks may be configured differently):
// - table-wise: a row is `d / dct_table_columns` tables; `dct_error_bound` gives one bound for
//   all or one per table, or `auto[:CLASSES]`: on the first call and every `dct_interval`
//   calls, each table gets the loosest class under which at least kSurvivingRows of its
//   distinct rows (over every block sent) stay distinct once quantised;
// - iteration-wise: `dct_error_bound_schedule=START,CALLS` multiplies every bound by a factor
//   going linearly from START on the first forward call to 1 after CALLS calls;
// - lossless stage, per message (the block to one peer): none, LZ4 or zstd, whichever has the
//   largest modelled speed-up 1 / (1/CR + B (1/Tc + 1/Td)) (cost_model.hpp, B = dct_beta_gbps);
//   CR per peer and the coders' throughputs Tc, Td are measured on the first call and every
//   `dct_interval` calls by running both coders, and reused in between. `dct_lossless` forces
//   one.
//
// A call runs as DCT-MP's top-k path does: one header alltoall (rows, d, datatype, table
// columns, bytes), one alltoallv of the messages, validation of every message into a staging
// buffer, one agreement; only then are the receive blocks written, on every rank or none.
#pragma once

#include <memory>

#include "core/comm_context.hpp"
#include "core/config.hpp"
#include "mp/alltoallv.hpp"

namespace dct::detail {

/// Of its distinct rows, the fraction a table must keep distinct under an automatic bound.
constexpr double kSurvivingRows = 0.99;

/// Checks the error-bounded keys against `config.row_length`; throws DCT_ERR_INFO.
void validate_error_bounded(const Config &config);

/// The forward request (`args` validated, `count` the elements this rank sends; `plan` as
/// make_alltoallv_engine's).
std::unique_ptr<RequestEngine> make_error_bounded_engine(std::shared_ptr<CommContext> context,
                                                         const AlltoallvArgs &args,
                                                         const Config &config, MPI_Count count,
                                                         std::shared_ptr<const ExchangePlan> plan);

/// The backward of `forward` if it is an error-bounded forward request, else nullptr.
std::unique_ptr<RequestEngine> make_error_bounded_backward(const RequestEngine &forward,
                                                           const AlltoallvArgs &args);

bool is_error_bounded(const RequestEngine &engine);

}  // namespace dct::detail
