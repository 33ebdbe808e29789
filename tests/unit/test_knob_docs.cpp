// The knob table (src/core/config.cpp) is the one source of truth for the configuration keys:
// docs/configuration.md's table must name the same keys, with the same environment variables
// and defaults, and every environment-only knob must be documented. A key added to the table
// without its documentation (or documented and gone) fails here. dct.h only points to the doc.
// Likewise dct.h is the source of truth for the status fields, the error codes and the
// algorithms: docs/configuration.md's status and errors tables must name every one of them.
#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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

TEST(KnobDocs, HeaderLeavesTheKeysToTheManual) {
  // dct.h is the contract; the settings' manual is docs/configuration.md alone. The header says
  // where it is, keeps no list of keys of its own (an entry "`dct_key` [`DCT_VAR`], default"
  // would be a second copy to fall behind), and every key it does name is one of the table's.
  const std::string header = read_file("include/dct/dct.h");
  EXPECT_NE(header.find("docs/configuration.md"), std::string::npos)
      << "dct.h does not point to docs/configuration.md for the configuration keys";
  std::set<std::string> known;
  for (const KnobDescription &knob : knob_descriptions())
    if (knob.info_key != nullptr) known.insert(knob.info_key);
  const std::regex entry(R"(`(dct_[a-z_0-9]+)` \[)");
  for (auto it = std::sregex_iterator(header.begin(), header.end(), entry);
       it != std::sregex_iterator(); ++it)
    ADD_FAILURE() << "dct.h documents " << (*it)[1]
                  << " in a key list: its documentation belongs in docs/configuration.md";
  const std::regex named("`(dct_[a-z_0-9]+)[`=]");
  for (auto it = std::sregex_iterator(header.begin(), header.end(), named);
       it != std::sregex_iterator(); ++it)
    EXPECT_EQ(known.count((*it)[1].str()), 1u)
        << "dct.h names " << (*it)[1] << ", which the knob table lacks";
}

TEST(KnobDocs, EnvironmentOnlyKnobsAreDocumented) {
  const std::string docs = read_file("docs/configuration.md") + read_file("docs/pmpi.md");
  for (const KnobDescription &knob : knob_descriptions()) {
    if (knob.info_key != nullptr || knob.env_var == nullptr) continue;
    EXPECT_NE(docs.find(std::string("`") + knob.env_var + "`"), std::string::npos)
        << knob.env_var << " is documented in neither docs/configuration.md nor docs/pmpi.md";
  }
}

/// `text` without its C and C++ comments.
std::string strip_comments(const std::string &text) {
  return std::regex_replace(text, std::regex(R"(/\*[\s\S]*?\*/|//[^\n]*)"), " ");
}

/// dct.h's declaration that ends with `closing` ("} DCT_Status;"), from the last `opening`
/// ("typedef struct DCT_Status {") before it, without comments.
std::string header_declaration(const std::string &opening, const std::string &closing) {
  const std::string header = read_file("include/dct/dct.h");
  const std::size_t end = header.find(closing);
  const std::size_t begin = end == std::string::npos ? end : header.rfind(opening, end);
  EXPECT_NE(begin, std::string::npos) << "dct.h has no " << opening << " ... " << closing;
  if (begin == std::string::npos) return "";
  return strip_comments(header.substr(begin + opening.size(), end - begin - opening.size()));
}

/// The enumerators of the enum `declaration` (its body) whose names `name` matches.
std::vector<std::string> enumerators(const std::string &declaration, const std::string &name) {
  const std::regex enumerator("\\b(" + name + ")\\s*(=|,|$)");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(declaration.begin(), declaration.end(), enumerator);
       it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1].str());
  return names;
}

/// Every `code` span of `text`.
std::vector<std::string> quoted(const std::string &text) {
  const std::regex code("`([^`]*)`");
  std::vector<std::string> spans;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), code); it != std::sregex_iterator();
       ++it)
    spans.push_back((*it)[1].str());
  return spans;
}

