// The sampler chain against hand computations and a brute-force reference written here: every
// probability of the vocabulary, fully sorted, cut as the parameters say (not the sampler's
// partial selection), and the sampler's picks counted against it.
#include "core/sampling/sampling.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>

namespace sy {
namespace {

// The reference: probabilities of the tokens the chain keeps, by id (sums to 1).
std::map<int64_t, double> reference(const std::vector<float>& logits, const SamplingParams& p) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<std::pair<double, int64_t>> w;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double x = std::exp((logits[i] - mx) / p.temperature);
    if (x >= p.min_p && x > 0) w.emplace_back(x, int64_t(i));
  }
  std::sort(w.begin(), w.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (p.top_k > 0 && size_t(p.top_k) < w.size()) w.resize(size_t(p.top_k));
  double total = 0;
  for (const auto& x : w) total += x.first;
  size_t n = 0;
  double kept = 0;
  while (n < w.size() && (n == 0 || kept / total < p.top_p)) kept += w[n++].first;
  std::map<int64_t, double> out;
  for (size_t i = 0; i < n; ++i) out[w[i].second] = w[i].first / kept;
  return out;
}

std::vector<float> random_logits(size_t vocab, double spread, uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, float(spread));
  std::vector<float> l(vocab);
  for (auto& x : l) x = d(g);
  return l;
}

// Draws `n` picks and checks each lands in the reference's support, and each kept token's
// frequency within 5 standard deviations of its probability.
void expect_distribution(const std::vector<float>& logits, const SamplingParams& p, int n) {
  const std::map<int64_t, double> want = reference(logits, p);
  Sampler s(p);
  std::map<int64_t, int> seen;
  for (int i = 0; i < n; ++i) {
    const int64_t id = s.sample(logits);
    ASSERT_TRUE(want.count(id)) << "token " << id << " is outside the kept set";
    ++seen[id];
  }
  for (const auto& [id, prob] : want) {
    const double sd = std::sqrt(n * prob * (1 - prob));
    EXPECT_NEAR(seen[id], n * prob, 5 * sd + 1) << "token " << id << ", p " << prob;
  }
}

TEST(Sampler, GreedyIsTheLowestIdOfTheLargestLogit) {
  Sampler s({});
  EXPECT_EQ(s.sample(std::vector<float>{0.5f, 2.f, -1.f, 2.f}), 1);
  // A NaN counts above every number and the first wins, as in op argmax (docs/operators.md),
  // whose greedy ids a stream without logprobs takes: the pick is the same either way.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(s.sample(std::vector<float>{1.f, nan, 2.f, nan}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{3.f, 2.f, 9.f}), 2);
}

TEST(Sampler, PicksFollowTemperatureTopKTopPAndMinP) {
  const std::vector<float> small = random_logits(50, 2.0, 1);
  SamplingParams p;
  p.seed = 3;
  for (double t : {0.5, 1.0, 2.0}) {
    p = {};
    p.temperature = t;
    p.seed = 5;
    SCOPED_TRACE("temperature " + std::to_string(t));
    expect_distribution(small, p, 20000);
  }
  p = {};
  p.temperature = 1.0, p.top_k = 7, p.seed = 9;
  expect_distribution(small, p, 20000);
  p = {};
  p.temperature = 0.8, p.top_p = 0.6, p.seed = 11;
  expect_distribution(small, p, 20000);
  p = {};
  p.temperature = 1.2, p.min_p = 0.1, p.seed = 13;
  expect_distribution(small, p, 20000);
  p = {};
  p.temperature = 1.0, p.top_k = 20, p.top_p = 0.9, p.min_p = 0.02, p.seed = 17;
  expect_distribution(small, p, 20000);
}

// A flat vocabulary whose top-p set is far longer than the first sorted head (64): the head
// doubles until its mass is enough, and the set is the fully sorted reference's.
TEST(Sampler, TopPGrowsItsSortedHeadPastTheFirstGuess) {
  const std::vector<float> flat = random_logits(20000, 0.3, 2);
  SamplingParams p;
  p.temperature = 1.0, p.top_p = 0.5, p.seed = 21;
  const std::map<int64_t, double> want = reference(flat, p);
  ASSERT_GT(want.size(), 1000u);
  Sampler s(p);
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(want.count(s.sample(flat)));
}

