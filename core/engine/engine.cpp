#include "core/engine/engine.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sy {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::eos: return "eos";
    case FinishReason::stop_text: return "stop_text";
    case FinishReason::max_tokens: return "max_tokens";
    case FinishReason::context_full: return "context_full";
    case FinishReason::callback: return "callback";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::error: return "error";
    case FinishReason::constraint_complete: return "constraint_complete";
  }
  return "error";
}

const char* openai_finish_reason(FinishReason reason) {
  return reason == FinishReason::max_tokens || reason == FinishReason::context_full ? "length"
                                                                                    : "stop";
}

TokenLogprobs token_logprobs(std::span<const float> logits, int64_t id, int64_t top) {
  const float high = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - double(high));
  const double log_z = double(high) + std::log(sum);
  TokenLogprobs out;
  out.id = id;
  out.logprob = double(logits[size_t(id)]) - log_z;
  const size_t n = std::min(size_t(std::max<int64_t>(top, 0)), logits.size());
  if (n == 0) return out;  // the sampled token's alone: no ranking of the vocabulary
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), int64_t(0));
  auto more_likely = [&](int64_t a, int64_t b) {
    return logits[size_t(a)] > logits[size_t(b)] ||
           (logits[size_t(a)] == logits[size_t(b)] && a < b);
  };
  std::partial_sort(order.begin(), order.begin() + long(n), order.end(), more_likely);
  for (size_t i = 0; i < n; ++i)
    out.top.emplace_back(order[i], double(logits[size_t(order[i])]) - log_z);
  return out;
}

std::shared_ptr<const TokenTable> vocabulary_table(const Tokenizer& tokenizer, int64_t vocab) {
  std::vector<std::string> bytes(static_cast<size_t>(vocab), std::string());
  std::vector<bool> control(size_t(vocab), true);  // ids the tokenizer lacks: never allowed
  for (int64_t id = 0; id < vocab; ++id)
    if (tokenizer.has_token(id)) {
      bytes[size_t(id)] = tokenizer.decode_token(id);
      control[size_t(id)] = false;
    }
  for (int64_t id : tokenizer.control_ids())
    if (id < vocab) control[size_t(id)] = true;
  return std::make_shared<TokenTable>(std::move(bytes), std::move(control));
}

struct Engine::Stream {
  SeqId seq;
  std::vector<int64_t> prompt;
  int64_t fed = 0;    // prompt tokens run so far
  int64_t next = -1;  // decoding: the sampled token the next step runs
  int64_t sampled = 0;
  int64_t max_tokens;
  int64_t logprobs;
  Sampler sampler;
  StopRule stop;
  OutputSink* sink;
  std::optional<Finish> finish;
  std::optional<GrammarConstraint> constraint;
  std::vector<float> masked;  // the step's logits with the constraint's mask
  // Choices still to fork from this stream once its prompt has run (Engine::start with several
  // sinks), with what each fork's sampler starts from.
  std::vector<OutputSink*> forks;
  std::optional<SamplingOptions> fork_options;
  std::vector<int64_t> fork_seen;
  Stream(SeqId s, std::vector<int64_t> p, const SamplingOptions& o, std::vector<int64_t> eos,
         std::span<const int64_t> seen, OutputSink& out)
      : seq(s),
        prompt(std::move(p)),
        max_tokens(o.max_tokens),
        logprobs(o.logprobs),
        sampler(o, seen),
        stop(std::move(eos), o.stop),
        sink(&out) {}
  bool decoding() const { return !finish && next >= 0; }
  int64_t prompt_left() const { return finish ? 0 : int64_t(prompt.size()) - fed; }
};

Engine::Engine(Context& context, const Tokenizer& tokenizer, const GenerationSettings& settings)
    : context_(context), tokenizer_(tokenizer), settings_(settings) {}

Engine::~Engine() = default;

bool Engine::has(SeqId seq) const {
  return std::any_of(streams_.begin(), streams_.end(),
                     [&](const auto& s) { return s->seq == seq; });
}

void Engine::start(SeqId seq, std::vector<int64_t> prompt, const SamplingOptions& options,
                   OutputSink& sink, std::span<const int64_t> held) {
  OutputSink* one[] = {&sink};
  start(seq, std::move(prompt), options, std::span<OutputSink* const>(one), held);
}

void Engine::start(SeqId seq, std::vector<int64_t> prompt, const SamplingOptions& options,
                   std::span<OutputSink* const> sinks, std::span<const int64_t> held) {
  if (sinks.empty()) throw Error(Errc::invalid_argument, "generate: no output sink");
  if (prompt.empty()) throw Error(Errc::invalid_argument, "generate: the prompt is empty");
  if (!context_.has_sequence(seq))
    throw Error(Errc::invalid_argument,
                "generate: sequence " + std::to_string(seq) + " does not exist");
  if (has(seq))
    throw Error(Errc::invalid_argument,
                "generate: sequence " + std::to_string(seq) + " is already generating");
  std::vector<int64_t> eos = options.ignore_eos ? std::vector<int64_t>{} : settings_.eos_ids;
  std::vector<int64_t> seen(held.begin(), held.end());
  seen.insert(seen.end(), prompt.begin(), prompt.end());
  auto stream =
      std::make_unique<Stream>(seq, std::move(prompt), options, std::move(eos), seen, *sinks[0]);
  if (options.grammar)
    stream->constraint.emplace(masks_for(options.grammar, options.grammar_specials));
  if (sinks.size() > 1) {
    stream->forks.assign(sinks.begin() + 1, sinks.end());
    stream->fork_options = options;
    stream->fork_seen = std::move(seen);
  }
  streams_.push_back(std::move(stream));
}