/// The rows of docs/configuration.md's table headed `header` ("| field | meaning |"), each as
/// its cells, trimmed.
std::vector<std::vector<std::string>> doc_table(const std::string &header) {
  const std::string doc = read_file("docs/configuration.md");
  const std::size_t at = doc.find("\n" + header + "\n");
  EXPECT_NE(at, std::string::npos) << "docs/configuration.md has no table " << header;
  std::vector<std::vector<std::string>> rows;
  if (at == std::string::npos) return rows;
  std::istringstream lines(doc.substr(at + header.size() + 2));
  std::string line;
  std::getline(lines, line);  // |---|---|
  while (std::getline(lines, line) && line.rfind("|", 0) == 0) {
    std::vector<std::string> cells;
    std::string cell;
    for (std::size_t i = 1; i < line.size(); ++i) {
      if (line[i] == '|' && line[i - 1] != '\\') {
        const std::size_t first = cell.find_first_not_of(' ');
        cells.push_back(first == std::string::npos
                            ? std::string()
                            : cell.substr(first, cell.find_last_not_of(' ') - first + 1));
        cell.clear();
      } else {
        cell += line[i];
      }
    }
    rows.push_back(cells);
  }
  return rows;
}

/// The text of docs/configuration.md's section `## title`, up to the next `## ` heading.
std::string doc_section(const std::string &title) {
  const std::string doc = read_file("docs/configuration.md");
  const std::size_t at = doc.find("\n## " + title + "\n");
  EXPECT_NE(at, std::string::npos) << "docs/configuration.md has no section " << title;
  if (at == std::string::npos) return "";
  return doc.substr(at, doc.find("\n## ", at + 1) - at);
}

TEST(KnobDocs, StatusTableNamesEveryStatusField) {
  // Fields of struct DCT_Status, in order, split into the header and the body. Declarations may
  // name several fields (`MPI_Count a, b;`) and arrays.
  std::vector<std::string> header_fields, fields;
  std::istringstream declarations(
      header_declaration("typedef struct DCT_Status {", "} DCT_Status;"));
  std::string declaration;
  const std::regex declarator(R"(([A-Za-z_]\w*)\s*(\[[^\]]*\]\s*)*$)");
  while (std::getline(declarations, declaration, ';')) {
    if (declaration.find_first_not_of(" \t\n") == std::string::npos) continue;
    // The header is what C++ initialises itself (DCT_STATUS_DEFAULT_, dct.h): `size`, `magic`,
    // `version` tell dct the caller's layout, and dct never writes them, so they report
    // nothing about a call. They belong to the Status section's prose, not to the table.
    const std::regex default_value(R"(DCT_STATUS_DEFAULT_\((?:[^()]|\([^()]*\))*\))");
    const bool header = std::regex_search(declaration, default_value);
    declaration = std::regex_replace(declaration, default_value, "");
    std::istringstream declarators(declaration);
    std::string one;
    while (std::getline(declarators, one, ',')) {
      std::smatch name;
      ASSERT_TRUE(std::regex_search(one, name, declarator)) << "cannot parse DCT_Status's " << one;
      (header ? header_fields : fields).push_back(name[1].str());
    }
  }
  ASSERT_EQ(header_fields, (std::vector<std::string>{"size", "magic", "version"}));
  ASSERT_GE(fields.size(), 15u) << "DCT_Status was not parsed";

  std::set<std::string> documented;
  for (const std::vector<std::string> &row : doc_table("| field | meaning |"))
    if (!row.empty())
      for (const std::string &name : quoted(row[0])) documented.insert(name);
  for (const std::string &field : fields) {
    EXPECT_EQ(documented.count(field), 1u)
        << "docs/configuration.md's status table has no row for DCT_Status." << field;
    documented.erase(field);
  }
  for (const std::string &name : documented)
    ADD_FAILURE() << "docs/configuration.md's status table documents " << name
                  << ", which DCT_Status lacks";
  const std::string status = doc_section("Status");
  for (const std::string &field : header_fields)
    EXPECT_NE(status.find("`" + field + "`"), std::string::npos)
        << "docs/configuration.md's Status section does not name the header field " << field;
}

