#include "core/runtime/model_source.hpp"

#include <filesystem>
#include <fstream>
#include <optional>

#include "core/executor/model_weights.hpp"
#include "core/gguf_model/gguf_model.hpp"
#include "core/weights/weights.hpp"

namespace sy {
namespace {

namespace fs = std::filesystem;

class FolderSource final : public ModelSource {
 public:
  FolderSource(fs::path dir, std::vector<std::string> allowed)
      : dir_(std::move(dir)), allowed_(std::move(allowed)) {}
  std::string model_type() const override {
    return nlohmann::json::parse(std::ifstream(dir_ / "config.json"), nullptr, false)
        .value("model_type", "");
  }
  Tokenizer tokenizer() const override {
    return Tokenizer::load((dir_ / "tokenizer.json").string());
  }
  GenerationSettings generation(const Tokenizer& tok) const override {
    return read_generation_settings(dir_, tok);
  }
  Graph import(ImportOptions o) const override {
    o.allowed_config_keys = allowed_;
    return import_hf_config((dir_ / "config.json").string(), o);
  }
  WeightLoader weights() override {
    // Opened once: every loader made shares the mapping (mapped weights point into it).
    if (!file_) file_.emplace(SafetensorsFile::open((dir_ / "model.safetensors").string()));
    std::string type = nlohmann::json::parse(std::ifstream(dir_ / "config.json"), nullptr, false)
                           .value("model_type", "");
    return safetensors_weight_loader(*file_, type);
  }
  uint64_t weight_bytes() const override { return file_ ? file_->size() : 0; }
  bool has_weights() const override { return fs::exists(dir_ / "model.safetensors"); }

 private:
  fs::path dir_;
  std::vector<std::string> allowed_;
  std::optional<SafetensorsFile> file_;
};

class GgufSource final : public ModelSource {
 public:
  GgufSource(const std::string& path, const std::vector<std::string>& allowed)
      : file_(GgufFile::open(path)), model_(describe_gguf(file_, allowed)) {}
  std::string model_type() const override { return model_.architecture; }
  Tokenizer tokenizer() const override {
    return Tokenizer::from_document(gguf_tokenizer_document(file_), file_.path());
  }
  GenerationSettings generation(const Tokenizer& tok) const override {
    return gguf_generation_settings(file_, tok);
  }
  Graph import(ImportOptions o) const override {
    // Every key of the synthesised config is one the importer knows: nothing to allow.
    o.weight_dtypes = model_.weight_dtypes;
    Graph g = import_hf_config_json(model_.config, file_.path(), o);
    g.name = fs::path(file_.path()).stem().string();
    g.conventions.insert(g.conventions.end(), model_.conventions.begin(), model_.conventions.end());
    return g;
  }
  WeightLoader weights() override { return gguf_weight_loader(file_, model_); }
  uint64_t weight_bytes() const override { return file_.size(); }
  bool has_weights() const override { return true; }

 private:
  GgufFile file_;
  GgufModel model_;
};

}  // namespace

std::unique_ptr<ModelSource> ModelSource::open(const std::string& path,
                                               const std::vector<std::string>& allowed_keys) {
  if (is_gguf_file(path)) return std::make_unique<GgufSource>(path, allowed_keys);
  return std::make_unique<FolderSource>(path, allowed_keys);
}

}  // namespace sy
