// Many sequences in one Context (core/executor/context.hpp) against each sequence run alone:
// eight prompts in one batch, forks of a shared prefix, a continued conversation, a reused
// prefix — each gives, bit for bit, the logits of the unshared runs (the kernels are
// batch-invariant: a row's output does not depend on what else is in the step). And bad input
// is refused before anything runs. On the reference plugin, on the same kernels taken as one
// segment on a simulated device with its own memory ("segments": remote_reference, uploads
// and all, plugin_api.h's segments extension), and on every tier of cpu_onednn, with f32 and
// with bf16 weights and activations.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <ostream>

#include "core/executor/context.hpp"
#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "support/cpu_tiers.hpp"
#include "support/hashed_weights.hpp"
#include "support/llama_reference.hpp"
#include "support/plugin_load_options.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

const std::filesystem::path kReferenceDir = SY_TEST_REFERENCE_DIR;
const std::filesystem::path kSegmentsDir = std::string(SY_TEST_SETS_DIR) + "/remote_reference";

constexpr auto load = test::load_hashed_weights;

// A backend ("reference": the double-precision plugin alone, or a tier of cpu_onednn) and the
// model's dtype.
struct Setup {
  std::string backend, dtype;
};

// How ctest's output names a case's parameter (gtest would print its bytes).
void PrintTo(const Setup& s, std::ostream* os) {
  *os << s.backend << " " << s.dtype;
}

class Batched : public ::testing::TestWithParam<Setup> {
 protected:
  void SetUp() override {
    const std::string& backend = GetParam().backend;
    if (backend != "reference" && backend != "segments") {
      SY_SKIP_UNLESS_CPU_TIER(backend);
      tier_.emplace(backend);
    }
    const std::filesystem::path dir = backend == "reference"  ? kReferenceDir
                                      : backend == "segments" ? kSegmentsDir
                                                              : test::kPluginDir;
    registry_ = std::make_unique<Registry>(
        Registry::discover({{dir}, "test"}, test::plugin_load_options()));
    inventory_ = live_inventory(*registry_);
  }

  // The tiny llama planned for `sequences` sequences of up to `context` tokens, steps of up to
  // `tokens`, a pool of `blocks` blocks (0: enough for every sequence), and loaded.
  void open(int64_t sequences, int64_t tokens, int64_t context = 96, int64_t blocks = 0) {
    ImportOptions o;
    o.max_sequences = sequences;
    o.max_batch_tokens = tokens;
    o.max_outputs = tokens;
    o.context = context;
    o.kv_blocks = blocks;
    o.dtype_override = GetParam().dtype;
    graph_ = import_hf_config_json(test::LlamaShape{}.config(), "tiny.json", o);
    Policy policy;
    policy.prefer = {kDLExtDev, kDLCPU};
    plan_ = plan_graph(graph_, *registry_, inventory_, policy);
    if (!plan_.ok()) throw *plan_.error;  // the test fails with the plan's error
    const auto& segments = plan_.phases.back().segments;
    if (GetParam().backend == "segments" && (segments.size() != 1 || !segments[0].segment))
      throw std::runtime_error("the plan does not hand the whole step over as one segment");
    model_ = std::make_unique<Model>(graph_, plan_, *registry_, inventory_, load);
    context_ = std::make_unique<Context>(*model_);
  }

  // Every token's logits, in order, of `tokens` run after sequence `seq`'s, in one step.
  std::vector<std::vector<float>> step(SeqId seq, const std::vector<int64_t>& tokens) {
    Batch b;
    int64_t position = context_->sequence_length(seq);
    for (int64_t t : tokens) b.add(t, position++, seq, true);
    StepResult r = context_->decode(b);
    EXPECT_TRUE(r.ran);
    return rows(context_->logits_rows());
  }
  std::vector<std::vector<float>> rows(size_t n) const {
    std::vector<std::vector<float>> out;
    for (size_t i = 0; i < n; ++i)
      out.emplace_back(context_->logits(i), context_->logits(i) + context_->vocab());
    return out;
  }
  static int64_t argmax(const std::vector<float>& row) {
    return int64_t(std::max_element(row.begin(), row.end()) - row.begin());
  }
  // `prompt` alone in a new sequence, then `steps` greedy tokens: every logits row, in order.
  std::vector<std::vector<float>> alone(const std::vector<int64_t>& prompt, int steps) {
    const SeqId s = context_->add_sequence();
    auto out = step(s, prompt);
    for (int i = 0; i < steps; ++i) out.push_back(step(s, {argmax(out.back())}).front());
    context_->remove_sequence(s);
    return out;
  }
  static void expect_same_bits(const std::vector<std::vector<float>>& a,
                               const std::vector<std::vector<float>>& b, const std::string& what) {
    ASSERT_EQ(a.size(), b.size()) << what;
    for (size_t r = 0; r < a.size(); ++r)
      ASSERT_EQ(std::memcmp(a[r].data(), b[r].data(), a[r].size() * 4), 0)
          << what << ": row " << r << " differs (argmax " << argmax(a[r]) << " vs " << argmax(b[r])
          << ")";
  }

