// runtime/ — the run pipeline as a library: open a model (model_source.hpp), turn a prompt or a
// chat message into ids, import and plan it for this machine, load a Session, and generate with
// sampling, stop rules and a token callback; then set the plan's memory prediction beside what
// the session measured. The CLI's `run` and the C host API (include/switchyard/host.h) are both
// clients of this code, so they give the same tokens for the same model, prompt and seed.
//
// Depends on gguf_model/ (and through it executor/, planner/, importer/, generation/, tokenizer/).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/executor/executor.hpp"
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
// declares), or a chat message rendered with the model's own template.
struct PromptRequest {
  std::string text;
  bool chat = false;
  std::optional<std::string> system;  // chat only
};
struct Prompt {
  std::vector<int64_t> ids;
  std::string echo;  // printed before the answer: the text itself, nothing for a chat
};
// Throws Error SY211 for a chat without a usable template.
Prompt build_prompt(const OpenedModel& model, const PromptRequest& request);

// A graph planned for a machine: what a Session needs, kept together so it outlives them.
struct PlannedModel {
  Graph graph;
  Inventory inventory;
  Plan plan;
};
// Imports `model` with `options` (prompt_len: the longest prompt prefill will take) and plans it
// for the live devices of `registry` under `policy`. The plan may carry its error (plan.ok()).
std::unique_ptr<PlannedModel> plan_model(const ModelSource& model, const ImportOptions& options,
                                         const Registry& registry, const Policy& policy);

// --prefer (comma-separated device types; empty: cuda, then cpu), --attention and --strict.
Policy run_policy(const std::string& prefer, const std::string& attention, bool strict);

struct SamplingOptions {
  int64_t max_tokens = 32;
  double temperature = 0;  // 0: greedy
  int64_t top_k = 0;       // 0: every token
  double top_p = 1;
  uint64_t seed = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;  // stop texts
};

enum class StopReason { none, eos, stop_text, max_tokens, callback };
const char* stop_reason_name(StopReason reason);  // "eos", "stop_text", ...

// Greedy at temperature 0; otherwise softmax(logits / T), cut to the top k and the top-p mass.
int64_t sample(const std::vector<float>& logits, const SamplingOptions& options, std::mt19937& rng);

// Called with each generated token and the text that may be shown now (held back while it may
// still become a stop text or an incomplete UTF-8 character). Returns false to stop.
using TokenCallback = std::function<bool(int64_t id, const std::string& text)>;

struct Generation {
  std::vector<int64_t> ids;  // every sampled token (an EOS or the one a stop text ends in too)
  std::string text;          // the answer as shown
  StopReason reason = StopReason::none;
  int64_t prompt_tokens = 0, decode_steps = 0;
  double prefill_ms = 0, decode_ms = 0;
};

// Generation over a loaded Session. Not thread-safe: one generate() at a time per Generator
// (and per Session).
class Generator {
 public:
  Generator(Session& session, const Tokenizer& tokenizer, const GenerationSettings& settings)
      : session_(session), tokenizer_(tokenizer), settings_(settings) {}
  // Prefills `prompt` (at most the plan's prompt length: a shorter one goes through decode
  // steps) and samples until an EOS id, a stop text, max_tokens or the callback
  // says stop. Throws Error (SY304 for a prompt or answer longer than the plan allows).
  Generation generate(const std::vector<int64_t>& prompt, const SamplingOptions& options,
                      const TokenCallback& on_token = {});

 private:
  Session& session_;
  const Tokenizer& tokenizer_;
  const GenerationSettings& settings_;
};

// The plan's prediction per location beside what the session measured: its buffers (weights,
// caches, arenas, copies) against the executor's allocations, and the whole need (workspace
// included) against what the location gave — the free-memory drop the device's plugin reports,
// or the growth of the host process's resident anonymous memory — each with the relative error
// (predicted − measured) / measured.
nlohmann::json memory_report(const Plan& plan, const Session& session);

}  // namespace sy
