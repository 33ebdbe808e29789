#include "mp/forward_headers.hpp"

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"

namespace dct::detail::peer {

std::int64_t forward_format_word(std::size_t element_size, ValueCoding coding) {
  return static_cast<std::int64_t>(element_size) * 16 + static_cast<std::int64_t>(coding);
}

ForwardAnnouncement read_forward_header(const std::int64_t *words, std::size_t row_length,
                                        std::int64_t format, std::size_t max_bytes) {
  const auto size = [](std::int64_t word) {
    return word >= 0 ? static_cast<std::size_t>(word) : SIZE_MAX;
  };
  ForwardAnnouncement announced;
  announced.shape.rows = size(words[forward::kRows]);
  announced.shape.nnz = size(words[forward::kNnz]);
  announced.shape.uniform = words[forward::kUniform];
  announced.shape.bytes = size(words[forward::kBytes]);
  announced.same_format = words[forward::kRowLength] == static_cast<std::int64_t>(row_length) &&
                          words[forward::kFormat] == format;
  announced.receive = receive_bytes(words[forward::kBytes], max_bytes);
  return announced;
}

int check_forward_header(const ForwardAnnouncement &announced, std::size_t expected_rows,
                         std::size_t received_bytes, std::string &why) {
  if (!announced.same_format) {
    why = "sends rows of another length, datatype or dct_values";
    return DCT_ERR_MISMATCH;
  }
  if (announced.shape.rows != expected_rows) {
    why = "sends " +
          (announced.shape.rows == SIZE_MAX ? std::string("a negative number of")
                                            : std::to_string(announced.shape.rows)) +
          " rows, recvcounts expects " + std::to_string(expected_rows);
    return DCT_ERR_MISMATCH;
  }
  if (announced.shape.bytes > received_bytes) {
    why = "announced a message longer than its rows can take";
    return DCT_ERR_PEER;
  }
  return DCT_SUCCESS;
}

int check_error_bounded_header(const std::int64_t *words, std::size_t row_length,
                               std::size_t value_bytes, std::size_t expected_rows,
                               std::size_t received_bytes, std::string &why) {
  using namespace error_bounded;
  const std::int64_t d = static_cast<std::int64_t>(row_length);
  if (words[kRowLength] != d || words[kValueBytes] != static_cast<std::int64_t>(value_bytes)) {
    why = "sends rows of another length or datatype";
    return DCT_ERR_MISMATCH;
  }
  if (words[kRows] != static_cast<std::int64_t>(expected_rows)) {
    why = "sends " + std::to_string(words[kRows]) + " rows, recvcounts expects " +
          std::to_string(expected_rows);
    return DCT_ERR_MISMATCH;
  }
  if (words[kTableColumns] < 1 || words[kTableColumns] > d || d % words[kTableColumns] != 0) {
    why = "announces tables of " + std::to_string(words[kTableColumns]) + " columns";
    return DCT_ERR_PEER;
  }
  if (words[kBytes] < 0 || static_cast<std::size_t>(words[kBytes]) > received_bytes) {
    why = "announced a message longer than its rows can take";
    return DCT_ERR_PEER;
  }
  return DCT_SUCCESS;
}

}  // namespace dct::detail::peer