  std::optional<test::ScopedCpuTier> tier_;
  std::unique_ptr<Registry> registry_;
  Inventory inventory_;
  Graph graph_;
  Plan plan_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Context> context_;
};

std::vector<int64_t> prompt_of(int n, int64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) p[size_t(i)] = (seed * 37 + i * 11 + 3) % 128;
  return p;
}

TEST_P(Batched, EightPromptsInOneBatchGiveEachPromptsLogitsAlone) {
  open(8, 96);
  const int kSteps = 6;
  std::vector<std::vector<int64_t>> prompts;
  for (int s = 0; s < 8; ++s) prompts.push_back(prompt_of(3 + 2 * s, s));
  std::vector<std::vector<std::vector<float>>> want;
  for (const auto& p : prompts) want.push_back(alone(p, kSteps));
  // All eight prompts in one step, then steps of one token of every sequence.
  std::vector<SeqId> seqs;
  Batch b;
  for (const auto& p : prompts) {
    seqs.push_back(context_->add_sequence());
    for (size_t i = 0; i < p.size(); ++i) b.add(p[i], int64_t(i), seqs.back(), true);
  }
  ASSERT_TRUE(context_->decode(b).ran);
  std::vector<std::vector<std::vector<float>>> got(8);
  size_t row = 0;
  for (int s = 0; s < 8; ++s)
    for (size_t i = 0; i < prompts[size_t(s)].size(); ++i)
      got[size_t(s)].emplace_back(context_->logits(row), context_->logits(row) + context_->vocab()),
          ++row;
  for (int i = 0; i < kSteps; ++i) {
    b.clear();
    for (int s = 0; s < 8; ++s)
      b.add(argmax(got[size_t(s)].back()), context_->sequence_length(seqs[size_t(s)]),
            seqs[size_t(s)], true);
    ASSERT_TRUE(context_->decode(b).ran);
    for (int s = 0; s < 8; ++s)
      got[size_t(s)].emplace_back(context_->logits(size_t(s)),
                                  context_->logits(size_t(s)) + context_->vocab());
  }
  for (int s = 0; s < 8; ++s)
    expect_same_bits(got[size_t(s)], want[size_t(s)], "sequence " + std::to_string(s));
}

TEST_P(Batched, ForksOfASharedPrefixGiveTheUnsharedRuns) {
  open(4, 64);
  const std::vector<int64_t> prefix = prompt_of(21, 5);  // a partial second block: copy on write
  const SeqId root = context_->add_sequence();
  step(root, prefix);
  std::vector<SeqId> forks = {root};
  for (int i = 0; i < 3; ++i) forks.push_back(context_->fork_sequence(root));
  for (size_t f = 0; f < forks.size(); ++f) {
    const std::vector<int64_t> more = prompt_of(3, int64_t(f) + 40);
    std::vector<int64_t> whole = prefix;
    whole.insert(whole.end(), more.begin(), more.end());
    const auto want = alone(whole, 4);
    auto got = step(forks[f], more);
    for (int i = 0; i < 4; ++i) got.push_back(step(forks[f], {argmax(got.back())}).front());
    // The forked run's rows are the last ones of the unshared run's.
    std::vector<std::vector<float>> tail(want.end() - long(got.size()), want.end());
    expect_same_bits(got, tail, "fork " + std::to_string(f));
  }
}

TEST_P(Batched, AContinuedConversationIsTheWholeConversationPrefilled) {
  open(2, 64);
  const std::vector<int64_t> turn1 = prompt_of(9, 1), turn2 = prompt_of(7, 2);
  const SeqId s = context_->add_sequence();
  auto rows1 = step(s, turn1);
  std::vector<int64_t> conversation = turn1;
  for (int i = 0; i < 5; ++i) {  // the answer, decoded one token at a time
    const int64_t next = argmax(rows1.back());
    conversation.push_back(next);
    rows1 = step(s, {next});
  }
  conversation.insert(conversation.end(), turn2.begin(), turn2.end());
  const auto continued = step(s, turn2);  // only turn 2 runs: the rest is cached
  const auto whole = alone(conversation, 0);
  std::vector<std::vector<float>> tail(whole.end() - long(continued.size()), whole.end());
  expect_same_bits(continued, tail, "turn 2");
}

