// The engine (core/engine/): streams stepped together give each the tokens of the same prompt
// decoded alone by hand (Context::decode, then the argmax of each logits row: greedy by its
// definition, not by the sampler), and every way a stream ends is the one the rule says — EOS,
// a stop text, max_tokens (0 included), the sink or the owner stopping it, a cancel in the
// middle of a prefill, a step the KV pool refuses — with held-back text released at the end.
// On the test model (`switchyard make-test-model`) and the build's cpu_onednn, paged layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/engine/engine.hpp"
#include "core/runtime/runtime.hpp"
#include "core/sampling/grammar.hpp"
#include "core/sampling/json_schema.hpp"
#include "support/plugin_load_options.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

// Records one stream as it comes.
struct Recorder final : OutputSink {
  std::vector<int64_t> ids;
  std::string text, tail;
  std::optional<FinishReason> reason;
  std::optional<Error> error;
  int64_t stop_after = -1;  // on_token says stop at this many tokens
  std::vector<TokenLogprobs> logprobs;
  bool on_token(int64_t id, const std::string& t, const TokenLogprobs* lp) override {
    ids.push_back(id);
    if (lp) logprobs.push_back(*lp);
    text += t;
    return stop_after < 0 || int64_t(ids.size()) < stop_after;
  }
  void on_finish(FinishReason r, const std::string& t, const Error* e) override {
    reason = r;
    tail = t;
    if (e) error = *e;
  }
  std::optional<SeqId> forked;
  void on_fork(SeqId s) override { forked = s; }
};

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    auto made =
        test::run_switchyard("make-test-model " + (dir_->path() / "m").string() + " --seed 7");
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  static void TearDownTestSuite() { delete dir_; }

  // The test model planned for 4 sequences of `context` tokens, steps of `step_tokens`, a pool
  // of `blocks` blocks of 16 tokens (0: enough for every sequence).
  void open(int64_t step_tokens = 24, int64_t blocks = 0, int64_t context = 160) {
    model_ = std::make_unique<OpenedModel>(OpenedModel::open((dir_->path() / "m").string(), {}));
    registry_ = std::make_unique<Registry>(
        Registry::discover({{test::kPluginDir}, "test"}, test::plugin_load_options()));
    ImportOptions o;
    o.max_sequences = 4;
    o.max_outputs = 4;
    o.max_batch_tokens = step_tokens;
    o.context = context;
    o.kv_blocks = blocks;
    loaded_ = std::make_unique<LoadedModel>(
        LoadedModel::load(*model_->source, o, *registry_, run_policy("cpu", "", false)));
    ASSERT_TRUE(loaded_->planned->plan.ok()) << loaded_->planned->plan.error->what();
    ASSERT_EQ(ctx().layout(), KvLayout::paged);
  }
  Context& ctx() { return *loaded_->context; }
  Engine make_engine() { return Engine(ctx(), model_->tokenizer, model_->generation); }

  // Greedy continuation of `prompt` by hand, in a sequence of its own, one token a step.
  std::vector<int64_t> greedy_alone(const std::vector<int64_t>& prompt, int64_t n) {
    const SeqId seq = ctx().add_sequence();
    std::vector<int64_t> out;
    std::vector<int64_t> feed = prompt;
    const size_t vocab = size_t(ctx().vocab());
    const size_t chunk = size_t(ctx().bounds().max_batch_tokens);
    for (int64_t i = 0; i < n; ++i) {
      for (size_t from = 0; from < feed.size(); from += chunk) {  // the prompt in steps
        Batch b;
        const int64_t at = ctx().sequence_length(seq);
        const size_t to = std::min(feed.size(), from + chunk);
        for (size_t k = from; k < to; ++k)
          b.add(feed[k], at + int64_t(k - from), seq, k + 1 == feed.size());
        EXPECT_TRUE(ctx().decode(b).ran);
      }
      const float* row = ctx().logits(0);
      out.push_back(int64_t(std::max_element(row, row + vocab) - row));
      feed = {out.back()};
    }
    ctx().remove_sequence(seq);
    return out;
  }
  std::vector<int64_t> prompt_of(int64_t length, int64_t salt) const {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < length; ++i) p.push_back(3 + (i * 7 + salt * 13) % 200);
    return p;
  }
  static SamplingOptions greedy(int64_t max_tokens) {
    SamplingOptions o;
    o.temperature = 0;
    o.max_tokens = max_tokens;
    o.ignore_eos = true;
    return o;
  }

  static test::TempDir* dir_;
  std::unique_ptr<OpenedModel> model_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<LoadedModel> loaded_;
};
test::TempDir* EngineTest::dir_ = nullptr;

