// The error catalog: one table, complete and unique, docs/errors.md generated from it, and the
// CLI that prints it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "apps/switchyard/exit_codes.hpp"
#include "core/errors/errors.hpp"
#include "core/graph/graph.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

bool empty(const char* s) {
  return s == nullptr || *s == '\0';
}

TEST(ErrorCatalog, CodesAndNamesAreUniqueAndWellFormed) {
  std::set<std::string> codes, names;
  for (const auto& e : error_catalog()) {
    ASSERT_FALSE(empty(e.code));
    ASSERT_FALSE(empty(e.name)) << e.code;
    EXPECT_TRUE(std::regex_match(e.code, std::regex("SY[0-3][0-9][0-9]"))) << e.code;
    EXPECT_TRUE(std::regex_match(e.name, std::regex("[a-z0-9_]+"))) << e.name;
    EXPECT_TRUE(codes.insert(e.code).second) << "duplicate code " << e.code;
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate name " << e.name;
  }
}

// The documented series: SY001-009, SY101-106 (one per load stage), SY201-210, SY301-304.
TEST(ErrorCatalog, EverySeriesIsComplete) {
  auto expect_range = [](const char* prefix, int first, int last) {
    for (int i = first; i <= last; ++i) {
      std::string code = prefix + std::to_string(i);
      EXPECT_TRUE(find_error(code)) << code;
    }
  };
  expect_range("SY00", 1, 9);
  expect_range("SY10", 1, 6);
  expect_range("SY20", 1, 9);
  expect_range("SY2", 10, 10);
  expect_range("SY30", 1, 4);
  EXPECT_EQ(error_catalog().size(), 29u);
  for (const char* stage : {"open", "entry", "abi", "init", "manifest", "capability"})
    EXPECT_TRUE(find_error(std::string("plugin_") + stage)) << stage;
}

TEST(ErrorCatalog, EveryEntryHasEveryField) {
  for (const auto& e : error_catalog()) {
    EXPECT_FALSE(empty(e.message)) << e.code;
    EXPECT_FALSE(empty(e.meaning)) << e.code;
    EXPECT_FALSE(empty(e.fix)) << e.code;
    EXPECT_GT(std::strlen(e.meaning), 60u) << e.code << ": a meaning is a paragraph";
    EXPECT_NE(e.exit_code, 0) << e.code;
  }
}

TEST(ErrorCatalog, CodesAreInOrder) {
  auto all = error_catalog();
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_LT(std::string(all[i - 1].code), std::string(all[i].code));
}

// Users search for the messages of other stacks: each appears verbatim as one code's message.
TEST(ErrorCatalog, SeedMessagesAreVerbatim) {
  const std::pair<const char*, const char*> seeds[] = {
      {"SY002", "no cpu support for flash-attn"},
      {"SY003", "flash-attn is only supported for f16/bf16 (F32)"},
      {"SY004",
       "Attention sinks cannot be run on CPU with flex attention. Please switch to a different "
       "device, e.g. CUDA"},
      {"SY005", "Expected CPU storage"},
      {"SY006", "Expected CPU"},
      {"SY007", "only kv-repeat = 1 is supported"},
  };
  for (const auto& [code, message] : seeds) {
    const ErrorInfo* e = find_error(code);
    ASSERT_TRUE(e) << code;
    EXPECT_STREQ(e->message, message) << code;
  }
}

// SY0xx no legal plan, SY1xx plugin load, SY2xx and SY302-304 bad input, SY301 a bug.
TEST(ErrorCatalog, ExitCodesFollowTheSeries) {
  for (const auto& e : error_catalog()) {
    std::string code = e.code;
    int expected = code == "SY301"  ? cli::kExitFailure
                   : code[2] == '0' ? cli::kExitNoPlan
                   : code[2] == '1' ? cli::kExitPluginError
                                    : cli::kExitBadInput;
    EXPECT_EQ(e.exit_code, expected) << code;
    // The catalog's words for the exit code are the CLI's own (`switchyard --help`).
    EXPECT_THAT(cli::kExitCodeHelp,
                HasSubstr(std::to_string(e.exit_code) + " " + error_exit_code_meaning(e.exit_code)))
        << code;
  }
}

