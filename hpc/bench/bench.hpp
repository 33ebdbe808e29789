// dct-bench's command line: one CLI11 subcommand per file (allreduce_bench.cpp, ...), put
// together by dct_bench.cpp. Every rank parses the same argv; only rank 0 prints.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace dct::detail {
struct Config;  // src/core/config.hpp
}  // namespace dct::detail

namespace dct::bench {

/// Runs a subcommand whose options have been parsed; returns the process's exit code.
using Run = std::function<int()>;

/// Each adds its subcommand (options, help) to `app` and returns what runs it.
Run add_allreduce(CLI::App &app);   // allreduce_bench.cpp
Run add_alltoallv(CLI::App &app);   // alltoallv_bench.cpp
Run add_calibrate(CLI::App &app);   // calibrate_bench.cpp
Run add_checkpoint(CLI::App &app);  // checkpoint_bench.cpp (HDF5 builds)
Run add_device(CLI::App &app);      // device_bench.cpp (CUDA builds)
Run add_kernels(CLI::App &app);     // kernels_bench.cpp
Run add_model(CLI::App &app);       // model_bench.cpp

/// Byte sizes from a comma list of sizes (suffix K, M or G: powers of 1024) and of ranges A-B,
/// which stand for the powers of 4 from A up to B: "4K-256M" is 4K,16K,...,64M,256M. Throws
/// std::invalid_argument naming the bad item.
std::vector<long long> parse_sizes(const std::string &list);

/// Adds `--sizes LIST` (parse_sizes) to `command`; a bad list is a usage error.
CLI::Option *add_sizes_option(CLI::App &command, std::vector<long long> &sizes,
                              const std::string &help);

/// Adds the options every timed collective takes: `--type float|double`, `--iters N` (timed
/// calls per row, >= 1) and `--warmup N` (untimed calls before them, >= 0).
void add_timing_options(CLI::App &command, std::string &type, int &iters, int &warmup);

/// The library's configuration with one key set: its knob table (src/core/config.cpp) parses and
/// checks the value; throws its error otherwise.
detail::Config config_with(const char *key, const std::string &value);

/// A CLI11 check that the library accepts `value` for `key`, with the library's message (a bad
/// value is then a usage error, exit code 2, before anything runs).
CLI::Validator knob(const char *key);

/// Checks for number options whose only bound is the sign, with a message that says so
/// (CLI11's PositiveNumber prints DBL_MAX as its upper bound).
extern const CLI::Validator kPositive;      ///< a number > 0
extern const CLI::Validator kNonNegative;   ///< a number >= 0
extern const CLI::Validator kUnitInterval;  ///< a number in (0, 1]

}  // namespace dct::bench
