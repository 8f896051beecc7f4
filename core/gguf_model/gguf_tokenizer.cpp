// tokenizer.* keys -> tokenizer.json text, and the generation settings of a GGUF file.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

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
    "tokenizer.ggml.add_sep_token",
    "tokenizer.ggml.add_space_prefix",
    "tokenizer.chat_template",
};

// GGUF's token types (llama.cpp's llama_token_type).
constexpr int64_t kUnknown = 2, kControl = 3, kUserDefined = 4;

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

// The Split regexes of the pre-tokenizers llama.cpp's converter names in tokenizer.ggml.pre, as
// the tokenizer.json files they came from write them (llama.cpp's llama-vocab.cpp quotes each
// "original regex from tokenizer.json" beside its adaptation; where it quotes none, its own).
constexpr std::string_view kContractions = R"((?i:'s|'t|'re|'ve|'m|'ll|'d))";
const std::string kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)" +
    std::string(kContractions) + R"(?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+)" +
    R"([\p{Ll}\p{Lm}\p{Lo}\p{M}]*)" + std::string(kContractions) +
    R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N})"
    R"(| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kDeepseekV3Words =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+)"
    R"(| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kDeepseekCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";
constexpr std::string_view kBloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

// One family of names: ByteLevel with GPT-2's regex (`byte_level_regex`), or these Splits in
// turn and then a plain ByteLevel; `digits` puts Digits(individual) first (SmolLM's form of
// llama.cpp's "\p{N}" split).
struct PreFamily {
  std::vector<std::string_view> names;
  std::vector<std::string> splits;
  bool byte_level_regex = false;
  bool digits = false;
  bool ignore_merges = false;  // llama.cpp's ignore_merges for the family (Llama 3)
};

const std::vector<PreFamily>& pre_families() {
  static const std::vector<PreFamily> families = {
      {{"default", "gpt2", "gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", "trillion",
        "granite-docling", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de", "gigachat", "a.x-4.0",
        "mellum", "modern-bert"},
       {},
       true},
      {{"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"},
       {},
       true,
       true},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {std::string(kTokenizerLlama3Pattern)},
       false,
       false,
       true},
      {{"smollm3", "dbrx", "smaug-bpe", "chatglm-bpe", "glm4"},
       {std::string(kTokenizerLlama3Pattern)}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "kormo"},
       {std::string(kTokenizerQwen2Pattern)}},
      {{"qwen35"}, {std::string(kQwen35)}},
      {{"gpt-4o", "llama4", "kanana2"}, {kO200k}},
      {{"tekken"}, {std::string(kTekken)}},
      {{"deepseek-v3"},
       {R"(\p{N}{1,3})", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
        std::string(kDeepseekV3Words)}},
      {{"deepseek-coder"},
       {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", std::string(kDeepseekCjk), R"(\p{N})"}},
      {{"falcon"},
       {R"([\p{P}\$\+<=>\^~\|`]+)",
        R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
        "[0-9][0-9][0-9]"}},
      {{"bloom", "poro-chat", "gpt3-finnish"}, {std::string(kBloom)}},
      {{"viking"}, {std::string(kBloom), R"(\p{N})"}},
  };
  return families;
}

const PreFamily* pre_family(const std::string& pre) {
  for (const PreFamily& f : pre_families())
    if (std::find(f.names.begin(), f.names.end(), pre) != f.names.end()) return &f;
  return nullptr;
}

// tokenizer.ggml.pre -> the tokenizer.json pre_tokenizer.
json pre_tokenizer(const GgufFile& f, const std::string& pre) {
  const PreFamily* family = pre_family(pre);
  if (!family) {
    std::string known;
    for (const PreFamily& fam : pre_families())
      for (std::string_view n : fam.names) known += (known.empty() ? "" : ", ") + std::string(n);
    bad(f, "tokenizer.ggml.pre",
        "is '" + pre + "', not a pre-tokenizer Switchyard knows (" + known + ")");
  }
  json stages = json::array();
  if (family->digits) stages.push_back({{"type", "Digits"}, {"individual_digits", true}});
  for (const std::string& regex : family->splits)
    stages.push_back({{"type", "Split"},
                      {"pattern", {{"Regex", regex}}},
                      {"behavior", "Isolated"},
                      {"invert", false}});
  stages.push_back({{"type", "ByteLevel"},
                    {"add_prefix_space", false},
                    {"trim_offsets", true},
                    {"use_regex", family->byte_level_regex}});
  return stages.size() == 1 ? stages[0] : json{{"type", "Sequence"}, {"pretokenizers", stages}};
}

