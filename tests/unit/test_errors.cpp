// Return-code strings, the version query, and the internal checks' messages.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "core/error.hpp"
#include "dct/dct.h"

namespace {

TEST(ErrorString, EveryCodeHasItsOwnSentence) {
  std::set<std::string> seen;
  for (int code = DCT_SUCCESS; code <= DCT_ERR_LASTCODE; ++code) {
    char text[DCT_MAX_ERROR_STRING];
    int length = -1;
    ASSERT_EQ(DCT_Error_string(code, text, &length), DCT_SUCCESS) << code;
    EXPECT_EQ(length, static_cast<int>(std::strlen(text)));
    EXPECT_GT(length, 0);
    EXPECT_TRUE(seen.insert(text).second) << "duplicate sentence: " << text;
  }
}

TEST(ErrorString, UnknownCodesAndNullPointersAreRefused) {
  char text[DCT_MAX_ERROR_STRING];
  int length = 0;
  EXPECT_EQ(DCT_Error_string(-1, text, &length), DCT_ERR_ARG);
  EXPECT_EQ(DCT_Error_string(DCT_ERR_LASTCODE + 1, text, &length), DCT_ERR_ARG);
  EXPECT_EQ(DCT_Error_string(DCT_SUCCESS, nullptr, &length), DCT_ERR_ARG);
  EXPECT_EQ(DCT_Error_string(DCT_SUCCESS, text, nullptr), DCT_ERR_ARG);
}

TEST(AlgorithmName, SpellsTheInfoValues) {
  EXPECT_STREQ(DCT_Algorithm_name(DCT_ALGORITHM_AUTO), "auto");
  EXPECT_STREQ(DCT_Algorithm_name(DCT_ALGORITHM_ALLGATHER), "allgather");
  EXPECT_STREQ(DCT_Algorithm_name(DCT_ALGORITHM_DENSE), "dense");
  EXPECT_STREQ(DCT_Algorithm_name(DCT_ALGORITHM_PASSTHROUGH), "passthrough");
  EXPECT_STREQ(DCT_Algorithm_name(-1), "unknown");
  EXPECT_STREQ(DCT_Algorithm_name(99), "unknown");
}

TEST(Version, RuntimeMatchesHeader) {
  int major = -1, minor = -1, patch = -1;
  EXPECT_EQ(DCT_Get_version(&major, &minor, &patch), DCT_SUCCESS);
  EXPECT_EQ(major, DCT_VERSION_MAJOR);
  EXPECT_EQ(minor, DCT_VERSION_MINOR);
  EXPECT_EQ(patch, DCT_VERSION_PATCH);
  EXPECT_EQ(DCT_Get_version(nullptr, nullptr, nullptr), DCT_SUCCESS);
}

TEST(LastError, CallsBeforeMpiInitFailCleanly) {
  float x = 1;
  EXPECT_EQ(DCT_Allreduce(&x, &x, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), DCT_ERR_NOT_INITIALIZED);
  EXPECT_NE(std::string(DCT_Get_last_error()).find("MPI is not initialized"), std::string::npos);
  EXPECT_EQ(x, 1.0f);
}

// Checks run on every call, some once per rank: a formatted message is built only when the
// check fails (error.hpp).
TEST(Require, FormatsAMessageOnlyWhenTheCheckFails) {
  int formatted = 0;
  const auto message = [&] {
    ++formatted;
    return "rank " + std::to_string(3) + " announced too much";
  };
  dct::detail::require(true, DCT_ERR_PEER, message);
  EXPECT_EQ(formatted, 0);
  try {
    dct::detail::require(false, DCT_ERR_PEER, message);
    ADD_FAILURE() << "no exception";
  } catch (const dct::detail::Error &e) {
    EXPECT_EQ(e.code(), DCT_ERR_PEER);
    EXPECT_STREQ(e.what(), "rank 3 announced too much");
  }
  EXPECT_EQ(formatted, 1);
}

}  // namespace
