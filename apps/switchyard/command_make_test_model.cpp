// `make-test-model DIR`: writes a small llama-architecture model — config.json,
// model.safetensors with seeded random weights, tokenizer.json (byte-level BPE),
// tokenizer_config.json with a ChatML chat template, generation_config.json — so tests and
// `make demo` run a real model end to end without downloading one. `--shape tiny-sinks` is the
// same tiny llama with gpt-oss-style attention sinks and alternating sliding-window layers
// (model_type switchyard_sinks_test, docs/graph-format.md). `--format gguf` writes the same
// model (same seed, same values) as one GGUF file the way llama.cpp's converter writes a llama
// checkpoint, so llama.cpp's own tools run the very model Switchyard runs (the device check's
// peer, issue 38).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "core/gguf_model/gguf_model.hpp"
#include "core/importer/importer.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "core/weights/weights.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
namespace fs = std::filesystem;
using nlohmann::json;

// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the rest map above 255.
std::string byte_token(int b) {
  int code = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) ++n;
    code = 256 + n;
  }
  std::string out;
  if (code < 0x80) {
    out += char(code);
  } else {
    out += char(0xC0 | (code >> 6));
    out += char(0x80 | (code & 0x3F));
  }
  return out;
}

// The special tokens, after the byte tokens and merges: end of text, then ChatML's turn markers.
constexpr const char* kSpecialTokens[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
constexpr int64_t kSpecials = 3;

// SmolLM2-Instruct's chat template (ChatML), so --chat runs on the test model too.
constexpr const char* kChatTemplate =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

// A byte-level BPE vocabulary: the 256 byte tokens, a few merges of common English pairs, then
// the special tokens; `tokens` in id order.
struct TestVocabulary {
  std::vector<std::string> tokens;
  std::vector<std::string> merges;  // "a b"
  int64_t first_special = 0;
};

TestVocabulary test_vocabulary() {
  TestVocabulary v;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_token(b));
  const std::string sp = byte_token(' ');
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"t", "h"}, {"h", "e"}, {sp, "t"},  {"th", "e"}, {sp + "t", "he"}, {"i", "n"},
      {sp, "a"},  {"e", "r"}, {"o", "n"}, {sp, "s"},   {"e", "n"},       {"a", "t"}};
  for (const auto& [a, b] : merges) {
    if (std::find(v.tokens.begin(), v.tokens.end(), a + b) == v.tokens.end())
      v.tokens.push_back(a + b);
    v.merges.push_back(a + " " + b);
  }
  v.first_special = int64_t(v.tokens.size());
  for (const char* special : kSpecialTokens) v.tokens.push_back(special);
  return v;
}

void write_tokenizer(const fs::path& file, const TestVocabulary& v) {
  json vocab = json::object();
  for (int64_t id = 0; id < v.first_special; ++id) vocab[v.tokens[size_t(id)]] = id;
  std::vector<AddedTokenSpec> added;
  for (int64_t id = v.first_special; id < int64_t(v.tokens.size()); ++id)
    added.push_back({id, v.tokens[size_t(id)], true, false});
  const json pre = {{"type", "ByteLevel"},
                    {"add_prefix_space", false},
                    {"trim_offsets", true},
                    {"use_regex", true}};
  std::ofstream(file) << byte_level_bpe_document(vocab, v.merges, added, pre).dump(1) << "\n";
}

json config_for(const std::string& shape, int64_t tokenizer_vocab, const std::string& dtype) {
  json c = {{"architectures", {"LlamaForCausalLM"}},
            {"model_type", "llama"},
            {"hidden_act", "silu"},
            {"rms_norm_eps", 1e-5},
            {"rope_theta", 10000.0},
            {"max_position_embeddings", 2048},
            {"tie_word_embeddings", false},
            {"torch_dtype", dtype == "bf16" ? "bfloat16" : "float32"},
            {"bos_token_id", tokenizer_vocab - kSpecials},
            {"eos_token_id", tokenizer_vocab - kSpecials}};
  if (shape == "tiny-sinks") {
    c["architectures"] = {"SwitchyardSinksTestForCausalLM"};
    c["model_type"] = "switchyard_sinks_test";
    c["layer_types"] = {"sliding_attention", "full_attention"};
    c["sliding_window"] = 8;
  }
  if (shape == "llama-1b") {  // Llama-3.2-1B's shape (hidden 2048, 16 layers, 32/8 heads, tied)
    c.update({{"hidden_size", 2048},
              {"num_hidden_layers", 16},
              {"num_attention_heads", 32},
              {"num_key_value_heads", 8},
              {"intermediate_size", 8192},
              {"vocab_size", 128256},
              {"head_dim", 64},
              {"rope_theta", 500000.0},
              {"tie_word_embeddings", true}});
  } else if (shape == "smollm2-135m") {  // SmolLM2-135M's shape (hidden 576, 30 layers, 9/3 heads)
    c.update({{"hidden_size", 576},
              {"num_hidden_layers", 30},
              {"num_attention_heads", 9},
              {"num_key_value_heads", 3},
              {"intermediate_size", 1536},
              {"vocab_size", 49152},
              {"head_dim", 64}});
  } else {
    c.update({{"hidden_size", 64},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"intermediate_size", 128},
              {"vocab_size", tokenizer_vocab},
              {"head_dim", 16}});
  }
  return c;
}

