// Reading a model folder's generation settings, and the stop rule (generation.hpp).
#include "core/generation/generation.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/errors/error.hpp"
#include "core/json/json_text.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The JSON object in `p`, or nullopt when there is no such file. `code` is the error for a
// file that is not a JSON object.
std::optional<json> read_object(const fs::path& p, Errc code) {
  std::optional<std::string> text = read_text(p);
  if (!text) return std::nullopt;
  nlohmann::json plain = parse_json_text(*text, p.string());
  if (!plain.is_object())
    throw Error(code, p.filename().string() + " must hold a JSON object", p.string());
  return json::parse(*text);  // again, keeping the key order templates may depend on
}

// eos_token_id: an int, a list of ints, or null.
void add_eos(const json& obj, const std::string& field, const fs::path& file,
             std::vector<int64_t>& out) {
  auto it = obj.find("eos_token_id");
  if (it == obj.end() || it->is_null()) return;
  auto bad = [&] {
    throw Error(Errc::bad_config,
                file.filename().string() + ": " + field +
                    " must be a token id or a list of token ids, got " + it->dump(),
                file.string() + ":" + field);
  };
  if (it->is_number_integer()) {
    if (it->get<int64_t>() < 0) bad();
    out.push_back(it->get<int64_t>());
    return;
  }
  if (!it->is_array()) bad();
  for (const json& id : *it) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0) bad();
    out.push_back(id.get<int64_t>());
  }
}

// A special token as tokenizer_config.json writes it: "<s>", or {"content": "<s>", ...}.
std::optional<std::string> token_text(const json& cfg, const char* key, const fs::path& file) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  throw Error(Errc::bad_tokenizer,
              "tokenizer " + file.string() + " is invalid: field '" + key +
                  "' must be a string or an object with a \"content\" string",
              file.string() + ":" + key);
}

std::optional<bool> flag(const json& cfg, const char* key, const fs::path& file) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean())
    throw Error(Errc::bad_tokenizer,
                "tokenizer " + file.string() + " is invalid: field '" + key +
                    "' must be true or false, got " + it->dump(),
                file.string() + ":" + key);
  return it->get<bool>();
}

// The chat template's source and where it came from.
std::optional<std::pair<std::string, std::string>> find_chat_template(
    const fs::path& dir, const std::optional<json>& tokenizer_config) {
  if (auto text = read_text(dir / "chat_template.jinja"))
    return std::pair{*text, (dir / "chat_template.jinja").string()};
  const fs::path jfile = dir / "chat_template.json";
  if (auto obj = read_object(jfile, Errc::chat_template)) {
    auto it = obj->find("chat_template");
    if (it == obj->end() || !it->is_string())
      throw Error(Errc::chat_template, "chat_template.json has no \"chat_template\" string",
                  jfile.string());
    return std::pair{it->get<std::string>(), jfile.string() + ":chat_template"};
  }
  if (!tokenizer_config) return std::nullopt;
  const std::string origin = (dir / "tokenizer_config.json").string() + ":chat_template";
  auto it = tokenizer_config->find("chat_template");
  if (it == tokenizer_config->end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return std::pair{it->get<std::string>(), origin};
  if (it->is_array()) {  // named templates: the "default" one is the chat template
    for (const json& entry : *it)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return std::pair{entry["template"].get<std::string>(), origin + "[default]"};
    return std::nullopt;
  }
  throw Error(Errc::chat_template, "chat_template must be a string or a list of named templates",
              origin);
}

void read_special_tokens(const fs::path& dir, const std::optional<json>& cfg, const Tokenizer& tok,
                         GenerationSettings& g) {
  const fs::path file = dir / "tokenizer_config.json";
  if (cfg)
    for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                            "cls_token", "mask_token"})
      if (auto text = token_text(*cfg, key, file)) g.special_tokens[key] = *text;
  std::optional<bool> add_bos = cfg ? flag(*cfg, "add_bos_token", file) : std::nullopt;
  std::optional<bool> add_eos = cfg ? flag(*cfg, "add_eos_token", file) : std::nullopt;
  if (!add_bos && !add_eos) {
    g.prompt_prefix = tok.special_prefix();
    g.prompt_suffix = tok.special_suffix();
    g.special_tokens_rule = "the post_processor of " + tok.file();
    return;
  }
  g.special_tokens_rule = file.string() + " (add_bos_token / add_eos_token)";
  auto id_of = [&](const char* key, const char* flag_name) {
    if (!g.special_tokens.contains(key))
      throw Error(Errc::bad_tokenizer,
                  std::string("tokenizer ") + file.string() + " is invalid: " + flag_name +
                      " is true but " + key + " is not set",
                  file.string() + ":" + flag_name);
    std::string text = g.special_tokens[key];
    std::optional<int64_t> id = tok.token_id(text);
    if (!id)
      throw Error(Errc::bad_tokenizer,
                  "tokenizer " + file.string() + " is invalid: " + key + " \"" + text +
                      "\" is not a token of " + tok.file(),
                  file.string() + ":" + key);
    return *id;
  };
  if (add_bos.value_or(false)) g.prompt_prefix = {id_of("bos_token", "add_bos_token")};
  if (add_eos.value_or(false)) g.prompt_suffix = {id_of("eos_token", "add_eos_token")};
}

}  // namespace

