// --numerics through `plan` (docs/numerics.md): under auto (the default) and fast, every matmul
// the activation_q16 kernel can serve gets it and says so, and every other matmul lists it with
// the reason it was refused; under exact no op quantizes its activations, and each matmul lists
// the q16 kernel as refused for numerics alone. The text form counts them. A bad value is a usage
// error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/capability/envelope.hpp"
#include "core/planner/planner.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const std::string kModel =
    std::string(SY_TEST_FIXTURES_DIR) + "/parity/smollm3_gguf_q4_k/model.gguf";

json plan_json(const std::string& flags) {
  auto r = test::run_switchyard("plan " + kModel + " --prefer cpu --json " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

// The reasons the q16 kernel was refused for op `o`, or nullopt when it is not among the rejected.
std::optional<std::vector<std::string>> q16_refusals(const json& o) {
  for (const json& c : o["rejected"])
    if (c["kernel"] == "matmul_q16") {
      std::vector<std::string> why;
      for (const json& r : c["reasons"]) why.push_back(r["constraint"].get<std::string>());
      return why;
    }
  return std::nullopt;
}

TEST(PlanNumerics, AutoAndFastGiveEveryServableMatmulTheQ16KernelAndSayWhyNotElsewhere) {
  for (const auto& [flags, name] : std::vector<std::pair<std::string, std::string>>{
           {"", "auto"}, {"--numerics auto", "auto"}, {"--numerics fast", "fast"}}) {
    SCOPED_TRACE(flags);
    const json j = plan_json(flags);
    EXPECT_EQ(j["policy"]["numerics"], name);
    int q16 = 0;
    for (const json& phase : j["phases"])
      for (const json& o : phase["ops"]) {
        SCOPED_TRACE(o["id"].get<std::string>());
        if (o["kernel"] == "matmul_q16") {
          EXPECT_EQ(o["numerics"], "activation_q16");
          EXPECT_THAT(o["rule"].get<std::string>(), HasSubstr("(--numerics " + name + ")"));
          ++q16;
          continue;
        }
        EXPECT_EQ(o["numerics"], "exact");
        if (o["op"] != "matmul") continue;
        const auto why = q16_refusals(o);
        ASSERT_TRUE(why) << "a matmul without the q16 kernel must list it";
        EXPECT_THAT(*why, ::testing::Not(::testing::Contains("numerics")));
      }
    // Every projection of the 4 layers (ffn_down, 288 wide, is q5_0) and lm_head.
    EXPECT_EQ(q16, 4 * 7 + 1);
    auto text = test::run_switchyard("plan " + kModel + " --prefer cpu " + flags);
    EXPECT_THAT(text.out,
                HasSubstr("numerics: " + name +
                          (name == "auto" ? " (the default; --numerics): " : " (--numerics): ") +
                          std::to_string(q16) +
                          " ops compute with activations quantized to 16-bit blocks "
                          "(activation_q16), every other op exact; --numerics exact "
                          "keeps every product on the weights as stored"));
  }
}

// auto is the policy for 16-bit blocks only: 8-bit ones (llama.cpp's; top-1 agreement 95-96 % on
// SmolLM2, docs/numerics.md) need --numerics fast.
TEST(PlanNumerics, AutoAllowsSixteenBitBlocksOnlyAndExactNeither) {
  for (const DeclaredNumerics& n : kDeclaredNumerics) {
    SCOPED_TRACE(n.feature);
    const bool q16 = n.bit == SY_FEATURE_ACTIVATION_Q16;
    EXPECT_FALSE(numerics_allowed(Numerics::exact, n));
    EXPECT_EQ(numerics_allowed(Numerics::automatic, n), q16);
    EXPECT_TRUE(numerics_allowed(Numerics::fast, n));
  }
  EXPECT_EQ(kDefaultNumerics, Numerics::automatic);
  EXPECT_EQ(parse_numerics("auto"), Numerics::automatic);
  EXPECT_STREQ(numerics_name(Numerics::automatic), "auto");
}

TEST(PlanNumerics, ExactRefusesTheQ16KernelForNumericsAlone) {
  {
    const std::string flags = "--numerics exact";
    const json j = plan_json(flags);
    EXPECT_EQ(j["policy"]["numerics"], "exact");
    int could = 0;
    for (const json& phase : j["phases"])
      for (const json& o : phase["ops"]) {
        EXPECT_EQ(o["numerics"], "exact") << o["id"];
        EXPECT_NE(o["kernel"], "matmul_q16") << o["id"];
        if (o["op"] != "matmul") continue;
        const auto why = q16_refusals(o);
        ASSERT_TRUE(why) << o["id"];
        if (*why == std::vector<std::string>{"numerics"}) ++could;
      }
    EXPECT_EQ(could, 4 * 7 + 1);
    auto text = test::run_switchyard("plan " + kModel + " --prefer cpu " + flags);
    EXPECT_THAT(text.out,
                HasSubstr("numerics: exact (--numerics): every op exact; " + std::to_string(could) +
                          " could quantize their activations (--numerics auto)"));
  }
}

TEST(PlanNumerics, AnotherValueIsAUsageError) {
  for (const std::string cmd : {"plan", "run --prompt hi", "bench decode"}) {
    auto r = test::run_switchyard(cmd + " " + kModel + " --numerics approximate");
    EXPECT_EQ(r.exit_code, 2) << cmd;
    EXPECT_THAT(r.err, HasSubstr("--numerics must be exact, auto or fast")) << cmd;
  }
}

}  // namespace
}  // namespace sy