// The forks of `parent`, whose prompt has just run: each a sequence sharing its blocks, a
// stream with the prompt fed and its own sampler (seed + its choice's index).
std::vector<std::unique_ptr<Engine::Stream>> Engine::spawn_forks(Stream& parent) {
  std::vector<std::unique_ptr<Stream>> born;
  const SamplingOptions& base = *parent.fork_options;
  for (size_t i = 0; i < parent.forks.size(); ++i) {
    SamplingOptions o = base;
    o.seed = base.seed + uint64_t(i + 1);
    const SeqId child = context_.fork_sequence(parent.seq);
    auto eos = o.ignore_eos ? std::vector<int64_t>{} : settings_.eos_ids;
    auto s = std::make_unique<Stream>(child, parent.prompt, o, std::move(eos), parent.fork_seen,
                                      *parent.forks[i]);
    s->fed = parent.fed;
    if (o.grammar) s->constraint.emplace(masks_for(o.grammar, o.grammar_specials));
    parent.forks[i]->on_fork(child);
    born.push_back(std::move(s));
  }
  parent.forks.clear();
  parent.fork_options.reset();
  parent.fork_seen.clear();
  return born;
}

void Engine::cancel(SeqId seq, FinishReason reason, const std::optional<Error>& error) {
  for (auto& s : streams_)
    if (s->seq == seq && !s->finish) s->finish = Finish{reason, error};
  end_finished();
}

// A decode token of every decoding stream first (their latency is the users'), then prompt
// chunks in start order with what is left of max_batch_tokens: a long prompt is prefilled over
// several steps while the others keep streaming.
void Engine::collect_batch() {
  batch_.clear();
  rows_.clear();
  chunks_.clear();
  for (auto& s : streams_)
    if (s->decoding()) {
      batch_.add(s->next, context_.sequence_length(s->seq), s->seq, true);
      rows_.push_back(s.get());
    }
  int64_t budget =
      std::max<int64_t>(1, context_.bounds().max_batch_tokens) - int64_t(batch_.size());
  for (auto& s : streams_) {
    const int64_t left = s->prompt_left();
    if (left == 0 || budget <= 0) continue;
    const int64_t take = std::min(left, budget);
    const int64_t position = context_.sequence_length(s->seq);
    for (int64_t i = 0; i < take; ++i)
      batch_.add(s->prompt[size_t(s->fed + i)], position + i, s->seq, i + 1 == left);
    if (take == left) rows_.push_back(s.get());
    chunks_.emplace_back(s.get(), take);
    budget -= take;
  }
}

// Whether a stream's pick needs its row's logits on the host: not when it is the raw arg max with
// no constraint, no log-probabilities and no forks to seed, which the step's greedy id gives.
bool Engine::needs_logits(const Stream& s) const {
  return !s.forks.empty() || s.constraint || s.logprobs >= 0 ||
         !s.sampler.params().picks_raw_argmax();
}

void Engine::sample_rows() {
  const size_t vocab = size_t(context_.vocab());
  for (size_t i = 0; i < rows_.size(); ++i) {
    Stream& s = *rows_[i];
    std::span<const float> logits;
    int64_t greedy = -1;
    try {  // the step has run and its tokens are held: a failed read ends the stream, with why
      if (!needs_logits(s))
        greedy = context_.greedy_token(i);  // R ids come back, not R rows of the vocabulary
      else
        logits = {context_.logits(i), vocab};
    } catch (const Error& e) {
      s.finish = Finish{FinishReason::error, e};
      continue;
    }
    if (greedy >= 0) {
      sample_row(s, {}, greedy);
      continue;
    }
    if (!s.forks.empty())  // the prompt's last row: the other choices start from it too
      for (auto& fork : spawn_forks(s)) {
        sample_row(*fork, logits);
        streams_.push_back(std::move(fork));
      }
    sample_row(s, logits);
  }
}

