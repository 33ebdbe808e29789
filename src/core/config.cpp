// The one table of knobs and a parser per knob (the enum knobs' names are in knob_names.hpp).
// Over 400 lines because every key's checks and message live next to its parser (about 40
// keys); the table itself is at the end.
#include "core/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "core/environment.hpp"
#include "core/error.hpp"
#include "core/knob_names.hpp"
#include "core/number_text.hpp"

namespace dct::detail {
namespace {

using namespace knob_names;

struct Knob {
  const char *info_key;  // nullptr: environment only
  const char *env_var;   // nullptr: no environment default
  void (*apply)(Config &config, const std::string &value, const std::string &origin);
  std::string (*show)(const Config &config);  // the value in force, as the key spells it
  unsigned uses;                              // KnobUse bits: where the key has an effect
};

std::string numbers(const std::vector<double> &xs) {
  std::string list;
  for (double x : xs) list += (list.empty() ? "" : ",") + decimal(x);
  return list;
}

[[noreturn]] void bad_value(const std::string &origin, const std::string &value,
                            const char *expected) {
  fail(DCT_ERR_INFO, origin + "='" + value + "' is invalid: expected " + expected);
}

/// `text` (the whole value, or a comma-separated part of `whole`) as one number of type T, else
/// bad_value quoting `whole`, the value as the user wrote it. Every number of the table is read
/// here, one way: std::from_chars, which reads the "C" locale's spelling whatever the
/// process's locale is (strtod read `0,05` under de_DE and refused `0.05`), takes no white space
/// and no trailing character, and refuses a value out of T's range. One leading '+' is taken,
/// as strtod took it.
template <typename T>
T read_number(std::string_view text, const std::string &whole, const std::string &origin,
              const char *expected) {
  if (text.size() > 1 && text[0] == '+' && text[1] != '-') text.remove_prefix(1);
  T number{};
  const char *end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, number);
  if (text.empty() || error != std::errc() || stop != end) bad_value(origin, whole, expected);
  // -0 is 0: settings are compared bit for bit between ranks, and one rank's `-0` against
  // another's `0` was DCT_ERR_MISMATCH (issue 61).
  return number == T(0) ? T(0) : number;
}

double read_double(const std::string &value, const std::string &origin, const char *expected) {
  return read_number<double>(value, value, origin, expected);
}

void parse_density(Config &config, const std::string &value, const std::string &origin) {
  const char *expected = "a number in (0, 1]";
  const double density = read_double(value, origin, expected);
  if (!(density > 0.0 && density <= 1.0)) bad_value(origin, value, expected);
  config.density = density;
}

/// `part` of `whole` as an integer in [minimum, maximum]; a refusal quotes `whole`.
long long integer_in(std::string_view part, const std::string &whole, const std::string &origin,
                     long long minimum, long long maximum, const char *expected) {
  const long long integer = read_number<long long>(part, whole, origin, expected);
  if (integer < minimum || integer > maximum) bad_value(origin, whole, expected);
  return integer;
}

long long parse_integer(const std::string &value, const std::string &origin, long long minimum,
                        const char *expected, long long maximum = LLONG_MAX) {
  return integer_in(value, value, origin, minimum, maximum, expected);
}

void parse_interval(Config &config, const std::string &value, const std::string &origin) {
  config.interval = parse_integer(value, origin, 1, "an integer >= 1");
}

void parse_momentum(Config &config, const std::string &value, const std::string &origin) {
  const char *expected = "a number in [0, 1)";
  const double momentum = read_double(value, origin, expected);
  if (!(momentum >= 0.0 && momentum < 1.0)) bad_value(origin, value, expected);
  config.momentum = momentum;
}

void parse_group_size(Config &config, const std::string &value, const std::string &origin) {
  config.group_size = static_cast<int>(parse_integer(
      value, origin, 0, "an integer in [0, 2147483647] (0: a node's ranks, or about sqrt(P))",
      INT_MAX));
}

void parse_sample_size(Config &config, const std::string &value, const std::string &origin) {
  config.sample_size = parse_integer(value, origin, 1, "an integer in [1, 16777216]");
  if (config.sample_size > (1 << 24)) bad_value(origin, value, "an integer in [1, 16777216]");
}

void parse_result_density(Config &config, const std::string &value, const std::string &origin) {
  Config parsed;
  parse_density(parsed, value, origin);
  config.result_density = parsed.density;
}

double parse_positive(const std::string &value, const std::string &origin) {
  const char *expected = "a positive number";
  const double number = read_double(value, origin, expected);
  if (!(number > 0.0) || !std::isfinite(number)) bad_value(origin, value, expected);
  return number;
}

void parse_alpha(Config &config, const std::string &value, const std::string &origin) {
  config.network.alpha_us = parse_positive(value, origin);
}

void parse_beta(Config &config, const std::string &value, const std::string &origin) {
  config.network.beta_gbps = parse_positive(value, origin);
}

/// Refused here what no checkpoint could save (an HDF5 group's name), rather than at the save.
void parse_name(Config &config, const std::string &value, const std::string &origin) {
  if (value.find('/') != std::string::npos || value == "." || value == "..")
    bad_value(origin, value, "a name without '/', other than '.' and '..' (an HDF5 group's)");
  config.name = value;
}

void parse_pmpi_min_count(Config &config, const std::string &value, const std::string &origin) {
  config.pmpi_min_count = parse_integer(value, origin, 0, "an integer >= 0");
}

void parse_drop_in_limit(Config &config, const std::string &value, const std::string &origin) {
  config.drop_in_limit = parse_integer(value, origin, 1, "an integer >= 1");
}

void parse_drop_in_memory(Config &config, const std::string &value, const std::string &origin) {
  config.drop_in_memory = parse_integer(value, origin, 0, "an integer >= 0 (bytes)");
}

void parse_row_length(Config &config, const std::string &value, const std::string &origin) {
  config.row_length = parse_integer(value, origin, 1, "an integer >= 1");
}

void parse_keep(Config &config, const std::string &value, const std::string &origin) {
  Config parsed;
  parse_density(parsed, value, origin);
  config.keep = parsed.density;
}

/// `part` of `whole` as a number in [low, high]; a refusal quotes `whole`.
double number_in(std::string_view part, const std::string &whole, const std::string &origin,
                 double low, double high, const char *expected) {
  const double number = read_number<double>(part, whole, origin, expected);
  if (!(number >= low && number <= high)) bad_value(origin, whole, expected);
  return number;
}

double parse_number(const std::string &value, const std::string &origin, double low, double high,
                    const char *expected) {
  return number_in(value, value, origin, low, high, expected);
}

/// A comma-separated list of relative bounds, each in [0, 1].
std::vector<double> parse_bounds(const std::string &value, const std::string &origin) {
  std::vector<double> bounds;
  std::size_t begin = 0;
  do {
    const std::size_t end = std::min(value.find(',', begin), value.size());
    bounds.push_back(number_in(std::string_view(value).substr(begin, end - begin), value, origin,
                               0.0, 1.0, "numbers in [0, 1], comma-separated, or auto[:LIST]"));
    begin = end + 1;
  } while (begin <= value.size());
  return bounds;
}

void parse_error_bound(Config &config, const std::string &value, const std::string &origin) {
  ErrorBoundConfig &eb = config.error_bound;
  eb.automatic = value.rfind("auto", 0) == 0;
  if (!eb.automatic) {
    eb.bounds = parse_bounds(value, origin);
    return;
  }
  if (value == "auto") return;
  if (value.size() < 6 || value[4] != ':')
    bad_value(origin, value, "numbers in [0, 1], comma-separated, or auto[:LIST]");
  eb.classes = parse_bounds(value.substr(5), origin);
  std::sort(eb.classes.begin(), eb.classes.end(), std::greater<double>());
}

void parse_error_bound_schedule(Config &config, const std::string &value,
                                const std::string &origin) {
  const char *expected = "START,CALLS: a factor in [1, 1000] and an integer >= 0";
  const std::size_t comma = value.find(',');
  if (comma == std::string::npos) bad_value(origin, value, expected);
  const std::string_view parts(value);
  config.error_bound.schedule_start =
      number_in(parts.substr(0, comma), value, origin, 1.0, 1000.0, expected);
  config.error_bound.schedule_calls =
      integer_in(parts.substr(comma + 1), value, origin, 0, LLONG_MAX, expected);
}

void parse_density_warmup(Config &config, const std::string &value, const std::string &origin) {
  const char *expected = "START,CALLS: a density in (0, 1] and an integer >= 0";
  const std::size_t comma = value.find(',');
  if (comma == std::string::npos) bad_value(origin, value, expected);
  const std::string_view parts(value);
  const double start = number_in(parts.substr(0, comma), value, origin, 0.0, 1.0, expected);
  if (!(start > 0.0)) bad_value(origin, value, expected);
  config.density_warmup.start = start;
  config.density_warmup.calls =
      integer_in(parts.substr(comma + 1), value, origin, 0, LLONG_MAX, expected);
}

void parse_table_columns(Config &config, const std::string &value, const std::string &origin) {
  config.error_bound.table_columns = parse_integer(value, origin, 0, "an integer >= 0");
}

void parse_backward_bound(Config &config, const std::string &value, const std::string &origin) {
  config.error_bound.backward_bound =
      value == "none" ? -1.0 : parse_number(value, origin, 0.0, 1.0, "none or a number in [0, 1]");
}

/// The knob of the Config member `Field...` (a path: `&Config::error_bound,
/// &ErrorBoundConfig::lossless`) spelt as `Names` says; an environment-only knob (no `info_key`)
/// shows nothing.
template <const auto &Names, auto... Field>
constexpr Knob choice(const char *info_key, const char *env_var, unsigned uses) {
  constexpr auto apply = [](Config &config, const std::string &value, const std::string &origin) {
    if (!Names.find(value, (config.*....*Field))) bad_value(origin, value, Names.listed().c_str());
  };
  constexpr auto show = [](const Config &config) {
    return std::string(Names.name((config.*....*Field)));
  };
  return {info_key, env_var, apply, info_key != nullptr ? +show : nullptr, uses};
}

constexpr unsigned kDp = KnobUse::allreduce | KnobUse::drop_in;  // every DCT-DP state
constexpr unsigned kAll = kDp | KnobUse::alltoallv;

// The one table of knobs: every MPI_Info key and DCT_* variable dct reads is declared here,
// with how DCT_Request_get_info shows its value and which collectives it acts on.
// docs/configuration.md documents the same table for users.
const Knob knobs[] = {
    {"dct_density", "DCT_DENSITY", parse_density,
     [](const Config &c) { return decimal(c.density); }, kDp},
    {"dct_density_warmup", "DCT_DENSITY_WARMUP", parse_density_warmup,
     [](const Config &c) {
       return decimal(c.density_warmup.start) + "," + std::to_string(c.density_warmup.calls);
     },
     kDp},
    {"dct_interval", "DCT_INTERVAL", parse_interval,
     [](const Config &c) { return std::to_string(c.interval); }, kAll},
    choice<tau_controls, &Config::tau_control>("dct_tau_control", "DCT_TAU_CONTROL", kAll),
    {"dct_result_density", "DCT_RESULT_DENSITY", parse_result_density,
     [](const Config &c) { return decimal(c.result_density); }, kDp},
    {"dct_momentum", "DCT_MOMENTUM", parse_momentum,
     [](const Config &c) { return decimal(c.momentum); }, kDp},
    choice<momentum_results, &Config::momentum_result>("dct_momentum_result", "DCT_MOMENTUM_RESULT",
                                                       kDp),
    choice<algorithms, &Config::algorithm>("dct_algorithm", "DCT_ALGORITHM", kDp),
    {"dct_group_size", "DCT_GROUP_SIZE", parse_group_size,
     [](const Config &c) { return std::to_string(c.group_size); }, KnobUse::allreduce},
    choice<knob_names::backends, &Config::backend>("dct_backend", "DCT_BACKEND", kAll),
    choice<value_codings, &Config::values>("dct_values", "DCT_VALUES", kAll),
    choice<transports, &Config::transport>("dct_transport", "DCT_TRANSPORT", KnobUse::allreduce),
    choice<thresholds, &Config::sampled_threshold>("dct_threshold", "DCT_THRESHOLD", kDp),
    {"dct_sample_size", "DCT_SAMPLE_SIZE", parse_sample_size,
     [](const Config &c) { return std::to_string(c.sample_size); }, kDp},
    {"dct_alpha_us", "DCT_ALPHA_US", parse_alpha,
     [](const Config &c) { return decimal(c.network.alpha_us); }, kDp},
    {"dct_beta_gbps", "DCT_BETA_GBPS", parse_beta,
     [](const Config &c) { return decimal(c.network.beta_gbps); }, kAll},
    {"dct_name", nullptr, parse_name, [](const Config &c) { return c.name; },
     KnobUse::allreduce | KnobUse::alltoallv},
    // Persistent allreduces only: the drop-in states are not checkpointed.
    choice<restarts, &Config::redistribute_on_restart>("dct_restart", "DCT_RESTART",
                                                       KnobUse::allreduce),
    // DCT-MP (DCT_Alltoallv_init).
    {"dct_row_length", "DCT_ROW_LENGTH", parse_row_length,
     [](const Config &c) { return std::to_string(c.row_length); }, KnobUse::alltoallv},
    {"dct_keep", "DCT_KEEP", parse_keep, [](const Config &c) { return decimal(c.keep); },
     KnobUse::alltoallv},
    choice<mp_selects, &Config::mp_select>("dct_mp_select", "DCT_MP_SELECT", KnobUse::alltoallv),
    choice<mp_compressors, &Config::mp_compressor>("dct_mp_compressor", "DCT_MP_COMPRESSOR",
                                                   KnobUse::alltoallv),
    {"dct_error_bound", "DCT_ERROR_BOUND", parse_error_bound,
     [](const Config &c) {
       const ErrorBoundConfig &eb = c.error_bound;
       return eb.automatic ? "auto:" + numbers(eb.classes) : numbers(eb.bounds);
     },
     KnobUse::alltoallv},
    {"dct_error_bound_schedule", "DCT_ERROR_BOUND_SCHEDULE", parse_error_bound_schedule,
     [](const Config &c) {
       return decimal(c.error_bound.schedule_start) + "," +
              std::to_string(c.error_bound.schedule_calls);
     },
     KnobUse::alltoallv},
    {"dct_table_columns", "DCT_TABLE_COLUMNS", parse_table_columns,
     [](const Config &c) { return std::to_string(c.error_bound.table_columns); },
     KnobUse::alltoallv},
    {"dct_backward_error_bound", "DCT_BACKWARD_ERROR_BOUND", parse_backward_bound,
     [](const Config &c) {
       const double bound = c.error_bound.backward_bound;
       return bound < 0 ? std::string("none") : decimal(bound);
     },
     KnobUse::alltoallv},
    choice<losslesses, &Config::error_bound, &ErrorBoundConfig::lossless>(
        "dct_lossless", "DCT_LOSSLESS", KnobUse::alltoallv),
    // DCT_Allreduce (the drop-in), environment only (nullptr: no MPI_Info key): the states
    // kept per communicator.
    {nullptr, "DCT_DROP_IN_LIMIT", parse_drop_in_limit, nullptr, KnobUse::drop_in},
    {nullptr, "DCT_DROP_IN_MEMORY", parse_drop_in_memory, nullptr, KnobUse::drop_in},
    // Read by libdct_pmpi from the environment only.
    choice<flags, &Config::pmpi_enabled>(nullptr, "DCT_PMPI", KnobUse::pmpi),
    {nullptr, "DCT_PMPI_MIN_COUNT", parse_pmpi_min_count, nullptr, KnobUse::pmpi},
    choice<flags, &Config::pmpi_report>(nullptr, "DCT_PMPI_REPORT", KnobUse::pmpi),
    choice<flags, &Config::pmpi_quiet>(nullptr, "DCT_PMPI_QUIET", KnobUse::pmpi),
    // Read by DCT_Checkpoint_save/load from the environment only.
    choice<checkpoint_ios, &Config::checkpoint_collective_io>(nullptr, "DCT_CHECKPOINT_IO",
                                                              KnobUse::checkpoint),
    choice<checksum_threads, &Config::checkpoint_checksum_thread>(
        nullptr, "DCT_CHECKPOINT_CHECKSUM_THREAD", KnobUse::checkpoint),
};

void check_no_unknown_dct_keys(MPI_Info info) {
  int nkeys = 0;
  check_mpi(MPI_Info_get_nkeys(info, &nkeys), "MPI_Info_get_nkeys");
  for (int i = 0; i < nkeys; ++i) {
    char key[MPI_MAX_INFO_KEY + 1] = {};
    check_mpi(MPI_Info_get_nthkey(info, i, key), "MPI_Info_get_nthkey");
    if (std::strncmp(key, "dct_", 4) != 0) continue;
    bool known = false;
    for (const Knob &knob : knobs)
      known = known || (knob.info_key && std::strcmp(key, knob.info_key) == 0);
    if (known) continue;
    std::vector<std::string> keys;
    for (const Knob &knob : knobs)
      if (knob.info_key) keys.emplace_back(knob.info_key);
    const std::string nearest = nearest_name(key, keys);
    fail(DCT_ERR_INFO, std::string("unknown MPI_Info key '") + key + "'" +
                           (nearest.empty() ? "" : " (did you mean " + nearest + "?)"));
  }
}

}  // namespace

