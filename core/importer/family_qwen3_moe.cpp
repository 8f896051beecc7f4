// Qwen3-MoE (model_type qwen3_moe, Qwen3MoeConfig's defaults): Qwen3's attention (q_norm/k_norm
// over the head dimension, optional attention biases) and, on its sparse layers, a mixture of
// experts: an unbiased router whose softmax's top num_experts_per_tok are renormalised
// (norm_topk_prob), then those experts' silu(gate)·up and down, summed under the router's
// weights. Sparse layers are those not in mlp_only_layers whose (index + 1) is a multiple of
// decoder_sparse_step; the rest have a dense MLP of intermediate_size.
#include <algorithm>

#include "core/importer/model_spec.hpp"

namespace sy::importer {
namespace {

void read_sparse_layers(const ConfigReader& r, ModelSpec& m) {
  const int64_t step = r.size("decoder_sparse_step", 1, 100'000, 1);
  std::vector<bool> dense(size_t(m.layers), false);
  if (const nlohmann::json* only = r.raw("mlp_only_layers")) {
    if (!only->is_array()) r.fail("mlp_only_layers", "must be an array of layer indices");
    for (const auto& v : *only) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= m.layers)
        r.fail("mlp_only_layers", "entry " + v.dump() + " is not a layer index in [0, " +
                                      std::to_string(m.layers) + ")");
      dense[size_t(v.get<int64_t>())] = true;
    }
  }
  for (int64_t i = 0; i < m.layers; ++i)
    m.layer[size_t(i)].dense_mlp = dense[size_t(i)] || (i + 1) % step != 0;
}

}  // namespace

ModelSpec read_qwen3_moe(const ConfigReader& r, const std::string& model_type) {
  ModelSpec m;
  m.model_type = model_type;
  read_common(r, CommonDefaults{}, m);
  read_activation(r, "hidden_act", "silu", m);
  if (!m.gelu.empty())
    r.fail("hidden_act", "the experts compute silu(gate)·up; another activation is not served");
  m.qk_norm = true;
  // Qwen3MoeAttention slides every layer when use_sliding_window; no released checkpoint does.
  if (r.boolean("use_sliding_window", false))
    r.fail("use_sliding_window", "true (a window on every layer) is not served for qwen3_moe");

  const char* count = r.has("num_experts") ? "num_experts" : "num_local_experts";
  m.experts = r.size(count, 1, 100'000, 128);
  m.experts_per_token = r.size("num_experts_per_tok", 1, 100'000, 8);
  if (m.experts_per_token > m.experts)
    r.fail("num_experts_per_tok", "the router picks " + std::to_string(m.experts_per_token) +
                                      " experts per token out of " + count + " = " +
                                      std::to_string(m.experts));
  m.expert_intermediate = r.size("moe_intermediate_size", 1, int64_t(1) << 24, 768);
  // moe_router's weights are the softmax over the chosen logits, which is the renormalised
  // top-k of the whole softmax; the unrenormalised top-k (Qwen3MoeConfig's default, never a
  // released Qwen3's) has no op form yet.
  if (!r.boolean("norm_topk_prob", false))
    r.fail("norm_topk_prob",
           "false (the top-k router weights without renormalisation) is not served; released "
           "Qwen3-MoE checkpoints set it true");
  read_sparse_layers(r, m);
  read_rope(r, 10000, m);
  return m;
}

}  // namespace sy::importer
