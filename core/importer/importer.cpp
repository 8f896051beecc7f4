// Entry points: read the file, check the import options, find the family, build the graph.
#include "core/importer/importer.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/importer/config_keys.hpp"
#include "core/importer/model_spec.hpp"

namespace sy {
namespace {

using importer::ConfigReader;
using importer::ModelSpec;
using nlohmann::json;

constexpr std::uintmax_t kMaxConfigBytes = 64u << 20;  // real configs are a few KiB

struct Family {
  const char* model_type;
  ModelSpec (*read)(const ConfigReader&, const std::string&);
};

constexpr Family kFamilies[] = {
    {"llama", importer::read_llama_family},
    {"mistral", importer::read_llama_family},
    {"qwen2", importer::read_llama_family},
    {"qwen3", importer::read_llama_family},
    {"smollm3", importer::read_llama_family},
    {"gemma2", importer::read_gemma},
    {"gemma3", importer::read_gemma},
    {"gemma3_text", importer::read_gemma},
    {"gpt_oss", importer::read_gpt_oss},
    {"qwen3_moe", importer::read_qwen3_moe},
    {"switchyard_sinks_test", importer::read_llama_family},
};

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error(Errc::bad_config, "invalid model config: " + what, where);
}

void check_option(const std::string& file, const char* name, int64_t v, int64_t hi) {
  if (v < 1 || v > hi)
    bad(file, "import option " + std::string(name) + " must be in [1, " + std::to_string(hi) +
                  "], got " + std::to_string(v));
}

void check_options(ImportOptions& o, const std::string& file) {
  check_option(file, "context", o.context, 10'000'000);
  check_option(file, "max_batch_tokens", o.max_batch_tokens, 10'000'000);
  if (o.kv_layout == KvLayout::contiguous) {
    check_option(file, "batch", o.batch, 1'000'000);
    // A contiguous prefill appends its whole step to caches of `context` rows, so a step never
    // takes more; the planner may pick this layout for a budget that was sized for the paged
    // one (many sequences' tokens together), and the plan's layout rule says it was capped.
    o.max_batch_tokens = std::min(o.max_batch_tokens, o.context);
    return;
  }
  check_option(file, "max_sequences", o.max_sequences, 100'000);
  if (o.max_outputs != 0) check_option(file, "max_outputs", o.max_outputs, o.max_batch_tokens);
  check_option(file, "kv_block_size", o.kv_block_size, 1024);
  if (o.kv_block_size % 16 != 0)
    bad(file, "import option kv_block_size (" + std::to_string(o.kv_block_size) +
                  ") must be a multiple of 16");
  const int64_t per_sequence = (o.context + o.kv_block_size - 1) / o.kv_block_size;
  if (o.kv_blocks == 0) o.kv_blocks = o.max_sequences * per_sequence;
  check_option(file, "kv_blocks", o.kv_blocks, int64_t(1) << 31);
}

std::optional<sy_dtype> dtype_of(const std::string& s) {
  if (s == "bf16" || s == "bfloat16") return SY_DTYPE_BF16;
  if (s == "f16" || s == "float16") return SY_DTYPE_F16;
  if (s == "f32" || s == "float32") return SY_DTYPE_F32;
  return std::nullopt;
}

std::string supported_list() {
  std::string out;
  for (const auto& t : supported_model_types()) out += (out.empty() ? "" : ", ") + t;
  return out;
}

}  // namespace

std::string config_keys_markdown() {
  return importer::render_config_keys_markdown();
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> out;
  for (const auto& f : kFamilies) out.push_back(f.model_type);
  return out;
}

Graph import_hf_config_json(const json& config, const std::string& file,
                            const ImportOptions& given) {
  if (!config.is_object())
    bad(file, "a config.json must hold a JSON object, got " + std::string(config.type_name()));
  ImportOptions options = given;
  check_options(options, file);
  std::optional<sy_dtype> override_dtype;
  if (!options.dtype_override.empty()) {
    override_dtype = dtype_of(options.dtype_override);
    if (!override_dtype)
      bad(file,
          "import option dtype_override '" + options.dtype_override + "' is not bf16, f16 or f32");
  }

  ConfigReader top(config, file, "");
  std::string model_type = top.string("model_type");
  const Family* family = nullptr;
  for (const auto& f : kFamilies)
    if (model_type == f.model_type) family = &f;
  if (!family)
    throw Error(Errc::unknown_model_type,
                "unknown model_type '" + model_type + "' (supported: " + supported_list() + ")",
                file);

  ModelSpec m;
  if (model_type == "gemma3") {
    // The multimodal config nests the text decoder; its dtype may sit at the top level.
    auto it = config.find("text_config");
    if (it == config.end() || !it->is_object())
      top.fail("text_config", "a gemma3 config needs a text_config object");
    json inherited = json::object();
    for (const char* key : {"torch_dtype", "dtype"})
      if (config.contains(key)) inherited[key] = config[key];
    importer::check_config_keys(top, "gemma3", options.allowed_config_keys);
    ConfigReader text(*it, file, "text_config.", inherited);
    importer::check_config_keys(text, "gemma3_text", options.allowed_config_keys);
    m = family->read(text, model_type);
  } else {
    importer::check_config_keys(top, model_type, options.allowed_config_keys);
    m = family->read(top, model_type);
  }
  if (override_dtype) m.dtype = *override_dtype;

  Graph g = importer::build_graph(m, options, file);
  if (options.max_batch_tokens < given.max_batch_tokens)
    g.bounds.max_batch_tokens_asked = given.max_batch_tokens;
  std::string dir = std::filesystem::path(file).parent_path().filename().string();
  g.name = dir.empty() ? model_type : dir;
  return g;
}

Graph import_hf_config(const std::string& path, const ImportOptions& options) {
  std::error_code ec;
  // A model folder stands for its config.json.
  const std::string config_path = std::filesystem::is_directory(path, ec)
                                      ? (std::filesystem::path(path) / "config.json").string()
                                      : path;
  auto bytes = std::filesystem::file_size(config_path, ec);
  if (!ec && bytes > kMaxConfigBytes)
    bad(config_path, "the file has " + std::to_string(bytes) +
                         " bytes; a config.json is a few KiB (limit 64 MiB)");
  std::ifstream in(config_path);
  if (!in) bad(config_path, "cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  json j = parse_json_text(text, config_path);
  return import_hf_config_json(j, config_path, options);
}

}  // namespace sy
