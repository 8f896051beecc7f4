#include "core/generation/reasoning.hpp"

#include "core/generation/harmony.hpp"

namespace sy {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

class ThinkSplit final : public ReasoningSplit {
 public:
  explicit ThinkSplit(bool inside) : state_(inside ? State::inside : State::leading) {}
  void feed(int64_t, const std::string& text, Parts& out) override {
    pending_ += text;
    run(out, false);
  }
  void finish(Parts& out) override { run(out, true); }

 private:
  // leading: before any text but blanks (an opening tag may come); inside: reasoning;
  // closed: after </think>, dropping its blank lines; content: the rest.
  enum class State { leading, inside, closed, content };

  void run(Parts& out, bool end) {
    for (bool again = true; again;) {
      again = false;
      switch (state_) {
        case State::leading: {
          size_t at = 0;
          while (at < pending_.size() && is_space(pending_[at])) ++at;
          const std::string_view rest = std::string_view(pending_).substr(at);
          if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
            pending_.erase(0, at + kThinkOpen.size());
            state_ = State::inside, again = true;
          } else if (end || (!rest.empty() && kThinkOpen.substr(0, rest.size()) != rest)) {
            state_ = State::content, again = true;
          }
          break;
        }
        case State::inside: {
          const size_t close = pending_.find(kThinkClose);
          if (close != std::string::npos) {
            out.reasoning += pending_.substr(0, close);
            pending_.erase(0, close + kThinkClose.size());
            state_ = State::closed, again = true;
          } else {
            const size_t keep = end ? 0 : tag_prefix_tail(pending_, kThinkClose);
            out.reasoning += pending_.substr(0, pending_.size() - keep);
            pending_.erase(0, pending_.size() - keep);
          }
          break;
        }
        case State::closed: {
          size_t at = 0;
          while (at < pending_.size() && is_space(pending_[at])) ++at;
          pending_.erase(0, at);
          if (!pending_.empty()) state_ = State::content, again = true;
          break;
        }
        case State::content:
          out.content += pending_;
          pending_.clear();
          break;
      }
    }
  }

  State state_;
  std::string pending_;
};

class HarmonySplit final : public ReasoningSplit {
 public:
  explicit HarmonySplit(HarmonyMarkers m)
      : reader_(m, [this](const std::string& channel, const std::string& text) {
          if (to_function(reader_.messages().back())) return;  // a call: taken whole, below
          (channel == "analysis" ? out_->reasoning : out_->content) += text;
        }) {}
  void feed(int64_t id, const std::string& text, Parts& out) override {
    out_ = &out;
    reader_.feed(id, text);
    take_calls(false);
  }
  void finish(Parts& out) override {
    out_ = &out;
    reader_.finish();
    take_calls(true);
  }

 private:
  static bool to_function(const HarmonyMessage& m) { return m.recipient.starts_with("functions."); }
  // Messages to a function, each once it is complete. At the end, one never completed (cut by
  // max_tokens) is content: its text is shown, not dropped.
  void take_calls(bool last) {
    const auto& messages = reader_.messages();
    for (; next_ < messages.size(); ++next_) {
      const HarmonyMessage& m = messages[next_];
      if (!m.complete && !last) return;
      if (!to_function(m)) continue;
      if (m.complete)
        out_->calls.emplace_back(m.recipient.substr(std::string("functions.").size()), m.content);
      else
        out_->content += m.content;
    }
  }
  HarmonyReader reader_;
  Parts* out_ = nullptr;
  size_t next_ = 0;  // messages before it are taken
};

}  // namespace

std::unique_ptr<ReasoningSplit> think_split(bool inside) {
  return std::make_unique<ThinkSplit>(inside);
}

ThinkLead think_lead_for(const GenerationSettings& g, const std::string& rendered_prompt) {
  if (!g.chat_template || g.chat_template->find(kThinkClose) == std::string::npos)
    return ThinkLead::none;
  if (g.chat_template->find("<|channel|>") != std::string::npos) return ThinkLead::none;
  const size_t open = rendered_prompt.rfind(kThinkOpen), close = rendered_prompt.rfind(kThinkClose);
  if (open != std::string::npos && (close == std::string::npos || close < open))
    return ThinkLead::inside;
  // A block closed at the very end of the prompt (Qwen3's enable_thinking false): no thought.
  if (close != std::string::npos &&
      rendered_prompt.find_first_not_of(" \t\r\n", close + kThinkClose.size()) == std::string::npos)
    return ThinkLead::none;
  return ThinkLead::optional;
}

std::unique_ptr<ReasoningSplit> reasoning_split_for(const Tokenizer& tok,
                                                    const GenerationSettings& g,
                                                    const std::string& rendered_prompt) {
  if (auto markers = harmony_markers(tok, g)) return std::make_unique<HarmonySplit>(*markers);
  if (!g.chat_template || g.chat_template->find(kThinkClose) == std::string::npos) return nullptr;
  // Inside when the last tag of the prompt is an opening one.
  const size_t open = rendered_prompt.rfind(kThinkOpen), close = rendered_prompt.rfind(kThinkClose);
  const bool inside = open != std::string::npos && (close == std::string::npos || close < open);
  return think_split(inside);
}

}  // namespace sy