// One weight of the imported graph with its seeded random values, in the graph's dtype.
struct TestWeight {
  Value value;
  std::vector<char> bytes;
};

// Every weight value of the config's graph, drawn in graph order from one generator: the same
// seed gives the same values in either format.
std::vector<TestWeight> test_weights(const json& config, const std::string& config_path,
                                     unsigned seed) {
  ImportOptions opts;
  opts.max_batch_tokens = 1;
  opts.context = 2;
  Graph g = import_hf_config_json(config, config_path, opts);
  const std::string model_type = config["model_type"].get<std::string>();
  std::mt19937 rng(seed);
  std::vector<TestWeight> out;
  for (const auto& v : g.phases.front().values) {
    if (v.kind != ValueKind::weight || !hf_tensor_name(model_type, v.name)) continue;
    bool norm = v.name.find("norm") != std::string::npos;
    bool sinks = v.name.ends_with(".sinks");  // logits in [0, 2]: above the scores' scale
    double fan_in = double(v.shape.back());
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    float scale = norm ? 0.1f : sinks ? 1.f : float(1.0 / std::sqrt(fan_in));
    int64_t n = v.bytes() / int64_t(sy_dtype_size(v.dtype));
    TestWeight w{v, std::vector<char>(size_t(v.bytes()))};
    for (int64_t i = 0; i < n; ++i) {
      float x = (norm || sinks ? 1.f : 0.f) + scale * dist(rng);
      if (v.dtype == SY_DTYPE_F32) {
        std::memcpy(w.bytes.data() + 4 * i, &x, 4);
      } else {
        uint16_t h = sy_f32_to_bf16(x);
        std::memcpy(w.bytes.data() + 2 * i, &h, 2);
      }
    }
    out.push_back(std::move(w));
  }
  return out;
}

// The folder form: config.json, tokenizer files, generation_config.json, model.safetensors.
size_t write_folder(const fs::path& dir, const json& config, const TestVocabulary& vocab,
                    const std::vector<TestWeight>& weights) {
  write_tokenizer(dir / "tokenizer.json", vocab);
  // As an instruct model ships them: a chat template, and <|im_end|> also ends generation.
  json tokenizer_config = {{"bos_token", nullptr},
                           {"eos_token", "<|im_end|>"},
                           {"pad_token", "<|endoftext|>"},
                           {"chat_template", kChatTemplate}};
  std::ofstream(dir / "tokenizer_config.json") << tokenizer_config.dump(2) << "\n";
  const int64_t end_of_text = vocab.first_special, im_end = vocab.first_special + 2;
  json generation_config = {{"eos_token_id", {end_of_text, im_end}}};
  std::ofstream(dir / "generation_config.json") << generation_config.dump(2) << "\n";
  std::vector<std::pair<TensorInfo, const void*>> tensors;
  for (const TestWeight& w : weights)
    tensors.push_back(
        {TensorInfo{*hf_tensor_name(config["model_type"].get<std::string>(), w.value.name),
                    w.value.dtype, w.value.shape, 0, uint64_t(w.bytes.size())},
         w.bytes.data()});
  write_safetensors((dir / "model.safetensors").string(), tensors,
                    {{"format", "pt"}, {"generator", "switchyard make-test-model"}});
  return tensors.size();
}

