#include "apps/switchyard/plan_flags.hpp"

#include <algorithm>
#include <sstream>

#include "apps/switchyard/model_run.hpp"
#include "core/capability/vocabulary.hpp"

namespace sy::cli {

namespace po = boost::program_options;

void PlanFlags::add(po::options_description& desc, int64_t default_sequences,
                    int64_t default_context) {
  max_sequences = default_sequences;
  context = default_context;
  desc.add_options()(
      "max-batch-tokens", po::value(&max_batch_tokens)->default_value(512),
      "tokens one step takes, every sequence's together (a longer prompt runs in chunks)")(
      "max-sequences", po::value(&max_sequences)->default_value(default_sequences),
      "sequences one step may hold")("context", po::value(&context)->default_value(default_context),
                                     "tokens per sequence")(
      "kv-blocks", po::value(&kv_blocks)->default_value(0),
      "blocks of 16 tokens in each KV pool (0: as many as the sequences need, or fit)")(
      "prefer", po::value(&prefer),
      "device order, e.g. cuda,cpu (default: accelerators, then cpu)")(
      "attention", po::value(&attention)->default_value("any"),
      "pin the attention family: flash|sdpa|flex|fused_decode|any")(
      "strict", po::bool_switch(&strict), "a refusal of the pinned/preferred choice is the error")(
      "require-verified", po::bool_switch(&require_verified),
      "use only kernels a conformance report beside their plugin verifies (SY010 otherwise)")(
      "dtype", po::value(&dtype), "run in f32|bf16 instead of the model's dtype")(
      "numerics", po::value(&numerics)->default_value(numerics_name(kDefaultNumerics)),
      "exact: products on the weights as stored; auto: also kernels that quantize activations "
      "to 16-bit blocks and multiply integers (quantized weights); fast: also 8-bit blocks "
      "(docs/numerics.md)")("allow-config-key", po::value(&allowed_config_keys),
                            "accept this unknown config.json key as without effect; repeatable")(
      "memory-reserve", po::value(&memory_reserve),
      "memory left free on every device (default: 1GiB, or an eighth of a smaller device)")(
      "max-device-memory", po::value(&max_device_memory),
      "cap a device's memory, e.g. cuda:0=8GiB; repeatable");
}

std::optional<std::string> PlanFlags::apply(ImportOptions& o, Policy& policy) const {
  if (max_batch_tokens < 1 || max_batch_tokens > 10'000'000)
    return "--max-batch-tokens must be in [1, 10^7]";
  if (max_sequences < 1 || max_sequences > 100'000) return "--max-sequences must be in [1, 10^5]";
  if (context < 1 || context > 10'000'000) return "--context must be in [1, 10^7]";
  if (kv_blocks < 0) return "--kv-blocks must be >= 0";
  const std::vector<std::string> families = {"flash", "sdpa", "flex", "fused_decode", "any"};
  if (std::find(families.begin(), families.end(), attention) == families.end())
    return "--attention must be flash, sdpa, flex, fused_decode or any";
  o.max_batch_tokens = max_batch_tokens;
  o.max_sequences = max_sequences;
  o.context = context;
  o.dtype_override = dtype;
  o.allowed_config_keys = allowed_config_keys;
  const auto chosen = parse_numerics(numerics);
  if (!chosen)
    return std::string("--numerics must be ") + kNumericsChoices + ", not '" + numerics + "'";
  policy.numerics = *chosen;
  policy.attention = attention;
  policy.strict = strict;
  policy.require_verified = require_verified;
  if (kv_blocks > 0) policy.kv_blocks = kv_blocks;
  policy.prefer = {kDLCUDA, kDLROCM, kDLCPU};
  if (!prefer.empty()) {
    policy.prefer.clear();
    std::stringstream ss(prefer);
    for (std::string item; std::getline(ss, item, ',');) {
      auto t = parse_device_type(item);
      if (!t) return "--prefer takes device types, e.g. cuda,cpu, not '" + item + "'";
      policy.prefer.push_back(*t);
    }
    policy.prefer_given = true;
  }
  return apply_memory_options(memory_reserve, max_device_memory, policy);
}

}  // namespace sy::cli
