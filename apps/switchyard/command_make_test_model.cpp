// `make-test-model DIR`: writes a small llama-architecture model — config.json,
// model.safetensors with seeded random weights, tokenizer.json (byte-level BPE),
// tokenizer_config.json with a ChatML chat template, generation_config.json — so tests and
// `make demo` run a real model end to end without downloading one. `--shape tiny-sinks` is the
// same tiny llama with gpt-oss-style attention sinks and alternating sliding-window layers
// (model_type switchyard_sinks_test, docs/graph-format.md).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
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

// A byte-level BPE tokenizer.json: the 256 byte tokens, a few merges of common English pairs,
// and the special tokens. Returns its vocabulary size.
int64_t write_tokenizer(const fs::path& file) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_token(b)] = b;
  const std::string sp = byte_token(' ');
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"t", "h"}, {"h", "e"}, {sp, "t"},  {"th", "e"}, {sp + "t", "he"}, {"i", "n"},
      {sp, "a"},  {"e", "r"}, {"o", "n"}, {sp, "s"},   {"e", "n"},       {"a", "t"}};
  json merge_list = json::array();
  int64_t id = 256;
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = id++;
    merge_list.push_back(a + " " + b);
  }
  std::vector<AddedTokenSpec> added;
  for (const char* special : kSpecialTokens) added.push_back({id++, special, true, false});
  const json pre = {{"type", "ByteLevel"},
                    {"add_prefix_space", false},
                    {"trim_offsets", true},
                    {"use_regex", true}};
  std::ofstream(file) << byte_level_bpe_document(vocab, merge_list, added, pre).dump(1) << "\n";
  return id;
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

}  // namespace

int run_make_test_model(const GlobalOptions&, const Args& args) {
  std::string dir, shape = "tiny", dtype = "f32";
  unsigned seed = 1;
  po::options_description desc("switchyard make-test-model options");
  desc.add_options()("help,h", "show this help")("dir", po::value(&dir), "folder to write")(
      "shape", po::value(&shape)->default_value("tiny"),
      "tiny | tiny-sinks | smollm2-135m | llama-1b")(
      "dtype", po::value(&dtype)->default_value("f32"), "f32 | bf16")(
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
      (dtype != "f32" && dtype != "bf16")) {
    std::cerr
        << "switchyard make-test-model: --shape tiny|tiny-sinks|smollm2-135m|llama-1b, --dtype "
           "f32|bf16\n";
    return kExitUsage;
  }
  fs::create_directories(dir);
  int64_t vocab = write_tokenizer(fs::path(dir) / "tokenizer.json");
  json config = config_for(shape, vocab, dtype);
  std::ofstream(fs::path(dir) / "config.json") << config.dump(2) << "\n";
  // As an instruct model ships them: a chat template, and <|im_end|> also ends generation.
  json tokenizer_config = {{"bos_token", nullptr},
                           {"eos_token", "<|im_end|>"},
                           {"pad_token", "<|endoftext|>"},
                           {"chat_template", kChatTemplate}};
  std::ofstream(fs::path(dir) / "tokenizer_config.json") << tokenizer_config.dump(2) << "\n";
  json generation_config = {{"eos_token_id", {vocab - kSpecials, vocab - 1}}};
  std::ofstream(fs::path(dir) / "generation_config.json") << generation_config.dump(2) << "\n";

  // One tensor per weight value of the imported graph, under its Hugging Face name.
  ImportOptions opts;
  opts.max_batch_tokens = 1;
  opts.context = 2;
  Graph g = import_hf_config_json(config, dir + "/config.json", opts);
  std::mt19937 rng(seed);
  std::vector<std::vector<char>> storage;
  std::vector<std::pair<TensorInfo, const void*>> tensors;
  for (const auto& v : g.phases.front().values) {
    if (v.kind != ValueKind::weight) continue;
    auto name = hf_tensor_name(config["model_type"].get<std::string>(), v.name);
    if (!name) continue;
    bool norm = v.name.find("norm") != std::string::npos;
    bool sinks = v.name.ends_with(".sinks");  // logits in [0, 2]: above the scores' scale
    double fan_in = double(v.shape.back());
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    float scale = norm ? 0.1f : sinks ? 1.f : float(1.0 / std::sqrt(fan_in));
    int64_t n = v.bytes() / int64_t(sy_dtype_size(v.dtype));
    storage.emplace_back(size_t(v.bytes()));
    for (int64_t i = 0; i < n; ++i) {
      float x = (norm || sinks ? 1.f : 0.f) + scale * dist(rng);
      if (v.dtype == SY_DTYPE_F32) {
        std::memcpy(storage.back().data() + 4 * i, &x, 4);
      } else {
        uint16_t h = sy_f32_to_bf16(x);
        std::memcpy(storage.back().data() + 2 * i, &h, 2);
      }
    }
    tensors.push_back(
        {TensorInfo{*name, v.dtype, v.shape, 0, uint64_t(v.bytes())}, storage.back().data()});
  }
  write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors,
                    {{"format", "pt"}, {"generator", "switchyard make-test-model"}});
  std::cout << "wrote " << dir << ": " << shape << " " << config["model_type"].get<std::string>()
            << ", " << tensors.size() << " tensors, " << dtype << ", vocab " << config["vocab_size"]
            << ", seed " << seed << "\n";
  return kExitOk;
}

}  // namespace sy::cli
