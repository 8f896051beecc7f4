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
  const std::regex code_form(std::string(kCodePrefix) + "[0-5][0-9][0-9]");
  for (const auto& e : error_catalog()) {
    ASSERT_FALSE(empty(e.code));
    ASSERT_FALSE(empty(e.name)) << e.code;
    EXPECT_TRUE(std::regex_match(e.code, code_form)) << e.code;
    EXPECT_EQ(code_text(e.errc), e.code) << "the code text is the Errc's number";
    EXPECT_TRUE(std::regex_match(e.name, std::regex("[a-z0-9_]+"))) << e.name;
    EXPECT_TRUE(codes.insert(e.code).second) << "duplicate code " << e.code;
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate name " << e.name;
    EXPECT_EQ(&error_info(e.errc), &e);
  }
}

// Codes are stable: every Errc keeps its number forever (users search for the codes).
TEST(ErrorCatalog, CodeNumbersNeverChange) {
  const std::pair<Errc, int> pinned[] = {
      {Errc::no_kernel_for_op, 1},
      {Errc::flash_attn_no_cpu, 2},
      {Errc::flash_attn_dtype, 3},
      {Errc::sinks_flex_cpu, 4},
      {Errc::expected_cpu_storage, 5},
      {Errc::expected_cpu, 6},
      {Errc::kv_repeat, 7},
      {Errc::device_unavailable, 8},
      {Errc::transfer_forbidden, 9},
      {Errc::kernel_unverified, 10},
      {Errc::does_not_fit, 11},
      {Errc::invalid_handle, 401},
      {Errc::invalid_argument, 402},
      {Errc::plugin_open, 101},
      {Errc::plugin_entry, 102},
      {Errc::plugin_abi, 103},
      {Errc::plugin_init, 104},
      {Errc::plugin_manifest, 105},
      {Errc::plugin_capability, 106},
      {Errc::plugin_probe, 107},
      {Errc::json_syntax, 201},
      {Errc::schema_version, 202},
      {Errc::unknown_op, 203},
      {Errc::shape_mismatch, 204},
      {Errc::dtype_mismatch, 205},
      {Errc::graph_cycle, 206},
      {Errc::bad_config, 207},
      {Errc::unknown_model_type, 208},
      {Errc::bad_graph, 209},
      {Errc::bad_target, 210},
      {Errc::chat_template, 211},
      {Errc::weight_type_unsupported, 212},
      {Errc::kernel_failed, 301},
      {Errc::bad_weights, 302},
      {Errc::bad_tokenizer, 303},
      {Errc::prompt_too_long, 304},
      {Errc::device_out_of_memory, 305},
      {Errc::device_lost, 306},
      {Errc::plugin_internal, 307},
      {Errc::kv_pool_full, 308},
      {Errc::bad_batch, 403},
      {Errc::bad_request, 501},
      {Errc::model_not_found, 502},
      {Errc::unauthorized, 503},
      {Errc::queue_full, 504},
      {Errc::unavailable, 505},
  };
  ASSERT_EQ(std::size(pinned), error_catalog().size()) << "a new code needs pinning here";
  for (const auto& [errc, number] : pinned) {
    EXPECT_EQ(static_cast<int>(errc), number);
    char text[8];
    std::snprintf(text, sizeof text, "%s%03d", kCodePrefix, number);
    EXPECT_EQ(code_text(errc), text);
    EXPECT_STREQ(error_info(errc).code, text);
  }
}

// The documented series: 001-011, 101-106 (one per load stage), 201-212, 301-308, 401-403,
// 501-505 (the server's).
TEST(ErrorCatalog, EverySeriesIsComplete) {
  auto expect_range = [](int first, int last) {
    for (int i = first; i <= last; ++i) {
      std::string code = code_text(static_cast<Errc>(i));
      ASSERT_TRUE(find_error(code)) << code;
      EXPECT_EQ(static_cast<int>(find_error(code)->errc), i);
    }
  };
  expect_range(1, 11);
  expect_range(101, 107);
  expect_range(201, 212);
  expect_range(301, 308);
  expect_range(401, 403);
  expect_range(501, 505);
  EXPECT_EQ(error_catalog().size(), 46u);
  for (const char* stage : {"open", "entry", "abi", "init", "manifest", "capability", "probe"})
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
  const std::pair<Errc, const char*> seeds[] = {
      {Errc::flash_attn_no_cpu, "no cpu support for flash-attn"},
      {Errc::flash_attn_dtype, "flash-attn is only supported for f16/bf16 (F32)"},
      {Errc::sinks_flex_cpu,
       "Attention sinks cannot be run on CPU with flex attention. Please switch to a different "
       "device, e.g. CUDA"},
      {Errc::expected_cpu_storage, "Expected CPU storage"},
      {Errc::expected_cpu, "Expected CPU"},
      {Errc::kv_repeat, "only kv-repeat = 1 is supported"},
  };
  for (const auto& [code, message] : seeds) EXPECT_STREQ(error_info(code).message, message);
}

