// Environment defaults of the knob table (MPI_Info keys are tested under MPI).
#include <gtest/gtest.h>

#include <cstdlib>

#include "config.hpp"
#include "error.hpp"

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

TEST(Config, ErrorMessageNamesTheOriginAndValue) {
  ScopedEnv density("DCT_DENSITY", "2");
  try {
    Config::from(MPI_INFO_NULL);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("DCT_DENSITY='2'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dct::detail
