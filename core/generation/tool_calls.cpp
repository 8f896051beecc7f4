#include "core/generation/tool_calls.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/sampling/json_schema.hpp"

namespace sy {
namespace {

constexpr std::string_view kToolCallOpen = "<tool_call>", kToolCallClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kToolCalls = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]";

bool mistral(ToolFormat f) {
  return f == ToolFormat::mistral_json || f == ToolFormat::mistral_args;
}

// OpenAI's "call_" and 24 alphanumerics; Mistral's templates take 9 alphanumerics only.
std::string call_id(uint64_t seed, int64_t n, bool nine) {
  static const char kDigits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t x = seed ^ (0x9E3779B97F4A7C15ull * uint64_t(n + 1));
  std::string id = nine ? "" : "call_";
  for (int i = 0; i < (nine ? 9 : 24); ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift64
    id += kDigits[x % 62];
  }
  return id;
}

std::string_view trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// A call object as the JSON forms write it: a string "name", and `key` an object, a string or
// absent.
bool is_call(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains("name") && j["name"].is_string() &&
         (!j.contains(key) || j[key].is_object() || j[key].is_string());
}

}  // namespace

ToolFormat tool_format(const GenerationSettings& g) {
  if (!g.chat_template) return ToolFormat::none;
  const std::string& t = *g.chat_template;
  if (t.find("<|channel|>") != std::string::npos && t.find("\"functions.\"") != std::string::npos)
    return ToolFormat::harmony;
  if (t.find(kToolCalls) != std::string::npos && t.find(kArgs) != std::string::npos)
    return ToolFormat::mistral_args;
  if (t.find(std::string(kToolCalls) + "[") != std::string::npos) return ToolFormat::mistral_json;
  if (t.find(kToolCallOpen) != std::string::npos) return ToolFormat::hermes;
  if (t.find("\"parameters\": ") != std::string::npos &&
      t.find("tool_call.name") != std::string::npos)
    return ToolFormat::llama3_json;
  return ToolFormat::none;
}

