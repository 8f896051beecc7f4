#include "core/serving/openai_request.hpp"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/errors/errors.hpp"
#include "core/json/json_text.hpp"
#include "core/sampling/json_schema.hpp"

namespace sy {
namespace {

// Ordered: tools, message fields and template kwargs reach the template with their keys in the
// order the client wrote them, as transformers renders them.
using json = nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& field, const std::string& detail) {
  throw Error(Errc::bad_request, field + ": " + detail);
}

// A value as a message shows it (a string's bytes that are not UTF-8 as U+FFFD, never a throw).
std::string shown(const json& v) {
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_float: return "a number";
    default: return "an integer";
  }
}

bool boolean(const json& v, const std::string& field) {
  if (!v.is_boolean()) refuse(field, "must be true or false, is " + kind_of(v));
  return v.get<bool>();
}

double number(const json& v, const std::string& field, double lo, double hi) {
  if (!v.is_number()) refuse(field, "must be a number, is " + kind_of(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    refuse(field, "must be in [" + shown(json(lo)) + ", " + shown(json(hi)) + "], is " + shown(v));
  return x;
}

int64_t integer(const json& v, const std::string& field, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) refuse(field, "must be an integer, is " + kind_of(v));
  const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)
                        ? INT64_MAX
                        : v.get<int64_t>();
  if (x < lo || x > hi)
    refuse(field,
           "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], is " + shown(v));
  return x;
}

// Any finite number: the range is SamplingParams::validate()'s.
constexpr double kAny = 1e300;

// OpenAI's logit_bias: an object of token ids (as decimal strings) to biases.
std::vector<std::pair<int64_t, double>> logit_bias_of(const json& v) {
  if (!v.is_object()) refuse("logit_bias", "must be an object of token ids to biases");
  std::vector<std::pair<int64_t, double>> out;
  for (const auto& [id, bias] : v.items()) {
    const std::string field = "logit_bias." + id;
    size_t used = 0;
    int64_t n = -1;
    try {
      n = std::stoll(id, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != id.size() || n < 0)
      refuse(field, "is not a token id (a non-negative decimal integer)");
    out.emplace_back(n, number(bias, field, -kAny, kAny));
  }
  return out;
}

std::string text(const json& v, const std::string& field) {
  if (!v.is_string()) refuse(field, "must be a string, is " + kind_of(v));
  return v.get<std::string>();
}

// A message's content: a string, or text parts ({"type": "text", "text": ...}) joined.
std::string content_of(const json& v, const std::string& field) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) refuse(field, "must be a string or an array of text parts, is " + kind_of(v));
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string part = field + "[" + std::to_string(i) + "]";
    if (!v[i].is_object() || !v[i].contains("type") || v[i]["type"] != "text")
      refuse(part, "only text parts ({\"type\": \"text\", \"text\": ...}) are served");
    out += text(v[i].value("text", json()), part + ".text");
  }
  return out;
}

// An assistant message's tool_calls, checked: [{id, type: function, function: {name,
// arguments}}], passed to the template as sent.
void check_tool_calls(const json& v, const std::string& field) {
  if (!v.is_array()) refuse(field, "must be an array of tool calls, is " + kind_of(v));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = field + "[" + std::to_string(i) + "]";
    if (!v[i].is_object()) refuse(at, "must be an object, is " + kind_of(v[i]));
    if (v[i].contains("type") && v[i]["type"] != "function")
      refuse(at + ".type", "must be function");
    if (!v[i].contains("function") || !v[i]["function"].is_object())
      refuse(at + ".function", "must be an object with name and arguments");
    text(v[i]["function"].value("name", json()), at + ".function.name");
    text(v[i]["function"].value("arguments", json()), at + ".function.arguments");
  }
}

