// The knob table (src/core/config.cpp) is the one source of truth for the configuration keys:
// docs/configuration.md's table and dct.h's key list must name the same keys, with the same
// environment variables and defaults, and every environment-only knob must be documented.
// A key added to the table without its documentation (or documented and gone) fails here.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "core/config.hpp"

namespace dct::detail {
namespace {

std::string read_file(const std::string &relative) {
  std::ifstream in(std::string(DCT_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(in.good()) << "cannot read " << relative;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct DocRow {
  std::string env;  // "(none)" where the key has no variable
  std::string default_value;
};

/// The rows "| `dct_key` | `DCT_VAR` or (none) | default | meaning |" of docs/configuration.md.
std::map<std::string, DocRow> documented_keys() {
  const std::string doc = read_file("docs/configuration.md");
  const std::regex row(R"(\n\| `(dct_[a-z_0-9]+)` \| ([^|]*) \| ([^|]*) \|)");
  std::map<std::string, DocRow> rows;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), row); it != std::sregex_iterator();
       ++it) {
    std::string env = (*it)[2].str(), value = (*it)[3].str();
    const std::smatch &match = *it;
    EXPECT_EQ(rows.count(match[1].str()), 0u) << match[1] << " has two rows";
    const std::regex first_code("`([^`]*)`");
    std::smatch code;
    if (std::regex_search(env, code, first_code)) env = code[1].str();
    // The default: its first `code`, "empty" for the empty string, as written otherwise.
    if (std::regex_search(value, code, first_code))
      value = code[1].str();
    else if (value == "empty")
      value.clear();
    rows[match[1].str()] = {env, value};
  }
  return rows;
}

TEST(KnobDocs, ConfigurationTableListsEveryKeyWithItsVariableAndDefault) {
  std::map<std::string, DocRow> rows = documented_keys();
  ASSERT_FALSE(rows.empty());
  for (const KnobDescription &knob : knob_descriptions()) {
    if (knob.info_key == nullptr) continue;
    SCOPED_TRACE(knob.info_key);
    const auto row = rows.find(knob.info_key);
    ASSERT_NE(row, rows.end()) << "docs/configuration.md has no row for " << knob.info_key;
    EXPECT_EQ(row->second.env, knob.env_var ? knob.env_var : "(none)");
    if (row->second.default_value != "(required)") {
      EXPECT_EQ(row->second.default_value, knob.default_value);
    }
    rows.erase(row);
  }
  for (const auto &[key, row] : rows)
    ADD_FAILURE() << "docs/configuration.md documents " << key << ", which the table lacks";
}

TEST(KnobDocs, HeaderListsEveryKeyWithItsVariable) {
  const std::string header = read_file("include/dct/dct.h");
  for (const KnobDescription &knob : knob_descriptions()) {
    if (knob.info_key == nullptr) continue;
    const std::string entry =
        std::string("`") + knob.info_key + "` [" +
        (knob.env_var ? std::string("`") + knob.env_var + "`" : std::string("no variable")) + "]";
    const std::size_t at = header.find(entry);
    EXPECT_NE(at, std::string::npos) << "dct.h does not list " << entry;
    if (at == std::string::npos) continue;
    // ", default `V`" (or "default empty", or "required") follows the entry.
    const std::string after = header.substr(at + entry.size(), 40);
    std::smatch value;
    if (std::regex_search(after, value, std::regex("^, default `([^`]*)`"))) {
      EXPECT_EQ(value[1].str(), knob.default_value) << "dct.h's default of " << knob.info_key;
    } else if (after.rfind(", default empty", 0) == 0) {
      EXPECT_EQ(knob.default_value, "") << "dct.h's default of " << knob.info_key;
    } else {
      EXPECT_EQ(after.rfind(", required", 0), 0u) << "dct.h gives no default for " << knob.info_key;
    }
  }
  // And no key the table lacks.
  const std::regex listed(R"(`(dct_[a-z_0-9]+)` \[)");
  std::set<std::string> known;
  for (const KnobDescription &knob : knob_descriptions())
    if (knob.info_key != nullptr) known.insert(knob.info_key);
  for (auto it = std::sregex_iterator(header.begin(), header.end(), listed);
       it != std::sregex_iterator(); ++it)
    EXPECT_EQ(known.count((*it)[1].str()), 1u) << "dct.h lists " << (*it)[1] << ", unknown";
}

TEST(KnobDocs, EnvironmentOnlyKnobsAreDocumented) {
  const std::string docs = read_file("docs/configuration.md") + read_file("docs/pmpi.md");
  for (const KnobDescription &knob : knob_descriptions()) {
    if (knob.info_key != nullptr || knob.env_var == nullptr) continue;
    EXPECT_NE(docs.find(std::string("`") + knob.env_var + "`"), std::string::npos)
        << knob.env_var << " is documented in neither docs/configuration.md nor docs/pmpi.md";
  }
}

}  // namespace
}  // namespace dct::detail
