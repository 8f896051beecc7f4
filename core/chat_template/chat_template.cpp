// The public face of chat_template/ (chat_template.hpp).
#include "core/chat_template/chat_template.hpp"

#include "core/chat_template/template_syntax.hpp"

namespace sy {

ChatTemplate ChatTemplate::parse(std::string_view source, std::string origin) {
  return ChatTemplate(chat::parse_template(source, std::move(origin)));
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context, std::time_t now) const {
  return chat::render_template(*program_, context, now);
}

const std::string& ChatTemplate::origin() const {
  return program_->origin;
}

nlohmann::ordered_json chat_context(const nlohmann::ordered_json& messages,
                                    bool add_generation_prompt,
                                    const nlohmann::ordered_json& special_tokens,
                                    const nlohmann::ordered_json& extra) {
  using json = nlohmann::ordered_json;
  json normalized = json::array();
  for (const json& m : messages) {
    if (!m.is_object()) {
      normalized.push_back(m);
      continue;
    }
    json kept = json::object();
    for (const auto& [k, v] : m.items())
      if (!v.is_null()) kept[k] = v;
    normalized.push_back(std::move(kept));
  }
  json c = json::object();
  c["messages"] = std::move(normalized);
  c["tools"] = nullptr;
  c["documents"] = nullptr;
  c["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [k, v] : special_tokens.items())
    if (!v.is_null()) c[k] = v;
  for (const auto& [k, v] : extra.items()) c[k] = v;
  return c;
}

}  // namespace sy