void prepare_tool_history(ToolFormat format, std::vector<nlohmann::ordered_json>& fields) {
  if (format == ToolFormat::none || format == ToolFormat::hermes) return;
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

std::vector<int64_t> tool_call_markers(ToolFormat format, const Tokenizer& tokenizer) {
  std::vector<std::string_view> markers;
  if (format == ToolFormat::hermes) markers = {kToolCallOpen, kToolCallClose};
  if (format == ToolFormat::harmony)
    markers = {"<|start|>", "<|end|>", "<|channel|>", "<|message|>", "<|constrain|>"};
  if (format == ToolFormat::llama3_json) markers = {kPythonTag};
  if (mistral(format)) markers = {kToolCalls, kArgs, kCallId};
  const std::vector<int64_t> control = tokenizer.control_ids();
  std::vector<int64_t> out;
  for (std::string_view m : markers)
    if (auto id = tokenizer.token_id(m);
        id && std::find(control.begin(), control.end(), *id) != control.end())
      out.push_back(*id);
  return out;
}

std::shared_ptr<const Grammar> tool_call_grammar(ToolFormat format,
                                                 const nlohmann::ordered_json& tools,
                                                 const std::string& only, bool parallel,
                                                 ThinkLead think) {
  if (format == ToolFormat::none)
    throw std::invalid_argument("tool_call_grammar: no grammar for the template's call format");
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
    // As the templates write it (tojson's spacing): Hermes and Mistral's JSON {"name": NAME,
    // "arguments": ARGS}, Llama 3.x {"name": NAME, "parameters": ARGS}, Mistral's v11
    // NAME[ARGS]ARGS.
    std::string head;
    if (format == ToolFormat::harmony)  // harmony's documented form: the recipient on the channel
      head = JsonGrammarBuilder::literal("<|channel|>commentary to=functions." + name +
                                         " <|constrain|>json<|message|>");
    else if (format == ToolFormat::mistral_args)  // the history's [CALL_ID] may come too
      head = JsonGrammarBuilder::literal(name) + " ( " +
             JsonGrammarBuilder::literal(std::string(kCallId)) + " [a-zA-Z0-9]{9} )? " +
             JsonGrammarBuilder::literal(std::string(kArgs));
    else
      head = JsonGrammarBuilder::literal(
          "\"name\": " + nlohmann::json(name).dump() +
          (format == ToolFormat::llama3_json ? ", \"parameters\": " : ", \"arguments\": "));
    functions += (functions.empty() ? "" : " | ") + head + " " + args;
  }
  if (functions.empty())
    throw std::invalid_argument("tool_call_grammar: no tool named `" + only + "`");
  const bool many = only.empty() && parallel;
  if (format == ToolFormat::harmony) {  // one call (its <|call|> is an end of sequence);
    // the analysis may come first, as gpt-oss writes it
    b.rule("calls", "( " + JsonGrammarBuilder::literal("<|channel|>analysis<|message|>") +
                        " thought " + JsonGrammarBuilder::literal("<|end|><|start|>assistant") +
                        " )? ( " + functions + " )");
  } else if (format == ToolFormat::llama3_json) {  // the whole answer, one call
    b.rule("calls", "\"{\" ( " + functions + " ) \"}\"");
  } else if (format == ToolFormat::mistral_args) {  // [TOOL_CALLS]NAME[ARGS]{...}, per call
    b.rule("call", JsonGrammarBuilder::literal(std::string(kToolCalls)) + " ( " + functions + " )");
    b.rule("calls", many ? "call+" : "call");
  } else if (format == ToolFormat::mistral_json) {  // [TOOL_CALLS][{..., "id": ID}, ...]
    b.rule("call", "\"{\" ( " + functions + " ) " + JsonGrammarBuilder::literal(", \"id\": \"") +
                       " [a-zA-Z0-9]{9} " + JsonGrammarBuilder::literal("\"}"));
    b.rule("calls", JsonGrammarBuilder::literal(std::string(kToolCalls) + "[") +
                        (many ? " call ( \", \" call )* " : " call ") + "\"]\"");
  } else {
    b.rule("call", JsonGrammarBuilder::literal(std::string(kToolCallOpen) + "\n{") + " ( " +
                       functions + " ) " +
                       JsonGrammarBuilder::literal("}\n" + std::string(kToolCallClose)));
    b.rule("calls", many ? "call ( \"\\n\" call )*" : "call");
  }
  // The thought is any text; the grammar's state is a set of stacks, so "</think>" both ends it
  // and, as far as the grammar goes, may be thought text: the reasoning split takes the first.
  b.rule("thought", "( [^<] | \"<\" )*");
  if (think == ThinkLead::inside)
    b.rule("root", "thought \"</think>\" [ \\n]* calls");
  else if (think == ThinkLead::optional)
    b.rule("root", "( \"<think>\" thought \"</think>\" [ \\n]* )? calls");
  else
    b.rule("root", "calls");
  return Grammar::from_gbnf(b.gbnf());
}

ToolCall ToolCallReader::make_call(const nlohmann::json& j, const char* arguments_key) {
  std::string arguments = "{}";
  if (j.contains(arguments_key))
    arguments = j[arguments_key].is_string() ? j[arguments_key].get<std::string>()
                                             : j[arguments_key].dump();
  return {call_id(seed_, made_++, mistral(format_)), j["name"].get<std::string>(), arguments};
}

void ToolCallReader::feed(const std::string& text, std::string& content,
                          std::vector<ToolCall>& calls) {
  pending_ += text;
  if (format_ == ToolFormat::harmony) {  // calls come through add(); the rest is text
    content += pending_;
    pending_.clear();
    return;
  }
  if (format_ == ToolFormat::llama3_json)
    feed_llama3(content);
  else if (mistral(format_))
    feed_mistral(content);
  else
    feed_hermes(content, calls);
}

// Text streams until the first [TOOL_CALLS] (what may be its start is held); from it on, all is
// held for finish().
void ToolCallReader::feed_mistral(std::string& content) {
  if (!inside_) inside_ = text_until(kToolCalls, content);
}

