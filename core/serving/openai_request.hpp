// serving/ — what `switchyard serve` needs beyond HTTP: an OpenAI request read into what the
// runtime runs (this file), the continuous-batching scheduler (scheduler.hpp) and its metrics.
//
// An OpenAI chat or completion request body, checked field by field. Every field is either
// served, accepted at its neutral value (best_of: 1, `tools: []`, `user`), or
// refused by name: a request is never served with a field silently ignored. Errors are Error
// SY501 bad_request whose message starts with the field's JSON path ("messages[1].content:
// ..."). Depends on generation/ (ChatMessages), sampling/ (SamplingParams), runtime/
// (SamplingOptions) and errors/.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/generation/generation.hpp"
#include "core/runtime/runtime.hpp"
#include "core/sampling/grammar.hpp"
#include "core/sampling/sampling.hpp"

namespace sy {

enum class RequestKind { chat, completion };
enum class ToolChoice { automatic, none, required, function };

struct CompletionRequest {
  RequestKind kind = RequestKind::chat;
  std::optional<std::string> model;   // as the client named it; absent: the server's
  ChatMessages messages;              // chat: (role, content), roles system|user|assistant
  std::string prompt;                 // completion: text (specials matched, as `run --prompt`)
  std::vector<int64_t> prompt_ids;    // completion: token ids instead of text
  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens; absent: the rest
  // temperature (OpenAI's default 1, its range [0, 2]), top_p, top_k (extension), min_p
  // (extension), presence_penalty, frequency_penalty, repetition_penalty (extension, also
  // llama-server's repeat_penalty) and logit_bias, checked by SamplingParams::validate(); the
  // seed when the request names one (sampling_options() supplies the server's otherwise).
  SamplingParams sampling = [] {
    SamplingParams p;
    p.temperature = 1.0;
    return p;
  }();
  std::optional<uint64_t> seed;
  // Choices (1 to 16): n answers to one prompt, which runs once; the others are forks of its
  // sequence (copy-on-write KV blocks). Choice i samples with seed + i. best_of is refused
  // unless 1 (it would rank candidates by log-probability on the server).
  int64_t n = 1;
  std::vector<std::string> stop;  // up to 4 texts
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool ignore_eos = false;        // extension (llama-server)
  bool return_token_ids = false;  // extension (vLLM): prompt_token_ids and choices' token_ids
  // -1: none. Chat: `logprobs: true` with `top_logprobs` alternatives (0 to 20, 0 when absent);
  // completion: `logprobs: N` (0 to 20). Of the model's distribution (engine.hpp's
  // TokenLogprobs).
  int64_t logprobs = -1;
  // chat: chat_template_kwargs (vLLM's, llama-server's), the template's extra variables, such
  // as Qwen3's enable_thinking; `messages` and `add_generation_prompt` are the request's own.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
  // The grammar the answer is held to (core/sampling/grammar.hpp), null for none:
  // response_format json_object (one JSON object), json_schema (its schema, compiled by
  // json_schema.hpp; a keyword it does not serve is refused, naming its place in the schema),
  // or `grammar` (llama-server's extension: GBNF). `constraint` names which.
  std::shared_ptr<const Grammar> grammar;
  std::string constraint;
  // chat: `tools` (function tools, as sent); empty with tool_choice none. With required or a
  // named function the answer is held to the calls' grammar (tool_calls.hpp's
  // tool_call_grammar), every schema it needs checked here; parallel_tool_calls false is served
  // with those (one call), refused with auto (nothing would hold the model to one).
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  ToolChoice tool_choice = ToolChoice::automatic;
  std::string tool_name;  // ToolChoice::function: the function's name
  bool parallel_tool_calls = true;
  // chat: per message, its fields beyond role and content (tool_calls, tool_call_id, name).
  std::vector<nlohmann::ordered_json> message_fields;
};

// Reads `body` as a request of `kind`. Throws Error SY501 naming the field.
CompletionRequest parse_completion_request(const std::string& body, RequestKind kind);

// What the engine runs for `r`: its sampling, `max_tokens` (the request's, resolved by the
// caller against the context), its seed or `random_seed`, ignore_eos, stop texts and logprobs.
// Throws Error SY501 naming logit_bias when one of its ids is outside a vocabulary of `vocab`.
SamplingOptions sampling_options(const CompletionRequest& r, int64_t max_tokens, int64_t vocab,
                                 uint64_t random_seed);

// llama-server's POST /tokenize: {"content": text, "add_special": false, "with_pieces": false}.
// add_special wraps the ids in the special tokens of a plain prompt (as a completion's prompt
// is); special tokens in the text are matched either way (llama-server's parse_special).
struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool with_pieces = false;  // [{"id", "piece"}] instead of ids
};
// llama-server's POST /detokenize: {"tokens": [ids]}.
struct DetokenizeRequest {
  std::vector<int64_t> tokens;
};
// Each throws Error SY501 naming the field (an unknown one included).
TokenizeRequest parse_tokenize_request(const std::string& body);
DetokenizeRequest parse_detokenize_request(const std::string& body);

}  // namespace sy
