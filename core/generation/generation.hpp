// generation/ — what a model folder says about generating with it, beyond the graph and the
// weights, read as transformers reads it:
//   - when to stop: every `eos_token_id` of config.json (top level and text_config) and of
//     generation_config.json, each an int or a list;
//   - the special tokens of a plain prompt: tokenizer_config.json's add_bos_token /
//     add_eos_token when it sets them, else what tokenizer.json's post_processor adds;
//   - the chat template (chat_template.jinja, else chat_template.json, else
//     tokenizer_config.json's chat_template, a string or the entry named "default" of a list)
//     and the special tokens' texts it is rendered with.
// And the stop rule of a generation loop: EOS ids and stop texts, holding back any text that
// may still become a stop text or an incomplete UTF-8 character, so nothing partial is printed;
// and (harmony.hpp) gpt-oss's harmony output split into its channels, the answer from `final`.
//
// Errors: a config.json / generation_config.json field of the wrong type is SY207 naming the
// file and field; a malformed tokenizer_config.json is SY303; --chat without a template, or a
// template that cannot render, SY211. Depends on tokenizer/, chat_template/, json/, errors/.
#pragma once

#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/chat_template/chat_template.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace sy {

struct GenerationSettings {
  std::vector<int64_t> eos_ids;          // sorted, unique
  std::vector<std::string> eos_sources;  // "config.json", "generation_config.json"
  // Ids around a plain --prompt, and where that rule came from (for --verbose and errors).
  std::vector<int64_t> prompt_prefix, prompt_suffix;
  std::string special_tokens_rule;
  // The chat template's source and where it came from; parsed by render_chat_prompt(), so a
  // template outside the supported subset fails --chat only, never a plain --prompt.
  std::optional<std::string> chat_template;
  std::string chat_template_origin;
  // bos_token, eos_token, unk_token, pad_token, sep_token, cls_token, mask_token: the ones set.
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();
};

// Reads config.json, generation_config.json, tokenizer_config.json and the chat template
// files of `dir` (each optional but config.json); `tok` resolves token texts to ids.
GenerationSettings read_generation_settings(const std::filesystem::path& dir, const Tokenizer& tok);

// A plain prompt's ids: the settings' prefix, the encoded text, the suffix.
std::vector<int64_t> plain_prompt_ids(const Tokenizer& tok, const GenerationSettings& g,
                                      std::string_view text);

// The model's chat template rendered for one user turn (after `system`, when given) with the
// generation prompt, as apply_chat_template renders it. Encode the result with tok.encode():
// the template writes its own special tokens. Throws Error SY211 when the model has no
// template or it cannot render.
std::string render_chat_prompt(const GenerationSettings& g, const std::string& user,
                               const std::optional<std::string>& system, std::time_t now);
// The same for a whole conversation: (role, content) messages in order ("system", "user",
// "assistant"), then the generation prompt when `add_generation_prompt`.
using ChatMessages = std::vector<std::pair<std::string, std::string>>;

// The token ids of a chat: `messages` rendered by the model's template (render_chat), encoded
// so that only the template's own markup becomes control tokens. Each message's content is
// found in the rendering (verbatim, else trimmed, in order) and no special token is matched
// inside it: a user's "<|im_start|>system" stays text, it cannot forge a role. (transformers,
// llama-server and vLLM match special tokens in user text by default; Switchyard does not.)
// Throws Error SY211 when the template has none, cannot render, or leaves a content not
// findable in its output (its control tokens could not be kept out of it).
// `template_kwargs`: variables the template also gets (a request's chat_template_kwargs, such
// as enable_thinking, or `tools`); `rendered`, when set, receives the rendered text;
// `message_fields`, when set, one object per message of the fields it has beyond role and
// content (an assistant's tool_calls, a tool result's tool_call_id), given to the template.
std::vector<int64_t> chat_prompt_ids(
    const Tokenizer& tok, const GenerationSettings& g, const ChatMessages& messages,
    bool add_generation_prompt, std::time_t now,
    const nlohmann::ordered_json& template_kwargs = nlohmann::ordered_json::object(),
    std::string* rendered = nullptr,
    const std::vector<nlohmann::ordered_json>* message_fields = nullptr);

// The length of the longest tail of `s` that is a proper prefix of `tag`: what a streaming
// reader holds back while it may still become the tag (a stop text, </think>, <tool_call>).
size_t tag_prefix_tail(const std::string& s, std::string_view tag);

// Bytes at the end of `s` that begin a UTF-8 character not yet complete (a streaming
// detokenizer holds them back until the next token completes the character).
size_t incomplete_utf8_tail(const std::string& s);
std::string render_chat(
    const GenerationSettings& g, const ChatMessages& messages, bool add_generation_prompt,
    std::time_t now,
    const nlohmann::ordered_json& template_kwargs = nlohmann::ordered_json::object(),
    const std::vector<nlohmann::ordered_json>* message_fields = nullptr);

class StopRule {
 public:
  enum class Reason { none, eos, stop_text };

  StopRule(std::vector<int64_t> eos_ids, std::vector<std::string> stop_texts);

  // One generated token and its bytes (Tokenizer::decode_token). Appends to `emit` the text
  // that can be printed now, and says whether generation stops: at an EOS id (whose text is
  // not printed), or at a stop text (printed up to it, not included).
  Reason feed(int64_t id, const std::string& bytes, std::string& emit);
  // What is still held back, at the end of generation.
  std::string flush();
  // The ids that end a stream (none when the request ignores EOS).
  const std::vector<int64_t>& eos_ids() const { return eos_; }

 private:
  std::vector<int64_t> eos_;
  std::vector<std::string> stops_;
  std::string pending_;
};

}  // namespace sy
