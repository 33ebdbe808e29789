// Numbers as text in the "C" locale's spelling, whatever the process's locale is: a training
// code that calls setlocale(LC_ALL, "") under de_DE must still read `dct_density=0.05` and see
// `0.05` in dct's messages (printf's %g and std::to_string(double) follow LC_NUMERIC).
#pragma once

#include <charconv>
#include <string>

namespace dct::detail {

/// The shortest decimal that reads back as `x` (`0.05`, `1e-05`).
inline std::string decimal(double x) {
  char text[32];
  const auto written = std::to_chars(text, text + sizeof text, x);
  return std::string(text, written.ptr);
}

/// `x` with `digits` digits after the point (`78.7`).
inline std::string fixed(double x, int digits) {
  char text[352];  // DBL_MAX in fixed notation with up to 30 digits fits
  const auto written = std::to_chars(text, text + sizeof text, x, std::chars_format::fixed,
                                     digits > 30 ? 30 : digits);
  return std::string(text, written.ptr);
}

}  // namespace dct::detail