const char *algorithm_name(int algorithm) {
  return algorithms.name(algorithm);
}

const char *backend_name(int backend) {
  return knob_names::backends.name(backend);
}

const char *transport_name(Transport transport) {
  return transports.name(transport);
}

const char *value_coding_name(ValueCoding coding) {
  return value_codings.name(coding);
}

std::vector<KnobDescription> knob_descriptions() {
  std::vector<KnobDescription> rows;
  const Config defaults;
  for (const Knob &knob : knobs)
    rows.push_back({knob.info_key, knob.env_var, knob.show ? knob.show(defaults) : std::string()});
  return rows;
}

double Config::density_at(std::int64_t call) const {
  if (!density_warmup.active(call) || !(density_warmup.start > density)) return density;
  const double progress = double(call) / double(density_warmup.calls);
  return std::max(density,
                  density_warmup.start * std::pow(density / density_warmup.start, progress));
}

std::vector<std::pair<std::string, std::string>> Config::in_force(unsigned use) const {
  std::vector<std::pair<std::string, std::string>> keys;
  for (const Knob &knob : knobs)
    if (knob.info_key != nullptr && (knob.uses & use) != 0)
      keys.emplace_back(knob.info_key, knob.show(*this));
  return keys;
}

Config Config::from(MPI_Info info, unsigned use) {
  report_misspelt_variables();
  Config config;
  if (info != MPI_INFO_NULL) check_no_unknown_dct_keys(info);
  for (const Knob &knob : knobs) {
    int length = 0, present = 0;
    if (info != MPI_INFO_NULL && knob.info_key != nullptr)
      check_mpi(MPI_Info_get_valuelen(info, knob.info_key, &length, &present),
                "MPI_Info_get_valuelen");
    if (present) {
      std::vector<char> value(static_cast<std::size_t>(length) + 1, '\0');
      check_mpi(MPI_Info_get(info, knob.info_key, length, value.data(), &present), "MPI_Info_get");
      knob.apply(config, value.data(), std::string("MPI_Info key ") + knob.info_key);
      continue;
    }
    // The variable is only the default of an absent key, and only of a knob acting here: a
    // bad DCT_KEEP is DCT_Alltoallv_init's error, not DCT_Allreduce_init's.
    if (knob.env_var == nullptr || (knob.uses & use) == 0) continue;
    if (const char *value = std::getenv(knob.env_var))
      knob.apply(config, value, std::string("environment variable ") + knob.env_var);
  }
  // Only split and hierarchical can drop summed entries (into the owners' residuals).
  const bool splits = config.algorithm == DCT_ALGORITHM_SPLIT ||
                      config.algorithm == DCT_ALGORITHM_HIERARCHICAL ||
                      config.algorithm == DCT_ALGORITHM_AUTO;
  require(config.result_density >= 1.0 || splits, DCT_ERR_INFO,
          std::string("dct_result_density < 1 needs dct_algorithm split, hierarchical or auto, "
                      "not ") +
              algorithm_name(config.algorithm));
  return config;
}

}  // namespace dct::detail
