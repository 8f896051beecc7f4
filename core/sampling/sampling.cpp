// The sampler chain (sampling.hpp).
#include "core/sampling/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace sy {
namespace {

// Written so that NaN fails: a comparison with NaN is false.
bool in_range(double v, double lo, double hi) {
  return v >= lo && v <= hi;
}

}  // namespace

std::optional<SamplingParamError> SamplingParams::validate(int64_t vocab) const {
  auto bad = [](const char* field, std::string what) {
    return SamplingParamError{field, std::move(what)};
  };
  if (!(temperature >= 0 && temperature < 1e6))
    return bad("temperature", "must be at least 0 and below 10^6");
  if (top_k < 0) return bad("top_k", "must be at least 0 (0: every token)");
  if (!(top_p > 0 && top_p <= 1)) return bad("top_p", "must be above 0 and at most 1");
  if (!in_range(min_p, 0, 1)) return bad("min_p", "must be in [0, 1]");
  if (!in_range(presence_penalty, -2, 2)) return bad("presence_penalty", "must be in [-2, 2]");
  if (!in_range(frequency_penalty, -2, 2)) return bad("frequency_penalty", "must be in [-2, 2]");
  if (!(repetition_penalty > 0 && repetition_penalty <= 100))
    return bad("repetition_penalty", "must be above 0 and at most 100 (1: none)");
  for (const auto& [id, bias] : logit_bias) {
    const std::string token = std::to_string(id);
    if (id < 0 || (vocab > 0 && id >= vocab))
      return bad("logit_bias", "token id " + token + " is not in the model's vocabulary" +
                                   (vocab > 0 ? " of " + std::to_string(vocab) : ""));
    if (!in_range(bias, -100, 100))
      return bad("logit_bias", "the bias of token " + token + " must be in [-100, 100]");
  }
  return std::nullopt;
}

Sampler::Sampler(SamplingParams params, std::span<const int64_t> prompt)
    : params_(std::move(params)), rng_(static_cast<std::mt19937::result_type>(params_.seed)) {
  if (params_.repetition_penalty != 1) seen_.insert(prompt.begin(), prompt.end());
}

void Sampler::accept(int64_t token) {
  ++generated_[token];
  if (params_.repetition_penalty != 1) seen_.insert(token);
}

void Sampler::adjust(std::span<const float> logits) {
  scores_.assign(logits.begin(), logits.end());
  const int64_t vocab = int64_t(scores_.size());
  for (const auto& [id, bias] : params_.logit_bias)
    if (id < vocab) scores_[size_t(id)] += bias;
  const double r = params_.repetition_penalty;
  for (int64_t id : seen_) {
    if (id < 0 || id >= vocab) continue;
    double& s = scores_[size_t(id)];
    s = s > 0 ? s / r : s * r;
  }
  if (params_.presence_penalty != 0 || params_.frequency_penalty != 0)
    for (const auto& [id, count] : generated_)
      if (id >= 0 && id < vocab)
        scores_[size_t(id)] -= params_.frequency_penalty * double(count) + params_.presence_penalty;
}

int64_t Sampler::sample(std::span<const float> logits) {
  adjust(logits);
  const int64_t next = pick();
  accept(next);
  return next;
}

int64_t Sampler::pick() {
  if (params_.greedy()) {
    // The first of the largest (the lowest id wins a tie), a NaN above every number: op argmax's
    // rule, which a step's greedy ids follow, so a greedy pick does not depend on whether the
    // stream also asked for log-probabilities.
    size_t best = 0;
    for (size_t i = 1; i < scores_.size(); ++i)
      if (!std::isnan(scores_[best]) && (std::isnan(scores_[i]) || scores_[i] > scores_[best]))
        best = i;
    return int64_t(best);
  }
  const auto top = std::max_element(scores_.begin(), scores_.end());
  const double mx = *top, t = params_.temperature;
  // Cuts on the scores, before any exp: the weight exp((s − mx) / t) is monotonic in s, so
  // min-p's cut (the largest weight is 1, so the cut is min_p itself) is a score floor, and
  // top-k the k best scores. Masked tokens (−inf) are never candidates. Only what is left
  // gets its weight.
  const double floor = params_.min_p > 0 ? mx + t * std::log(params_.min_p)
                                         : -std::numeric_limits<double>::infinity();
  candidates_.clear();
  for (size_t i = 0; i < scores_.size(); ++i)
    if (scores_[i] >= floor && scores_[i] > -std::numeric_limits<double>::infinity())
      candidates_.push_back({scores_[i], int64_t(i)});  // the score, for now
  auto first = candidates_.begin();
  if (params_.top_k > 0 && size_t(params_.top_k) < candidates_.size()) {
    std::nth_element(first, first + params_.top_k, candidates_.end(), std::greater<>());
    candidates_.resize(size_t(params_.top_k));
  }
  size_t n = 0;
  for (const Candidate& c : candidates_) {
    const double w = std::exp((c.weight - mx) / t);
    if (w > 0) candidates_[n++] = {w, c.id};  // an underflow to 0 is no candidate
  }
  candidates_.resize(n);
  first = candidates_.begin();
  size_t kept_n = n;
  double kept = 0;
  if (params_.top_p < 1) {
    double total = 0;
    for (size_t i = 0; i < n; ++i) total += candidates_[i].weight;
    // Sort a head of the candidates, twice as long each time its mass is short. Each longer
    // head selects only its new part from the rest (nth_element, linear) and sorts that part:
    // a partial_sort of the whole rest per doubling took ~5 ms a token on a flat 20000-token
    // vocabulary whose top-p set is thousands long. The order is the comparator's either way
    // (a total one: the lowest id first among equal weights).
    size_t sorted = 0, head = std::min<size_t>(n, 64);
    kept_n = 0;
    for (;;) {
      if (head < n)
        std::nth_element(first + long(sorted), first + long(head), first + long(n),
                         std::greater<>());
      std::sort(first + long(sorted), first + long(head), std::greater<>());
      while (kept_n < head && (kept_n == 0 || kept / total < params_.top_p))
        kept += candidates_[kept_n++].weight;
      if (kept_n < head || head == n) break;
      sorted = head;
      head = std::min(n, head * 2);
    }
  } else {
    for (size_t i = 0; i < n; ++i) kept += candidates_[i].weight;
  }
  std::uniform_real_distribution<double> u(0, kept);
  double r = u(rng_);
  for (size_t i = 0; i < kept_n; ++i)
    if ((r -= candidates_[i].weight) <= 0) return candidates_[i].id;
  return candidates_[kept_n - 1].id;
}

}  // namespace sy