TEST(KnobDocs, ErrorsTableNamesEveryErrorCode) {
  const std::vector<std::string> codes =
      enumerators(header_declaration("typedef enum {", "} DCT_Error;"), "DCT_SUCCESS|DCT_ERR_\\w+");
  const std::set<std::string> known(codes.begin(), codes.end());
  ASSERT_EQ(known.count("DCT_SUCCESS"), 1u) << "DCT_Error was not parsed";
  ASSERT_EQ(known.count("DCT_ERR_LASTCODE"), 1u) << "DCT_Error was not parsed";

  // A row names codes, or a group `DCT_ERR_CKPT_*` whose members' suffixes its text quotes.
  std::set<std::string> documented;
  for (const std::vector<std::string> &row : doc_table("| code | when |")) {
    if (row.size() < 2) continue;
    for (const std::string &name : quoted(row[0])) {
      if (name.size() > 1 && name.compare(name.size() - 2, 2, "_*") == 0) {
        for (const std::string &suffix : quoted(row[1]))
          documented.insert(name.substr(0, name.size() - 1) + suffix);
      } else {
        documented.insert(name);
      }
    }
  }
  for (const std::string &code : codes) {
    // DCT_ERR_LASTCODE is the largest code's value again, for range checks: no call returns
    // it. DCT_SUCCESS is no error: the section's text names it (checked below).
    if (code == "DCT_ERR_LASTCODE" || code == "DCT_SUCCESS") continue;
    EXPECT_EQ(documented.count(code), 1u) << "docs/configuration.md's errors table lacks " << code;
  }
  for (const std::string &name : documented)
    EXPECT_EQ(known.count(name), 1u)
        << "docs/configuration.md's errors table documents " << name << ", which dct.h lacks";
  EXPECT_NE(doc_section("Errors").find("`DCT_SUCCESS`"), std::string::npos)
      << "docs/configuration.md's Errors section does not name DCT_SUCCESS";
}

TEST(KnobDocs, StatusAlgorithmRowNamesEveryAlgorithm) {
  const std::vector<std::string> algorithms =
      enumerators(header_declaration("typedef enum {", "} DCT_Algorithm;"), "DCT_ALGORITHM_\\w+");
  const std::set<std::string> known(algorithms.begin(), algorithms.end());
  ASSERT_EQ(known.count("DCT_ALGORITHM_AUTO"), 1u) << "DCT_Algorithm was not parsed";

  // The `algorithm` row quotes constants whole or by their suffix: `DCT_ALGORITHM_SPLIT`, `_SPLIT`.
  std::set<std::string> listed;
  bool found = false;
  for (const std::vector<std::string> &row : doc_table("| field | meaning |")) {
    if (row.size() < 2 || row[0] != "`algorithm`") continue;
    found = true;
    for (const std::string &name : quoted(row[1])) {
      if (name.rfind("DCT_ALGORITHM_", 0) == 0) listed.insert(name);
      if (name.rfind("_", 0) == 0) listed.insert("DCT_ALGORITHM" + name);
    }
  }
  ASSERT_TRUE(found) << "docs/configuration.md's status table has no `algorithm` row";
  for (const std::string &algorithm : algorithms) {
    // A status never reports auto: decide_algorithm (src/core/cost_model.cpp) resolves it to
    // the algorithm it picks before the exchange records it in DCT_Status.algorithm.
    if (algorithm == "DCT_ALGORITHM_AUTO") continue;
    EXPECT_EQ(listed.count(algorithm), 1u)
        << "docs/configuration.md's `algorithm` row does not list " << algorithm;
  }
  for (const std::string &name : listed)
    EXPECT_EQ(known.count(name), 1u)
        << "docs/configuration.md's `algorithm` row lists " << name << ", which dct.h lacks";
}

}  // namespace
}  // namespace dct::detail
