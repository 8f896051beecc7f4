// serving/ — what `switchyard serve` needs beyond HTTP: an OpenAI request read into what the
// runtime runs (this file), the continuous-batching scheduler (scheduler.hpp) and its metrics.
//
// An OpenAI chat or completion request body, checked field by field. Every field is either
// served, accepted at its neutral value (n: 1, zero penalties, an empty logit_bias, `user`), or
// refused by name: a request is never served with a field silently ignored. Errors are Error
// SY501 bad_request whose message starts with the field's JSON path ("messages[1].content:
// ..."). Depends on generation/ (ChatMessages) and errors/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/generation/generation.hpp"

namespace sy {

enum class RequestKind { chat, completion };

struct CompletionRequest {
  RequestKind kind = RequestKind::chat;
  std::optional<std::string> model;   // as the client named it; absent: the server's
  ChatMessages messages;              // chat: (role, content), roles system|user|assistant
  std::string prompt;                 // completion: text (specials matched, as `run --prompt`)
  std::vector<int64_t> prompt_ids;    // completion: token ids instead of text
  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens; absent: the rest
  double temperature = 1.0;           // OpenAI's default
  double top_p = 1.0;
  int64_t top_k = 0;  // extension (llama-server); 0: every token
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;  // up to 4 texts
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool ignore_eos = false;        // extension (llama-server)
  bool return_token_ids = false;  // extension (vLLM): prompt_token_ids and choices' token_ids
};

// Reads `body` as a request of `kind`. Throws Error SY501 naming the field.
CompletionRequest parse_completion_request(const std::string& body, RequestKind kind);

}  // namespace sy
