// HarmonyReader: gpt-oss's generated tokens split into harmony messages (harmony.hpp).
#include "core/generation/harmony.hpp"

namespace sy {
namespace {

constexpr const char* kStart = "<|start|>";
constexpr const char* kEnd = "<|end|>";
constexpr const char* kMessage = "<|message|>";
constexpr const char* kChannel = "<|channel|>";
constexpr const char* kReturn = "<|return|>";
constexpr const char* kCall = "<|call|>";
constexpr const char* kConstrain = "<|constrain|>";

std::string trimmed_header(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\n") - a + 1);
}

// "NAME to=RECIPIENT" (either part may be absent): the name, and the recipient if any.
std::pair<std::string, std::string> name_and_recipient(const std::string& header) {
  const std::string h = trimmed_header(header);
  const size_t to = h.find("to=");
  if (to == std::string::npos) return {h, ""};
  std::string recipient = h.substr(to + 3);
  recipient = recipient.substr(0, recipient.find_first_of(" \t\n"));
  return {trimmed_header(h.substr(0, to)), recipient};
}

}  // namespace

std::optional<HarmonyMarkers> harmony_markers(const Tokenizer& tok, const GenerationSettings& g) {
  if (!g.chat_template || g.chat_template->find(kChannel) == std::string::npos) return std::nullopt;
  auto start = tok.token_id(kStart), end = tok.token_id(kEnd), message = tok.token_id(kMessage),
       channel = tok.token_id(kChannel), ret = tok.token_id(kReturn), call = tok.token_id(kCall);
  if (!start || !end || !message || !channel || !ret || !call) return std::nullopt;
  return HarmonyMarkers{*start, *end, *message, *channel, *ret, *call, tok.token_id(kConstrain)};
}

HarmonyReader::HarmonyReader(HarmonyMarkers markers, TextCallback on_text)
    : m_(markers), on_text_(std::move(on_text)) {
  messages_.emplace_back();  // the prompt's "<|start|>assistant" opened it
}

void HarmonyReader::feed(int64_t id, const std::string& emitted) {
  const std::pair<int64_t, const char*> kMarkers[] = {{m_.start, kStart},
                                                      {m_.end, kEnd},
                                                      {m_.message, kMessage},
                                                      {m_.channel, kChannel},
                                                      {m_.ret, kReturn},
                                                      {m_.call, kCall},
                                                      {m_.constrain.value_or(-2), kConstrain}};
  for (const auto& [marker_id, marker_text] : kMarkers) {
    if (id != marker_id) continue;
    // The stop rule emits held-back text before the token's own (and no text for an EOS id).
    const std::string t = marker_text;
    const bool has = emitted.size() >= t.size() && emitted.ends_with(t);
    text(has ? emitted.substr(0, emitted.size() - t.size()) : emitted);
    marker(id);
    return;
  }
  text(emitted);
}

void HarmonyReader::text(const std::string& s) {
  if (s.empty()) return;
  if (part_ == Part::between) {  // text outside any message: a message without a header
    messages_.emplace_back();
    part_ = Part::content;
  }
  if (part_ != Part::content) {
    header_ += s;
    return;
  }
  HarmonyMessage& msg = messages_.back();
  msg.content += s;
  if (on_text_) on_text_(msg.channel, s);
}

void HarmonyReader::finish() {
  if (part_ == Part::content || part_ == Part::between || header_.empty()) return;
  HarmonyMessage& msg = messages_.back();
  if (part_ == Part::role && msg.channel.empty() && messages_.size() == 1) {
    msg.content += header_;
    if (on_text_) on_text_(msg.channel, header_);
  }
  header_.clear();
}

void HarmonyReader::header_done() {
  HarmonyMessage& msg = messages_.back();
  auto [name, recipient] = name_and_recipient(header_);
  if (part_ == Part::role && !name.empty()) msg.role = name;
  if (part_ == Part::channel) msg.channel = name;
  if (part_ == Part::constrain) msg.content_type = name;
  if (!recipient.empty()) msg.recipient = recipient;
  header_.clear();
}

void HarmonyReader::marker(int64_t id) {
  if (id == m_.start) {
    if (part_ != Part::between) header_done();
    messages_.emplace_back();
    part_ = Part::role;
    header_.clear();
    return;
  }
  if (id == m_.end || id == m_.ret || id == m_.call) {
    if (part_ != Part::content && part_ != Part::between) header_done();
    if (part_ != Part::between) messages_.back().complete = true;
    part_ = Part::between;
    return;
  }
  if (part_ == Part::between) {  // a header part without its <|start|>: a new message
    messages_.emplace_back();
    part_ = Part::role;
  }
  if (part_ != Part::content) header_done();
  if (id == m_.channel) part_ = Part::channel;
  if (m_.constrain && id == *m_.constrain) part_ = Part::constrain;
  if (id == m_.message) part_ = Part::content;
}

std::string HarmonyReader::answer() const {
  std::string out, unstructured;
  bool any_final = false;
  for (const auto& msg : messages_) {
    if (msg.channel == "final") {
      out += msg.content;
      any_final = true;
    } else if (msg.channel.empty()) {
      unstructured += msg.content;
    }
  }
  // A model that wrote no channel at all answered in plain text.
  return any_final ? out : unstructured;
}

std::string HarmonyReader::reasoning() const {
  std::string out;
  for (const auto& msg : messages_)
    if (msg.channel == "analysis") out += msg.content;
  return out;
}

}  // namespace sy
