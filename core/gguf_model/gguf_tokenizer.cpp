// tokenizer.* keys -> tokenizer.json text, and the generation settings of a GGUF file.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "core/gguf_model/gguf_model.hpp"

namespace sy {
namespace {

using nlohmann::json;

// The tokenizer.* keys this file reads; any other is refused by name (SY303).
const std::set<std::string> kTokenizerKeys = {
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id",
    "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id",
    "tokenizer.ggml.sep_token_id",
    "tokenizer.ggml.cls_token_id",
    "tokenizer.ggml.mask_token_id",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token",
    "tokenizer.ggml.add_space_prefix",
    "tokenizer.chat_template",
};

// GGUF's token types (llama.cpp's llama_token_type).
constexpr int64_t kControl = 3, kUserDefined = 4;

[[noreturn]] void bad(const GgufFile& f, const std::string& key, const std::string& what) {
  throw Error(Errc::bad_tokenizer, "tokenizer is invalid: metadata '" + key + "' " + what,
              f.path());
}

const GgufValue& need(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.value(key);
  if (!v) bad(f, key, "is missing");
  return *v;
}

std::optional<int64_t> token_id(const GgufFile& f, const std::string& key, int64_t vocab) {
  const GgufValue* v = f.value(key);
  if (!v) return std::nullopt;
  auto id = v->as_int();
  if (!id || *id < 0 || *id >= vocab)
    bad(f, key, "is " + v->type_text() + ", not a token id in [0, " + std::to_string(vocab) + ")");
  return id;
}

bool flag(const GgufFile& f, const std::string& key, bool fallback) {
  const GgufValue* v = f.value(key);
  if (!v) return fallback;
  if (v->type != GgufType::boolean) bad(f, key, "is " + v->type_text() + ", not a bool");
  return v->i != 0;
}

// tokenizer.ggml.pre -> the tokenizer.json pre_tokenizer (llama.cpp's names for the
// pre-tokenizers of the Hugging Face tokenizers they were converted from).
json pre_tokenizer(const GgufFile& f, const std::string& pre) {
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  json byte_level_plain = byte_level;
  byte_level_plain["use_regex"] = false;
  auto split = [](std::string_view pattern) {
    return json{{"type", "Split"},
                {"pattern", {{"Regex", std::string(pattern)}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  };
  auto sequence = [](json a, json b) {
    return json{{"type", "Sequence"}, {"pretokenizers", json::array({a, b})}};
  };
  if (pre == "gpt2" || pre == "default") return byte_level;
  if (pre == "smollm")
    return sequence({{"type", "Digits"}, {"individual_digits", true}}, byte_level);
  if (pre == "llama-bpe" || pre == "llama3" || pre == "smollm3")
    return sequence(split(kTokenizerLlama3Pattern), byte_level_plain);
  if (pre == "qwen2") return sequence(split(kTokenizerQwen2Pattern), byte_level_plain);
  bad(f, "tokenizer.ggml.pre",
      "is '" + pre + "', not a pre-tokenizer Switchyard knows (gpt2, smollm, llama-bpe, qwen2)");
}

}  // namespace

std::string gguf_tokenizer_json(const GgufFile& f) {
  for (const auto& [key, value] : f.metadata())
    if (key.starts_with("tokenizer.") && !kTokenizerKeys.count(key))
      bad(f, key, "is not one Switchyard knows the effect of");
  const GgufValue& model = need(f, "tokenizer.ggml.model");
  if (model.s != "gpt2")
    bad(f, "tokenizer.ggml.model",
        "is '" + model.s + "': only byte-level BPE tokenizers (gpt2) are supported");
  if (flag(f, "tokenizer.ggml.add_space_prefix", false))
    bad(f, "tokenizer.ggml.add_space_prefix", "is true, which a byte-level BPE never applies");
  const GgufValue& tokens = need(f, "tokenizer.ggml.tokens");
  if (tokens.element_type != GgufType::string || tokens.strings.empty())
    bad(f, "tokenizer.ggml.tokens", "is not a non-empty array of strings");
  // No merges is a byte-level BPE whose tokens are its bytes (PyPI gguf writes no empty array;
  // llama.cpp requires the key, Switchyard reads its absence as none).
  static const GgufValue kNoMerges{GgufType::array, GgufType::string};
  const GgufValue* m = f.value("tokenizer.ggml.merges");
  const GgufValue& merges = m ? *m : kNoMerges;
  if (merges.element_type != GgufType::string)
    bad(f, "tokenizer.ggml.merges", "is not an array of strings");
  std::vector<int64_t> types(tokens.strings.size(), 1);
  if (const GgufValue* t = f.value("tokenizer.ggml.token_type")) {
    auto ints = t->as_int_array();
    if (!ints || ints->size() != tokens.strings.size())
      bad(f, "tokenizer.ggml.token_type", "is not one integer per token");
    types = *ints;
  }
  const GgufValue* pre = f.value("tokenizer.ggml.pre");
  const std::string pre_name = pre ? pre->s : "default";
  json vocab = json::object();
  std::vector<AddedTokenSpec> added;
  for (size_t id = 0; id < tokens.strings.size(); ++id) {
    vocab[tokens.strings[id]] = id;
    if (types[id] == kControl || types[id] == kUserDefined)
      added.push_back(
          {int64_t(id), tokens.strings[id], types[id] == kControl, types[id] == kUserDefined});
  }
  return byte_level_bpe_json(vocab, merges.strings, added, pre_tokenizer(f, pre_name),
                             pre_name == "llama-bpe" || pre_name == "llama3");
}

GenerationSettings gguf_generation_settings(const GgufFile& f, const Tokenizer& tok) {
  GenerationSettings g;
  const GgufValue& tokens = need(f, "tokenizer.ggml.tokens");
  const int64_t vocab = int64_t(tokens.strings.size());
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"})
    if (auto id = token_id(f, key, vocab)) g.eos_ids.push_back(*id);
  std::sort(g.eos_ids.begin(), g.eos_ids.end());
  g.eos_ids.erase(std::unique(g.eos_ids.begin(), g.eos_ids.end()), g.eos_ids.end());
  if (!g.eos_ids.empty()) g.eos_sources.push_back(f.path());
  const auto bos = token_id(f, "tokenizer.ggml.bos_token_id", vocab);
  const auto eos = token_id(f, "tokenizer.ggml.eos_token_id", vocab);
  if (flag(f, "tokenizer.ggml.add_bos_token", false) && bos) g.prompt_prefix = {*bos};
  if (flag(f, "tokenizer.ggml.add_eos_token", false) && eos) g.prompt_suffix = {*eos};
  g.special_tokens_rule = "tokenizer.ggml.add_bos_token / add_eos_token of " + f.path();
  for (auto [key, name] : {std::pair{"tokenizer.ggml.bos_token_id", "bos_token"},
                           std::pair{"tokenizer.ggml.eos_token_id", "eos_token"},
                           std::pair{"tokenizer.ggml.unknown_token_id", "unk_token"},
                           std::pair{"tokenizer.ggml.padding_token_id", "pad_token"},
                           std::pair{"tokenizer.ggml.sep_token_id", "sep_token"},
                           std::pair{"tokenizer.ggml.cls_token_id", "cls_token"},
                           std::pair{"tokenizer.ggml.mask_token_id", "mask_token"}})
    if (auto id = token_id(f, key, vocab)) g.special_tokens[name] = tok.decode_token(*id);
  if (const GgufValue* t = f.value("tokenizer.chat_template")) {
    if (t->type != GgufType::string) bad(f, "tokenizer.chat_template", "is not a string");
    g.chat_template = t->s;
    g.chat_template_origin = f.path() + ":tokenizer.chat_template";
  }
  return g;
}

bool is_gguf_file(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (ext == ".gguf" && !std::filesystem::is_directory(path)) return true;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const bool gguf = std::fread(magic, 1, 4, f) == 4 && std::string(magic, 4) == "GGUF";
  std::fclose(f);
  return gguf;
}

}  // namespace sy
