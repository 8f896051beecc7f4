// engine/ — the one generation loop. Every sequence that generates — `run`'s single one, the
// host API's, each of serve's concurrent requests — is a stream of an Engine over a Context:
//
//   step():  batch (a decode token of every decoding stream, then prompt chunks in start order
//            up to the plan's max_batch_tokens) → Context::decode → per row: Sampler → StopRule
//            (EOS ids, stop texts, UTF-8 held back) → the stream's OutputSink.
//
// So the CLI, the host API and the server sample, stop and finish by the same code, and give
// the same tokens for the same model, prompt and seed. What differs is the owner around it:
// runtime's Generator runs one stream to its end on the caller's thread; serving's Scheduler
// admits many, each against the KV memory's ledger (KvBlocks::promise), and publishes them to
// the HTTP threads.
//
// An Engine and its Context belong to one thread; sinks are called on it. The engine never
// removes a sequence from the Context: a finished stream's sequence stays there for its owner
// (a conversation continues on it, or a server drops it).
//
// Depends on executor/ (Context), sampling/, generation/ (StopRule), tokenizer/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/executor/context.hpp"
#include "core/generation/generation.hpp"
#include "core/sampling/sampling.hpp"
#include "core/sampling/token_mask.hpp"

namespace sy {

// A generation's sampling (core/sampling/) and when it ends.
struct SamplingOptions : SamplingParams {
  int64_t max_tokens = 32;  // 0: run the prompt, sample nothing
  bool ignore_eos = false;
  std::vector<std::string> stop;  // stop texts
  // -1: no log-probabilities; 0 to 20: each token's, and that many most likely alternatives.
  int64_t logprobs = -1;
  // The output is a sentence of this grammar (core/sampling/grammar.hpp; a JSON schema's, or
  // json_object's): tokens that cannot continue one are masked before sampling, and the stream
  // ends when no byte can follow. Null: unconstrained.
  std::shared_ptr<const Grammar> grammar;
  // Control tokens the grammar may take as their text (a template's call markers that the
  // tokenizer keeps as special tokens, such as Mistral's [TOOL_CALLS] and [ARGS]): without
  // them the grammar would have the model spell the marker out of ordinary tokens.
  std::vector<int64_t> grammar_specials;
};

// A sampled token's log-probability under the model's own distribution: the log-softmax of the
// logits the step computed, before any bias, penalty, temperature or truncation of the sampler
// (vLLM's default, raw_logprobs). `top`: the `logprobs` most likely tokens, most likely first
// (ties: the lower id), whether or not the sampled one is among them.
struct TokenLogprobs {
  int64_t id = 0;
  double logprob = 0;
  std::vector<std::pair<int64_t, double>> top;
};
// The log-softmax of `logits` at `id`, and the `top` most likely entries (in double).
TokenLogprobs token_logprobs(std::span<const float> logits, int64_t id, int64_t top);

// The vocabulary of `tokenizer` as constraints read it (token_mask.hpp): each id's bytes below
// `vocab`, ids it lacks and its control tokens marked as never allowed.
std::shared_ptr<const TokenTable> vocabulary_table(const Tokenizer& tokenizer, int64_t vocab);

// Why a stream ended: the one type of the CLI (`stop_reason`), the host API (SY_STOP_*) and the
// server (OpenAI's finish_reason).
enum class FinishReason {
  eos,           // the model's end-of-sequence id (not shown)
  stop_text,     // a stop text (shown up to it)
  max_tokens,    // the request's max_tokens
  context_full,  // the sequence reached the context length
  callback,      // the sink (or the owner's abort check) asked to stop
  cancelled,     // the owner cancelled it (a client went away, a deadline passed, a shutdown)
  error,         // the step refused the sequence (SY304, SY308): OutputSink::on_finish's error
  constraint_complete,  // the constrained output (a grammar's sentence) is whole
};
const char* finish_reason_name(FinishReason reason);  // "eos", "stop_text", "max_tokens", ...
// OpenAI's finish_reason: "length" for max_tokens and context_full, else "stop".
const char* openai_finish_reason(FinishReason reason);

// Where one stream's output goes. Called on the engine's thread, in order: on_token per sampled
// token, then on_finish once.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  // A sampled token and the text that may be shown now (empty while it is held back: it may
  // still become a stop text or complete a UTF-8 character). False stops the stream after it.
  // `logprobs`: when the options asked for them, and not for an EOS that ends the stream (its
  // text is never shown); null otherwise. Valid during the call.
  virtual bool on_token(int64_t id, const std::string& text, const TokenLogprobs* logprobs) = 0;
  // The end: `tail` is text held back that no stop text claimed (often empty), `error` is set
  // only for FinishReason::error. The stream is gone from the engine when this is called.
  virtual void on_finish(FinishReason reason, const std::string& tail, const Error* error) = 0;
  // A fork's sequence (Engine::start with several sinks), made by the engine from the first
  // sink's once the prompt has run, before this sink's first on_token. The owner removes it
  // when the stream ends, as it does its own.
  virtual void on_fork(SeqId seq) { (void)seq; }
};