GgufValue gguf_u32(const json& v) {
  GgufValue g;
  g.type = GgufType::u32, g.u = v.get<uint64_t>();
  return g;
}
GgufValue gguf_f32(const json& v) {
  GgufValue g;
  g.type = GgufType::f32, g.f = v.get<double>();
  return g;
}
GgufValue gguf_text(std::string v) {
  GgufValue g;
  g.type = GgufType::string, g.s = std::move(v);
  return g;
}
GgufValue gguf_flag(bool v) {
  GgufValue g;
  g.type = GgufType::boolean, g.i = v;
  return g;
}
GgufValue gguf_texts(std::vector<std::string> v) {
  GgufValue g;
  g.type = GgufType::array, g.element_type = GgufType::string, g.strings = std::move(v);
  return g;
}

// The metadata llama.cpp's converter writes for a llama checkpoint with a byte-level BPE
// tokenizer (its gpt2 model and GPT-2's pre-tokenizer): a vocabulary padded to the model's with
// "[PAD<id>]" tokens of type unused, as the converter pads one; <|endoftext|> is BOS (not added
// to a prompt) and padding, <|im_end|> EOS, as the folder form's files say.
std::vector<std::pair<std::string, GgufValue>> llama_gguf_metadata(const json& c,
                                                                   const TestVocabulary& v,
                                                                   const std::string& shape) {
  constexpr int64_t kNormal = 1, kControl = 3, kUnused = 5;
  const int64_t vocab_size = c["vocab_size"].get<int64_t>();
  std::vector<std::string> tokens = v.tokens;
  GgufValue types;
  types.type = GgufType::array, types.element_type = GgufType::i32;
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (id >= int64_t(v.tokens.size())) tokens.push_back("[PAD" + std::to_string(id) + "]");
    types.ints.push_back(id >= int64_t(v.tokens.size()) ? kUnused
                         : id >= v.first_special        ? kControl
                                                        : kNormal);
  }
  const bool bf16 = c["torch_dtype"] == "bfloat16";
  return {
      {"general.architecture", gguf_text("llama")},
      {"general.name", gguf_text("switchyard test model " + shape)},
      {"general.file_type", gguf_u32(bf16 ? 32 : 0)},  // llama_ftype: MOSTLY_BF16, ALL_F32
      {"llama.vocab_size", gguf_u32(vocab_size)},
      {"llama.context_length", gguf_u32(c["max_position_embeddings"])},
      {"llama.embedding_length", gguf_u32(c["hidden_size"])},
      {"llama.block_count", gguf_u32(c["num_hidden_layers"])},
      {"llama.feed_forward_length", gguf_u32(c["intermediate_size"])},
      {"llama.rope.dimension_count", gguf_u32(c["head_dim"])},
      {"llama.attention.head_count", gguf_u32(c["num_attention_heads"])},
      {"llama.attention.head_count_kv", gguf_u32(c["num_key_value_heads"])},
      {"llama.attention.key_length", gguf_u32(c["head_dim"])},
      {"llama.attention.value_length", gguf_u32(c["head_dim"])},
      {"llama.attention.layer_norm_rms_epsilon", gguf_f32(c["rms_norm_eps"])},
      {"llama.rope.freq_base", gguf_f32(c["rope_theta"])},
      {"tokenizer.ggml.model", gguf_text("gpt2")},
      {"tokenizer.ggml.pre", gguf_text("gpt-2")},
      {"tokenizer.ggml.tokens", gguf_texts(std::move(tokens))},
      {"tokenizer.ggml.token_type", types},
      {"tokenizer.ggml.merges", gguf_texts(v.merges)},
      {"tokenizer.ggml.bos_token_id", gguf_u32(v.first_special)},
      {"tokenizer.ggml.eos_token_id", gguf_u32(v.first_special + 2)},
      {"tokenizer.ggml.padding_token_id", gguf_u32(v.first_special)},
      {"tokenizer.ggml.add_bos_token", gguf_flag(false)},
      {"tokenizer.chat_template", gguf_text(kChatTemplate)},
  };
}