// OpenAI's penalties on the generated tokens, by hand: logits 3: 2.0, 5: 1.9, 7: 1.0 after
// 3, 3, 5 were generated, frequency 0.5 and presence 0.2: 3 → 2.0 − 1.0 − 0.2 = 0.8,
// 5 → 1.9 − 0.5 − 0.2 = 1.2, 7 → 1.0: greedy picks 5.
TEST(Sampler, PresenceAndFrequencyPenaltiesCountGeneratedTokens) {
  std::vector<float> logits(10, -5.f);
  logits[3] = 2.0f, logits[5] = 1.9f, logits[7] = 1.0f;
  SamplingParams p;
  p.frequency_penalty = 0.5, p.presence_penalty = 0.2;
  Sampler s(p, std::vector<int64_t>{7, 7, 7});  // the prompt does not count
  for (int64_t t : {3, 3, 5}) s.accept(t);
  EXPECT_EQ(s.sample(logits), 5);
  // 5 is now generated twice: 1.9 − 1.0 − 0.2 = 0.7 < 7's 1.0.
  EXPECT_EQ(s.sample(logits), 7);
}

// transformers' repetition penalty over the prompt and the output: 1: 2.0 / 2 = 1.0, 2: −1 · 2;
// 0 (1.5) wins.
TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p;
  p.repetition_penalty = 2.0;
  Sampler s(p, std::vector<int64_t>{1, 2});
  EXPECT_EQ(s.sample(std::vector<float>{1.5f, 2.0f, -1.0f}), 0);
  Sampler none({}, std::vector<int64_t>{1, 2});
  EXPECT_EQ(none.sample(std::vector<float>{1.5f, 2.0f, -1.0f}), 1);
  // A negative logit gets more negative: 2 at −0.1 · 4 = −0.4 loses to 3 at −0.3.
  p.repetition_penalty = 4.0;
  Sampler neg(p, std::vector<int64_t>{2});
  EXPECT_EQ(neg.sample(std::vector<float>{-9.f, -9.f, -0.1f, -0.3f}), 3);
}

TEST(Sampler, LogitBiasShiftsTheChoice) {
  SamplingParams p;
  p.logit_bias = {{1, -100.0}, {2, 0.4}};
  Sampler s(p);
  EXPECT_EQ(s.sample(std::vector<float>{1.0f, 3.0f, 0.7f}), 2);  // 1: −97, 2: 1.1
  // −100 on every token but one makes sampling take that one.
  p.temperature = 1.0, p.logit_bias = {{0, -100.0}, {1, -100.0}};
  Sampler t(p);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(t.sample(std::vector<float>{1.f, 1.f, 1.f}), 2);
}

TEST(Sampler, ASeedGivesItsSequenceAndAnotherSeedAnother) {
  const std::vector<float> logits = random_logits(200, 1.0, 4);
  auto draw = [&](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0, p.seed = seed;
    Sampler s(p);
    std::vector<int64_t> ids;
    for (int i = 0; i < 32; ++i) ids.push_back(s.sample(logits));
    return ids;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(SamplingParams, EveryRangeIsCheckedAndNamed) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    const char* field;
    void (*edit)(SamplingParams&, double);
    double bad;
  };
  const Case cases[] = {
      {"temperature", [](SamplingParams& p, double v) { p.temperature = v; }, -0.1},
      {"temperature", [](SamplingParams& p, double v) { p.temperature = v; }, 1e7},
      {"top_k", [](SamplingParams& p, double v) { p.top_k = int64_t(v); }, -1},
      {"top_p", [](SamplingParams& p, double v) { p.top_p = v; }, 0},
      {"top_p", [](SamplingParams& p, double v) { p.top_p = v; }, 1.5},
      {"min_p", [](SamplingParams& p, double v) { p.min_p = v; }, 1.5},
      {"presence_penalty", [](SamplingParams& p, double v) { p.presence_penalty = v; }, 2.5},
      {"frequency_penalty", [](SamplingParams& p, double v) { p.frequency_penalty = v; }, -3},
      {"repetition_penalty", [](SamplingParams& p, double v) { p.repetition_penalty = v; }, 0},
      {"logit_bias",
       [](SamplingParams& p, double v) {
         p.logit_bias = {{1, v}};
       },
       101},
  };
  for (const Case& c : cases)
    for (double v : {c.bad, nan}) {
      if (std::string(c.field) == "top_k" && std::isnan(v)) continue;  // an integer
      SamplingParams p;
      c.edit(p, v);
      auto e = p.validate();
      ASSERT_TRUE(e) << c.field << " " << v;
      EXPECT_EQ(e->field, c.field);
    }
  SamplingParams ok;
  ok.logit_bias = {{7, 5.0}};
  EXPECT_FALSE(ok.validate());
  EXPECT_FALSE(ok.validate(8));
  auto e = ok.validate(7);  // id 7 is outside a vocabulary of 7
  ASSERT_TRUE(e);
  EXPECT_EQ(e->field, "logit_bias");
  EXPECT_NE(e->message.find("7"), std::string::npos);
}

}  // namespace
}  // namespace sy
