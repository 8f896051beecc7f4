#include "op_contracts/attention_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>

namespace sy::contracts {
namespace {

const sy_tensor_desc* input(const sy_op_desc* op, size_t i) {
  return i < op->num_inputs ? op->inputs[i] : nullptr;
}
const sy_tensor_desc* output(const sy_op_desc* op, size_t i) {
  return i < op->num_outputs ? op->outputs[i] : nullptr;
}

int refuse_rank(const char* operand, const sy_tensor_desc* t, int rank, sy_refusal_fn add,
                void* ctx) {
  if (t && t->ndim == rank && t->shape) return 0;
  char need[48], text[128];
  std::snprintf(need, sizeof need, "%s of rank %d", operand, rank);
  std::snprintf(text, sizeof text, "%s must be a rank-%d tensor", operand, rank);
  return sy_refuse(add, ctx, "shape", t ? "other rank" : "missing", need, text);
}

std::string dims(const sy_tensor_desc* t) {
  std::string s = "[";
  for (int i = 0; i < t->ndim; ++i) {
    if (i) s += ',';
    s += std::to_string(t->shape[i]);
  }
  return s + "]";
}

}  // namespace

int narrow_attention(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  const sy_tensor_desc *q = input(op, 0), *k = input(op, 1), *v = input(op, 2);
  int n = refuse_rank("q", q, 4, add, ctx) + refuse_rank("k", k, 4, add, ctx) +
          refuse_rank("v", v, 4, add, ctx) + refuse_rank("o", output(op, 0), 4, add, ctx);
  if (n) return n;
  char need[64], text[160];
  if (k->shape[2] <= 0 || q->shape[2] % k->shape[2] != 0) {
    std::snprintf(need, sizeof need, "Hq=%lld, Hkv=%lld", (long long)q->shape[2],
                  (long long)k->shape[2]);
    std::snprintf(text, sizeof text, "query heads (%lld) must be a multiple of KV heads (%lld)",
                  (long long)q->shape[2], (long long)k->shape[2]);
    n += sy_refuse(add, ctx, "gqa_divisible", need, "Hq % Hkv == 0", text);
  }
  const sy_tensor_desc* o = output(op, 0);
  bool same_kv = std::equal(k->shape, k->shape + 4, v->shape);
  bool fits = q->shape[0] == k->shape[0] && q->shape[3] == k->shape[3] &&
              std::equal(q->shape, q->shape + 4, o->shape);
  if (!same_kv || !fits)
    n += sy_refuse(add, ctx, "shape", "mismatched q/k/v/o shapes",
                   "q, o [B,Sq,Hq,D]; k, v [B,Skv,Hkv,D]",
                   "q, k, v and o must agree on B and D, k and v on every dimension");
  for (const sy_tensor_desc* t : {k, v})
    if (t->dtype != q->dtype)
      n += sy_refuse(add, ctx, "dtype_match", "q, k, v of one dtype", "q, k, v of one dtype",
                     "q, k and v must share one dtype");
  bool kv_len_input = sy_op_int_attr(op, SY_ATTR_KV_LEN_INPUT, 0) != 0;
  size_t operands = op->num_inputs - (kv_len_input ? 1 : 0);
  if (operands > 4)
    n += sy_refuse(add, ctx, "arity", "more inputs", "q, k, v[, sinks][, kv_len]",
                   "attention takes q, k, v, optional sinks and optional kv_len");
  if (const sy_tensor_desc* sinks = operands > 3 ? input(op, 3) : nullptr)
    if (sinks->dtype != SY_DTYPE_F32 || sinks->ndim != 1 || sinks->shape[0] != q->shape[2])
      n += sy_refuse(add, ctx, "sinks_shape", "sinks", "f32 [Hq]", "sinks must be f32 [Hq]");
  if (kv_len_input) {
    const sy_tensor_desc* kv = input(op, op->num_inputs - 1);
    if (!kv || kv->dtype != SY_DTYPE_I64 || kv->ndim != 1 || kv->shape[0] != q->shape[0])
      n += sy_refuse(add, ctx, "kv_len_shape", "kv_len", "i64 [B]", "kv_len must be i64 [B]");
  }
  if (const sy_tensor_desc* lse = output(op, 1))
    if (lse->dtype != SY_DTYPE_F32 || lse->ndim != 3 || lse->shape[0] != q->shape[0] ||
        lse->shape[1] != q->shape[2] || lse->shape[2] != q->shape[1])
      n += sy_refuse(add, ctx, "lse_shape", "lse", "f32 [B,Hq,Sq]", "lse must be f32 [B,Hq,Sq]");
  return n;
}

int narrow_fused_decode(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  int n = 0;
  auto refuse = [&](const char* constraint, const std::string& required, const std::string& offered,
                    const std::string& text) {
    n += sy_refuse(add, ctx, constraint, required.c_str(), offered.c_str(), text.c_str());
  };
  // x [1,1,H]; wq [Hq*D,H]; wk, wv [Hkv*D,H]; position i64 [1] -> o [1,1,Hq,D]; caches [1,C,Hkv,D]
  static const char* const kNames[] = {"x",        "wq", "wk",      "wv",
                                       "position", "o",  "k_cache", "v_cache"};
  static const int kRanks[] = {3, 2, 2, 2, 1, 4, 4, 4};
  const sy_tensor_desc* t[8] = {};
  bool present = op->num_inputs == 5 && op->num_outputs == 3 && op->inputs && op->outputs;
  for (int i = 0; present && i < 8; ++i) {
    t[i] = i < 5 ? op->inputs[i] : op->outputs[i - 5];
    present = t[i] && (t[i]->ndim <= 0 || t[i]->shape);
  }
  if (!present) {
    refuse(
        "arity",
        std::to_string(op->num_inputs) + " inputs, " + std::to_string(op->num_outputs) + " outputs",
        "x, wq, wk, wv, position -> o, k_cache, v_cache",
        "the fused decode block takes x, wq, wk, wv, position and writes o, k_cache, v_cache");
    return n;
  }
  const sy_tensor_desc *x = t[0], *wq = t[1], *wk = t[2], *wv = t[3], *pos = t[4], *o = t[5],
                       *kc = t[6], *vc = t[7];

  // Dtypes: the envelope checks x; every other float operand must be f32 too.
  for (int i = 1; i < 8; ++i) {
    if (i == 4) continue;
    if (t[i]->dtype == SY_DTYPE_F32) continue;
    const char* dt = sy_dtype_name(t[i]->dtype) ? sy_dtype_name(t[i]->dtype) : "?";
    refuse("dtype", std::string(kNames[i]) + " " + dt, std::string(kNames[i]) + " f32",
           std::string(kNames[i]) + " is " + dt + ": the fused decode block is f32 only");
  }

  bool ranks_ok = true;  // and every dimension positive
  for (int i = 0; i < 8; ++i) {
    if (t[i]->ndim == kRanks[i]) {
      if (std::all_of(t[i]->shape, t[i]->shape + t[i]->ndim, [](int64_t d) { return d > 0; }))
        continue;
      ranks_ok = false;
      refuse("shape", std::string(kNames[i]) + " " + dims(t[i]), "positive dimensions",
             std::string(kNames[i]) + " has an empty or negative dimension " + dims(t[i]));
      continue;
    }
    ranks_ok = false;
    refuse("rank", std::string(kNames[i]) + " " + dims(t[i]),
           std::string(kNames[i]) + " of rank " + std::to_string(kRanks[i]),
           std::string(kNames[i]) + " must have rank " + std::to_string(kRanks[i]) + ", is " +
               dims(t[i]) + " (see docs/operators.md)");
  }
  if (pos->dtype != SY_DTYPE_I64 || (pos->ndim == 1 && pos->shape[0] != 1))
    refuse("position",
           std::string("position ") +
               (sy_dtype_name(pos->dtype) ? sy_dtype_name(pos->dtype) : "?") + " " + dims(pos),
           "position i64 [1]",
           "position must be an i64 tensor of shape [1], is " +
               std::string(sy_dtype_name(pos->dtype) ? sy_dtype_name(pos->dtype) : "?") + " " +
               dims(pos));

  int64_t D = 0;
  if (ranks_ok) {
    const int64_t H = x->shape[2], Hq = o->shape[2], Hkv = kc->shape[2], C = kc->shape[1];
    D = o->shape[3];
    if (x->shape[0] != 1 || o->shape[0] != 1 || kc->shape[0] != 1 || vc->shape[0] != 1)
      refuse("batch", "x " + dims(x) + ", k_cache " + dims(kc), "batch 1",
             "the fused decode block serves one sequence (batch 1); x is " + dims(x) +
                 ", k_cache " + dims(kc));
    if (x->shape[1] != 1 || o->shape[1] != 1)
      refuse("decode", "x " + dims(x) + ", o " + dims(o), "one token",
             "the fused decode block serves one token: x must be [1,1,H] and o [1,1,Hq,D], are " +
                 dims(x) + " and " + dims(o));
    auto shape = [&](const char* name, const sy_tensor_desc* d, std::initializer_list<int64_t> want,
                     const char* layout) {
      if (std::equal(want.begin(), want.end(), d->shape)) return;
      std::string w = "[";
      for (int64_t v : want) {
        if (w.size() > 1) w += ',';
        w += std::to_string(v);
      }
      w += "]";
      refuse("shape_match", std::string(name) + " " + dims(d), std::string(name) + " " + w,
             std::string(name) + " is " + dims(d) + ", must be " + w + " (" + layout + ")");
    };
    shape("wq", wq, {Hq * D, H}, "[Hq·D, H]");
    shape("wk", wk, {Hkv * D, H}, "[Hkv·D, H]");
    shape("wv", wv, {Hkv * D, H}, "[Hkv·D, H]");
    shape("k_cache", kc, {kc->shape[0], C, Hkv, D}, "[1, C, Hkv, D] with o's D");
    shape("v_cache", vc, {kc->shape[0], C, Hkv, D}, "k_cache's shape");
    if (Hq % Hkv != 0)
      refuse("gqa_divisible", "Hq=" + std::to_string(Hq) + ", Hkv=" + std::to_string(Hkv),
             "Hq % Hkv == 0",
             "query heads (" + std::to_string(Hq) + ") must be a multiple of KV heads (" +
                 std::to_string(Hkv) + ")");
    if (D % kAttentionHeadDimMultiple != 0 || D > kAttentionHeadDimMax)
      refuse("head_dim", std::to_string(D),
             "multiple of " + std::to_string(kAttentionHeadDimMultiple) + " up to " +
                 std::to_string(kAttentionHeadDimMax),
             "head dim " + std::to_string(D) + " is outside the kernel's set (multiple of " +
                 std::to_string(kAttentionHeadDimMultiple) + " up to " +
                 std::to_string(kAttentionHeadDimMax) + ")");
  }

  // Attributes.
  auto find = [&](const char* name) -> const sy_attr* {
    for (size_t i = 0; i < op->num_attrs; ++i) {
      const sy_attr* a = op->attrs ? op->attrs[i] : nullptr;
      if (a && a->name && std::strcmp(a->name, name) == 0) return a;
    }
    return nullptr;
  };
  auto wrong_type = [&](const char* name, const char* type) {
    refuse("attribute", std::string(name) + " of another type", std::string(name) + " " + type,
           std::string("attribute ") + name + " must be " + type);
  };
  auto int_attr = [&](const char* name, int64_t fallback) {
    const sy_attr* a = find(name);
    if (!a) return fallback;
    if (a->type == SY_ATTR_INT) return a->i;
    wrong_type(name, "an int");
    return fallback;
  };
  auto float_attr = [&](const char* name, double fallback) {
    const sy_attr* a = find(name);
    if (!a) return fallback;
    if (a->type == SY_ATTR_FLOAT) return a->f;
    if (a->type == SY_ATTR_INT) return double(a->i);
    wrong_type(name, "a float");
    return fallback;
  };
  const int64_t rope = int_attr(kFusedDecodeRopeAttr, 1);
  if (rope != 0 && rope != 1)
    refuse("attribute", "rope=" + std::to_string(rope), "rope 0|1",
           "attribute rope is " + std::to_string(rope) + ", must be 0 (no rotary) or 1");
  if (const sy_attr* a = find(SY_ATTR_ROPE_STYLE)) {
    if (a->type != SY_ATTR_STRING || !a->s)
      wrong_type(SY_ATTR_ROPE_STYLE, "a string");
    else if (std::strcmp(a->s, "neox") != 0)
      refuse("rope_style", std::string("rope_style=") + a->s, "rope_style neox",
             std::string("the fused decode block rotates neox style only, rope_style is \"") +
                 a->s + "\"");
  }
  const int64_t rotary = int_attr(SY_ATTR_ROTARY_DIM, D);
  if (rope == 1 && ranks_ok && (rotary < 2 || rotary > D || rotary % 2 != 0))
    refuse("rotary_dim", "rotary_dim=" + std::to_string(rotary),
           "even rotary_dim in [2, " + std::to_string(D) + "]",
           "rotary_dim is " + std::to_string(rotary) +
               ", must be even and between 2 and the head dim " + std::to_string(D));
  const double theta = float_attr(SY_ATTR_ROPE_THETA, 10000.0);
  if (rope == 1 && !(std::isfinite(theta) && theta > 0))
    refuse("attribute", "rope_theta=" + std::to_string(theta), "rope_theta finite > 0",
           "attribute rope_theta is " + std::to_string(theta) + ", must be finite and > 0");
  const double scale = float_attr(SY_ATTR_SCALE, 0.0);
  if (!std::isfinite(scale))
    refuse("attribute", "scale=" + std::to_string(scale), "scale finite",
           "attribute scale is " + std::to_string(scale) + ", must be finite (0 = 1/sqrt(D))");
  const double softcap = float_attr(SY_ATTR_SOFTCAP, 0.0);
  if (softcap != 0.0)
    refuse("softcap", "softcap=" + std::to_string(softcap), "no softcap",
           "the fused decode block has no softcap (softcap is " + std::to_string(softcap) + ")");
  int_attr(SY_ATTR_CAUSAL, 1);
  int_attr(SY_ATTR_WINDOW_LEFT, -1);
  return n;
}

}  // namespace sy::contracts
