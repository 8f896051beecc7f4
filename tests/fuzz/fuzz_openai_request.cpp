// libFuzzer target: the server's request parser must turn any body into a request that keeps
// its promises (roles it serves, at most 4 stop texts, a positive max_tokens, sampling in range)
// or an Error SY501, never a crash, a hang or another exception.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/errors/errors.hpp"
#include "core/serving/openai_request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  for (auto kind : {sy::RequestKind::chat, sy::RequestKind::completion}) {
    try {
      const sy::CompletionRequest r = sy::parse_completion_request(body, kind);
      for (const auto& [role, content] : r.messages)
        if (role != "system" && role != "user" && role != "assistant") std::abort();
      if (kind == sy::RequestKind::chat && r.messages.empty()) std::abort();
      if (r.stop.size() > 4 || (r.max_tokens && *r.max_tokens < 1)) std::abort();
      if (!(r.sampling.temperature >= 0 && r.sampling.temperature <= 2) || r.sampling.validate())
        std::abort();
    } catch (const sy::Error& e) {
      if (e.code != sy::Errc::bad_request) std::abort();
    }
  }
  return 0;
}