TEST_F(EngineTest, StreamsSteppedTogetherGiveEachItsOwnGreedyTokens) {
  open(/*step_tokens=*/24);
  // Prompts of 5, 40 (two steps of prefill beside the others' decodes) and 17 tokens; the third
  // joins after the first two have stepped, as a server's late request does.
  const std::vector<std::vector<int64_t>> prompts{prompt_of(5, 1), prompt_of(40, 2),
                                                  prompt_of(17, 3)};
  std::vector<std::vector<int64_t>> expected;
  for (const auto& p : prompts) expected.push_back(greedy_alone(p, 9));
  Engine engine = make_engine();
  Recorder out[3];
  std::vector<SeqId> seqs;
  for (int i = 0; i < 2; ++i) {
    seqs.push_back(ctx().add_sequence());
    engine.start(seqs.back(), prompts[size_t(i)], greedy(9), out[i]);
  }
  ASSERT_TRUE(engine.step());
  ASSERT_TRUE(engine.step());
  seqs.push_back(ctx().add_sequence());
  engine.start(seqs.back(), prompts[2], greedy(9), out[2]);
  int guard = 0;
  while (engine.step()) ASSERT_LT(++guard, 100);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].ids, expected[size_t(i)]) << "stream " << i;
    EXPECT_EQ(out[i].reason, FinishReason::max_tokens);
    // The last sampled token is not run: the sequence holds the prompt and 8 of the 9.
    EXPECT_EQ(ctx().sequence_length(seqs[size_t(i)]), int64_t(prompts[size_t(i)].size()) + 8);
  }
}

// A greedy stream with no logprobs, bias or penalty takes its step's greedy id (computed where
// the logits are) and reads no logits back: two of them read 8 bytes a sampled token; a stream
// that asks for log-probabilities reads its rows of the vocabulary too. The tokens are those of
// StreamsSteppedTogether...: the arg max of each logits row, decoded alone by hand.
TEST_F(EngineTest, GreedyStreamsReadBackTheirIdsNotTheLogits) {
  open(/*step_tokens=*/24);
  const std::vector<int64_t> a = prompt_of(5, 1), b = prompt_of(17, 3);
  const std::vector<int64_t> want_a = greedy_alone(a, 9), want_b = greedy_alone(b, 9);
  const int64_t vocab = ctx().vocab();
  Engine engine = make_engine();
  Recorder out[3];
  const int64_t before = ctx().profile("step").readback_bytes;
  engine.start(ctx().add_sequence(), a, greedy(9), out[0]);
  engine.start(ctx().add_sequence(), b, greedy(9), out[1]);
  int guard = 0;
  while (engine.step()) ASSERT_LT(++guard, 100);
  EXPECT_EQ(out[0].ids, want_a);
  EXPECT_EQ(out[1].ids, want_b);
  const int64_t greedy_bytes = ctx().profile("step").readback_bytes - before;
  EXPECT_EQ(greedy_bytes, 18 * int64_t(sizeof(int64_t))) << "18 tokens sampled, an id each";

  SamplingOptions with_logprobs = greedy(9);
  with_logprobs.logprobs = 2;
  engine.start(ctx().add_sequence(), a, with_logprobs, out[2]);
  while (engine.step()) ASSERT_LT(++guard, 200);
  EXPECT_EQ(out[2].ids, want_a);
  EXPECT_EQ(ctx().profile("step").readback_bytes - before - greedy_bytes,
            9 * vocab * int64_t(sizeof(float)))
      << "9 rows of f32 logits";
}

