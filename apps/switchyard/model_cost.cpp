#include "apps/switchyard/model_cost.hpp"

#include <algorithm>

namespace sy::cli {
namespace {

int64_t int_attr(const Node& n, const char* name, int64_t fallback) {
  for (const auto& a : n.attrs)
    if (a.name == name)
      if (const auto* v = std::get_if<int64_t>(&a.value)) return *v;
  return fallback;
}

// Elements of `v` at the step's extents.
double elements(const Value& v, const StepShape& s) {
  double n = 1;
  for (size_t i = 0; i < v.shape.size(); ++i) {
    int64_t d = v.shape[i];
    if (int(i) == v.dynamic.axis) switch (v.dynamic.extent) {
        case StepExtent::tokens: d = s.tokens; break;
        case StepExtent::sequences: d = s.sequences; break;
        case StepExtent::sequences_plus_one: d = s.sequences + 1; break;
        case StepExtent::outputs: d = s.outputs; break;
        default: break;
      }
    n *= double(d);
  }
  return n;
}

// Bytes of one cached row (one position of one layer) of a KV cache or pool.
double row_bytes(const Value& cache) {
  if (cache.shape.size() != 4) return 0;
  // [NB, BS, Hkv, D] paged or [B, C, Hkv, D] contiguous: the first two axes count rows.
  const double rows = double(cache.shape[0] * cache.shape[1]);
  return double(cache.bytes()) / rows;
}

// The share of its experts a moe_experts node reads in a step of `tokens` tokens: each picks
// top_k of E, so at most min(E, tokens·top_k) distinct experts (the bound: a decode token reads
// top_k / E of every stacked expert weight).
double expert_share(const Phase& phase, const Node& n, const StepShape& s) {
  const Value* ids = n.inputs.size() > 3 ? phase.value(n.inputs[1]) : nullptr;
  const Value* gate = n.inputs.size() > 3 ? phase.value(n.inputs[3]) : nullptr;
  if (!ids || !gate || ids->shape.empty() || gate->shape.empty()) return 1.0;
  const double k = double(ids->shape.back()), experts = double(gate->shape[0]);
  const double tokens = elements(*ids, s) / k;
  return std::min(1.0, tokens * k / experts);
}

}  // namespace

double visible_pairs(int64_t sq, int64_t skv, bool causal, int64_t window) {
  double pairs = 0;
  for (int64_t i = 0; i < sq; ++i) {
    int64_t diag = i + skv - sq;
    int64_t hi = causal ? std::min(diag, skv - 1) : skv - 1;
    int64_t lo = window >= 0 ? std::max<int64_t>(0, diag - window) : 0;
    pairs += double(std::max<int64_t>(0, hi - lo + 1));
  }
  return pairs;
}

StepBytes step_bytes(const Phase& phase, const StepShape& shape) {
  StepBytes b;
  const Value* ids = nullptr;
  for (const auto& v : phase.values)
    if (v.role == ValueRole::token_ids) ids = &v;
  for (const auto& v : phase.values) {
    if (v.kind != ValueKind::weight) continue;
    bool only_lookups = true, used = false;
    double share = 1.0;  // of a stacked expert weight, the experts a step reads
    for (const auto& n : phase.nodes)
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (n.inputs[i] == v.name) {
          used = true;
          if (!(n.op == SY_OP_EMBEDDING && i == 0)) only_lookups = false;
          if (n.op == SY_OP_MOE_EXPERTS && i >= 3) share = expert_share(phase, n, shape);
        }
    if (!used) continue;
    const double bytes = double(v.bytes()) * share;
    const double rows = v.shape.empty() ? 1 : double(v.shape[0]);
    b.weights += only_lookups && ids ? bytes / rows * elements(*ids, shape) : bytes;
  }
  const bool paged = ids && ids->dynamic.axis >= 0;
  for (const auto& n : phase.nodes) {
    if (n.op != SY_OP_ATTENTION || n.inputs.size() < 3) continue;
    const int64_t window = int_attr(n, SY_ATTR_WINDOW_LEFT, -1);
    const int64_t rows = window >= 0 ? std::min(shape.kv_len, window + 1) : shape.kv_len;
    for (size_t i = 1; i <= 2; ++i) {
      const Value* cache = phase.value(n.inputs[i]);
      if (!cache || cache->kind != ValueKind::kv_cache) continue;
      b.kv += row_bytes(*cache) * double(rows) * double(paged ? shape.sequences : 1);
    }
  }
  return b;
}

double step_flops(const Phase& phase, const StepShape& shape) {
  double flops = 0;
  for (const auto& n : phase.nodes) {
    if (n.op == SY_OP_MATMUL && n.inputs.size() == 2) {
      const Value* a = phase.value(n.inputs[0]);
      const Value* w = phase.value(n.inputs[1]);
      if (!a || !w || w->shape.size() != 2) continue;
      const bool tb = int_attr(n, SY_ATTR_TRANSPOSE_B, 0) != 0;
      const int64_t cols = tb ? w->shape[0] : w->shape[1];
      flops += 2.0 * elements(*a, shape) * double(cols);
    } else if (n.op == SY_OP_MOE_EXPERTS && n.inputs.size() >= 6) {
      // Each token's top_k experts: gate and up [I, H], down [H, I].
      const Value* x = phase.value(n.inputs[0]);
      const Value* ids = phase.value(n.inputs[1]);
      const Value* gate = phase.value(n.inputs[3]);
      if (!x || !ids || !gate || gate->shape.size() != 3 || ids->shape.empty()) continue;
      const double routed = elements(*ids, shape);  // tokens · top_k
      flops += 2.0 * routed * 3.0 * double(gate->shape[1] * gate->shape[2]);
    } else if (n.op == SY_OP_ATTENTION && n.inputs.size() >= 3) {
      const Value* q = phase.value(n.inputs[0]);
      const Value* k = phase.value(n.inputs[1]);
      if (!q || !k || q->shape.size() != 4 || k->shape.size() != 4) continue;
      const bool causal = int_attr(n, SY_ATTR_CAUSAL, 0) != 0;
      const int64_t window = int_attr(n, SY_ATTR_WINDOW_LEFT, -1);
      // Paged: each sequence's share of the tokens over its kv_len rows. Contiguous: the
      // phase's own [B, S] over its fresh keys (prefill) or its kv_len cache rows (decode).
      const bool paged = q->dynamic.axis >= 0;
      const int64_t batch = paged ? shape.sequences : q->shape[0];
      const int64_t sq = paged ? shape.tokens / std::max<int64_t>(1, shape.sequences) : q->shape[1];
      const int64_t skv =
          paged || k->kind == ValueKind::kv_cache ? std::max(shape.kv_len, sq) : k->shape[1];
      flops +=
          4.0 * double(batch * q->shape[2] * q->shape[3]) * visible_pairs(sq, skv, causal, window);
    }
  }
  return flops;
}

}  // namespace sy::cli
