// runtime/ — the run pipeline as a library: open a model (model_source.hpp), turn a prompt or a
// chat conversation into ids, import and plan it for this machine (the paged layout, or the
// contiguous one for older plugins), load a Model and a Context, and generate for a sequence with
// sampling, stop rules and a token callback, prompts prefilled in chunks of the plan's step;
// then set the plan's memory prediction beside what was measured. The CLI's `run`, `perplexity`,
// `bench` and the C host API (include/switchyard/host.h) are clients of this code, so they give
// the same tokens for the same model, prompt and seed; generation itself is the engine's
// (core/engine/), which serving/ runs too.
//
// Depends on gguf_model/ (and through it executor/, planner/, importer/, generation/,
// tokenizer/) and engine/.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/engine/engine.hpp"
#include "core/executor/context.hpp"
#include "core/generation/generation.hpp"
#include "core/runtime/model_source.hpp"

namespace sy {

// A model opened for generation: the source, its tokenizer and what it says about generating.
struct OpenedModel {
  std::unique_ptr<ModelSource> source;
  Tokenizer tokenizer;
  GenerationSettings generation;
  // Throws Error naming the file (SY207, SY302, SY303, ...).
  static OpenedModel open(const std::string& path, const std::vector<std::string>& allowed_keys);
};

// What the user asked to continue: plain text (wrapped in the special tokens the tokenizer
// declares), or a chat rendered with the model's own template: one user message (`text`, with
// an optional system message), or a whole conversation (`messages`, role and content each).
struct PromptRequest {
  std::string text;
  bool chat = false;
  std::optional<std::string> system;                          // chat only
  std::vector<std::pair<std::string, std::string>> messages;  // chat: replaces text and system
};
struct Prompt {
  std::vector<int64_t> ids;
  std::string echo;  // printed before the answer: the text itself, nothing for a chat
};
// Throws Error SY211 for a chat without a usable template.
Prompt build_prompt(const OpenedModel& model, const PromptRequest& request);

// A graph planned for a machine: what a Model needs, kept together so it outlives it.
struct PlannedModel {
  Graph graph;
  Inventory inventory;
  Plan plan;
};
// Imports `model` with `options` (its bounds: max_batch_tokens, max_sequences, context) and
// plans it for the live devices of `registry` under `policy`, in the paged layout or, for one
// sequence, the contiguous one (plan_layouts). When the source has its weights, the memory table
// says which host weights are mapped from the file. The plan may carry its error (plan.ok()).
std::unique_ptr<PlannedModel> plan_model(ModelSource& model, const ImportOptions& options,
                                         const Registry& registry, const Policy& policy);
// The same, for a machine described by `inventory` (--target): nothing is mapped.
std::unique_ptr<PlannedModel> plan_model_for(const ModelSource& model, const ImportOptions& options,
                                             const Registry& registry, const Inventory& inventory,
                                             const Policy& policy);

// A model planned for this machine and loaded: the plan, the Model (weights, loaded once) and
// one Context. The CLI's run, perplexity and bench and the host API start here.
struct LoadedModel {
  std::unique_ptr<PlannedModel> planned;
  std::unique_ptr<Model> model;      // null when the plan has an error
  std::unique_ptr<Context> context;  // null when the plan has an error
  double load_ms = 0;                // weights and kernels
  // Plans `source` with `options` under `policy`; nothing is loaded yet. Throws Error (importer).
  static LoadedModel plan(ModelSource& source, const ImportOptions& options,
                          const Registry& registry, const Policy& policy);
  // Loads a legal plan (its weights through `wrap(source.weights())` when `wrap` is set: a
  // progress bar) and makes one context of `context_options`. Throws Error (the plan's own,
  // weights, kernels, memory).
  void load(ModelSource& source, const Registry& registry,
            const ContextOptions& context_options = {},
            const std::function<WeightLoader(WeightLoader)>& wrap = {});
  // plan(), then load() when the plan is legal (an illegal one is returned, nothing loaded).
  static LoadedModel load(ModelSource& source, const ImportOptions& options,
                          const Registry& registry, const Policy& policy,
                          const ContextOptions& context_options = {},
                          const std::function<WeightLoader(WeightLoader)>& wrap = {});
};

// --prefer (comma-separated device types; empty: cuda, then cpu), --attention and --strict.
Policy run_policy(const std::string& prefer, const std::string& attention, bool strict);

// Called with each generated token and the text that may be shown now (held back while it may
// still become a stop text or an incomplete UTF-8 character), and with id -1 for text released
// at the end. Returns false to stop.
using TokenCallback = std::function<bool(int64_t id, const std::string& text)>;

struct Generation {
  std::vector<int64_t> ids;  // every sampled token (an EOS or the one a stop text ends in too)
  std::string text;          // the answer as shown
  FinishReason reason = FinishReason::max_tokens;
  int64_t prompt_tokens = 0, decode_steps = 0;
  int64_t cached_tokens = 0;  // of the prompt, found in the KV memory and not run again
  double prefill_ms = 0, decode_ms = 0;
};

// Checked between steps (prefill chunks, decode tokens): true stops the generation.
using AbortCheck = std::function<bool()>;

// One sequence of a Context generated to its end on the caller's thread: the engine
// (core/engine/) with one stream. Not thread-safe: one generate() at a time per Generator (and
// per Context).
class Generator {
 public:
  Generator(Context& context, const Tokenizer& tokenizer, const GenerationSettings& settings)
      : context_(context), engine_(context, tokenizer, settings) {}
  // Runs `prompt` after the tokens the sequence `seq` already holds (its cached KV: a
  // conversation continues, it is never prefilled again), in steps of at most the plan's
  // max_batch_tokens, then samples until a FinishReason (the callback saying stop, or `abort`,
  // is `callback`). The sequence keeps every token it ran. Throws Error (SY304 when the
  // sequence's tokens, the prompt and max_tokens pass the context; SY308 when the KV pool has
  // no block left).
  Generation generate(SeqId seq, const std::vector<int64_t>& prompt, const SamplingOptions& options,
                      const TokenCallback& on_token = {}, const AbortCheck& abort = {});
  // A new sequence that starts from any cached prefix of `prompt`, then generate() on it.
  Generation generate(const std::vector<int64_t>& prompt, const SamplingOptions& options,
                      const TokenCallback& on_token = {});
  // A next turn: `conversation` is every token of the conversation so far (the earlier turns,
  // rendered as the model's template renders them, then the new message). The sequence keeps
  // the tokens it shares with it, from the start, and runs only the rest.
  Generation continue_sequence(SeqId seq, const std::vector<int64_t>& conversation,
                               const SamplingOptions& options, const TokenCallback& on_token = {},
                               const AbortCheck& abort = {});

