// `switchyard perplexity` against the double reference: the tiny quantized GGUF
// (support/tiny_gguf.hpp) scores a text with strided windows, and the mean NLL equals the one
// computed here from the reference's logits with Hugging Face's strided-perplexity loop, written
// independently of the command's. Bad arguments and a text too short to score are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/gguf_model/gguf_model.hpp"
#include "support/test_paths.hpp"
#include "support/tiny_gguf.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::Storage;
using test::TinyGguf;

const std::string kText = "hello the hello the the hello he the hello the";

// Hugging Face's loop: windows of `context` starting every `stride`; each scores its last
// `end - prev_end` labels (never its first token).
// Returns the mean NLL and the number of labels scored.
std::pair<double, int64_t> reference_mean_nll(const TinyGguf& tiny, const std::vector<int64_t>& ids,
                                              int64_t context, int64_t stride) {
  double sum = 0;
  int64_t count = 0, prev_end = 0;
  const int64_t n = int64_t(ids.size());
  for (int64_t begin = 0; begin < n; begin += stride) {
    const int64_t end = std::min(begin + context, n), target_len = end - prev_end;
    test::LlamaReference ref(test::kShape,
                             [&](const std::string& w, int64_t i) { return tiny.weight(w, i); });
    for (int64_t t = begin; t < end; ++t) {
      const test::LlamaReference::Mat logits = ref.step(ids[size_t(t)]);
      const int64_t label = t + 1;
      if (label >= end || label < end - target_len) continue;
      double mx = -1e300, z = 0;
      for (double l : logits) mx = std::max(mx, l);
      for (double l : logits) z += std::exp(l - mx);
      sum += std::log(z) - (logits[size_t(ids[size_t(label)])] - mx);
      ++count;
    }
    prev_end = end;
    if (end == n) break;
  }
  return {sum / double(count), count};
}

class PerplexityCli : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = (dir_.path() / "tiny.gguf").string();
    text_ = (dir_.path() / "text.txt").string();
    std::ofstream(model_, std::ios::binary) << tiny_.w.bytes();
    std::ofstream(text_) << kText;
  }
  TinyGguf tiny_{Storage::quantized};
  test::TempDir dir_;
  std::string model_, text_;
};

TEST_F(PerplexityCli, StridedMeanNllIsTheReferences) {
  const GgufFile file = GgufFile::open(model_);
  const std::vector<int64_t> ids =
      Tokenizer::parse(gguf_tokenizer_json(file), model_).encode(kText);
  ASSERT_GT(ids.size(), 12u);
  for (auto [context, stride] : {std::pair{8, 8}, std::pair{8, 3}, std::pair{64, 64}}) {
    auto r = test::run_switchyard("perplexity " + model_ + " --file " + text_ + " --context " +
                                  std::to_string(context) + " --stride " + std::to_string(stride) +
                                  " --prefer cpu --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    const auto [want, scored] = reference_mean_nll(tiny_, ids, context, stride);
    EXPECT_NEAR(j["mean_nll"].get<double>(), want, 1e-4 * want) << context << "/" << stride;
    EXPECT_NEAR(j["perplexity"].get<double>(), std::exp(want), 1e-4 * std::exp(want));
    EXPECT_EQ(j["tokens"], ids.size());
    EXPECT_EQ(j["scored_tokens"], scored);
  }
}

// --compare-numerics scores under exact then the default, auto: the exact run's top-1 ids are
// the reference's argmaxes, the auto run (its matmul_q16 on the quantized weights) stays close,
// and the figures of the comparison are those of the two runs' lists.
TEST_F(PerplexityCli, CompareNumericsReportsBothRunsAndTheirAgreement) {
  const GgufFile file = GgufFile::open(model_);
  const std::vector<int64_t> ids =
      Tokenizer::parse(gguf_tokenizer_json(file), model_).encode(kText);
  auto r = test::run_switchyard("perplexity " + model_ + " --file " + text_ +
                                " --prefer cpu --compare-numerics --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["numerics"], "exact");
  EXPECT_EQ(j["runs"][1]["numerics"], "auto");
  EXPECT_EQ(j["numerics"], "auto");
  const auto exact = j["runs"][0]["top1"].get<std::vector<int64_t>>();
  const auto fast = j["runs"][1]["top1"].get<std::vector<int64_t>>();
  ASSERT_EQ(int64_t(exact.size()), j["scored_tokens"].get<int64_t>());
  ASSERT_EQ(fast.size(), exact.size());
  test::LlamaReference ref(test::kShape,
                           [&](const std::string& w, int64_t i) { return tiny_.weight(w, i); });
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    const test::LlamaReference::Mat logits = ref.step(ids[t]);
    const auto best = std::max_element(logits.begin(), logits.end()) - logits.begin();
    EXPECT_EQ(exact[t], best) << "position " << t;
  }
  size_t agree = 0;
  for (size_t i = 0; i < exact.size(); ++i) agree += exact[i] == fast[i];
  EXPECT_DOUBLE_EQ(j["top1_agreement"].get<double>(), double(agree) / double(exact.size()));
  EXPECT_NEAR(j["delta_mean_nll"].get<double>(),
              j["runs"][1]["mean_nll"].get<double>() - j["runs"][0]["mean_nll"].get<double>(),
              1e-12);
  EXPECT_LT(std::abs(j["delta_mean_nll"].get<double>()), 0.05);
  auto bad = test::run_switchyard("perplexity " + model_ + " --file " + text_ + " --numerics x");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, ::testing::HasSubstr("--numerics must be exact, auto or fast, not 'x'"));
}

TEST_F(PerplexityCli, RefusesWhatItCannotScore) {
  std::ofstream(text_) << "h";
  auto one = test::run_switchyard("perplexity " + model_ + " --file " + text_);
  EXPECT_EQ(one.exit_code, 4);
  EXPECT_THAT(one.err, ::testing::HasSubstr("perplexity needs at least 2"));
  auto missing = test::run_switchyard("perplexity " + model_ + " --file /nonexistent.txt");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, ::testing::HasSubstr("cannot read /nonexistent.txt"));
  auto stride =
      test::run_switchyard("perplexity " + model_ + " --file " + text_ + " --context 8 --stride 9");
  EXPECT_EQ(stride.exit_code, 2);
}

}  // namespace
}  // namespace sy