// `greedy` >= 0: the row's greedy id, taken instead of a pick from `logits` (needs_logits false).
void Engine::sample_row(Stream& s, std::span<const float> logits, int64_t greedy) {
  if (s.sampled >= s.max_tokens) {  // max_tokens 0: the prompt only
    s.finish = Finish{FinishReason::max_tokens, {}};
    return;
  }
  if (greedy >= 0) s.sampler.accept(greedy);
  const int64_t id = greedy >= 0 ? greedy : pick(s, logits);
  if (id < 0) return;  // the constraint left no token: finished with its error
  ++s.sampled;
  std::string emit;
  const std::string bytes =
      tokenizer_.has_token(id) ? tokenizer_.decode_token(id) : "<" + std::to_string(id) + ">";
  const StopRule::Reason why = s.stop.feed(id, bytes, emit);
  std::optional<TokenLogprobs> lp;
  if (s.logprobs >= 0 && why != StopRule::Reason::eos) lp = token_logprobs(logits, id, s.logprobs);
  const bool go_on = s.sink->on_token(id, emit, lp ? &*lp : nullptr);
  if (why == StopRule::Reason::eos)
    s.finish = Finish{FinishReason::eos, {}};
  else if (why == StopRule::Reason::stop_text)
    s.finish = Finish{FinishReason::stop_text, {}};
  else if (!go_on)
    s.finish = Finish{FinishReason::callback, {}};
  else if (s.constraint && s.constraint->complete())
    s.finish = Finish{FinishReason::constraint_complete, {}};
  else if (s.sampled >= s.max_tokens)
    s.finish = Finish{FinishReason::max_tokens, {}};
  else if (context_.sequence_length(s.seq) >= context_.context_length())  // no room to run it
    s.finish = Finish{FinishReason::context_full, {}};
  else
    s.next = id;
}

// The sampler's pick, from the logits the stream's constraint leaves (when it has one).
int64_t Engine::pick(Stream& s, std::span<const float> logits) {
  if (!s.constraint) return s.sampler.sample(logits);
  s.masked.assign(logits.begin(), logits.end());
  if (s.constraint->mask(s.masked, s.stop.eos_ids()) == 0) {
    s.finish = Finish{FinishReason::error,
                      Error(Errc::bad_tokenizer,
                            "constrained output: no token of the vocabulary continues the "
                            "grammar here (it needs bytes no token has)")};
    return -1;
  }
  const int64_t id = s.sampler.sample(s.masked);
  s.constraint->accept(id);
  return id;
}

std::shared_ptr<const TokenTable> Engine::table_with(const std::vector<int64_t>& specials) {
  if (!token_table_) token_table_ = vocabulary_table(tokenizer_, context_.vocab());
  if (specials.empty()) return token_table_;
  for (const auto& [ids, table] : special_tables_)
    if (ids == specials) return table;
  const TokenTable& base = *token_table_;
  std::vector<std::string> bytes(size_t(base.size()));
  std::vector<bool> control(size_t(base.size()));
  for (int64_t id = 0; id < base.size(); ++id) {
    bytes[size_t(id)] = base.bytes(id);
    control[size_t(id)] = base.control(id);
  }
  for (int64_t id : specials)
    if (id >= 0 && id < base.size()) control[size_t(id)] = false;
  special_tables_.emplace_back(specials,
                               std::make_shared<TokenTable>(std::move(bytes), std::move(control)));
  return special_tables_.back().second;
}

std::shared_ptr<GrammarMasks> Engine::masks_for(const std::shared_ptr<const Grammar>& grammar,
                                                const std::vector<int64_t>& specials) {
  const std::shared_ptr<const TokenTable> table = table_with(specials);
  for (const auto& m : masks_)
    if (m->grammar() == grammar && m->table() == table) return m;
  if (masks_.size() >= kMaxGrammars)  // drop those only this list still holds
    masks_.erase(std::remove_if(masks_.begin(), masks_.end(),
                                [](const auto& m) { return m.use_count() == 1; }),
                 masks_.end());
  masks_.push_back(std::make_shared<GrammarMasks>(grammar, table));
  return masks_.back();
}

bool Engine::step() {
  collect_batch();
  if (batch_.size() == 0) return false;
  StepResult result = context_.decode(batch_);
  if (!result.ran) {
    // Nothing ran: the refused streams end with the step's error, the rest step again.
    for (const StepRefusal& refusal : result.refused)
      for (auto& s : streams_)
        if (s->seq == refusal.seq && !s->finish)
          s->finish = Finish{FinishReason::error, refusal.error};
    end_finished();
    return true;
  }
  for (auto& [s, take] : chunks_) s->fed += take;
  sample_rows();
  end_finished();
  return true;
}

// Finished streams leave the engine before their sinks hear it, so a sink may start another
// stream, or its owner remove the sequence, from on_finish.
void Engine::end_finished() {
  std::vector<std::unique_ptr<Stream>> done;
  for (auto& s : streams_)
    if (s->finish) done.push_back(std::move(s));
  if (done.empty()) return;
  streams_.erase(std::remove(streams_.begin(), streams_.end(), nullptr), streams_.end());
  for (auto& s : done) {
    const std::string tail = s->stop.flush();  // held back for a stop text that never came
    const Error* error = s->finish->error ? &*s->finish->error : nullptr;
    s->sink->on_finish(s->finish->reason, tail, error);
    for (OutputSink* fork : s->forks) fork->on_finish(s->finish->reason, "", error);
  }
}

}  // namespace sy