GenerationSettings read_generation_settings(const fs::path& dir, const Tokenizer& tok) {
  GenerationSettings g;
  if (auto config = read_object(dir / "config.json", Errc::bad_config)) {
    size_t before = g.eos_ids.size();
    add_eos(*config, "eos_token_id", dir / "config.json", g.eos_ids);
    if (auto text = config->find("text_config"); text != config->end() && text->is_object())
      add_eos(*text, "text_config.eos_token_id", dir / "config.json", g.eos_ids);
    if (g.eos_ids.size() > before) g.eos_sources.push_back("config.json");
  }
  if (auto gen = read_object(dir / "generation_config.json", Errc::bad_config)) {
    size_t before = g.eos_ids.size();
    add_eos(*gen, "eos_token_id", dir / "generation_config.json", g.eos_ids);
    if (g.eos_ids.size() > before) g.eos_sources.push_back("generation_config.json");
  }
  std::sort(g.eos_ids.begin(), g.eos_ids.end());
  g.eos_ids.erase(std::unique(g.eos_ids.begin(), g.eos_ids.end()), g.eos_ids.end());

  std::optional<json> tcfg = read_object(dir / "tokenizer_config.json", Errc::bad_tokenizer);
  read_special_tokens(dir, tcfg, tok, g);
  if (auto found = find_chat_template(dir, tcfg)) {
    g.chat_template = found->first;
    g.chat_template_origin = found->second;
  }
  return g;
}

std::vector<int64_t> plain_prompt_ids(const Tokenizer& tok, const GenerationSettings& g,
                                      std::string_view text) {
  std::vector<int64_t> ids = g.prompt_prefix;
  std::vector<int64_t> body = tok.encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  ids.insert(ids.end(), g.prompt_suffix.begin(), g.prompt_suffix.end());
  return ids;
}

std::string render_chat_prompt(const GenerationSettings& g, const std::string& user,
                               const std::optional<std::string>& system, std::time_t now) {
  ChatMessages messages;
  if (system) messages.emplace_back("system", *system);
  messages.emplace_back("user", user);
  return render_chat(g, messages, true, now);
}

std::string render_chat(const GenerationSettings& g, const ChatMessages& messages,
                        bool add_generation_prompt, std::time_t now,
                        const nlohmann::ordered_json& template_kwargs,
                        const std::vector<nlohmann::ordered_json>* message_fields) {
  if (!g.chat_template)
    throw Error(Errc::chat_template,
                "the model has no chat template (no chat_template.jinja, chat_template.json or "
                "chat_template in tokenizer_config.json): use --prompt with the text it expects",
                "");
  json list = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    json m{{"role", messages[i].first}, {"content", messages[i].second}};
    if (message_fields && i < message_fields->size())
      for (const auto& [key, value] : (*message_fields)[i].items()) m[key] = value;
    list.push_back(std::move(m));
  }
  return ChatTemplate::parse(*g.chat_template, g.chat_template_origin)
      .render(chat_context(list, add_generation_prompt, g.special_tokens, template_kwargs), now);
}

std::vector<int64_t> chat_prompt_ids(const Tokenizer& tok, const GenerationSettings& g,
                                     const ChatMessages& messages, bool add_generation_prompt,
                                     std::time_t now, const nlohmann::ordered_json& template_kwargs,
                                     std::string* rendered_out,
                                     const std::vector<nlohmann::ordered_json>* message_fields) {
  const std::string rendered =
      render_chat(g, messages, add_generation_prompt, now, template_kwargs, message_fields);
  if (rendered_out) *rendered_out = rendered;
  std::vector<TextSpan> contents;
  size_t from = 0;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& content = messages[i].second;
    if (content.empty()) continue;
    const size_t first = content.find_first_not_of(" \t\n\r");
    const size_t last = content.find_last_not_of(" \t\n\r");
    const std::string trimmed =
        first == std::string::npos ? std::string() : content.substr(first, last - first + 1);
    size_t at = rendered.find(content, from), size = content.size();
    if (at == std::string::npos && !trimmed.empty())
      at = rendered.find(trimmed, from), size = trimmed.size();
    if (at == std::string::npos) {
      if (trimmed.empty()) continue;  // whitespace only: nothing a control token could hide in
      throw Error(Errc::chat_template,
                  "the chat template (" + g.chat_template_origin + ") does not keep message " +
                      std::to_string(i) + "'s content as written, so its control tokens could " +
                      "not be kept out of it; Switchyard refuses to tokenize it",
                  "");
    }
    contents.push_back({at, size});
    from = at + size;
  }
  return tok.encode(rendered, contents);
}

// ---- the stop rule ---------------------------------------------------------------------------

StopRule::StopRule(std::vector<int64_t> eos_ids, std::vector<std::string> stop_texts)
    : eos_(std::move(eos_ids)), stops_(std::move(stop_texts)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

size_t incomplete_utf8_tail(const std::string& s) {
  for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
    unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

size_t tag_prefix_tail(const std::string& s, std::string_view tag) {
  if (tag.empty()) return 0;
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (s.compare(s.size() - n, n, tag, 0, n) == 0) return n;
  return 0;
}

StopRule::Reason StopRule::feed(int64_t id, const std::string& bytes, std::string& emit) {
  if (std::find(eos_.begin(), eos_.end(), id) != eos_.end()) return Reason::eos;
  pending_ += bytes;
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, pending_.find(stop));
  if (first != std::string::npos) {
    emit += pending_.substr(0, first);
    pending_.clear();
    return Reason::stop_text;
  }
  // Hold back the longest tail that may still grow into a stop text.
  size_t hold = incomplete_utf8_tail(pending_);
  for (const std::string& stop : stops_) hold = std::max(hold, tag_prefix_tail(pending_, stop));
  emit += pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return Reason::none;
}

std::string StopRule::flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace sy
