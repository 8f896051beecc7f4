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

int64_t elements(const Value& v) {
  int64_t n = 1;
  for (int64_t d : v.shape) n *= d;
  return n;
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

StepBytes decode_step_bytes(const Phase& decode, int64_t kv_len) {
  StepBytes b;
  for (const auto& v : decode.values) {
    if (v.kind != ValueKind::weight) continue;
    bool only_lookups = true, used = false;
    for (const auto& n : decode.nodes)
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (n.inputs[i] == v.name) {
          used = true;
          if (!(n.op == SY_OP_EMBEDDING && i == 0)) only_lookups = false;
        }
    if (!used) continue;
    const double bytes = double(v.bytes());
    const double rows = v.shape.empty() ? 1 : double(v.shape[0]);
    const Value* ids = decode.value("tokens");
    b.weights += only_lookups && ids ? bytes / rows * double(elements(*ids)) : bytes;
  }
  for (const auto& n : decode.nodes) {
    if (n.op != SY_OP_ATTENTION || n.inputs.size() < 3) continue;
    const int64_t window = int_attr(n, SY_ATTR_WINDOW_LEFT, -1);
    const int64_t rows = window >= 0 ? std::min(kv_len, window + 1) : kv_len;
    for (size_t i = 1; i <= 2; ++i) {
      const Value* cache = decode.value(n.inputs[i]);
      if (!cache || cache->shape.size() != 4) continue;  // [B, C, Hkv, D]
      b.kv += double(cache->bytes()) / double(cache->shape[1]) * double(rows);
    }
  }
  return b;
}

double phase_flops(const Phase& phase) {
  double flops = 0;
  for (const auto& n : phase.nodes) {
    if (n.op == SY_OP_MATMUL && n.inputs.size() == 2) {
      const Value* a = phase.value(n.inputs[0]);
      const Value* w = phase.value(n.inputs[1]);
      if (!a || !w || w->shape.size() != 2) continue;
      const bool tb = int_attr(n, SY_ATTR_TRANSPOSE_B, 0) != 0;
      const int64_t k = tb ? w->shape[1] : w->shape[0], cols = tb ? w->shape[0] : w->shape[1];
      flops += 2.0 * double(elements(*a) / k) * double(k) * double(cols);
    } else if (n.op == SY_OP_ATTENTION && n.inputs.size() >= 3) {
      const Value* q = phase.value(n.inputs[0]);
      const Value* k = phase.value(n.inputs[1]);
      if (!q || !k || q->shape.size() != 4 || k->shape.size() != 4) continue;
      const bool causal = int_attr(n, SY_ATTR_CAUSAL, 0) != 0;
      const int64_t window = int_attr(n, SY_ATTR_WINDOW_LEFT, -1);
      const int64_t sq = q->shape[1];
      const int64_t skv = k->kind == ValueKind::kv_cache ? sq : k->shape[1];
      flops += 4.0 * double(q->shape[0] * q->shape[2] * q->shape[3]) *
               visible_pairs(sq, skv, causal, window);
    }
  }
  return flops;
}

}  // namespace sy::cli