// ---- SentencePiece vocabularies (tokenizer.ggml.model = "llama") ---------------------------
// As transformers' GGUF loader reads them (integrations/gguf/gguf_tokenizer_mapping.py): a
// byte-fallback BPE over characters whose merges, when the file lists none, are derived from the
// vocabulary (generate_merges), ranked by the tokens' scores, or for Gemma by their order in the
// file; Gemma's tokens of spaces respelled with ▁; Gemma's normalizer and decoder, or Llama's
// Metaspace with a prefix space.

bool is_gemma(const std::string& arch) {
  return arch == "gemma" || arch == "gemma2" || arch == "gemma3";
}

// The code points of a UTF-8 token, as byte offsets (and the end).
std::vector<size_t> char_offsets(std::string_view s) {
  std::vector<size_t> at;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) at.push_back(i);
  at.push_back(s.size());
  return at;
}

// Every split of a token into two tokens of the vocabulary, ranked best-first by the token's
// score, then the longer left and right part (transformers' generate_merges; equal keys keep
// the vocabulary's order, and within a token the parts' ids).
json derived_merges(const std::vector<std::string>& tokens, const std::vector<double>& scores) {
  // Views of `tokens` (alive for the call): a split is looked up without copying its parts.
  std::unordered_map<std::string_view, int64_t> id;
  id.reserve(tokens.size());
  std::vector<int64_t> order;  // first appearance, as a Python dict keeps it
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto [it, fresh] = id.try_emplace(tokens[i], int64_t(i));
    if (fresh) order.push_back(int64_t(i));
    it->second = int64_t(i);  // a repeated token's id and score are its last, as in the dict
  }
  struct Merge {
    double score;
    uint32_t left_chars, right_chars;
    int64_t left_id, right_id;
  };
  std::vector<Merge> merges, local;
  for (int64_t first : order) {
    const std::string_view t = tokens[size_t(first)];
    const std::vector<size_t> at = char_offsets(t);
    const size_t chars = at.size() - 1;
    const double s = scores[size_t(id.at(t))];
    local.clear();
    for (size_t k = 1; k < chars; ++k) {
      auto il = id.find(t.substr(0, at[k]));
      if (il == id.end()) continue;
      auto ir = id.find(t.substr(at[k]));
      if (ir == id.end()) continue;
      local.push_back({s, uint32_t(k), uint32_t(chars - k), il->second, ir->second});
    }
    std::stable_sort(local.begin(), local.end(), [](const Merge& a, const Merge& b) {
      return std::pair(a.left_id, a.right_id) < std::pair(b.left_id, b.right_id);
    });
    merges.insert(merges.end(), local.begin(), local.end());
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tuple(a.score, a.left_chars, a.right_chars) >
           std::tuple(b.score, b.left_chars, b.right_chars);
  });
  json out = json::array();
  out.get_ref<json::array_t&>().reserve(merges.size());
  for (const Merge& m : merges)
    out.push_back(json::array({tokens[size_t(m.left_id)], tokens[size_t(m.right_id)]}));
  return out;
}

