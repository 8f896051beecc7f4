// A model as `run`, `plan` and `bench decode` read it: a Hugging Face folder (config.json,
// model.safetensors, tokenizer files) or a GGUF file (core/gguf_model/), behind one interface.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/executor/weight_loader.hpp"
#include "core/generation/generation.hpp"
#include "core/graph/graph.hpp"
#include "core/importer/importer.hpp"
#include "core/tokenizer/tokenizer.hpp"

namespace sy {

class ModelSource {
 public:
  // `path`: a model folder or a .gguf file (told by its magic). Throws Error naming the file.
  static std::unique_ptr<ModelSource> open(const std::string& path,
                                           const std::vector<std::string>& allowed_keys);
  virtual ~ModelSource() = default;

  // config.json's model_type, or the GGUF file's general.architecture.
  virtual std::string model_type() const = 0;
  virtual Tokenizer tokenizer() const = 0;
  virtual GenerationSettings generation(const Tokenizer& tok) const = 0;
  // The graph for `options` (a GGUF file adds its weights' quantized dtypes).
  virtual Graph import(ImportOptions options) const = 0;
  // Opens the weights (mapped, not read) and returns their loader, which also maps host weights
  // the file stores as the graph declares them; valid while this lives.
  virtual WeightLoader weights() = 0;
  // Whether the source has its weights (a folder may hold a config.json only).
  virtual bool has_weights() const = 0;
  // Bytes of weights the loader reads from (for progress).
  virtual uint64_t weight_bytes() const = 0;
};

}  // namespace sy