// n choices of one prompt: the prompt runs once (two prefill steps, then one decode step per
// token, as for one stream), the forks share its blocks and copy only the partial last one,
// and each choice's greedy tokens are the prompt's decoded alone.
TEST_F(EngineTest, ForksShareThePromptAndEachDecodesItsOwnTokens) {
  open(/*step_tokens=*/24);
  const std::vector<int64_t> prompt = prompt_of(40, 5);  // 3 blocks of 16, the last partial
  const std::vector<int64_t> expected = greedy_alone(prompt, 9);
  ASSERT_EQ(ctx().kv().used_blocks(), 0);
  Engine engine = make_engine();
  Recorder out[3];
  OutputSink* sinks[] = {&out[0], &out[1], &out[2]};
  const SeqId seq = ctx().add_sequence();
  engine.start(seq, prompt, greedy(9), std::span<OutputSink* const>(sinks));
  int steps = 0;
  while (engine.step()) ASSERT_LT(++steps, 100);
  EXPECT_EQ(steps, 2 + 8);  // the prefill once; the 9th token is not run
  EXPECT_FALSE(out[0].forked.has_value());
  ASSERT_TRUE(out[1].forked && out[2].forked);
  EXPECT_NE(*out[1].forked, *out[2].forked);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].ids, expected) << "choice " << i;
    EXPECT_EQ(out[i].reason, FinishReason::max_tokens);
    const SeqId s = i == 0 ? seq : *out[i].forked;
    EXPECT_EQ(ctx().sequence_length(s), 48);
    EXPECT_EQ(ctx().sequence_tokens(s), ctx().sequence_tokens(seq));
  }
  // 48 tokens each: the two full prompt blocks shared, the third (partial when forked) one each.
  EXPECT_EQ(ctx().kv().used_blocks(), 2 + 3);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(ctx().kv().blocks(i == 0 ? seq : *out[i].forked).size(), 3u);
}

// A stream cancelled before its prompt has run takes its forks with it, each told why.
TEST_F(EngineTest, ForksOfAStreamCancelledInItsPrefillEndWithIt) {
  open(/*step_tokens=*/24);
  Engine engine = make_engine();
  Recorder out[2];
  OutputSink* sinks[] = {&out[0], &out[1]};
  const SeqId seq = ctx().add_sequence();
  engine.start(seq, prompt_of(40, 6), greedy(4), std::span<OutputSink* const>(sinks));
  ASSERT_TRUE(engine.step());  // the first 24 tokens of the prompt
  engine.cancel(seq, FinishReason::cancelled);
  EXPECT_EQ(out[0].reason, FinishReason::cancelled);
  EXPECT_EQ(out[1].reason, FinishReason::cancelled);
  EXPECT_FALSE(out[1].forked.has_value());
  EXPECT_TRUE(out[1].ids.empty());
  EXPECT_FALSE(engine.step());
}

TEST_F(EngineTest, HeldBackTextIsReleasedWhenTheStreamEndsAtEos) {
  open();
  const std::vector<int64_t> prompt = prompt_of(6, 4);
  const std::vector<int64_t> ids = greedy_alone(prompt, 12);
  // A k where the k-th token differs from every earlier one and the one before it has text.
  size_t k = 2;
  auto text_of = [&](int64_t id) { return model_->tokenizer.decode_token(id); };
  while (k < ids.size() &&
         (std::find(ids.begin(), ids.begin() + long(k), ids[k]) != ids.begin() + long(k) ||
          text_of(ids[k - 1]).empty()))
    ++k;
  ASSERT_LT(k, ids.size()) << "no usable token in the greedy run";
  GenerationSettings settings = model_->generation;
  settings.eos_ids = {ids[k]};
  Engine engine(ctx(), model_->tokenizer, settings);
  SamplingOptions o = greedy(12);
  o.ignore_eos = false;
  o.stop = {text_of(ids[k - 1]) + "\x01"};  // held back, never completed
  Recorder out;
  engine.start(ctx().add_sequence(), prompt, o, out);
  while (engine.step()) {
  }
  std::string shown;
  for (size_t i = 0; i < k; ++i) shown += text_of(ids[i]);
  EXPECT_EQ(out.reason, FinishReason::eos);
  EXPECT_EQ(out.ids, std::vector<int64_t>(ids.begin(), ids.begin() + long(k) + 1));
  EXPECT_EQ(out.tail, text_of(ids[k - 1]));
  EXPECT_EQ(out.text + out.tail, shown);  // the EOS's own text is not shown
}

