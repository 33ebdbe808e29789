#include "mp/alltoallv_validate.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include "core/compute_backend.hpp"
#include "core/datatypes.hpp"
#include "core/error.hpp"
#include "mp/error_bounded.hpp"
#include "mp/error_bounded_codec.hpp"
#include "mp/row_codec.hpp"

namespace dct::detail {
namespace {

/// Validates one side's counts and displacements; returns the total of `counts`. Every block
/// must end, in bytes, within what MPI_Aint addresses (so that no offset computed from it
/// overflows), and the counts must add up within MPI_Count.
MPI_Count check_side(const MPI_Count *counts, const MPI_Aint *displs, const void *buffer, int ranks,
                     std::int64_t d, int element_size, const char *counts_name,
                     const char *displs_name, const char *buffer_name) {
  require(counts != nullptr, DCT_ERR_ARG, std::string(counts_name) + " is NULL");
  require(displs != nullptr, DCT_ERR_ARG, std::string(displs_name) + " is NULL");
  const MPI_Count max_elements = std::numeric_limits<MPI_Aint>::max() / element_size;
  MPI_Count total = 0;
  for (int j = 0; j < ranks; ++j) {
    const std::string at = "[" + std::to_string(j) + "]";
    require(counts[j] >= 0, DCT_ERR_COUNT,
            std::string(counts_name) + at + " = " + std::to_string(counts[j]) + " is negative");
    require(counts[j] % d == 0, DCT_ERR_COUNT,
            std::string(counts_name) + at + " = " + std::to_string(counts[j]) +
                " is not a multiple of dct_row_length " + std::to_string(d));
    require(displs[j] >= 0, DCT_ERR_ARG,
            std::string(displs_name) + at + " = " + std::to_string(displs[j]) + " is negative");
    require(counts[j] <= max_elements && MPI_Count(displs[j]) <= max_elements - counts[j],
            DCT_ERR_COUNT,
            std::string(counts_name) + at + " = " + std::to_string(counts[j]) + " at " +
                displs_name + at + " = " + std::to_string(displs[j]) +
                " ends past what MPI_Aint addresses");
    require(counts[j] <= std::numeric_limits<MPI_Count>::max() - total, DCT_ERR_COUNT,
            std::string(counts_name) + " add up past MPI_Count");
    total += counts[j];
  }
  require(total == 0 || (buffer != nullptr && buffer != MPI_IN_PLACE), DCT_ERR_BUFFER,
          std::string(buffer_name) + " is NULL or MPI_IN_PLACE with a positive count");
  return total;
}

/// DCT-MP's selection and codec run on the host: device buffers are refused, not crashed on.
void require_host(const void *buffer, const char *name) {
  if (buffer == nullptr || buffer == MPI_IN_PLACE) return;
  require(backends::backend_for(buffer, DCT_BACKEND_AUTO).kind() == DCT_BACKEND_KOKKOS,
          DCT_ERR_BUFFER,
          std::string(name) + " is GPU memory: DCT-MP works on host buffers in this version");
}

}  // namespace

std::size_t longest_message_units(std::size_t rows, const Config &config, int element_size) {
  const std::size_t d = static_cast<std::size_t>(config.row_length);
  if (config.mp_compressor == MpCompressor::error_bounded)
    return MessageUnits::of(eb::max_message_bytes(rows, d, d, std::size_t(element_size)));
  mp::RowFormat format;
  format.d = d;
  format.value_bytes = value_bytes(config.values, static_cast<std::size_t>(element_size));
  return MessageUnits::of(format.max_message_bytes(rows));
}

int alltoallv_comm_size(MPI_Comm comm) {
  require(comm != MPI_COMM_NULL, DCT_ERR_COMM, "communicator is MPI_COMM_NULL");
  int inter = 0, size = 0;
  check_mpi(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  require(!inter, DCT_ERR_COMM, "inter-communicators are not supported");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  return size;
}

void validate_alltoallv(const AlltoallvArgs &args, const Config &config) {
  const int ranks = alltoallv_comm_size(args.comm);
  require(args.datatype != MPI_DATATYPE_NULL, DCT_ERR_DATATYPE, "datatype is MPI_DATATYPE_NULL");
  require(floating_element_size(args.datatype) != 0, DCT_ERR_DATATYPE,
          "DCT-MP compresses MPI_FLOAT and MPI_DOUBLE (and Fortran REAL, DOUBLE PRECISION) only");
  require(config.row_length >= 1, DCT_ERR_INFO,
          "dct_row_length (the row length d) is required: an integer >= 1");
  require(config.row_length <= INT_MAX, DCT_ERR_INFO, "dct_row_length exceeds INT_MAX");
  require(config.values != ValueCoding::sign, DCT_ERR_INFO,
          "dct_values=sign needs error feedback, which DCT-MP does not have (its dropped "
          "entries are not sent later): use native, fp16 or bf16");
  const int bytes = floating_element_size(args.datatype);
  check_side(args.sendcounts, args.sdispls, args.sendbuf, ranks, config.row_length, bytes,
             "sendcounts", "sdispls", "sendbuf");
  check_side(args.recvcounts, args.rdispls, args.recvbuf, ranks, config.row_length, bytes,
             "recvcounts", "rdispls", "recvbuf");
  require(config.backend == DCT_BACKEND_AUTO || config.backend == DCT_BACKEND_KOKKOS,
          DCT_ERR_NOT_COMPILED,
          std::string("dct_backend=") + DCT_Backend_name(config.backend) +
              ": DCT-MP runs on the host only in this version");
  require_host(args.sendbuf, "sendbuf");
  require_host(args.recvbuf, "recvbuf");
  if (config.mp_compressor == MpCompressor::error_bounded) validate_error_bounded(config);
}

void check_mp_state(const std::vector<double> &words, const std::string &name, MPI_Count count,
                    bool forward, std::size_t bounds) {
  const std::size_t expected = forward ? 2 + bounds : 1;
  require(words.size() == expected, DCT_ERR_CKPT_MISMATCH,
          "request '" + name + "': the checkpoint holds " + std::to_string(words.size()) +
              " state words for this rank, the request keeps " + std::to_string(expected) +
              " (another compressor or number of tables?)");
  require(words[0] == double(count), DCT_ERR_CKPT_MISMATCH,
          "request '" + name + "' sends " + std::to_string(count) +
              " elements from this rank, the checkpoint's rank sent " + std::to_string(words[0]));
  if (!forward) return;
  const double calls = words[1];
  require(calls >= 0 && calls <= 9.0e15 && calls == std::floor(calls), DCT_ERR_CKPT_FORMAT,
          "request '" + name + "' has an invalid forward call counter in the checkpoint");
  for (std::size_t t = 0; t < bounds; ++t) {
    const double bound = words[2 + t];
    require(bound >= 0.0 && bound <= 1.0, DCT_ERR_CKPT_FORMAT,
            "request '" + name + "' has an invalid error bound in the checkpoint");
  }
}

void require_backward_ready(bool forward_active, std::int64_t forward_calls, bool restored) {
  require(!forward_active, DCT_ERR_ACTIVE,
          "the forward request is started: complete it before its backward");
  require(forward_calls > 0, DCT_ERR_ACTIVE,
          "backward before the forward request completed a call");
  require(!restored, DCT_ERR_ACTIVE,
          "backward before the forward request completed a call since DCT_Checkpoint_load (a "
          "checkpoint holds no masks: run the forward first)");
}

MPI_Count check_backward_args(const AlltoallvArgs &args, const AlltoallvLayout &f, int ranks,
                              std::int64_t d, int element_size) {
  const MPI_Count count = check_side(args.sendcounts, args.sdispls, args.sendbuf, ranks, d,
                                     element_size, "sendcounts", "sdispls", "sendbuf");
  check_side(args.recvcounts, args.rdispls, args.recvbuf, ranks, d, element_size, "recvcounts",
             "rdispls", "recvbuf");
  for (int j = 0; j < ranks; ++j) {
    const std::string at = "[" + std::to_string(j) + "]";
    require(args.sendcounts[j] == f.recvcounts[j], DCT_ERR_COUNT,
            "sendcounts" + at + " = " + std::to_string(args.sendcounts[j]) +
                " differs from the forward's recvcounts" + at + " = " +
                std::to_string(f.recvcounts[j]));
    require(args.recvcounts[j] == f.sendcounts[j], DCT_ERR_COUNT,
            "recvcounts" + at + " = " + std::to_string(args.recvcounts[j]) +
                " differs from the forward's sendcounts" + at + " = " +
                std::to_string(f.sendcounts[j]));
  }
  require_host(args.sendbuf, "sendbuf");
  require_host(args.recvbuf, "recvbuf");
  return count;
}

}  // namespace dct::detail