json sentencepiece_document(const GgufFile& f, std::vector<std::string> tokens,
                            const std::vector<int64_t>& types) {
  const GgufValue* arch_v = f.value("general.architecture");
  const std::string arch = arch_v ? arch_v->s : "";
  const bool gemma = is_gemma(arch);
  if (gemma)  // Gemma's files spell a token of spaces with spaces; its tokenizer with ▁
    for (std::string& t : tokens)
      if (t.find(' ') != std::string::npos &&
          t.find_first_not_of(" \t\n\r\v\f") == std::string::npos) {
        std::string mark;
        for (size_t k = 0; k < t.size(); ++k) mark += "\u2581";
        t = mark;
      }
  std::vector<double> scores(tokens.size());
  if (gemma) {  // Gemma's scores do not follow its merge order; the file's order does
    for (size_t i = 0; i < tokens.size(); ++i) scores[i] = -double(i);
  } else {
    const GgufValue& s = need(f, "tokenizer.ggml.scores");
    if (s.element_type != GgufType::f32 || s.floats.size() != tokens.size())
      bad(f, "tokenizer.ggml.scores", "is not one f32 per token");
    scores = s.floats;
  }
  json merges;
  if (const GgufValue* m = f.value("tokenizer.ggml.merges")) {
    if (m->element_type != GgufType::string) bad(f, "tokenizer.ggml.merges", "is not strings");
    merges = m->strings;
  } else {
    merges = derived_merges(tokens, scores);
  }
  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    vocab[tokens[id]] = id;
    // Control and unknown tokens (<s>, <unk>) are special, matched whole in the text, as
    // llama.cpp and transformers' loader both take them; user-defined ones are plain added.
    if (types[id] == kControl || types[id] == kUnknown || types[id] == kUserDefined)
      added.push_back({{"id", id},
                       {"content", tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", types[id] != kUserDefined}});
  }
  const json replace_mark = {
      {"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
  json decoders = json::array({replace_mark, {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
  json j = {{"added_tokens", added},
            {"model",
             {{"type", "BPE"},
              {"vocab", vocab},
              {"merges", merges},
              {"byte_fallback", true},
              {"fuse_unk", true}}}};
  // The prefix space as the file says (llama.cpp's add_space_prefix; transformers' loader
  // always adds it outside Gemma, which a file saying false would not get).
  const bool prefix = flag(f, "tokenizer.ggml.add_space_prefix", !gemma);
  if (gemma && prefix)
    bad(f, "tokenizer.ggml.add_space_prefix", "is true, which Gemma's tokenizer never applies");
  if (gemma) {  // GemmaTokenizer: no prefix space
    if (vocab.contains("<unk>")) j["model"]["unk_token"] = "<unk>";
    j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
    j["pre_tokenizer"] = {{"type", "Split"},
                          {"pattern", {{"String", " "}}},
                          {"behavior", "MergedWithPrevious"},
                          {"invert", false}};
  } else {  // LlamaTokenizer: a prefix space before the text, stripped when decoding
    j["pre_tokenizer"] = {{"type", "Metaspace"},
                          {"replacement", "\u2581"},
                          {"prepend_scheme", prefix ? "first" : "never"},
                          {"split", false}};
    if (prefix)
      decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  }
  j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  return j;
}

}  // namespace

json gguf_tokenizer_document(const GgufFile& f) {
  for (const auto& [key, value] : f.metadata())
    if (key.starts_with("tokenizer.") && !kTokenizerKeys.count(key))
      bad(f, key, "is not one Switchyard knows the effect of");
  const GgufValue& model = need(f, "tokenizer.ggml.model");
  if (model.s != "gpt2" && model.s != "llama")
    bad(f, "tokenizer.ggml.model",
        "is '" + model.s +
            "': Switchyard reads byte-level BPE (gpt2) and SentencePiece BPE "
            "(llama) vocabularies");
  const GgufValue& tokens = need(f, "tokenizer.ggml.tokens");
  if (tokens.element_type != GgufType::string || tokens.strings.empty())
    bad(f, "tokenizer.ggml.tokens", "is not a non-empty array of strings");
  if (flag(f, "tokenizer.ggml.add_sep_token", false))
    bad(f, "tokenizer.ggml.add_sep_token",
        "is true: a SEP token after the text is for encoders, which Switchyard does not run");
  std::vector<int64_t> types(tokens.strings.size(), 1);
  if (const GgufValue* t = f.value("tokenizer.ggml.token_type")) {
    auto ints = t->as_int_array();
    if (!ints || ints->size() != tokens.strings.size())
      bad(f, "tokenizer.ggml.token_type", "is not one integer per token");
    types = *ints;
  }
  if (model.s == "llama") return sentencepiece_document(f, tokens.strings, types);
  if (flag(f, "tokenizer.ggml.add_space_prefix", false))
    bad(f, "tokenizer.ggml.add_space_prefix", "is true, which a byte-level BPE never applies");
  // No merges is a byte-level BPE whose tokens are its bytes (PyPI gguf writes no empty array;
  // llama.cpp requires the key, Switchyard reads its absence as none).
  static const GgufValue kNoMerges{GgufType::array, GgufType::string};
  const GgufValue* m = f.value("tokenizer.ggml.merges");
  const GgufValue& merges = m ? *m : kNoMerges;
  if (merges.element_type != GgufType::string)
    bad(f, "tokenizer.ggml.merges", "is not an array of strings");
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
  const json pre_json = pre_tokenizer(f, pre_name);
  return byte_level_bpe_document(vocab, merges.strings, added, pre_json,
                                 pre_family(pre_name)->ignore_merges);
}

std::string gguf_tokenizer_json(const GgufFile& f) {
  return gguf_tokenizer_document(f).dump(1);
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