TEST_F(EngineTest, EachWayToEndIsNamed) {
  open(/*step_tokens=*/8);
  Engine engine = make_engine();
  const std::vector<int64_t> prompt = prompt_of(20, 5);
  // max_tokens 0: the prompt runs, nothing is sampled.
  Recorder none;
  const SeqId a = ctx().add_sequence();
  engine.start(a, prompt, greedy(0), none);
  // The sink stops it after 3 tokens.
  Recorder stopped;
  stopped.stop_after = 3;
  const SeqId b = ctx().add_sequence();
  engine.start(b, prompt, greedy(10), stopped);
  // Cancelled while its prompt is half prefilled.
  Recorder cancelled;
  const SeqId c = ctx().add_sequence();
  engine.start(c, prompt_of(30, 6), greedy(10), cancelled);
  EXPECT_THROW(engine.start(c, prompt, greedy(1), cancelled), Error);  // already streaming
  EXPECT_THROW(engine.start(ctx().add_sequence(), {}, greedy(1), cancelled), Error);
  while (engine.step())
    if (engine.has(c) && ctx().sequence_length(c) > 0) engine.cancel(c, FinishReason::cancelled);
  EXPECT_EQ(none.reason, FinishReason::max_tokens);
  EXPECT_TRUE(none.ids.empty());
  EXPECT_EQ(ctx().sequence_length(a), 20);
  EXPECT_EQ(stopped.reason, FinishReason::callback);
  EXPECT_EQ(stopped.ids.size(), 3u);
  EXPECT_EQ(ctx().sequence_length(b), 22);
  EXPECT_EQ(cancelled.reason, FinishReason::cancelled);
  EXPECT_TRUE(cancelled.ids.empty());
  EXPECT_GT(ctx().sequence_length(c), 0);
  EXPECT_LT(ctx().sequence_length(c), 30);
  EXPECT_EQ(engine.streams(), 0u);
}

TEST_F(EngineTest, AStepThePoolRefusesEndsThatStreamWithItsError) {
  // Two blocks of 16 tokens: a 40-token prompt cannot have its third block.
  open(/*step_tokens=*/16, /*blocks=*/2);
  Engine engine = make_engine();
  Recorder out;
  engine.start(ctx().add_sequence(), prompt_of(40, 7), greedy(4), out);
  int guard = 0;
  while (engine.step()) ASSERT_LT(++guard, 20);
  ASSERT_EQ(out.reason, FinishReason::error);
  ASSERT_TRUE(out.error.has_value());
  EXPECT_EQ(out.error->code, Errc::kv_pool_full) << out.error->what();
}

TEST_F(EngineTest, TheGeneratorIsTheEngineWithOneStream) {
  open();
  const std::vector<int64_t> prompt = prompt_of(9, 8);
  const std::vector<int64_t> expected = greedy_alone(prompt, 6);
  Generator generator(ctx(), model_->tokenizer, model_->generation);
  std::vector<int64_t> seen;
  Generation g = generator.generate(prompt, greedy(6), [&](int64_t id, const std::string&) {
    if (id >= 0) seen.push_back(id);
    return true;
  });
  EXPECT_EQ(g.ids, expected);
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(g.reason, FinishReason::max_tokens);
  EXPECT_EQ(g.decode_steps, 5);
  // An abort before anything ran: nothing sampled, reason callback.
  Generation aborted =
      generator.generate(ctx().add_sequence(), prompt, greedy(6), {}, [] { return true; });
  EXPECT_TRUE(aborted.ids.empty());
  EXPECT_EQ(aborted.reason, FinishReason::callback);
}

TEST_F(EngineTest, LogprobsAreTheLogSoftmaxOfTheStepsLogits) {
  open();
  const std::vector<int64_t> prompt = prompt_of(7, 9);
  // The reference: each step's logits by hand, log-softmax in long double, all sorted.
  std::vector<std::vector<std::pair<int64_t, long double>>> expected;
  {
    const SeqId seq = ctx().add_sequence();
    std::vector<int64_t> feed = prompt;
    const size_t vocab = size_t(ctx().vocab());
    for (int step = 0; step < 4; ++step) {
      Batch b;
      const int64_t at = ctx().sequence_length(seq);
      for (size_t k = 0; k < feed.size(); ++k)
        b.add(feed[k], at + int64_t(k), seq, k + 1 == feed.size());
      ASSERT_TRUE(ctx().decode(b).ran);
      const float* row = ctx().logits(0);
      long double z = 0;
      for (size_t v = 0; v < vocab; ++v) z += std::exp((long double)row[v]);
      std::vector<std::pair<int64_t, long double>> all;
      for (size_t v = 0; v < vocab; ++v)
        all.emplace_back(int64_t(v), (long double)row[v] - std::log(z));
      std::stable_sort(all.begin(), all.end(),
                       [](auto& a, auto& b) { return a.second > b.second; });
      expected.push_back(all);
      feed = {all[0].first};
    }
    ctx().remove_sequence(seq);
  }
  Engine engine = make_engine();
  Recorder out;
  SamplingOptions o = greedy(4);
  o.logprobs = 5;
  engine.start(ctx().add_sequence(), prompt, o, out);
  while (engine.step()) {
  }
  ASSERT_EQ(out.logprobs.size(), 4u);
  for (size_t t = 0; t < 4; ++t) {
    const TokenLogprobs& lp = out.logprobs[t];
    EXPECT_EQ(lp.id, expected[t][0].first);
    EXPECT_NEAR(lp.logprob, double(expected[t][0].second), 1e-6);
    ASSERT_EQ(lp.top.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(lp.top[k].first, expected[t][k].first) << "token " << t << " rank " << k;
      EXPECT_NEAR(lp.top[k].second, double(expected[t][k].second), 1e-6);
    }
  }
  // Unasked, none; asked with 0 alternatives, the sampled token's alone.
  Recorder plain, bare;
  engine.start(ctx().add_sequence(), prompt, greedy(2), plain);
  o.logprobs = 0;
  o.max_tokens = 2;
  engine.start(ctx().add_sequence(), prompt, o, bare);
  while (engine.step()) {
  }
  EXPECT_TRUE(plain.logprobs.empty());
  ASSERT_EQ(bare.logprobs.size(), 2u);
  EXPECT_TRUE(bare.logprobs[0].top.empty());
  EXPECT_NEAR(bare.logprobs[1].logprob, double(expected[1][0].second), 1e-6);
}