ChatMessages messages_of(const json& v, std::vector<nlohmann::ordered_json>& fields) {
  if (!v.is_array() || v.empty()) refuse("messages", "must be a non-empty array of messages");
  ChatMessages out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) refuse(field, "must be an object, is " + kind_of(m));
    if (!m.contains("role")) refuse(field + ".role", "is missing");
    const std::string role = text(m["role"], field + ".role");
    if (role != "system" && role != "user" && role != "assistant" && role != "developer" &&
        role != "tool")
      refuse(field + ".role",
             "must be system, developer, user, assistant or tool, is \"" + role + "\"");
    nlohmann::ordered_json extra = nlohmann::ordered_json::object();
    for (const auto& [key, value] : m.items()) {
      if (key == "role" || key == "content" || (key == "name" && value.is_string())) continue;
      if (key == "tool_calls" && role == "assistant") {
        check_tool_calls(value, field + ".tool_calls");
      } else if (key == "tool_call_id" && role == "tool") {
        text(value, field + ".tool_call_id");
      } else {
        refuse(field + "." + key,
               "is not served (message fields other than role, content, "
               "name, an assistant's tool_calls and a tool's tool_call_id "
               "are refused, not ignored)");
      }
      extra[key] = value;
    }
    if (m.contains("name") && role == "tool") extra["name"] = m["name"].get<std::string>();
    const bool calls = extra.contains("tool_calls");
    if (!m.contains("content") && !calls) refuse(field + ".content", "is missing");
    const bool no_content = !m.contains("content") || (m["content"].is_null() && calls);
    out.emplace_back(role == "developer" ? "system" : role,
                     no_content ? std::string() : content_of(m["content"], field + ".content"));
    fields.push_back(std::move(extra));
  }
  return out;
}

// `tools`: function tools, [{type: function, function: {name, description?, parameters?,
// strict?}}], passed to the template as sent.
nlohmann::ordered_json tools_of(const json& v) {
  if (!v.is_array()) refuse("tools", "must be an array of tools, is " + kind_of(v));
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!v[i].is_object() || v[i].value("type", "") != "function")
      refuse(at + ".type", "must be function (the only kind of tool served)");
    if (!v[i].contains("function") || !v[i]["function"].is_object())
      refuse(at + ".function", "must be an object");
    const json& f = v[i]["function"];
    text(f.value("name", json()), at + ".function.name");
    for (const auto& [key, value] : f.items()) {
      if (key == "name") continue;
      if (key == "description")
        text(value, at + ".function.description");
      else if (key == "parameters") {
        if (!value.is_object()) refuse(at + ".function.parameters", "must be a JSON schema object");
      } else if (key == "strict") {
        boolean(value, at + ".function.strict");
      } else {
        refuse(at + ".function." + key, "is not a field of a function tool");
      }
    }
  }
  return v;
}

// A schema's JSON pointer as a path in the request: /properties/a/items → .properties.a.items.
std::string schema_path(const std::string& base, const std::string& pointer) {
  std::string out = base, segment;
  auto flush = [&] {
    const bool index =
        !segment.empty() && segment.find_first_not_of("0123456789") == std::string::npos;
    out += index ? "[" + segment + "]" : "." + segment;
    segment.clear();
  };
  for (size_t i = 1; i <= pointer.size(); ++i) {
    if (i == pointer.size() || pointer[i] == '/') {
      flush();
    } else if (pointer[i] == '~' && i + 1 < pointer.size()) {
      segment += pointer[++i] == '1' ? '/' : '~';
    } else {
      segment += pointer[i];
    }
  }
  return out;
}

// tool_choice: "auto", "none", "required", or {"type": "function", "function": {"name": N}}.
void tool_choice_of(const json& v, CompletionRequest& r) {
  const std::string key = "tool_choice";
  if (v.is_null() || v == "auto") {
    r.tool_choice = ToolChoice::automatic;
  } else if (v == "none") {
    r.tool_choice = ToolChoice::none;
  } else if (v == "required") {
    r.tool_choice = ToolChoice::required;
  } else if (v.is_object()) {
    if (v.value("type", json()) != "function") refuse(key + ".type", "must be function");
    if (!v.contains("function") || !v["function"].is_object())
      refuse(key + ".function", "must be an object {name}");
    for (const auto& [k2, v2] : v.items())
      if (k2 != "type" && k2 != "function") refuse(key + "." + k2, "is not a field of tool_choice");
    for (const auto& [k2, v2] : v["function"].items())
      if (k2 != "name") refuse(key + ".function." + k2, "is not a field of tool_choice.function");
    r.tool_name = text(v["function"].value("name", json()), key + ".function.name");
    r.tool_choice = ToolChoice::function;
  } else {
    refuse(key,
           "must be auto, none, required or {\"type\": \"function\", \"function\": "
           "{\"name\": ...}}, is " +
               shown(v));
  }
}

