// serving/ — what `switchyard serve` needs beyond HTTP: an OpenAI request read into what the
// runtime runs (this file), the continuous-batching scheduler (scheduler.hpp) and its metrics.
//
// An OpenAI chat or completion request body, checked field by field. Every field is either
// served, accepted at its neutral value (n: 1, `logprobs: false`, `tools: []`, `user`), or
// refused by name: a request is never served with a field silently ignored. Errors are Error
// SY501 bad_request whose message starts with the field's JSON path ("messages[1].content:
// ..."). Depends on generation/ (ChatMessages), sampling/ (SamplingParams), runtime/
// (SamplingOptions) and errors/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/generation/generation.hpp"
#include "core/runtime/runtime.hpp"
#include "core/sampling/sampling.hpp"

namespace sy {

enum class RequestKind { chat, completion };

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
  std::vector<std::string> stop;  // up to 4 texts
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool ignore_eos = false;        // extension (llama-server)
  bool return_token_ids = false;  // extension (vLLM): prompt_token_ids and choices' token_ids
};

// Reads `body` as a request of `kind`. Throws Error SY501 naming the field.
CompletionRequest parse_completion_request(const std::string& body, RequestKind kind);

// What the engine runs for `r`: its sampling, `max_tokens` (the request's, resolved by the
// caller against the context), its seed or `random_seed`, ignore_eos and stop texts. Throws
// Error SY501 naming logit_bias when one of its ids is outside a vocabulary of `vocab`.
SamplingOptions sampling_options(const CompletionRequest& r, int64_t max_tokens, int64_t vocab,
                                 uint64_t random_seed);

}  // namespace sy