class Engine {
 public:
  Engine(Context& context, const Tokenizer& tokenizer, const GenerationSettings& settings);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts a stream on the Context's sequence `seq`: `prompt` runs after the tokens the
  // sequence holds (a cached prefix, a conversation's earlier turns), then tokens are sampled
  // until a FinishReason. The last sampled token is not run: the sequence ends holding the
  // prompt and every sampled token before the last. `sink` outlives the stream. Throws Error
  // (invalid_argument) for an empty prompt, an unknown sequence, or one already streaming.
  // `held`: the request's tokens the sequence already holds before `prompt` (a cached prefix of
  // the same request), which repetition_penalty counts as prompt tokens too, so an answer does
  // not depend on how much of its prompt was cached.
  void start(SeqId seq, std::vector<int64_t> prompt, const SamplingOptions& options,
             OutputSink& sink, std::span<const int64_t> held = {});
  // Several answers to one prompt (OpenAI's n): the prompt runs once on `seq`, for sinks[0];
  // when its last row's logits are there, the sequence is forked for each further sink
  // (copy-on-write KV blocks: the prompt's rows are shared, never recomputed; OutputSink::
  // on_fork names the new sequence) and every fork samples its own tokens from those logits
  // on. Choice i samples with seed `options.seed + i`, so a seeded request is reproducible
  // and its choices differ. A stream that ends before its prompt has run ends its forks with
  // the same reason.
  void start(SeqId seq, std::vector<int64_t> prompt, const SamplingOptions& options,
             std::span<OutputSink* const> sinks, std::span<const int64_t> held = {});
  // Ends `seq`'s stream now, before its next step; its sink hears `reason` (and `error`).
  // Nothing happens when `seq` has no stream.
  void cancel(SeqId seq, FinishReason reason, const std::optional<Error>& error = {});
  // Runs one step and feeds the sinks; streams that finish are dropped after their on_finish.
  // Returns false when no stream had anything to run.
  bool step();

  size_t streams() const { return streams_.size(); }
  bool has(SeqId seq) const;

 private:
  struct Stream;
  struct Finish {
    FinishReason reason;
    std::optional<Error> error;
  };
  void collect_batch();
  void sample_rows();
  bool needs_logits(const Stream& s) const;
  void sample_row(Stream& s, std::span<const float> logits, int64_t greedy = -1);
  std::vector<std::unique_ptr<Stream>> spawn_forks(Stream& parent);
  void end_finished();
  int64_t pick(Stream& s, std::span<const float> logits);

  Context& context_;
  const Tokenizer& tokenizer_;
  const GenerationSettings& settings_;
  std::vector<std::unique_ptr<Stream>> streams_;   // in start order
  std::shared_ptr<const TokenTable> token_table_;  // made when a stream is first constrained
  // Each grammar's cached masks, shared by the streams with that grammar (a server's requests
  // with the same schema share one compiled grammar). Kept while the engine lives, up to
  // kMaxGrammars; beyond, the ones no stream uses are dropped.
  std::vector<std::shared_ptr<GrammarMasks>> masks_;
  static constexpr size_t kMaxGrammars = 64;
  std::shared_ptr<GrammarMasks> masks_for(const std::shared_ptr<const Grammar>& grammar,
                                          const std::vector<int64_t>& specials);
  // The vocabulary's table with `specials` read as text (a few per engine: one per tool format).
  std::shared_ptr<const TokenTable> table_with(const std::vector<int64_t>& specials);
  std::vector<std::pair<std::vector<int64_t>, std::shared_ptr<const TokenTable>>> special_tables_;
  // One step's scratch, kept to reuse its storage.
  Batch batch_;
  std::vector<Stream*> rows_;  // whose logits each asked-for row of the step is
  std::vector<std::pair<Stream*, int64_t>> chunks_;
};

}  // namespace sy