// After the whole body is read: tool_choice against the tools, and the schemas a forced call
// is held to compiled now, so a keyword we do not serve is refused naming its place.
void check_tool_choice(CompletionRequest& r) {
  if (r.tool_choice == ToolChoice::none) r.tools = nlohmann::ordered_json::array();
  const bool forced =
      r.tool_choice == ToolChoice::required || r.tool_choice == ToolChoice::function;
  if (!r.parallel_tool_calls && !forced && !r.tools.empty())
    refuse("parallel_tool_calls",
           "false is served with tool_choice required or a named function (the answer is held "
           "to one call); with auto nothing holds the model to one");
  if (!forced) return;
  if (r.tools.empty()) refuse("tool_choice", "asks for a call, but the request has no tools");
  bool named = false;
  for (size_t i = 0; i < r.tools.size(); ++i) {
    const json& f = r.tools[i]["function"];
    if (r.tool_choice == ToolChoice::function && f["name"] != r.tool_name) continue;
    named = true;
    if (!f.contains("parameters")) continue;
    try {
      json_schema_grammar(f["parameters"]);
    } catch (const SchemaError& e) {
      refuse(schema_path("tools[" + std::to_string(i) + "].function.parameters", e.pointer()),
             e.message());
    }
  }
  if (!named) refuse("tool_choice.function.name", "no tool is named \"" + r.tool_name + "\"");
}

// Fields accepted only at their neutral value: anything else would be ignored, so it is refused.
void neutral(const std::string& key, const json& v) {
  bool ok = v.is_null();
  if (key == "best_of") ok = ok || (v.is_number_integer() && v.get<int64_t>() == 1);
  if (key == "echo") ok = ok || (v.is_boolean() && !v.get<bool>());
  if (key == "functions") ok = ok || (v.is_array() && v.empty());
  if (key == "function_call") ok = ok || v == "none";
  if (key == "suffix") ok = ok || (v.is_string() && v.get<std::string>().empty());
  if (!ok) refuse(key, "is not served at " + shown(v) + " (only its neutral value is accepted)");
}

// response_format: text; json_object; json_schema {name, schema, strict, description}. A schema
// compiles to the grammar the answer is held to, or the request is refused naming the place.
void response_format(const json& v, CompletionRequest& r) {
  const std::string key = "response_format";
  if (!v.is_object()) refuse(key, "must be an object, is " + kind_of(v));
  const std::string type = text(v.contains("type") ? v["type"] : json(), key + ".type");
  if (type != "text" && type != "json_object" && type != "json_schema")
    refuse(key + ".type", "must be text, json_object or json_schema, is \"" + type + "\"");
  for (const auto& [k2, v2] : v.items())
    if (k2 != "type" && !(type == "json_schema" && k2 == "json_schema"))
      refuse(key + "." + k2, "is not a field of response_format " + type);
  if (type == "text") return;
  if (type == "json_object") {
    r.grammar = json_object_grammar();
    r.constraint = "json_object";
    return;
  }
  const std::string at = key + ".json_schema";
  if (!v.contains("json_schema") || !v["json_schema"].is_object())
    refuse(at, "must be an object {name, schema, strict, description}");
  const json& js = v["json_schema"];
  json schema = json::object();
  for (const auto& [k2, v2] : js.items()) {
    if (k2 == "name" || k2 == "description")
      text(v2, at + "." + k2);
    else if (k2 == "strict")
      boolean(v2, at + "." + k2);  // the answer is held to the schema either way
    else if (k2 == "schema")
      schema = v2;
    else
      refuse(at + "." + k2, "is not a field of json_schema (name, schema, strict, description)");
  }
  if (!js.contains("name")) refuse(at + ".name", "is missing");
  try {
    r.grammar = json_schema_grammar(schema);
  } catch (const SchemaError& e) {
    refuse(schema_path(at + ".schema", e.pointer()), e.message());
  }
  r.constraint = "json_schema";
}

