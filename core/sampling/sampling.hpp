// sampling/ — how the next token is picked from a step's logits: the request's parameters
// (SamplingParams) with the one check of their ranges every front end uses (the CLI, the host
// API, the OpenAI server), and the sampler chain that applies them:
//
//   logit bias → repetition, frequency and presence penalties over the sequence's tokens →
//   temperature (0: the most likely token, after bias and penalties) → min-p → top-k → top-p →
//   a pick in proportion to the kept probabilities, from the request's own seeded generator.
//
// The chain never sorts the whole vocabulary: min-p and top-k cut the candidates first
// (nth_element), and top-p sorts only as long a head of them as its mass needs, growing it by
// doubling. Ties break by id (the lower id first), so a pick depends on the logits, the
// parameters, the seed and the sequence's tokens only: the same in `run`, the host API and a
// batch of `serve` (batch invariance).
//
// Definitions, where front ends disagree:
//   presence / frequency penalty  OpenAI's: logit −= frequency · count + presence · (count > 0),
//                                 counting the tokens generated so far (not the prompt);
//   repetition_penalty            transformers' and vLLM's: over the prompt and the generated
//                                 tokens, a positive logit is divided by it, a negative one
//                                 multiplied (1 = none);
//   min_p                         vLLM's: after temperature, tokens whose probability is below
//                                 min_p × the largest are dropped;
//   logit_bias                    OpenAI's: added to the token's logit, in [-100, 100].
//
// Depends on nothing else of the core.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sy {

// A parameter out of its range: the field (as the OpenAI API and the CLI name it) and why.
struct SamplingParamError {
  std::string field;
  std::string message;
};

struct SamplingParams {
  double temperature = 0;                              // 0: greedy
  int64_t top_k = 0;                                   // 0: every token
  double top_p = 1;                                    // (0, 1]
  double min_p = 0;                                    // [0, 1]
  double presence_penalty = 0, frequency_penalty = 0;  // [-2, 2]
  double repetition_penalty = 1;                       // (0, 100]
  std::vector<std::pair<int64_t, double>> logit_bias;  // token id, bias in [-100, 100]
  uint64_t seed = 0;

  // The first parameter out of range (NaN is out of every range), or nullopt. `vocab` > 0 also
  // checks logit_bias's ids against the model's vocabulary.
  std::optional<SamplingParamError> validate(int64_t vocab = 0) const;
  // Whether the pick is the arg max of the biased, penalised logits.
  bool greedy() const { return temperature <= 0; }
  // Whether the pick is the arg max of the logits as they are (greedy, no bias, no penalty):
  // the first maximum, which the step's graph computes where the logits are.
  bool picks_raw_argmax() const {
    return greedy() && logit_bias.empty() && presence_penalty == 0 && frequency_penalty == 0 &&
           repetition_penalty == 1;
  }
};

// One sequence's sampler: the parameters, its generator, and the counts of its tokens.
class Sampler {
 public:
  // `prompt`: the sequence's tokens before the first sample (repetition_penalty sees them).
  explicit Sampler(SamplingParams params, std::span<const int64_t> prompt = {});

  // The next token from `logits` (one per vocabulary entry); it is counted as generated.
  int64_t sample(std::span<const float> logits);
  // Counts a generated token the sampler did not pick (a forced or replayed one).
  void accept(int64_t token);

  const SamplingParams& params() const { return params_; }

 private:
  struct Candidate {
    double weight;  // unnormalised probability after temperature
    int64_t id;
    bool operator>(const Candidate& o) const {
      return weight > o.weight || (weight == o.weight && id < o.id);
    }
  };
  void adjust(std::span<const float> logits);  // bias and penalties into scores_
  int64_t pick();

  SamplingParams params_;
  std::mt19937 rng_;
  std::unordered_map<int64_t, int64_t> generated_;  // token -> times generated
  std::unordered_set<int64_t> seen_;                // prompt or generated (repetition penalty)
  std::vector<double> scores_;
  std::vector<Candidate> candidates_;
};

}  // namespace sy