// The GGUF form, DIR/model.gguf: 2-D weights in the run's dtype with attn_q / attn_k rows
// permuted as the converter permutes them; 1-D (the norms) as f32, as the converter keeps them
// (bf16 widens to f32 exactly).
size_t write_gguf_file(const fs::path& file, const json& config, const TestVocabulary& vocab,
                       std::vector<TestWeight>& weights, const std::string& shape) {
  constexpr uint32_t kGgmlF32 = 0, kGgmlBf16 = 30;
  const int64_t heads = config["num_attention_heads"].get<int64_t>(),
                kv_heads = config["num_key_value_heads"].get<int64_t>();
  std::vector<GgufTensorData> tensors;
  for (TestWeight& w : weights) {
    const Value& v = w.value;
    const bool f32 = v.dtype == SY_DTYPE_F32 || v.shape.size() == 1;
    if (f32 && v.dtype == SY_DTYPE_BF16) {
      std::vector<char> wide(size_t(v.shape[0]) * 4);
      for (int64_t i = 0; i < v.shape[0]; ++i) {
        uint16_t h;
        std::memcpy(&h, w.bytes.data() + 2 * i, 2);
        const float x = sy_bf16_to_f32(h);
        std::memcpy(wide.data() + 4 * i, &x, 4);
      }
      w.bytes = std::move(wide);
    }
    if (gguf_rows_permuted("llama", v.name, v.shape.size()))
      gguf_permute_rows(reinterpret_cast<uint8_t*>(w.bytes.data()), v.shape[0],
                        int64_t(w.bytes.size()) / v.shape[0],
                        v.name.ends_with(".q_proj") ? heads : kv_heads);
    std::vector<int64_t> dims(v.shape.rbegin(), v.shape.rend());
    tensors.push_back({*gguf_tensor_name("llama", v.name), f32 ? kGgmlF32 : kGgmlBf16, dims,
                       w.bytes.data(), uint64_t(w.bytes.size())});
  }
  write_gguf(file.string(), llama_gguf_metadata(config, vocab, shape), tensors);
  return tensors.size();
}

}  // namespace

int run_make_test_model(const GlobalOptions&, const Args& args) {
  std::string dir, shape = "tiny", dtype = "f32", format = "safetensors";
  unsigned seed = 1;
  po::options_description desc("switchyard make-test-model options");
  desc.add_options()("help,h", "show this help")("dir", po::value(&dir), "folder to write")(
      "shape", po::value(&shape)->default_value("tiny"),
      "tiny | tiny-sinks | smollm2-135m | llama-1b")(
      "dtype", po::value(&dtype)->default_value("f32"), "f32 | bf16")(
      "format", po::value(&format)->default_value("safetensors"),
      "safetensors (a model folder) | gguf (DIR/model.gguf, llama.cpp's form; not tiny-sinks)")(
      "seed", po::value(&seed)->default_value(1), "random seed of the weights");
  po::positional_options_description pos;
  pos.add("dir", 1);
  auto vm = parse_command(args, desc, &pos);
  if (vm.count("help") || dir.empty()) {
    std::cout << "Usage: switchyard make-test-model DIR [options]\n" << desc;
    return vm.count("help") ? kExitOk : kExitUsage;
  }
  if ((shape != "tiny" && shape != "tiny-sinks" && shape != "smollm2-135m" &&
       shape != "llama-1b") ||
      (dtype != "f32" && dtype != "bf16") || (format != "safetensors" && format != "gguf")) {
    std::cerr << "switchyard make-test-model: --shape tiny|tiny-sinks|smollm2-135m|llama-1b, "
                 "--dtype f32|bf16, --format safetensors|gguf\n";
    return kExitUsage;
  }
  if (format == "gguf" && shape == "tiny-sinks") {
    std::cerr << "switchyard make-test-model: --format gguf writes llama models; tiny-sinks "
                 "(model_type switchyard_sinks_test) has no GGUF architecture\n";
    return kExitUsage;
  }
  fs::create_directories(dir);
  const TestVocabulary vocab = test_vocabulary();
  json config = config_for(shape, int64_t(vocab.tokens.size()), dtype);
  const fs::path config_path = fs::path(dir) / "config.json";
  if (format == "safetensors") std::ofstream(config_path) << config.dump(2) << "\n";
  std::vector<TestWeight> weights = test_weights(config, config_path.string(), seed);
  const size_t count = format == "gguf" ? write_gguf_file(fs::path(dir) / "model.gguf", config,
                                                          vocab, weights, shape)
                                        : write_folder(dir, config, vocab, weights);
  std::cout << "wrote " << (format == "gguf" ? (fs::path(dir) / "model.gguf").string() : dir)
            << ": " << shape << " " << config["model_type"].get<std::string>() << ", " << count
            << " tensors, " << dtype << ", vocab " << config["vocab_size"] << ", seed " << seed
            << "\n";
  return kExitOk;
}

}  // namespace sy::cli
