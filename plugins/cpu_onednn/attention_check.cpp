#include "attention_check.hpp"

#include <algorithm>
#include <cstdio>
#include <initializer_list>

namespace sy::cpu {
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
  // x [1,1,H]; wq [Hq*D,H]; wk, wv [Hkv*D,H]; position i64 [1] -> o [1,1,Hq,D]; caches [1,C,Hkv,D]
  const sy_tensor_desc *x = input(op, 0), *wq = input(op, 1), *wk = input(op, 2),
                       *wv = input(op, 3), *pos = input(op, 4);
  const sy_tensor_desc *o = output(op, 0), *kc = output(op, 1), *vc = output(op, 2);
  if (op->num_inputs != 5 || op->num_outputs != 3 || !x || !wq || !wk || !wv || !pos || !o || !kc ||
      !vc)
    return sy_refuse(add, ctx, "arity", "other operands", "x, wq, wk, wv, position -> o, k, v",
                     "the fused decode block takes x, wq, wk, wv, position and writes o, k, v");
  int n = 0;
  if (x->ndim != 3 || x->shape[0] != 1 || x->shape[1] != 1)
    n += sy_refuse(add, ctx, "batch", "other", "batch 1, one token [1,1,H]",
                   "the fused decode block serves one token of one sequence");
  if (o->ndim != 4 || kc->ndim != 4 || vc->ndim != 4 || wq->ndim != 2 || wk->ndim != 2 ||
      wv->ndim != 2 || x->ndim < 1)
    return n + sy_refuse(add, ctx, "shape", "other ranks", "see docs/operators.md",
                         "fused decode operand ranks are wrong");
  int64_t H = x->shape[x->ndim - 1], Hq = o->shape[2], D = o->shape[3], Hkv = kc->shape[2];
  bool ok = wq->shape[0] == Hq * D && wq->shape[1] == H && wk->shape[0] == Hkv * D &&
            wk->shape[1] == H && wv->shape[0] == Hkv * D && wv->shape[1] == H &&
            kc->shape[3] == D && std::equal(kc->shape, kc->shape + 4, vc->shape) && Hkv > 0 &&
            Hq % Hkv == 0 && pos->dtype == SY_DTYPE_I64;
  if (!ok)
    n += sy_refuse(add, ctx, "shape", "mismatched shapes", "see docs/operators.md",
                   "fused decode weights, caches and output do not agree");
  return n;
}

}  // namespace sy::cpu