 private:
  Context& context_;
  Engine engine_;
};

// Runs `tokens` after what sequence `seq` holds, in steps of at most the plan's max_batch_tokens
// tokens, asking for the logits of the tokens `logits_of` selects (true: every one; false: the
// last) and handing them to `on_logits(index, row)` in order. Throws the step's Error (SY304,
// SY308) when the context refuses it.
void run_tokens(Context& context, SeqId seq, std::span<const int64_t> tokens, bool every_logits,
                const std::function<void(size_t, const float*)>& on_logits,
                const AbortCheck& abort = {});

// The plan's prediction per location beside what the model and context measured: their
// buffers (copied weights, KV memory, arenas) against the allocations, and the whole need
// (workspace included; without the weights mapped from the file, and, paged, without the KV
// pool, whose pages become resident as blocks are written) against what the location gave —
// the free-memory drop the device's plugin reports, or the growth of the host process's
// resident anonymous memory — each with prediction_check's fields.
nlohmann::json memory_report(const Plan& plan, const Model& model, const Context& context);

// {"error": (predicted − measured) / measured} when something was measured; when nothing was
// (measured <= 0) {"error": null, "problem": "nothing was measured …"}: a check of the error
// then fails instead of passing on a 0 that compared nothing.
nlohmann::json prediction_check(int64_t predicted, int64_t measured);

}  // namespace sy