TEST(ErrorCatalog, FindsByCodeOrName) {
  ASSERT_TRUE(find_error("SY004"));
  EXPECT_STREQ(find_error("SY004")->name, "sinks_flex_cpu");
  EXPECT_EQ(find_error("sy004"), find_error("SY004"));
  EXPECT_EQ(find_error("sinks_flex_cpu"), find_error("SY004"));
  EXPECT_EQ(find_error("NOPE"), nullptr);
  EXPECT_EQ(find_error(""), nullptr);
}

// The codes the graph reader throws are in the catalog, as bad input.
TEST(ErrorCatalog, InputErrorCodesAreCatalogued) {
  for (const char* code :
       {input_error::kJsonSyntax, input_error::kSchema, input_error::kUnknownOp,
        input_error::kShapeMismatch, input_error::kDtypeMismatch, input_error::kCycle,
        input_error::kBadConfig, input_error::kUnknownModelType, input_error::kBadGraph,
        input_error::kBadTarget}) {
    const ErrorInfo* e = find_error(code);
    ASSERT_TRUE(e) << code;
    EXPECT_EQ(e->exit_code, cli::kExitBadInput) << code;
  }
}

TEST(ErrorCatalog, DocsMatchTheTable) {
  std::filesystem::path file = std::filesystem::path(SY_TEST_DOCS_DIR) / "errors.md";
  std::ifstream in(file);
  ASSERT_TRUE(in) << file << " is missing. Regenerate it with:\n"
                  << "  build/bin/switchyard errors --markdown > docs/errors.md";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(text.str() == render_errors_markdown())
      << file << " differs from the error table in core/errors/errors.cpp. Regenerate it with:\n"
      << "  build/bin/switchyard errors --markdown > docs/errors.md";
}

TEST(ErrorCatalog, MarkdownHasEveryEntry) {
  std::string md = render_errors_markdown();
  for (const auto& e : error_catalog()) {
    EXPECT_THAT(md, HasSubstr(std::string("### ") + e.code + " `" + e.name + "`"));
    EXPECT_THAT(md, HasSubstr(std::string("`") + e.message + "`"));
  }
}

TEST(ErrorCli, OneEntryAsJson) {
  auto r = test::run_switchyard("errors SY004 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  for (const char* key : {"code", "name", "message", "meaning", "fix", "exit_code"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["code"], "SY004");
  EXPECT_EQ(j["name"], "sinks_flex_cpu");
  EXPECT_EQ(j["message"], find_error("SY004")->message);
  EXPECT_EQ(j["exit_code"], cli::kExitNoPlan);
}

TEST(ErrorCli, ByNameInText) {
  auto r = test::run_switchyard("errors kv_repeat");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("SY007 kv_repeat"));
  EXPECT_THAT(r.out, HasSubstr("only kv-repeat = 1 is supported"));
  EXPECT_THAT(r.out, HasSubstr("How to fix it"));
  EXPECT_THAT(r.out, HasSubstr("Exit code: 3"));
}

TEST(ErrorCli, ListAsTableAndJson) {
  auto table = test::run_switchyard("errors");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("CODE"));
  EXPECT_THAT(table.out, HasSubstr("Expected CPU storage"));
  auto r = test::run_switchyard("errors --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  EXPECT_EQ(j.size(), error_catalog().size());
}

TEST(ErrorCli, UnknownCodeExitsTwoAndSaysHowToList) {
  auto r = test::run_switchyard("errors NOPE");
  EXPECT_EQ(r.exit_code, cli::kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("NOPE"));
  EXPECT_THAT(r.err, HasSubstr("switchyard errors"));
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(ErrorCli, MarkdownIsTheRenderedCatalog) {
  auto r = test::run_switchyard("errors --markdown");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, render_errors_markdown());
}

}  // namespace
}  // namespace sy
