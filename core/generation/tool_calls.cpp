#include "core/generation/tool_calls.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/sampling/json_schema.hpp"

namespace sy {
namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

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
  if (!g.chat_template) return ToolFormat::none;
  const std::string& t = *g.chat_template;
  if (t.find(kOpen) != std::string::npos) return ToolFormat::hermes;
  if (t.find("\"parameters\": ") != std::string::npos &&
      t.find("tool_call.name") != std::string::npos)
    return ToolFormat::llama3_json;
  return ToolFormat::none;
}

void prepare_tool_history(ToolFormat format, std::vector<nlohmann::ordered_json>& fields) {
  if (format != ToolFormat::llama3_json) return;
  for (nlohmann::ordered_json& m : fields) {
    if (!m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (nlohmann::ordered_json& call : m["tool_calls"]) {
      if (!call.contains("function") || !call["function"].contains("arguments")) continue;
      nlohmann::ordered_json& args = call["function"]["arguments"];
      if (!args.is_string()) continue;
      auto parsed = nlohmann::ordered_json::parse(args.get<std::string>(), nullptr, false);
      if (parsed.is_object()) args = std::move(parsed);
    }
  }
}

bool template_renders_tools(const GenerationSettings& g) {
  return g.chat_template && g.chat_template->find("tools") != std::string::npos;
}

std::shared_ptr<const Grammar> tool_call_grammar(ToolFormat format,
                                                 const nlohmann::ordered_json& tools,
                                                 const std::string& only, bool parallel) {
  if (format == ToolFormat::none)
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
    // As the templates write it (tojson's spacing): Hermes {"name": NAME, "arguments": ARGS},
    // Llama 3.x {"name": NAME, "parameters": ARGS}.
    const std::string head =
        "\"name\": " + nlohmann::json(name).dump() +
        (format == ToolFormat::hermes ? ", \"arguments\": " : ", \"parameters\": ");
    functions += (functions.empty() ? "" : " | ") + JsonGrammarBuilder::literal(head) + " " + args;
  }
  if (functions.empty())
    throw std::invalid_argument("tool_call_grammar: no tool named `" + only + "`");
  if (format == ToolFormat::llama3_json) {  // the whole answer, one call
    b.rule("root", "\"{\" ( " + functions + " ) \"}\"");
    return Grammar::from_gbnf(b.gbnf());
  }
  b.rule("call", JsonGrammarBuilder::literal(std::string(kOpen) + "\n{") + " ( " + functions +
                     " ) " + JsonGrammarBuilder::literal("}\n" + std::string(kClose)));
  b.rule("root", only.empty() && parallel ? "call ( \"\\n\" call )*" : "call");
  return Grammar::from_gbnf(b.gbnf());
}

ToolCall ToolCallReader::make_call(const nlohmann::json& j, const char* arguments_key) {
  std::string arguments = "{}";
  if (j.contains(arguments_key))
    arguments = j[arguments_key].is_string() ? j[arguments_key].get<std::string>()
                                             : j[arguments_key].dump();
  return {call_id(seed_, made_++), j["name"].get<std::string>(), arguments};
}

void ToolCallReader::feed(const std::string& text, std::string& content,
                          std::vector<ToolCall>& calls) {
  pending_ += text;
  if (format_ == ToolFormat::llama3_json)
    feed_llama3(content);
  else
    feed_hermes(content, calls);
}

// Decides at the answer's first non-blank text: "{" or the python tag (or the start of it)
// holds everything for finish(); anything else streams.
void ToolCallReader::feed_llama3(std::string& content) {
  if (lead_ == Lead::undecided) {
    const size_t first = pending_.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return;
    const std::string_view rest = std::string_view(pending_).substr(first);
    if (rest[0] == '{' || rest.starts_with(kPythonTag))
      lead_ = Lead::call;
    else if (kPythonTag.starts_with(rest))
      return;  // maybe the tag: not known yet
    else
      lead_ = Lead::text;
  }
  if (lead_ == Lead::text) {
    content += pending_;
    pending_.clear();
  }
}

void ToolCallReader::feed_hermes(std::string& content, std::vector<ToolCall>& calls) {
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
    calls.push_back(make_call(j, "arguments"));
  }
}

void ToolCallReader::finish(std::string& content, std::vector<ToolCall>& calls) {
  if (format_ == ToolFormat::llama3_json && lead_ == Lead::call) {
    std::string_view body = pending_;
    body.remove_prefix(std::min(body.size(), body.find_first_not_of(" \t\r\n")));
    if (body.substr(0, kPythonTag.size()) == kPythonTag) body.remove_prefix(kPythonTag.size());
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    const char* key = j.is_object() && j.contains("parameters") ? "parameters" : "arguments";
    const bool call = j.is_object() && j.contains("name") && j["name"].is_string() &&
                      (!j.contains(key) || j[key].is_object() || j[key].is_string());
    if (call) {
      calls.push_back(make_call(j, key));
      pending_.clear();
    }
  }
  if (inside_) content += std::string(kOpen);
  content += pending_;
  pending_.clear();
  inside_ = false;
  lead_ = Lead::undecided;
}

}  // namespace sy