json object_body(const std::string& body) {
  // JSON text is UTF-8 (RFC 8259): a byte that is not is refused at the field it is in, before
  // the parser, whose message would name only a byte offset.
  if (const size_t bad = first_invalid_utf8(body); bad != std::string::npos) {
    const std::string at = json_path_at(body, bad);
    refuse(at.empty() ? "body" : at, "is not valid UTF-8 (byte " + std::to_string(bad) +
                                         " of the body, line:column " + line_column(body, bad) +
                                         ")");
  }
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1e999
    refuse("body", std::string("is not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) refuse("body", "must be a JSON object, is " + kind_of(j));
  return j;
}

}  // namespace

TokenizeRequest parse_tokenize_request(const std::string& body) {
  const json j = object_body(body);
  if (!j.contains("content")) refuse("content", "is missing");
  TokenizeRequest r;
  for (const auto& [key, v] : j.items()) {
    if (key == "content")
      r.content = text(v, key);
    else if (key == "add_special")
      r.add_special = boolean(v, key);
    else if (key == "with_pieces")
      r.with_pieces = boolean(v, key);
    else if (key == "model")
      text(v, key);  // accepted: the server has one model
    else
      refuse(key, "is not a field of /tokenize (content, add_special, with_pieces)");
  }
  return r;
}

DetokenizeRequest parse_detokenize_request(const std::string& body) {
  const json j = object_body(body);
  if (!j.contains("tokens")) refuse("tokens", "is missing");
  DetokenizeRequest r;
  for (const auto& [key, v] : j.items()) {
    if (key == "tokens") {
      if (!v.is_array()) refuse(key, "must be an array of token ids, is " + kind_of(v));
      for (size_t i = 0; i < v.size(); ++i)
        r.tokens.push_back(integer(v[i], "tokens[" + std::to_string(i) + "]", 0, INT64_MAX));
    } else if (key == "model") {
      text(v, key);
    } else {
      refuse(key, "is not a field of /detokenize (tokens)");
    }
  }
  return r;
}

CompletionRequest parse_completion_request(const std::string& body, RequestKind kind) {
  const json j = object_body(body);
  CompletionRequest r;
  r.kind = kind;
  const char* required = kind == RequestKind::chat ? "messages" : "prompt";
  bool chat_logprobs = false;
  std::optional<int64_t> top_logprobs;
  std::shared_ptr<const Grammar> gbnf;
  if (!j.contains(required)) refuse(required, "is missing");
  for (const auto& [key, v] : j.items()) {
    if (key == "messages" && kind == RequestKind::chat) {
      r.messages = messages_of(v, r.message_fields);
    } else if (key == "tools" && kind == RequestKind::chat) {
      if (!v.is_null()) r.tools = tools_of(v);
    } else if (key == "tool_choice" && kind == RequestKind::chat) {
      tool_choice_of(v, r);
    } else if (key == "parallel_tool_calls" && kind == RequestKind::chat) {
      if (!v.is_null()) r.parallel_tool_calls = boolean(v, key);
    } else if (key == "prompt" && kind == RequestKind::completion) {
      if (v.is_string()) {
        r.prompt = v.get<std::string>();
      } else if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
        for (size_t i = 0; i < v.size(); ++i)
          r.prompt_ids.push_back(integer(v[i], "prompt[" + std::to_string(i) + "]", 0, INT64_MAX));
      } else {
        refuse("prompt", "must be a string or an array of token ids (one prompt per request)");
      }
    } else if (key == "model") {
      r.model = text(v, key);
    } else if (key == "max_tokens" || key == "max_completion_tokens") {
      if (!v.is_null()) r.max_tokens = integer(v, key, 1, int64_t(1) << 30);
    } else if (key == "temperature") {
      r.sampling.temperature = number(v, key, 0, 2);  // the OpenAI API's own range
    } else if (key == "top_p") {
      r.sampling.top_p = number(v, key, -kAny, kAny);
    } else if (key == "top_k") {
      r.sampling.top_k = integer(v, key, 0, int64_t(1) << 30);
    } else if (key == "min_p") {
      r.sampling.min_p = number(v, key, -kAny, kAny);
    } else if (key == "presence_penalty") {
      if (!v.is_null()) r.sampling.presence_penalty = number(v, key, -kAny, kAny);
    } else if (key == "frequency_penalty") {
      if (!v.is_null()) r.sampling.frequency_penalty = number(v, key, -kAny, kAny);
    } else if (key == "repetition_penalty" || key == "repeat_penalty") {
      r.sampling.repetition_penalty = number(v, key, -kAny, kAny);
    } else if (key == "logit_bias") {
      if (!v.is_null()) r.sampling.logit_bias = logit_bias_of(v);
    } else if (key == "seed") {
      if (!v.is_null()) r.seed = uint64_t(integer(v, key, INT64_MIN, INT64_MAX));
    } else if (key == "stop") {
      if (v.is_string()) {
        r.stop.push_back(v.get<std::string>());
      } else if (v.is_array() && v.size() <= 4) {
        for (size_t i = 0; i < v.size(); ++i)
          r.stop.push_back(text(v[i], "stop[" + std::to_string(i) + "]"));
      } else if (!v.is_null()) {
        refuse(key, "must be a string or an array of up to 4 strings");
      }
    } else if (key == "stream") {
      r.stream = boolean(v, key);
    } else if (key == "stream_options") {
      if (v.is_null()) continue;
      if (!v.is_object()) refuse(key, "must be an object, is " + kind_of(v));
      for (const auto& [k2, v2] : v.items()) {
        if (k2 != "include_usage") refuse(key + "." + k2, "is not served");
        r.include_usage = boolean(v2, key + "." + k2);
      }
    } else if (key == "ignore_eos") {
      r.ignore_eos = boolean(v, key);
    } else if (key == "return_token_ids") {
      r.return_token_ids = boolean(v, key);
    } else if (key == "chat_template_kwargs" && kind == RequestKind::chat) {
      if (v.is_null()) continue;
      if (!v.is_object()) refuse(key, "must be an object, is " + kind_of(v));
      for (const auto& [name, value] : v.items()) {
        if (name == "messages" || name == "add_generation_prompt")
          refuse(key + "." + name, "is the request's own, not a template argument");
        r.template_kwargs[name] = value;
      }
    } else if (key == "response_format") {
      if (!v.is_null()) response_format(v, r);
    } else if (key == "grammar") {  // llama-server's extension: GBNF text
      if (v.is_null()) continue;
      try {
        gbnf = Grammar::from_gbnf(text(v, key));
      } catch (const GrammarError& e) {
        refuse(key, e.what());
      }
    } else if (key == "logprobs" && kind == RequestKind::chat) {
      if (!v.is_null()) chat_logprobs = boolean(v, key);
    } else if (key == "top_logprobs" && kind == RequestKind::chat) {
      if (!v.is_null()) top_logprobs = integer(v, key, 0, 20);
    } else if (key == "logprobs") {  // completion: the number of alternatives
      if (!v.is_null()) r.logprobs = integer(v, key, 0, 20);
    } else if (key == "user") {
      text(v, key);  // an end user's id: accepted, it changes nothing
    } else if (key == "n") {
      if (!v.is_null()) r.n = integer(v, key, 1, 16);
    } else if (key == "best_of" || key == "echo" || key == "functions" || key == "function_call" ||
               key == "suffix") {
      neutral(key, v);
    } else {
      refuse(key, "is not a field this server knows (it is refused, not ignored)");
    }
  }
  if (r.stream == false && r.include_usage) refuse("stream_options", "is only for stream: true");
  if (top_logprobs && !chat_logprobs) refuse("top_logprobs", "needs logprobs: true");
  if (chat_logprobs) r.logprobs = top_logprobs.value_or(0);
  check_tool_choice(r);
  if (gbnf && r.grammar)
    refuse("grammar", "and response_format " + r.constraint + " cannot both constrain the answer");
  if (gbnf) {
    r.grammar = std::move(gbnf);
    r.constraint = "grammar";
  }
  if (auto bad = r.sampling.validate()) refuse(bad->field, bad->message);
  return r;
}

SamplingOptions sampling_options(const CompletionRequest& r, int64_t max_tokens, int64_t vocab,
                                 uint64_t random_seed) {
  if (auto bad = r.sampling.validate(vocab)) refuse(bad->field, bad->message);
  SamplingOptions o;
  static_cast<SamplingParams&>(o) = r.sampling;
  o.seed = r.seed.value_or(random_seed);
  o.max_tokens = max_tokens;
  o.ignore_eos = r.ignore_eos;
  o.stop = r.stop;
  o.logprobs = r.logprobs;
  o.grammar = r.grammar;
  return o;
}

}  // namespace sy