// json_object: whatever the model's (noise) logits favour, the output is a prefix of a JSON
// object nlohmann accepts, and a stream that ends by the constraint is a whole one.
// A grammar's special tokens: a control token is never taken under a grammar, unless the
// options name it (a template's call marker kept as a special token): then it is taken as its
// text. With a +100 bias on it, it is the pick where it is allowed; elsewhere the text is spelled
// with ordinary tokens. Either way the output is the grammar's sentence.
TEST_F(EngineTest, AGrammarTakesTheControlTokensItIsGivenAsTheirText) {
  open();
  const auto marker = model_->tokenizer.token_id("<|im_start|>");
  ASSERT_TRUE(marker.has_value());
  auto grammar = Grammar::from_gbnf("root ::= \"<|im_start|>\" [a-z] [a-z] [a-z]");
  for (bool allowed : {false, true}) {
    Engine engine = make_engine();
    SamplingOptions o = greedy(40);
    o.grammar = grammar;
    o.logit_bias = {{*marker, 100.0}};
    if (allowed) o.grammar_specials = {*marker};
    Recorder out;
    engine.start(ctx().add_sequence(), prompt_of(5, 9), o, out);
    while (engine.step()) {
    }
    ASSERT_EQ(out.reason, FinishReason::constraint_complete) << allowed;
    std::string text;
    for (int64_t id : out.ids) text += model_->tokenizer.decode_token(id);
    EXPECT_TRUE(text.starts_with("<|im_start|>")) << text;
    EXPECT_EQ(text.size(), std::string("<|im_start|>").size() + 3) << text;
    EXPECT_EQ(out.ids[0] == *marker, allowed) << text;
    EXPECT_EQ(std::count(out.ids.begin(), out.ids.end(), *marker), allowed ? 1 : 0);
  }
}

TEST_F(EngineTest, JsonObjectOutputIsAlwaysValidJson) {
  open();
  Engine engine = make_engine();
  int whole = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SamplingOptions o = greedy(150);
    o.temperature = 1.0;
    o.seed = seed;
    o.grammar = json_object_grammar();
    o.ignore_eos = false;
    Recorder out;
    engine.start(ctx().add_sequence(), prompt_of(5, int64_t(seed)), o, out);
    while (engine.step()) {
    }
    std::string text;
    for (int64_t id : out.ids) text += model_->tokenizer.decode_token(id);
    ASSERT_TRUE(out.reason == FinishReason::constraint_complete ||
                out.reason == FinishReason::max_tokens)
        << finish_reason_name(*out.reason) << ": " << (out.error ? out.error->what() : "");
    if (out.reason == FinishReason::constraint_complete) {
      ++whole;
      EXPECT_TRUE(nlohmann::json::accept(text)) << text;
      EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
    } else {
      GrammarState m(json_object_grammar());
      for (unsigned char c : text) ASSERT_TRUE(m.feed(c)) << text;
    }
  }
  EXPECT_GT(whole, 0);
}

}  // namespace
}  // namespace sy
