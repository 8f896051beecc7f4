// libFuzzer target: the Hugging Face config importer must answer any JSON with valid phases
// (in both KV layouts) or an Error, never a crash, a hang or another exception.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/importer/importer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  for (auto layout : {sy::KvLayout::paged, sy::KvLayout::contiguous}) {
    sy::ImportOptions opts;
    opts.kv_layout = layout;
    opts.max_batch_tokens = 16;
    opts.max_sequences = 4;
    opts.context = 64;
    try {
      (void)sy::import_hf_config_json(j, "fuzz.json", opts);
    } catch (const sy::Error&) {
    }
  }
  return 0;
}