// The pending text before `tag` to `content`; true when the tag is there (pending_ now starts
// with it). Without it, all but what may be its start goes.
bool ToolCallReader::text_until(std::string_view tag, std::string& content) {
  const size_t at = pending_.find(tag);
  const size_t take =
      at != std::string::npos ? at : pending_.size() - tag_prefix_tail(pending_, tag);
  content += pending_.substr(0, take);
  pending_.erase(0, take);
  return at != std::string::npos;
}

// `held` from its first [TOOL_CALLS] to the end. The JSON form is read whole (one array: every
// call well formed, or none); v11's calls one after another, up to the first that is not well
// formed (the one max_tokens cut, say). Returns the bytes read as calls; the rest is content.
size_t ToolCallReader::read_mistral(std::string_view held, std::vector<ToolCall>& calls) {
  if (format_ == ToolFormat::mistral_json) {
    const nlohmann::json j = nlohmann::json::parse(held.substr(kToolCalls.size()), nullptr, false);
    const nlohmann::json list = j.is_array() ? j : nlohmann::json::array({j});
    if (list.empty()) return 0;
    for (const nlohmann::json& c : list)
      if (!is_call(c, "arguments")) return 0;
    for (const nlohmann::json& c : list) calls.push_back(make_call(c, "arguments"));
    return held.size();
  }
  size_t read = 0;
  while (read < held.size()) {
    std::string_view one = held.substr(read);
    if (!one.starts_with(kToolCalls)) break;
    const size_t next = one.find(kToolCalls, kToolCalls.size());
    one = one.substr(0, next);
    const size_t args = one.find(kArgs);
    if (args == std::string_view::npos) break;
    std::string_view name = one.substr(kToolCalls.size(), args - kToolCalls.size());
    if (const size_t id = name.find(kCallId); id != std::string_view::npos)
      name = name.substr(0, id);
    const nlohmann::json a =
        nlohmann::json::parse(trimmed(one.substr(args + kArgs.size())), nullptr, false);
    if (name.empty() || name.find('[') != std::string_view::npos || !a.is_object()) break;
    calls.push_back(make_call({{"name", std::string(name)}, {"arguments", a}}, "arguments"));
    read += one.size();
  }
  return read;
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
      if (!text_until(kToolCallOpen, content)) return;
      pending_.erase(0, kToolCallOpen.size());
      inside_ = true;
    }
    const size_t close = pending_.find(kToolCallClose);
    if (close == std::string::npos) return;  // the block is still being written
    const std::string body = pending_.substr(0, close);
    pending_.erase(0, close + kToolCallClose.size());
    inside_ = false;
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (!is_call(j, "arguments")) {  // not a call after all: the text stays as the model wrote it
      content += std::string(kToolCallOpen) + body + std::string(kToolCallClose);
      continue;
    }
    calls.push_back(make_call(j, "arguments"));
  }
}

void ToolCallReader::add(const std::string& name, const std::string& arguments,
                         std::vector<ToolCall>& calls) {
  calls.push_back({call_id(seed_, made_++, false), name, arguments.empty() ? "{}" : arguments});
}

void ToolCallReader::finish(std::string& content, std::vector<ToolCall>& calls) {
  if (format_ == ToolFormat::llama3_json && lead_ == Lead::call) {
    std::string_view body = trimmed(pending_);
    if (body.starts_with(kPythonTag)) body.remove_prefix(kPythonTag.size());
    const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    const char* key = j.is_object() && j.contains("parameters") ? "parameters" : "arguments";
    if (is_call(j, key)) {
      calls.push_back(make_call(j, key));
      pending_.clear();
    }
  }
  if (mistral(format_) && inside_) pending_.erase(0, read_mistral(pending_, calls));
  if (inside_ && format_ == ToolFormat::hermes) content += std::string(kToolCallOpen);
  content += pending_;
  pending_.clear();
  inside_ = false;
  lead_ = Lead::undecided;
}

}  // namespace sy
