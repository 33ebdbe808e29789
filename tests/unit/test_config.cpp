// Environment defaults of the knob table (MPI_Info keys are tested under MPI).
#include <gtest/gtest.h>

#include <clocale>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/config.hpp"
#include "core/environment.hpp"
#include "core/error.hpp"

namespace dct::detail {
namespace {

class ScopedEnv {
 public:
  ScopedEnv(const char *name, const char *value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char *name_;
};

int code_of(void (*body)()) {
  try {
    body();
  } catch (const Error &e) {
    return e.code();
  }
  return DCT_SUCCESS;
}

TEST(Config, BuiltInDefaults) {
  const Config config = Config::from(MPI_INFO_NULL);
  EXPECT_EQ(config.density, 0.01);
  EXPECT_EQ(config.interval, 1000);
  EXPECT_EQ(config.algorithm, DCT_ALGORITHM_AUTO);
  EXPECT_EQ(config.name, "");
}

TEST(Config, EnvironmentOverridesDefaults) {
  ScopedEnv density("DCT_DENSITY", "0.25");
  ScopedEnv interval("DCT_INTERVAL", "7");
  ScopedEnv algorithm("DCT_ALGORITHM", "dense");
  const Config config = Config::from(MPI_INFO_NULL);
  EXPECT_EQ(config.density, 0.25);
  EXPECT_EQ(config.interval, 7);
  EXPECT_EQ(config.algorithm, DCT_ALGORITHM_DENSE);
}

TEST(Config, BadEnvironmentValuesAreRefused) {
  for (const char *value : {"0", "-0.1", "1.5", "abc", "0.5x", "", "nan"}) {
    ScopedEnv density("DCT_DENSITY", value);
    EXPECT_EQ(code_of([] { Config::from(MPI_INFO_NULL); }), DCT_ERR_INFO) << value;
  }
  for (const char *value : {"0", "-3", "1.5", "x", "99999999999999999999999"}) {
    ScopedEnv interval("DCT_INTERVAL", value);
    EXPECT_EQ(code_of([] { Config::from(MPI_INFO_NULL); }), DCT_ERR_INFO) << value;
  }
  ScopedEnv algorithm("DCT_ALGORITHM", "ring");
  EXPECT_EQ(code_of([] { Config::from(MPI_INFO_NULL); }), DCT_ERR_INFO);
}

TEST(Config, KernelKnobs) {
  const Config defaults = Config::from(MPI_INFO_NULL);
  EXPECT_EQ(defaults.backend, DCT_BACKEND_AUTO);
  EXPECT_EQ(defaults.values, ValueCoding::native);
  EXPECT_FALSE(defaults.sampled_threshold);
  ScopedEnv backend("DCT_BACKEND", "kokkos");
  ScopedEnv values("DCT_VALUES", "bf16");
  ScopedEnv threshold("DCT_THRESHOLD", "sampled");
  ScopedEnv sample("DCT_SAMPLE_SIZE", "1000");
  const Config config = Config::from(MPI_INFO_NULL);
  EXPECT_EQ(config.backend, DCT_BACKEND_KOKKOS);
  EXPECT_EQ(config.values, ValueCoding::bf16);
  EXPECT_TRUE(config.sampled_threshold);
  EXPECT_EQ(config.sample_size, 1000);
  for (auto [name, value] :
       {std::pair{"DCT_BACKEND", "gpu"}, std::pair{"DCT_VALUES", "fp8"},
        std::pair{"DCT_THRESHOLD", "approx"}, std::pair{"DCT_SAMPLE_SIZE", "0"},
        std::pair{"DCT_SAMPLE_SIZE", "16777217"}}) {
    ScopedEnv bad(name, value);
    EXPECT_EQ(code_of([] { Config::from(MPI_INFO_NULL); }), DCT_ERR_INFO) << name << "=" << value;
  }
}

// dct_density_warmup: START,CALLS read back as given; the density in force falls
// geometrically from START to dct_density over CALLS calls and never below dct_density.
TEST(Config, DensityWarmup) {
  const Config defaults = Config::from(MPI_INFO_NULL);
  EXPECT_EQ(defaults.density_at(0), defaults.density);  // off by default
  ScopedEnv density("DCT_DENSITY", "0.01");
  {
    ScopedEnv warmup("DCT_DENSITY_WARMUP", "0.25,100");
    const Config config = Config::from(MPI_INFO_NULL);
    EXPECT_EQ(config.density_warmup.start, 0.25);
    EXPECT_EQ(config.density_warmup.calls, 100);
    EXPECT_EQ(config.density_at(0), 0.25);
    EXPECT_NEAR(config.density_at(50), 0.05, 1e-15);  // sqrt(0.25 * 0.01)
    EXPECT_GT(config.density_at(99), 0.01);
    EXPECT_EQ(config.density_at(100), 0.01);
    EXPECT_EQ(config.density_at(1000000), 0.01);
    bool shown = false;
    for (const auto &[key, value] : config.in_force(KnobUse::allreduce))
      if (key == "dct_density_warmup") shown = value == "0.25,100";
    EXPECT_TRUE(shown);
  }
  {
    ScopedEnv below("DCT_DENSITY_WARMUP", "0.001,100");  // below the target: the target rules
    EXPECT_EQ(Config::from(MPI_INFO_NULL).density_at(0), 0.01);
  }
  for (const char *value : {"0,10", "1.5,10", "0.5", "0.5,-1", "0.5,1.5", ",10", "0.5,", "x,1"}) {
    ScopedEnv bad("DCT_DENSITY_WARMUP", value);
    EXPECT_EQ(code_of([] { Config::from(MPI_INFO_NULL); }), DCT_ERR_INFO) << value;
    // The message quotes the whole value, not the part that failed ('0.5,' was quoted as '').
    try {
      Config::from(MPI_INFO_NULL);
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("DCT_DENSITY_WARMUP='" + std::string(value) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

/// The process's locale for one scope: a locale whose decimal point is a comma, as a training
/// code gets from setlocale(LC_ALL, "") under de_DE, or none (then the test skips).
class CommaLocale {
 public:
  CommaLocale() {
    for (const char *name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"})
      if (std::setlocale(LC_ALL, name) != nullptr && *std::localeconv()->decimal_point == ',') {
        name_ = name;
        return;
      }
    std::setlocale(LC_ALL, "C");
  }
  ~CommaLocale() { std::setlocale(LC_ALL, "C"); }
  const char *name() const { return name_; }

 private:
  const char *name_ = nullptr;
};

std::string shown(const Config &config, const std::string &key) {
  for (const auto &[k, value] : config.in_force(KnobUse::every))
    if (k == key) return value;
  return "(not shown)";
}

// Every enum knob takes each of its names (shown back as given where it has an MPI_Info key)
// and refuses anything else with a message listing the names it takes, in this order.
TEST(Config, EnumKnobsTakeTheirNamesAndListThem) {
  struct Case {
    const char *variable, *key;  // key nullptr: environment only
    std::vector<const char *> names;
    const char *listed;
  };
  const Case cases[] = {
      {"DCT_TAU_CONTROL", "dct_tau_control", {"adaptive", "fixed"}, "adaptive or fixed"},
      {"DCT_MOMENTUM_RESULT", "dct_momentum_result", {"update", "gradient"}, "update or gradient"},
      {"DCT_ALGORITHM",
       "dct_algorithm",
       {"auto", "allgather", "split", "hierarchical", "recursive_doubling", "dense"},
       "one of auto, allgather, split, hierarchical, recursive_doubling, dense"},
      {"DCT_BACKEND",
       "dct_backend",
       {"auto", "kokkos", "cuda", "hip"},
       "one of auto, kokkos, cuda, hip"},
      {"DCT_VALUES",
       "dct_values",
       {"native", "fp16", "bf16", "sign"},
       "one of native, fp16, bf16, sign"},
      {"DCT_TRANSPORT", "dct_transport", {"auto", "mpi", "nccl"}, "one of auto, mpi, nccl"},
      {"DCT_THRESHOLD", "dct_threshold", {"exact", "sampled"}, "exact or sampled"},
      {"DCT_RESTART", "dct_restart", {"strict", "redistribute"}, "strict or redistribute"},
      {"DCT_MP_SELECT",
       "dct_mp_select",
       {"exact", "laplace", "threshold"},
       "exact, laplace or threshold"},
      {"DCT_MP_COMPRESSOR",
       "dct_mp_compressor",
       {"topk", "error_bounded"},
       "topk or error_bounded"},
      {"DCT_LOSSLESS", "dct_lossless", {"auto", "none", "lz4", "zstd"}, "auto, none, lz4 or zstd"},
      {"DCT_PMPI", nullptr, {"0", "1"}, "0 or 1"},
      {"DCT_PMPI_REPORT", nullptr, {"0", "1"}, "0 or 1"},
      {"DCT_PMPI_QUIET", nullptr, {"0", "1"}, "0 or 1"},
      {"DCT_CHECKPOINT_IO", nullptr, {"independent", "collective"}, "independent or collective"},
      {"DCT_CHECKPOINT_CHECKSUM_THREAD", nullptr, {"auto", "on", "off"}, "auto, on or off"},
  };
  for (const Case &c : cases) {
    for (const char *name : c.names) {
      ScopedEnv good(c.variable, name);
      const Config config = Config::from(MPI_INFO_NULL);
      if (c.key != nullptr) {
        EXPECT_EQ(shown(config, c.key), name) << c.variable;
      }
    }
    // passthrough is a name of DCT_Algorithm_name's, not a setting.
    for (const char *bad : {"x", "", "passthrough", "Auto"}) {
      ScopedEnv refused(c.variable, bad);
      try {
        Config::from(MPI_INFO_NULL);
        ADD_FAILURE() << c.variable << "=" << bad << " taken";
      } catch (const Error &e) {
        EXPECT_EQ(e.code(), DCT_ERR_INFO);
        EXPECT_EQ(std::string(e.what()), std::string("environment variable ") + c.variable + "='" +
                                             bad + "' is invalid: expected " + c.listed);
      }
    }
  }
  EXPECT_STREQ(algorithm_name(DCT_ALGORITHM_PASSTHROUGH), "passthrough");
  EXPECT_STREQ(algorithm_name(99), "unknown");
  EXPECT_STREQ(backend_name(-1), "unknown");
  EXPECT_STREQ(transport_name(Transport::nccl), "nccl");
  EXPECT_STREQ(value_coding_name(ValueCoding::sign), "sign");
  EXPECT_STREQ(value_coding_name(static_cast<ValueCoding>(7)), "native");
}

// Numbers are read and shown in the "C" locale's spelling whatever the process's locale is
// (under de_DE.UTF-8 strtod refused dct_density=0.05 and took 0,05, and no spelling of
// dct_density_warmup=0.5,10 was accepted). ctest provides de_DE.UTF-8 (localedef into the build
// tree, LOCPATH).
TEST(Config, NumbersIgnoreTheProcessLocale) {
  const CommaLocale locale;
  if (locale.name() == nullptr) GTEST_SKIP() << "no locale with a decimal comma here";
  {
    ScopedEnv density("DCT_DENSITY", "0.05");
    ScopedEnv warmup("DCT_DENSITY_WARMUP", "0.5,10");
    ScopedEnv momentum("DCT_MOMENTUM", "0.9");
    const Config config = Config::from(MPI_INFO_NULL);
    EXPECT_EQ(config.density, 0.05) << locale.name();
    EXPECT_EQ(config.density_warmup.start, 0.5);
    EXPECT_EQ(config.density_warmup.calls, 10);
    EXPECT_EQ(config.momentum, 0.9);
    EXPECT_EQ(shown(config, "dct_density"), "0.05");
    EXPECT_EQ(shown(config, "dct_density_warmup"), "0.5,10");
  }
  for (const char *value : {"0,05", "0.05 ", " 0.05", "0x1p-4"}) {
    ScopedEnv density("DCT_DENSITY", value);
    EXPECT_EQ(code_of([] { Config::from(MPI_INFO_NULL); }), DCT_ERR_INFO) << value;
  }
  ScopedEnv plus("DCT_DENSITY", "+0.25");  // strtod's leading '+' is still taken
  EXPECT_EQ(Config::from(MPI_INFO_NULL).density, 0.25);
}

// -0 reads as 0: ranks compare their settings bit for bit (dct_momentum 0 on one rank and -0
// on another was DCT_ERR_MISMATCH).
TEST(Config, MinusZeroIsZero) {
  ScopedEnv momentum("DCT_MOMENTUM", "-0");
  const Config config = Config::from(MPI_INFO_NULL);
  EXPECT_EQ(config.momentum, 0.0);
  EXPECT_FALSE(std::signbit(config.momentum));
}

TEST(Config, ErrorMessageNamesTheOriginAndValue) {
  ScopedEnv density("DCT_DENSITY", "2");
  try {
    Config::from(MPI_INFO_NULL);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("DCT_DENSITY='2'"), std::string::npos) << e.what();
  }
}

// The name a misspelt DCT_* variable is reported with: the nearest of the knobs'
// variables within 2 edits, a swap of neighbours counting one; nothing for names further away,
// such as the variables dct's own scripts read.
TEST(Config, MisspeltVariablesGetTheNearestKnob) {
  std::vector<std::string> known;
  for (const KnobDescription &knob : knob_descriptions())
    if (knob.env_var != nullptr) known.emplace_back(knob.env_var);
  EXPECT_EQ(nearest_name("DCT_DENSTY", known), "DCT_DENSITY");
  EXPECT_EQ(nearest_name("DCT_PMPI_REPROT", known), "DCT_PMPI_REPORT");
  EXPECT_EQ(nearest_name("dct_momentum", known), "DCT_MOMENTUM");
  EXPECT_EQ(nearest_name("DCT_ALGORITM", known), "DCT_ALGORITHM");
  EXPECT_EQ(nearest_name("DCT_PMPI_QUITE", known), "DCT_PMPI_QUIET");
  for (const char *far : {"DCT_BUILD_DIR", "DCT_SIM_RANKS", "DCT_BENCH_SIZES", "DCT_EPOCHS",
                          "DCT_TEST_THREAD_LEVEL", "DCT_PROPERTY_SEED", "DCT_DATA", "DCT_CACHE"})
    EXPECT_EQ(nearest_name(far, known), "") << far;
}

}  // namespace
}  // namespace dct::detail