// SY0xx no legal plan, SY1xx plugin load, SY2xx and SY302-304 bad input, SY301 a bug, and a
// code of its own for each of a plugin's run-time answers OUT_OF_MEMORY, UNAVAILABLE, INTERNAL;
// a KV pool without a free block (SY308) is out of memory too.
TEST(ErrorCatalog, ExitCodesFollowTheSeries) {
  for (const auto& e : error_catalog()) {
    const int n = static_cast<int>(e.errc);
    int expected = e.errc == Errc::kernel_failed          ? cli::kExitFailure
                   : e.errc == Errc::device_out_of_memory ? cli::kExitOutOfMemory
                   : e.errc == Errc::kv_pool_full         ? cli::kExitOutOfMemory
                   : e.errc == Errc::device_lost          ? cli::kExitDeviceLost
                   : e.errc == Errc::plugin_internal      ? cli::kExitPluginBug
                   : n < 100                              ? cli::kExitNoPlan
                   : n < 200                              ? cli::kExitPluginError
                   : n > 400                              ? cli::kExitUsage
                                                          : cli::kExitBadInput;
    EXPECT_EQ(e.exit_code, expected) << e.code;
    // The catalog's words for the exit code are the CLI's own (`switchyard --help`).
    EXPECT_THAT(cli::kExitCodeHelp,
                HasSubstr(std::to_string(e.exit_code) + " " + error_exit_code_meaning(e.exit_code)))
        << e.code;
  }
  std::set<int> run_time = {cli::kExitFailure, cli::kExitOutOfMemory, cli::kExitDeviceLost,
                            cli::kExitPluginBug};
  EXPECT_EQ(run_time.size(), 4u) << "each run-time failure has an exit code of its own";
}

// A plugin's status at run time picks the code: its own for OUT_OF_MEMORY, UNAVAILABLE and
// INTERNAL (and anything outside the closed set), SY301 for a refusal of what was planned.
TEST(ErrorCatalog, PluginStatusesMapToTheirOwnCodes) {
  EXPECT_EQ(errc_for_plugin_status(SY_STATUS_OUT_OF_MEMORY), Errc::device_out_of_memory);
  EXPECT_EQ(errc_for_plugin_status(SY_STATUS_UNAVAILABLE), Errc::device_lost);
  EXPECT_EQ(errc_for_plugin_status(SY_STATUS_INTERNAL), Errc::plugin_internal);
  EXPECT_EQ(errc_for_plugin_status(77), Errc::plugin_internal);
  EXPECT_EQ(errc_for_plugin_status(SY_STATUS_INVALID_ARGUMENT), Errc::kernel_failed);
  EXPECT_EQ(errc_for_plugin_status(SY_STATUS_UNSUPPORTED), Errc::kernel_failed);
}

TEST(ErrorCatalog, FindsByCodeOrName) {
  const std::string code = code_text(Errc::sinks_flex_cpu);
  std::string lower = code;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  ASSERT_TRUE(find_error(code));
  EXPECT_STREQ(find_error(code)->name, "sinks_flex_cpu");
  EXPECT_EQ(find_error(lower), find_error(code));
  EXPECT_EQ(find_error("sinks_flex_cpu"), find_error(code));
  EXPECT_EQ(find_error("NOPE"), nullptr);
  EXPECT_EQ(find_error(""), nullptr);
}

// The codes bad input is reported with are in the catalog, as bad input.
TEST(ErrorCatalog, InputErrorCodesAreCatalogued) {
  for (Errc code :
       {Errc::json_syntax, Errc::schema_version, Errc::unknown_op, Errc::shape_mismatch,
        Errc::dtype_mismatch, Errc::graph_cycle, Errc::bad_config, Errc::unknown_model_type,
        Errc::bad_graph, Errc::bad_target, Errc::bad_weights, Errc::bad_tokenizer}) {
    EXPECT_EQ(error_info(code).exit_code, cli::kExitBadInput) << code_text(code);
    EXPECT_EQ(Error(code, "x").exit_code(), cli::kExitBadInput);
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
  auto r = test::run_switchyard("errors " + code_text(Errc::sinks_flex_cpu) + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  for (const char* key : {"code", "name", "message", "meaning", "fix", "exit_code"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["code"], code_text(Errc::sinks_flex_cpu));
  EXPECT_EQ(j["name"], "sinks_flex_cpu");
  EXPECT_EQ(j["message"], error_info(Errc::sinks_flex_cpu).message);
  EXPECT_EQ(j["exit_code"], cli::kExitNoPlan);
}

TEST(ErrorCli, ByNameInText) {
  auto r = test::run_switchyard("errors kv_repeat");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(code_text(Errc::kv_repeat) + " kv_repeat"));
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