TEST_P(Batched, ANewSequenceReusesAFinishedOnesPrefix) {
  open(2, 64);
  const std::vector<int64_t> prompt = prompt_of(40, 9);
  const auto want = alone(prompt, 3);  // leaves its 2 full blocks as a prefix
  const SeqId s = context_->add_sequence();
  const int64_t cached = context_->reuse_prefix(s, prompt);
  EXPECT_EQ(cached, 32);
  auto got = step(s, std::vector<int64_t>(prompt.begin() + cached, prompt.end()));
  for (int i = 0; i < 3; ++i) got.push_back(step(s, {argmax(got.back())}).front());
  std::vector<std::vector<float>> tail(want.end() - long(got.size()), want.end());
  expect_same_bits(got, tail, "after the reused prefix");
}

TEST_P(Batched, BadBatchesAreRefusedBeforeAnythingRuns) {
  open(2, 8, 32);
  const SeqId a = context_->add_sequence();
  const auto want = alone(prompt_of(5, 3), 2);
  auto code_of = [&](const Batch& b) {
    try {
      context_->decode(b);
    } catch (const Error& e) {
      return e.code;
    }
    return Errc::kernel_failed;
  };
  Batch b;
  for (int i = 0; i < 9; ++i) b.add(1, i, a, false);  // 9 tokens > the plan's 8
  EXPECT_EQ(code_of(b), Errc::bad_batch);
  b.clear();
  b.add(1, 0, a + 100, true);  // no such sequence
  EXPECT_EQ(code_of(b), Errc::bad_batch);
  b.clear();
  b.add(1, 3, a, true);  // not the sequence's next position
  EXPECT_EQ(code_of(b), Errc::bad_batch);
  b.clear();
  b.add(128, 0, a, true);  // outside the vocabulary
  EXPECT_EQ(code_of(b), Errc::bad_batch);
  const SeqId c = context_->add_sequence(), d = context_->add_sequence();
  b.clear();
  for (SeqId s : {a, c, d}) b.add(1, 0, s, true);  // 3 sequences > the plan's 2
  EXPECT_EQ(code_of(b), Errc::bad_batch);
  EXPECT_EQ(context_->sequence_length(a), 0);  // nothing ran
  const auto again = alone(prompt_of(5, 3), 2);
  expect_same_bits(again, want, "after the refusals");
}

TEST_P(Batched, AFullPoolRefusesTheSequenceThatAskedAndTheOthersGoOn) {
  open(2, 32, 64, 3);  // 3 blocks of 16
  const SeqId a = context_->add_sequence(), b = context_->add_sequence();
  step(a, prompt_of(20, 1));  // 2 blocks
  Batch batch;
  for (int i = 0; i < 17; ++i) batch.add(5, i, b, i == 16);  // b needs 2 blocks; 1 is left
  batch.add(7, 20, a, true);
  StepResult r = context_->decode(batch);
  EXPECT_FALSE(r.ran);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].seq, b);
  EXPECT_EQ(r.refused[0].error.code, Errc::kv_pool_full);
  EXPECT_EQ(context_->sequence_length(a), 20);  // nothing ran
  batch.clear();
  batch.add(7, 20, a, true);
  EXPECT_TRUE(context_->decode(batch).ran);
  // Past its context: SY304 for that sequence.
  batch.clear();
  for (int i = 0; i < 32; ++i) batch.add(1, 21 + i, a, false);
  for (int i = 0; i < 12; ++i) batch.add(1, 53 + i, a, false);
  EXPECT_THROW(context_->decode(batch), Error);  // 44 tokens > the plan's 32 per step
  batch.clear();
  for (int i = 0; i < 32; ++i) batch.add(1, 21 + i, a, i == 31);
  r = context_->decode(batch);  // 53 tokens: fits the context of 64, needs a 4th block
  EXPECT_FALSE(r.ran);
  EXPECT_EQ(r.refused.at(0).error.code, Errc::kv_pool_full);
}

TEST_P(Batched, ASequencePastItsContextIsRefusedAlone) {
  open(2, 32, 24);
  const SeqId a = context_->add_sequence(), b = context_->add_sequence();
  step(a, prompt_of(20, 1));
  Batch batch;
  for (int i = 0; i < 5; ++i) batch.add(1, 20 + i, a, i == 4);  // 25 > 24
  batch.add(3, 0, b, true);
  StepResult r = context_->decode(batch);
  EXPECT_FALSE(r.ran);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_EQ(r.refused[0].seq, a);
  EXPECT_EQ(r.refused[0].error.code, Errc::prompt_too_long);
}

std::vector<Setup> setups() {
  std::vector<Setup> out;
  for (const char* dtype : {"f32", "bf16"}) {
    out.push_back({"reference", dtype});
    out.push_back({"segments", dtype});
    for (const auto& t : test::cpu_tiers()) out.push_back({t, dtype});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Backends, Batched, ::testing::ValuesIn(setups()),
                         [](const ::testing::TestParamInfo<Setup>& info) {
                           return info.param.backend + "_" + info.param.dtype;
                         });

}  // namespace
}  // namespace sy
