#include "core/generation/tool_calls.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/sampling/json_schema.hpp"

namespace sy {
namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

std::string call_id(uint64_t seed, int64_t n) {
  static const char kDigits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t x = seed ^ (0x9E3779B97F4A7C15ull * uint64_t(n + 1));
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    id += kDigits[x % 62];
  }
  return id;
}

}  // namespace

ToolFormat tool_format(const GenerationSettings& g) {
  if (g.chat_template && g.chat_template->find(kOpen) != std::string::npos)
    return ToolFormat::hermes;
  return ToolFormat::none;
}

bool template_renders_tools(const GenerationSettings& g) {
  return g.chat_template && g.chat_template->find("tools") != std::string::npos;
}

std::shared_ptr<const Grammar> tool_call_grammar(ToolFormat format,
                                                 const nlohmann::ordered_json& tools,
                                                 const std::string& only, bool parallel) {
  if (format != ToolFormat::hermes)
    throw std::invalid_argument("tool_call_grammar: the template's call format is not read");
  JsonGrammarBuilder b;
  std::string functions;
  for (size_t i = 0; i < tools.size(); ++i) {
    const nlohmann::ordered_json& f = tools[i]["function"];
    const std::string name = f["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    const nlohmann::ordered_json any = {{"type", "object"}};
    std::string args;
    try {
      args = b.add(f.contains("parameters") ? f["parameters"] : any, "args-" + std::to_string(i));
    } catch (const SchemaError& e) {
      throw SchemaError("/" + std::to_string(i) + "/function/parameters" + e.pointer(),
                        e.message());
    }
    // As the Hermes templates write it: {"name": NAME, "arguments": ARGS} (tojson's spacing).
    const std::string head = "\"name\": " + nlohmann::json(name).dump() + ", \"arguments\": ";
    functions += (functions.empty() ? "" : " | ") + JsonGrammarBuilder::literal(head) + " " + args;
  }
  if (functions.empty())
    throw std::invalid_argument("tool_call_grammar: no tool named `" + only + "`");
  b.rule("call", JsonGrammarBuilder::literal(std::string(kOpen) + "\n{") + " ( " + functions +
                     " ) " + JsonGrammarBuilder::literal("}\n" + std::string(kClose)));
  b.rule("root", only.empty() && parallel ? "call ( \"\\n\" call )*" : "call");
  return Grammar::from_gbnf(b.gbnf());
}

void ToolCallReader::feed(const std::string& text, std::string& content,
                          std::vector<ToolCall>& calls) {
  pending_ += text;
  for (;;) {
    if (!inside_) {
      const size_t open = pending_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = tag_prefix_tail(pending_, kOpen);
        content += pending_.substr(0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      content += pending_.substr(0, open);
      pending_.erase(0, open + kOpen.size());
      inside_ = true;
    }
    const size_t close = pending_.find(kClose);
    if (close == std::string::npos) return;  // the block is still being written
    const std::string body = pending_.substr(0, close);
    pending_.erase(0, close + kClose.size());
    inside_ = false;
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    const bool call =
        j.is_object() && j.contains("name") && j["name"].is_string() &&
        (!j.contains("arguments") || j["arguments"].is_object() || j["arguments"].is_string());
    if (!call) {  // not a call after all: the text stays as the model wrote it
      content += std::string(kOpen) + body + std::string(kClose);
      continue;
    }
    std::string arguments = "{}";
    if (j.contains("arguments"))
      arguments =
          j["arguments"].is_string() ? j["arguments"].get<std::string>() : j["arguments"].dump();
    calls.push_back({call_id(seed_, made_++), j["name"].get<std::string>(), arguments});
  }
}

void ToolCallReader::finish(std::string& content) {
  if (inside_) content += std::string(kOpen);
  content += pending_;
  pending_.clear();
  inside_ = false;
}

}  // namespace sy
