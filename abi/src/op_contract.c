/* The operator contracts of docs/operators.md; see switchyard/op_contract.h. */
#include "switchyard/op_contract.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- reporting ------------------------------------------------------------------------- */

typedef struct refuser {
  sy_refusal_fn add;
  void* ctx;
  int n;
} refuser;

static void refuse(refuser* r, const char* constraint, const char* required, const char* offered,
                   const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
static void refuse(refuser* r, const char* constraint, const char* required, const char* offered,
                   const char* fmt, ...) {
  char text[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  r->n += sy_refuse(r->add, r->ctx, constraint, required, offered, text);
}

typedef struct text64 {
  char s[64];
} text64;

static text64 fmt64(const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
static text64 fmt64(const char* fmt, ...) {
  text64 t;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t.s, sizeof t.s, fmt, ap);
  va_end(ap);
  return t;
}

static text64 dims_of(const int64_t* shape, int ndim) {
  text64 t;
  size_t used = 1;
  int i;
  t.s[0] = '[';
  t.s[1] = '\0';
  for (i = 0; shape && i < ndim && used < sizeof t.s; ++i)
    used += (size_t)snprintf(t.s + used, sizeof t.s - used, "%s%lld", i ? "," : "",
                             (long long)shape[i]);
  if (used < sizeof t.s - 1) {
    t.s[used] = ']';
    t.s[used + 1] = '\0';
  }
  return t;
}

static text64 dims(const sy_tensor_desc* t) {
  return dims_of(t->shape, t->ndim);
}

static const char* dtname(sy_dtype d) {
  const char* n = sy_dtype_name(d);
  return n ? n : "?";
}

static int64_t elements(const sy_tensor_desc* t) {
  int64_t n = 1;
  int i;
  for (i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

static int is_float(sy_dtype d) {
  return d == SY_DTYPE_F32 || d == SY_DTYPE_F16 || d == SY_DTYPE_BF16;
}

/* ---- attributes ------------------------------------------------------------------------ */

static const sy_attr* find_attr(const sy_op_desc* op, const char* name) {
  size_t i;
  for (i = 0; i < op->num_attrs; ++i) {
    const sy_attr* a = op->attrs ? op->attrs[i] : NULL;
    if (a && a->name && strcmp(a->name, name) == 0) return a;
  }
  return NULL;
}

static void wrong_type(refuser* r, const char* name, const char* type) {
  text64 need = fmt64("%s of another type", name), have = fmt64("%s %s", name, type);
  refuse(r, "attribute", need.s, have.s, "attribute %s must be %s", name, type);
}

static int64_t int_attr(refuser* r, const sy_op_desc* op, const char* name, int64_t fallback) {
  const sy_attr* a = find_attr(op, name);
  if (!a) return fallback;
  if (a->type == SY_ATTR_INT) return a->i;
  wrong_type(r, name, "an int");
  return fallback;
}

/* Floats accept an int too, as the kernels' attribute readers do. */
static double float_attr(refuser* r, const sy_op_desc* op, const char* name, double fallback) {
  const sy_attr* a = find_attr(op, name);
  if (!a) return fallback;
  if (a->type == SY_ATTR_FLOAT) return a->f;
  if (a->type == SY_ATTR_INT) return (double)a->i;
  wrong_type(r, name, "a float");
  return fallback;
}

static const char* string_attr(refuser* r, const sy_op_desc* op, const char* name,
                               const char* fallback) {
  const sy_attr* a = find_attr(op, name);
  if (!a) return fallback;
  if (a->type == SY_ATTR_STRING && a->s) return a->s;
  wrong_type(r, name, "a string");
  return fallback;
}

static void one_of(refuser* r, const char* name, const char* value, const char* a, const char* b) {
  text64 need, have;
  if (strcmp(value, a) == 0 || strcmp(value, b) == 0) return;
  need = fmt64("%s=%s", name, value);
  have = fmt64("%s %s|%s", name, a, b);
  refuse(r, "attribute", need.s, have.s, "attribute %s is \"%s\", must be \"%s\" or \"%s\"", name,
         value, a, b);
}

static void finite_at_least(refuser* r, const char* name, double value, double min, int strict) {
  text64 need, have;
  if (isfinite(value) && (strict ? value > min : value >= min)) return;
  need = fmt64("%s=%f", name, value);
  have = fmt64("%s %s %f", name, strict ? ">" : ">=", min);
  refuse(r, "attribute", need.s, have.s, "attribute %s is %f, must be finite and %s %f", name,
         value, strict ? ">" : ">=", min);
}

/* ---- operands -------------------------------------------------------------------------- */

static const sy_tensor_desc* input(const sy_op_desc* op, size_t i) {
  return op->inputs && i < op->num_inputs ? op->inputs[i] : NULL;
}

static const sy_tensor_desc* output(const sy_op_desc* op, size_t i) {
  return op->outputs && i < op->num_outputs ? op->outputs[i] : NULL;
}

/* One operand: described, with positive dimensions that multiply to at most 2^48 elements.
 * Labels and texts are formatted only on a refusal: the plugin kit re-checks the actual
 * extents of every varlen execute with these contracts. */
static int well_formed(refuser* r, const sy_tensor_desc* t, const char* label) {
  int64_t n = 1;
  int i;
  if (!t || t->ndim < 0 || (t->ndim > 0 && !t->shape)) {
    text64 need = fmt64("%s missing", label), have = fmt64("%s described", label);
    refuse(r, "operands", need.s, have.s, "%s is missing or malformed", label);
    return 0;
  }
  for (i = 0; i < t->ndim; ++i) {
    int empty = t->shape[i] < 1;
    if (empty || __builtin_mul_overflow(n, t->shape[i], &n) || n > ((int64_t)1 << 48)) {
      text64 d = dims(t), need = fmt64("%s %s", label, d.s);
      if (empty)
        refuse(r, "shape", need.s, "positive dimensions",
               "%s has an empty or negative dimension %s", label, d.s);
      else
        refuse(r, "shape", need.s, "at most 2^48 elements",
               "%s %s has more elements than any memory holds", label, d.s);
      return 0;
    }
  }
  return 1;
}

/* well_formed for operand i of the inputs (is_input) or outputs, labelled "input i" / "output i"
 * only when it is refused. */
static int operand_well_formed(refuser* r, const sy_tensor_desc* t, int is_input, size_t i) {
  refuser quiet = {NULL, NULL, 0};
  text64 label;
  if (well_formed(&quiet, t, "")) return 1;
  label = fmt64("%s %zu", is_input ? "input" : "output", i);
  return well_formed(r, t, label.s);
}

/* The operand counts the kind takes, each well formed. Later filters may dereference every
 * operand once this returned 1. */
static int operands(refuser* r, const sy_op_desc* op, size_t inputs, size_t outputs,
                    const char* names) {
  size_t i;
  int ok = 1;
  if (op->num_inputs != inputs || op->num_outputs != outputs || (inputs && !op->inputs) ||
      (outputs && !op->outputs)) {
    text64 need = fmt64("%zu inputs, %zu outputs", op->num_inputs, op->num_outputs);
    text64 have = fmt64("%zu inputs, %zu outputs", inputs, outputs);
    refuse(r, "operands", need.s, have.s, "the operator takes %s", names);
    return 0;
  }
  for (i = 0; i < inputs; ++i) ok = operand_well_formed(r, op->inputs[i], 1, i) && ok;
  for (i = 0; i < outputs; ++i) ok = operand_well_formed(r, op->outputs[i], 0, i) && ok;
  return ok;
}

static void rank_at_least(refuser* r, const char* name, const sy_tensor_desc* t, int rank) {
  text64 need, have, d;
  if (t->ndim >= rank) return;
  need = fmt64("%s of rank %d", name, t->ndim);
  have = fmt64("%s of rank >= %d", name, rank);
  d = dims(t);
  refuse(r, "rank", need.s, have.s, "%s must have rank >= %d, has %s", name, rank, d.s);
}

static int rank_is(refuser* r, const char* name, const sy_tensor_desc* t, int rank,
                   const char* layout) {
  text64 need, have, d;
  if (t->ndim == rank) return 1;
  need = fmt64("%s of rank %d", name, t->ndim);
  have = fmt64("%s %s", name, layout);
  d = dims(t);
  refuse(r, "rank", need.s, have.s, "%s must be %s (rank %d), has %s", name, layout, rank, d.s);
  return 0;
}

static void same_dtype(refuser* r, const char* name, const sy_tensor_desc* t, const char* ref_name,
                       const sy_tensor_desc* ref) {
  text64 need, have;
  if (t->dtype == ref->dtype) return;
  need = fmt64("%s %s", name, dtname(t->dtype));
  have = fmt64("%s %s", name, dtname(ref->dtype));
  refuse(r, "dtype_match", need.s, have.s, "%s is %s but %s is %s: they must share one dtype", name,
         dtname(t->dtype), ref_name, dtname(ref->dtype));
}

static int shape_equals(const sy_tensor_desc* t, const int64_t* want, int n) {
  int i;
  if (t->ndim != n) return 0;
  for (i = 0; i < n; ++i)
    if (t->shape[i] != want[i]) return 0;
  return 1;
}

static void shape_is(refuser* r, const char* name, const sy_tensor_desc* t, const int64_t* want,
                     int n, const char* why) {
  text64 d, w, need, have;
  if (shape_equals(t, want, n)) return;
  d = dims(t);
  w = dims_of(want, n);
  need = fmt64("%s %s", name, d.s);
  have = fmt64("%s %s", name, w.s);
  refuse(r, "shape_match", need.s, have.s, "%s is %s, must be %s (%s)", name, d.s, w.s, why);
}

/* t with ref's shape and dtype. */
static void like(refuser* r, const char* name, const sy_tensor_desc* t, const char* ref_name,
                 const sy_tensor_desc* ref) {
  text64 why;
  same_dtype(r, name, t, ref_name, ref);
  if (shape_equals(t, ref->shape, ref->ndim)) return;
  why = fmt64("like %s", ref_name);
  shape_is(r, name, t, ref->shape, ref->ndim, why.s);
}

static void index_dtype(refuser* r, const char* name, const sy_tensor_desc* t) {
  text64 need, have;
  if (t->dtype == SY_DTYPE_I32 || t->dtype == SY_DTYPE_I64) return;
  need = fmt64("%s %s", name, dtname(t->dtype));
  have = fmt64("%s i32,i64", name);
  refuse(r, "index_dtype", need.s, have.s, "%s must be i32 or i64, is %s", name, dtname(t->dtype));
}

static void position_i64(refuser* r, const sy_tensor_desc* pos) {
  text64 d, need;
  if (pos->dtype == SY_DTYPE_I64 && pos->ndim == 1 && pos->shape[0] == 1) return;
  d = dims(pos);
  need = fmt64("position %s %s", dtname(pos->dtype), d.s);
  refuse(r, "position", need.s, "position i64 [1]",
         "position must be an i64 tensor of shape [1], is %s %s", dtname(pos->dtype), d.s);
}

static void gelu_approximate(refuser* r, const sy_op_desc* op) {
  one_of(r, SY_ATTR_GELU_APPROX, string_attr(r, op, SY_ATTR_GELU_APPROX, "none"), "none", "tanh");
}

/* A block-quantized weight `w` (matmul's b, an embedding's table) read with float operand
 * `act`: `act` must be f32, f16 or bf16, and the weight's rows (`row` elements; -1 when the
 * weight is not stored as rows of the reduction, i.e. a matmul b without transpose_b) whole
 * blocks. */
static void quantized_weights(refuser* r, const char* name, const sy_tensor_desc* w,
                              const char* act_name, const sy_tensor_desc* act, int64_t row) {
  const int64_t block = (int64_t)sy_dtype_block_elements(w->dtype);
  if (!is_float(act->dtype)) {
    text64 need = fmt64("%s %s", act_name, dtname(act->dtype));
    refuse(r, "block_dtype", need.s, "f32, f16 or bf16",
           "%s is %s: with %s weights it must be f32, f16 or bf16", act_name, dtname(act->dtype),
           dtname(w->dtype));
  }
  if (row < 0) {
    refuse(r, "block_dtype", "transpose_b=0", "transpose_b=1",
           "%s is %s: block-quantized weights are stored as rows of K ([N, K], transpose_b=1)",
           name, dtname(w->dtype));
  } else if (row % block != 0) {
    text64 need = fmt64("rows of %lld", (long long)row);
    text64 have = fmt64("rows of a multiple of %lld", (long long)block);
    refuse(r, "block_dtype", need.s, have.s,
           "%s is %s: its rows of %lld elements are not whole blocks of %lld", name,
           dtname(w->dtype), (long long)row, (long long)block);
  }
}

/* Block-quantized operands anywhere but matmul's b, an embedding's table, the fused decode
 * block's projections and a copy of one. */
static int blocked_elsewhere(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  size_t i, total = op->num_inputs + op->num_outputs;
  for (i = 0; i < total; ++i) {
    int is_in = i < op->num_inputs;
    size_t idx = is_in ? i : i - op->num_inputs;
    const sy_tensor_desc* t = is_in ? op->inputs[idx] : op->outputs[idx];
    if (!t || !sy_dtype_is_blocked(t->dtype)) continue;
    if (is_in && ((op->op == SY_OP_MATMUL && idx == 1) || (op->op == SY_OP_EMBEDDING && idx == 0) ||
                  (op->op == SY_OP_FUSED_DECODE_ATTENTION && idx >= 1 && idx <= 3) ||
                  (op->op == SY_OP_MOE_EXPERTS && idx >= 3 && idx <= 5)))
      continue;
    if (op->op == SY_OP_COPY) continue; /* a copy keeps its dtype: sy_contract_copy */
    {
      text64 need = fmt64("%s %zu %s", is_in ? "input" : "output", idx, dtname(t->dtype));
      refuse(&r, "block_dtype", need.s,
             "matmul b, embedding table, fused decode projection or expert weight",
             "%s %zu is %s: only matmul's b, an embedding's table, the fused decode block's "
             "projections and moe_experts' gate, up and down may be block-quantized",
             is_in ? "input" : "output", idx, dtname(t->dtype));
    }
  }
  return r.n;
}

/* ---- contracts ------------------------------------------------------------------------- */

/* a and c are views: any shapes of M·K and M·N elements, K and N from b, so a projection may
 * write [B, S, H, D] and the next one read it. */
int sy_contract_matmul(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *a, *b, *c;
  int64_t tb, k, n, m, ea, ec;
  int ranks;
  text64 bd, b_is;
  if (!operands(&r, op, 2, 1, "a, b -> c")) return r.n;
  a = op->inputs[0];
  b = op->inputs[1];
  c = op->outputs[0];
  tb = int_attr(&r, op, SY_ATTR_TRANSPOSE_B, 0);
  if (tb != 0 && tb != 1) {
    text64 need = fmt64("transpose_b=%lld", (long long)tb);
    refuse(&r, "attribute", need.s, "transpose_b 0|1",
           "attribute transpose_b is %lld, must be 0 or 1", (long long)tb);
  }
  if (sy_dtype_is_blocked(b->dtype))
    quantized_weights(&r, "b", b, "a", a, tb == 1 && b->ndim == 2 ? b->shape[1] : -1);
  else
    same_dtype(&r, "b", b, "a", a);
  same_dtype(&r, "c", c, "a", a);
  ranks = a->ndim >= 1 && c->ndim >= 1;
  rank_at_least(&r, "a", a, 1);
  rank_at_least(&r, "c", c, 1);
  ranks = rank_is(&r, "b", b, 2, tb == 1 ? "[N, K]" : "[K, N]") && ranks;
  if (!ranks) return r.n;
  k = tb == 1 ? b->shape[1] : b->shape[0];
  n = tb == 1 ? b->shape[0] : b->shape[1];
  ea = elements(a);
  ec = elements(c);
  if (ea % k == 0 && ec % n == 0 && ec / n == ea / k) return r.n;
  bd = dims(b);
  b_is = fmt64("b is %s%s", bd.s, tb == 1 ? " [N, K] (transpose_b=1)" : " [K, N]");
  if (ea % k != 0) {
    text64 ad = dims(a), need = fmt64("a of %lld elements", (long long)ea);
    text64 have = fmt64("a of M·K elements, K=%lld", (long long)k);
    refuse(&r, "shape_match", need.s, have.s,
           "a %s has %lld elements, not a multiple of K=%lld (%s): K must match", ad.s,
           (long long)ea, (long long)k, b_is.s);
    return r.n;
  }
  m = ea / k;
  if (ec % n != 0 || ec / n != m) {
    text64 cd = dims(c), need = fmt64("c of %lld elements", (long long)ec);
    text64 have = fmt64("c of M·N = %lld·%lld elements", (long long)m, (long long)n);
    refuse(&r, "shape_match", need.s, have.s,
           "c %s has %lld elements, must have M·N = %lld·%lld (M=%lld rows of a, %s)", cd.s,
           (long long)ec, (long long)m, (long long)n, (long long)m, b_is.s);
  }
  return r.n;
}

int sy_contract_embedding(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *table, *ids, *rows;
  if (!operands(&r, op, 2, 1, "table, ids -> rows")) return r.n;
  table = op->inputs[0];
  ids = op->inputs[1];
  rows = op->outputs[0];
  index_dtype(&r, "ids", ids);
  if (sy_dtype_is_blocked(table->dtype))
    quantized_weights(&r, "table", table, "rows", rows, table->ndim == 2 ? table->shape[1] : -1);
  else
    same_dtype(&r, "rows", rows, "table", table);
  if (rank_is(&r, "table", table, 2, "[V, H]")) {
    int64_t want[17];
    int i, n = ids->ndim < 16 ? ids->ndim : 16;
    for (i = 0; i < n; ++i) want[i] = ids->shape[i];
    want[n] = table->shape[1];
    shape_is(&r, "rows", rows, want, n + 1, "[..., H]: ids' shape, then the table's H");
  }
  return r.n;
}

/* x [..., H], weight [H] (and bias [H]) of x's dtype, y like x. */
static int norm_contract(const sy_op_desc* op, sy_refusal_fn add, void* ctx, int with_bias) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc* x;
  if (!operands(&r, op, with_bias ? 3 : 2, 1,
                with_bias ? "x, weight, bias -> y" : "x, weight -> y"))
    return r.n;
  x = op->inputs[0];
  rank_at_least(&r, "x", x, 1);
  if (x->ndim >= 1) {
    const int64_t* h = &x->shape[x->ndim - 1];
    shape_is(&r, "weight", op->inputs[1], h, 1, "[H], H the last dimension of x");
    if (with_bias) shape_is(&r, "bias", op->inputs[2], h, 1, "[H], H the last dimension of x");
  }
  same_dtype(&r, "weight", op->inputs[1], "x", x);
  if (with_bias) same_dtype(&r, "bias", op->inputs[2], "x", x);
  like(&r, "y", op->outputs[0], "x", x);
  finite_at_least(&r, SY_ATTR_EPS, float_attr(&r, op, SY_ATTR_EPS, with_bias ? 1e-5 : 1e-6), 0.0,
                  0);
  if (!with_bias && !isfinite(float_attr(&r, op, SY_ATTR_WEIGHT_OFFSET, 0.0)))
    refuse(&r, "attribute", "weight_offset not finite", "weight_offset finite",
           "attribute weight_offset must be finite");
  return r.n;
}

int sy_contract_rms_norm(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  return norm_contract(op, add, ctx, 0);
}

int sy_contract_layer_norm(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  return norm_contract(op, add, ctx, 1);
}

static void rotary_dim_in_range(refuser* r, int64_t rot, int64_t d) {
  text64 need, have;
  if (rot >= 2 && rot <= d && rot % 2 == 0) return;
  need = fmt64("rotary_dim=%lld", (long long)rot);
  have = fmt64("even rotary_dim in [2, %lld]", (long long)d);
  refuse(r, "rotary_dim", need.s, have.s,
         "rotary_dim is %lld, must be even and between 2 and the head dim %lld", (long long)rot,
         (long long)d);
}

/* A scaled rope's frequency table: f32 [rotary_dim / 2] (inv_freq[i] replaces theta^(-2i/R));
 * and the attention factor on cos and sin, finite and > 0. */
static void rope_scaling(refuser* r, const sy_op_desc* op, const sy_tensor_desc* table,
                         int64_t rotary) {
  finite_at_least(r, SY_ATTR_ROPE_ATTENTION_FACTOR,
                  float_attr(r, op, SY_ATTR_ROPE_ATTENTION_FACTOR, 1.0), 0.0, 1);
  if (!table) return;
  if (table->dtype != SY_DTYPE_F32) {
    text64 need = fmt64("inv_freq %s", dtname(table->dtype));
    refuse(r, "dtype_match", need.s, "inv_freq f32", "the rope frequency table must be f32, is %s",
           dtname(table->dtype));
  }
  if (rotary > 0) {
    const int64_t half = rotary / 2;
    shape_is(r, "inv_freq", table, &half, 1, "[rotary_dim / 2]");
  }
}

int sy_contract_rope(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *x, *pos, *table;
  const int scaled = op->num_inputs == 3;
  int64_t rotary = 0;
  if (!operands(&r, op, scaled ? 3 : 2, 1, "x, positions[, inv_freq] -> y")) return r.n;
  x = op->inputs[0];
  pos = op->inputs[1];
  table = scaled ? op->inputs[2] : NULL;
  index_dtype(&r, "positions", pos);
  like(&r, "y", op->outputs[0], "x", x);
  finite_at_least(&r, SY_ATTR_ROPE_THETA, float_attr(&r, op, SY_ATTR_ROPE_THETA, 10000.0), 0.0, 1);
  one_of(&r, SY_ATTR_ROPE_STYLE, string_attr(&r, op, SY_ATTR_ROPE_STYLE, "neox"), "neox",
         "interleaved");
  if (rank_is(&r, "x", x, 4, "[B, S, H, D]")) {
    const int64_t bs[2] = {x->shape[0], x->shape[1]};
    shape_is(&r, "positions", pos, bs, 2, "[B, S] of x");
    rotary = int_attr(&r, op, SY_ATTR_ROTARY_DIM, x->shape[3]);
    rotary_dim_in_range(&r, rotary, x->shape[3]);
  } else {
    int_attr(&r, op, SY_ATTR_ROTARY_DIM, 0);
  }
  rope_scaling(&r, op, table, rotary);
  return r.n;
}

/* y = softcap · tanh(x / softcap): y like x, softcap finite and > 0. */
int sy_contract_softcap(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  if (!operands(&r, op, 1, 1, "x -> y")) return r.n;
  like(&r, "y", op->outputs[0], "x", op->inputs[0]);
  finite_at_least(&r, SY_ATTR_SOFTCAP, float_attr(&r, op, SY_ATTR_SOFTCAP, 0.0), 0.0, 1);
  return r.n;
}

/* y = x[..., start : start + n, ...] along `axis`: same dtype and rank, every extent but the
 * axis equal to x's, and the kept range inside x. */
int sy_contract_slice(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *x, *y;
  int64_t axis, start, want[16];
  int i;
  if (!operands(&r, op, 1, 1, "x -> y")) return r.n;
  x = op->inputs[0];
  y = op->outputs[0];
  same_dtype(&r, "y", y, "x", x);
  rank_at_least(&r, "x", x, 1);
  axis = int_attr(&r, op, SY_ATTR_AXIS, -1);
  start = int_attr(&r, op, SY_ATTR_START, -1);
  if (x->ndim > 16)
    refuse(&r, "rank", "x of rank > 16", "x of rank <= 16", "slice takes x of rank <= 16, has %d",
           x->ndim);
  if (x->ndim < 1 || x->ndim > 16) return r.n;
  if (axis < 0 || axis >= x->ndim) {
    text64 need = fmt64("axis=%lld", (long long)axis), have = fmt64("0 <= axis < %d", x->ndim);
    refuse(&r, "attribute", need.s, have.s, "slice needs attribute axis in [0, %d), has %lld",
           x->ndim, (long long)axis);
    return r.n;
  }
  for (i = 0; i < x->ndim; ++i) want[i] = x->shape[i];
  if (y->ndim == x->ndim) want[axis] = y->shape[axis];
  shape_is(&r, "y", y, want, x->ndim, "x's shape but for the sliced axis");
  if (y->ndim == x->ndim && (start < 0 || start + y->shape[axis] > x->shape[axis])) {
    text64 need = fmt64("start=%lld, n=%lld", (long long)start, (long long)y->shape[axis]);
    text64 have = fmt64("0 <= start, start + n <= %lld", (long long)x->shape[axis]);
    refuse(&r, "attribute", need.s, have.s,
           "slice keeps [%lld, %lld) of axis %lld, outside x's [0, %lld)", (long long)start,
           (long long)(start + y->shape[axis]), (long long)axis, (long long)x->shape[axis]);
  }
  return r.n;
}

int sy_contract_unary(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  if (op->op == SY_OP_GELU) gelu_approximate(&r, op);
  if (!operands(&r, op, 1, 1, "x -> y")) return r.n;
  like(&r, "y", op->outputs[0], "x", op->inputs[0]);
  return r.n;
}

/* b of a's shape or a suffix of it. */
static void broadcastable(refuser* r, const sy_tensor_desc* a, const sy_tensor_desc* b) {
  int i, suffix = b->ndim <= a->ndim;
  text64 bd, ad, need, have;
  for (i = 1; suffix && i <= b->ndim; ++i) suffix = b->shape[b->ndim - i] == a->shape[a->ndim - i];
  if (suffix) return;
  bd = dims(b);
  ad = dims(a);
  need = fmt64("b %s", bd.s);
  have = fmt64("b of a's shape or a suffix of %s", ad.s);
  refuse(r, "broadcast", need.s, have.s,
         "b %s must have a's shape %s or a suffix of it (broadcast over leading dimensions)", bd.s,
         ad.s);
}

int sy_contract_binary(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  int gated = op->op == SY_OP_SILU_MUL || op->op == SY_OP_GELU_MUL;
  const char* an = gated ? "gate" : "a";
  const char* bn = gated ? "up" : "b";
  const sy_tensor_desc *a, *b;
  if (op->op == SY_OP_GELU_MUL) gelu_approximate(&r, op);
  if (!operands(&r, op, 2, 1, gated ? "gate, up -> y" : "a, b -> c")) return r.n;
  a = op->inputs[0];
  b = op->inputs[1];
  same_dtype(&r, bn, b, an, a);
  like(&r, gated ? "y" : "c", op->outputs[0], an, a);
  if (gated)
    shape_is(&r, "up", b, a->shape, a->ndim, "gate's shape");
  else
    broadcastable(&r, a, b);
  return r.n;
}

int sy_contract_softmax(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  if (!operands(&r, op, 1, 1, "x -> y")) return r.n;
  rank_at_least(&r, "x", op->inputs[0], 1);
  like(&r, "y", op->outputs[0], "x", op->inputs[0]);
  return r.n;
}

int sy_contract_argmax(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *x, *index;
  if (!operands(&r, op, 1, 1, "x -> index")) return r.n;
  x = op->inputs[0];
  index = op->outputs[0];
  if (index->dtype != SY_DTYPE_I64) {
    text64 need = fmt64("index %s", dtname(index->dtype));
    refuse(&r, "dtype_match", need.s, "index i64", "the index output must be i64, is %s",
           dtname(index->dtype));
  }
  if (x->ndim < 1) {
    rank_at_least(&r, "x", x, 1);
    return r.n;
  }
  /* A rank-1 x may give a rank-0 index or [1]. */
  if (!(x->ndim == 1 && index->ndim == 1 && index->shape[0] == 1))
    shape_is(&r, "index", index, x->shape, x->ndim - 1, "x's shape without its last axis");
  return r.n;
}

/* The same dtype, or a conversion between two float dtypes (a kernel may serve fewer). */
int sy_contract_copy(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *x, *y;
  if (!operands(&r, op, 1, 1, "x -> y")) return r.n;
  x = op->inputs[0];
  y = op->outputs[0];
  shape_is(&r, "y", y, x->shape, x->ndim, "x's shape");
  if (x->dtype != y->dtype && !(is_float(x->dtype) && is_float(y->dtype))) {
    text64 need = fmt64("%s -> %s", dtname(x->dtype), dtname(y->dtype));
    refuse(&r, "dtype_match", need.s, "the same dtype, or f32/f16/bf16",
           "copy converts only between f32, f16 and bf16, not %s to %s", dtname(x->dtype),
           dtname(y->dtype));
  }
  return r.n;
}

/* attr paged: 0 or 1 (since ABI 1.5); 1 selects the block-pool form of attention and append. */
static int paged_form(refuser* r, const sy_op_desc* op) {
  int64_t paged = int_attr(r, op, SY_ATTR_PAGED, 0);
  if (paged != 0 && paged != 1) {
    text64 need = fmt64("paged=%lld", (long long)paged);
    refuse(r, "attribute", need.s, "paged 0|1", "attribute paged is %lld, must be 0 or 1",
           (long long)paged);
  }
  return paged == 1;
}

/* A metadata operand: dtype `dt`, rank `rank`. */
static int metadata_is(refuser* r, const char* name, const sy_tensor_desc* t, sy_dtype dt, int rank,
                       const char* layout) {
  int ok = rank_is(r, name, t, rank, layout);
  if (t->dtype != dt) {
    text64 need = fmt64("%s %s", name, dtname(t->dtype));
    text64 have = fmt64("%s %s", name, dtname(dt));
    refuse(r, "index_dtype", need.s, have.s, "%s must be %s %s, is %s", name, dtname(dt), layout,
           dtname(t->dtype));
    ok = 0;
  }
  return ok;
}

/* The paged append: rows [1, T, Hkv, D], slot_mapping i64 [T] -> pool [NB, BS, Hkv, D], row t
 * written at block slot_mapping[t] / BS, offset slot_mapping[t] % BS (vLLM's slot mapping). */
static int kv_append_paged(refuser* r, const sy_op_desc* op) {
  const sy_tensor_desc *rows, *slots, *pool;
  int ranks;
  if (!operands(r, op, 2, 1, "rows, slot_mapping -> pool (paged)")) return r->n;
  rows = op->inputs[0];
  slots = op->inputs[1];
  pool = op->outputs[0];
  ranks = rank_is(r, "rows", rows, 4, "[1, T, Hkv, D]");
  ranks = rank_is(r, "pool", pool, 4, "[NB, BS, Hkv, D]") && ranks;
  ranks = metadata_is(r, "slot_mapping", slots, SY_DTYPE_I64, 1, "[T]") && ranks;
  same_dtype(r, "pool", pool, "rows", rows);
  if (!ranks) return r->n;
  if (rows->shape[0] != 1) {
    text64 d = dims(rows), need = fmt64("rows %s", d.s);
    refuse(r, "batch", need.s, "rows [1, T, Hkv, D]",
           "the paged append takes every sequence's rows packed along T: rows must be [1, T, "
           "Hkv, D], is %s",
           d.s);
  }
  if (slots->shape[0] != rows->shape[1]) {
    text64 need = fmt64("slot_mapping [%lld]", (long long)slots->shape[0]);
    text64 have = fmt64("slot_mapping [%lld]", (long long)rows->shape[1]);
    refuse(r, "shape_match", need.s, have.s, "slot_mapping must hold one slot per row (T=%lld)",
           (long long)rows->shape[1]);
  }
  if (pool->shape[2] != rows->shape[2] || pool->shape[3] != rows->shape[3]) {
    text64 pd = dims(pool), need = fmt64("pool %s", pd.s);
    refuse(r, "shape_match", need.s, "pool [NB, BS, Hkv, D] with rows' Hkv and D",
           "the pool %s must have rows' Hkv and D", pd.s);
  }
  return r->n;
}

int sy_contract_kv_cache_append(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *rows, *pos, *cache;
  int ranks;
  if (paged_form(&r, op)) return kv_append_paged(&r, op);
  if (!operands(&r, op, 2, 1, "rows, position -> cache")) return r.n;
  rows = op->inputs[0];
  pos = op->inputs[1];
  cache = op->outputs[0];
  ranks = rank_is(&r, "rows", rows, 4, "[B, T, Hkv, D]");
  ranks = rank_is(&r, "cache", cache, 4, "[B, C, Hkv, D]") && ranks;
  position_i64(&r, pos);
  same_dtype(&r, "cache", cache, "rows", rows);
  if (ranks) {
    int64_t want[4];
    memcpy(want, rows->shape, sizeof want);
    want[1] = cache->shape[1];
    shape_is(&r, "cache", cache, want, 4, "[B, C, Hkv, D] with rows' B, Hkv and D");
    if (rows->shape[1] > cache->shape[1]) {
      text64 need = fmt64("T=%lld", (long long)rows->shape[1]);
      text64 have = fmt64("T <= C=%lld", (long long)cache->shape[1]);
      refuse(&r, "capacity", need.s, have.s,
             "appending %lld rows can never fit a cache of capacity %lld",
             (long long)rows->shape[1], (long long)cache->shape[1]);
    }
  }
  return r.n;
}

/* ---- attention ------------------------------------------------------------------------- */

static int rank4_or_refuse(refuser* r, const char* operand, const sy_tensor_desc* t) {
  text64 need;
  if (t && t->ndim == 4 && t->shape) return 1;
  need = fmt64("%s of rank 4", operand);
  refuse(r, "shape", t ? "other rank" : "missing", need.s, "%s must be a rank-4 tensor", operand);
  return 0;
}

static void gqa_divisible(refuser* r, int64_t hq, int64_t hkv) {
  text64 need;
  if (hkv > 0 && hq % hkv == 0) return;
  need = fmt64("Hq=%lld, Hkv=%lld", (long long)hq, (long long)hkv);
  refuse(r, "gqa_divisible", need.s, "Hq % Hkv == 0",
         "query heads (%lld) must be a multiple of KV heads (%lld)", (long long)hq, (long long)hkv);
}

/* The optional operands after q, k, v and o: sinks, kv_len, lse. */
static void attention_extras(refuser* r, const sy_op_desc* op, const sy_tensor_desc* q) {
  int kv_len_input = sy_op_int_attr(op, SY_ATTR_KV_LEN_INPUT, 0) != 0;
  size_t operands = op->num_inputs - (kv_len_input ? 1 : 0);
  const sy_tensor_desc* sinks = operands > 3 ? input(op, 3) : NULL;
  const sy_tensor_desc* lse = output(op, 1);
  if (operands > 4)
    refuse(r, "arity", "more inputs", "q, k, v[, sinks][, kv_len]",
           "attention takes q, k, v, optional sinks and optional kv_len (last, with "
           "kv_len_input = 1)");
  if (sinks && (sinks->dtype != SY_DTYPE_F32 || sinks->ndim != 1 || !sinks->shape ||
                sinks->shape[0] != q->shape[2]))
    refuse(r, "sinks_shape", "sinks", "f32 [Hq]", "sinks must be f32 [Hq]");
  if (kv_len_input) {
    const sy_tensor_desc* kv = input(op, op->num_inputs - 1);
    if (!kv || kv->dtype != SY_DTYPE_I64 || kv->ndim != 1 || !kv->shape ||
        kv->shape[0] != q->shape[0])
      refuse(r, "kv_len_shape", "kv_len", "i64 [B]", "kv_len must be i64 [B]");
  }
  if (op->num_outputs > 2)
    refuse(r, "arity", "more outputs", "o[, lse]", "attention writes o and an optional lse");
  if (lse && (lse->dtype != SY_DTYPE_F32 || lse->ndim != 3 || !lse->shape ||
              lse->shape[0] != q->shape[0] || lse->shape[1] != q->shape[2] ||
              lse->shape[2] != q->shape[1]))
    refuse(r, "lse_shape", "lse", "f32 [B,Hq,Sq]", "lse must be f32 [B,Hq,Sq]");
}

/* The paged form's metadata, the last three inputs: query_start i32 [S+1], seq_lens i32 [S],
 * block_table i32 [S, MB]. */
static void paged_metadata(refuser* r, const sy_op_desc* op) {
  const sy_tensor_desc *starts = input(op, op->num_inputs - 3),
                       *lens = input(op, op->num_inputs - 2),
                       *table = input(op, op->num_inputs - 1);
  int ok = metadata_is(r, "query_start", starts, SY_DTYPE_I32, 1, "[S+1]");
  ok = metadata_is(r, "seq_lens", lens, SY_DTYPE_I32, 1, "[S]") && ok;
  ok = metadata_is(r, "block_table", table, SY_DTYPE_I32, 2, "[S, MB]") && ok;
  if (ok && (starts->shape[0] != lens->shape[0] + 1 || table->shape[0] != lens->shape[0])) {
    text64 need =
        fmt64("query_start [%lld], seq_lens [%lld], block_table [%lld, ...]",
              (long long)starts->shape[0], (long long)lens->shape[0], (long long)table->shape[0]);
    refuse(r, "shape_match", need.s, "[S+1], [S], [S, MB]",
           "query_start, seq_lens and block_table must describe the same S sequences");
  }
}

/* The paged form (attr paged = 1, since ABI 1.5): q [1,T,Hq,D] packing every sequence's query
 * tokens, k/v pools [NB,BS,Hkv,D], optional sinks f32 [Hq], then query_start, seq_lens and
 * block_table; o [1,T,Hq,D], optional lse f32 [1,Hq,T]. */
static int attention_paged(refuser* r, const sy_op_desc* op) {
  const sy_tensor_desc *q = input(op, 0), *k = input(op, 1), *v = input(op, 2), *o = output(op, 0);
  const sy_tensor_desc* lse = output(op, 1);
  int i, same_kv = 1, ranks;
  if (op->num_inputs != 6 && op->num_inputs != 7) {
    text64 need = fmt64("%zu inputs", op->num_inputs);
    refuse(r, "operands", need.s, "6 or 7 inputs",
           "the paged attention takes q, k_pool, v_pool, optional sinks, query_start, seq_lens, "
           "block_table");
    return r->n;
  }
  if (sy_op_int_attr(op, SY_ATTR_KV_LEN_INPUT, 0) != 0)
    refuse(r, "attribute", "kv_len_input=1", "kv_len_input 0 with paged",
           "the paged attention reads its lengths from seq_lens: kv_len_input must be 0");
  ranks = rank4_or_refuse(r, "q", q);
  ranks = rank4_or_refuse(r, "k_pool", k) && ranks;
  ranks = rank4_or_refuse(r, "v_pool", v) && ranks;
  ranks = rank4_or_refuse(r, "o", o) && ranks;
  if (!ranks) return r->n;
  gqa_divisible(r, q->shape[2], k->shape[2]);
  for (i = 0; i < 4; ++i) same_kv = same_kv && k->shape[i] == v->shape[i];
  if (!same_kv || q->shape[0] != 1 || q->shape[3] != k->shape[3] || !shape_equals(o, q->shape, 4))
    refuse(r, "shape", "mismatched q/k/v/o shapes", "q, o [1,T,Hq,D]; k_pool, v_pool [NB,BS,Hkv,D]",
           "q and o must be [1,T,Hq,D] and the pools [NB,BS,Hkv,D] with q's D");
  if (k->dtype != q->dtype || v->dtype != q->dtype)
    refuse(r, "dtype_match", "q, k, v of one dtype", "q, k, v of one dtype",
           "q, k and v must share one dtype");
  if (op->num_inputs == 7) {
    const sy_tensor_desc* sinks = input(op, 3);
    if (sinks->dtype != SY_DTYPE_F32 || sinks->ndim != 1 || sinks->shape[0] != q->shape[2])
      refuse(r, "sinks_shape", "sinks", "f32 [Hq]", "sinks must be f32 [Hq]");
  }
  paged_metadata(r, op);
  if (op->num_outputs > 2)
    refuse(r, "arity", "more outputs", "o[, lse]", "attention writes o and an optional lse");
  if (lse && (lse->dtype != SY_DTYPE_F32 || lse->ndim != 3 || !lse->shape || lse->shape[0] != 1 ||
              lse->shape[1] != q->shape[2] || lse->shape[2] != q->shape[1]))
    refuse(r, "lse_shape", "lse", "f32 [1,Hq,T]", "lse must be f32 [1,Hq,T]");
  return r->n;
}

/* q [B,Sq,Hq,D], k/v [B,Skv,Hkv,D], optional sinks f32 [Hq], optional kv_len i64 [B];
 * o [B,Sq,Hq,D], optional lse f32 [B,Hq,Sq]. The paged form: attention_paged. */
int sy_contract_attention(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *q = input(op, 0), *k = input(op, 1), *v = input(op, 2), *o = output(op, 0);
  int i, same_kv = 1, fits;
  int ranks;
  if (paged_form(&r, op)) {
    size_t n;
    if ((op->num_inputs && !op->inputs) || (op->num_outputs && !op->outputs)) {
      refuse(&r, "operands", "operand arrays missing", "q, k_pool, v_pool, ... -> o[, lse]",
             "the operand arrays are NULL");
      return r.n;
    }
    for (n = 0; n < op->num_inputs; ++n)
      if (!well_formed(&r, op->inputs[n], "an input")) return r.n;
    for (n = 0; n < op->num_outputs; ++n)
      if (!well_formed(&r, op->outputs[n], "an output")) return r.n;
    if (op->num_outputs < 1) {
      refuse(&r, "operands", "no outputs", "o[, lse]", "attention writes o and an optional lse");
      return r.n;
    }
    return attention_paged(&r, op);
  }
  ranks = rank4_or_refuse(&r, "q", q);
  ranks = rank4_or_refuse(&r, "k", k) && ranks;
  ranks = rank4_or_refuse(&r, "v", v) && ranks;
  ranks = rank4_or_refuse(&r, "o", o) && ranks;
  if (!ranks) return r.n;
  gqa_divisible(&r, q->shape[2], k->shape[2]);
  for (i = 0; i < 4; ++i) same_kv = same_kv && k->shape[i] == v->shape[i];
  fits = q->shape[0] == k->shape[0] && q->shape[3] == k->shape[3] && shape_equals(o, q->shape, 4);
  if (!same_kv || !fits)
    refuse(&r, "shape", "mismatched q/k/v/o shapes", "q, o [B,Sq,Hq,D]; k, v [B,Skv,Hkv,D]",
           "q, k, v and o must agree on B and D, k and v on every dimension");
  if (k->dtype != q->dtype || v->dtype != q->dtype)
    refuse(&r, "dtype_match", "q, k, v of one dtype", "q, k, v of one dtype",
           "q, k and v must share one dtype");
  attention_extras(&r, op, q);
  return r.n;
}

/* lse f32 [B,Hq,Sq], sinks f32 [Hq] -> o [B,Sq,Hq,D] rescaled in place. */
int sy_contract_sinks_from_lse(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *lse, *sinks, *o;
  if (!operands(&r, op, 2, 1, "lse, sinks -> o (rescaled in place)")) return r.n;
  lse = op->inputs[0];
  sinks = op->inputs[1];
  o = op->outputs[0];
  if (!rank_is(&r, "o", o, 4, "[B, Sq, Hq, D]")) return r.n;
  if (!is_float(o->dtype)) {
    text64 need = fmt64("o %s", dtname(o->dtype));
    refuse(&r, "dtype_match", need.s, "o f32|f16|bf16", "o must be a float tensor, is %s",
           dtname(o->dtype));
  }
  {
    const int64_t want_lse[3] = {o->shape[0], o->shape[2], o->shape[1]};
    shape_is(&r, "lse", lse, want_lse, 3, "[B, Hq, Sq] of o");
    shape_is(&r, "sinks", sinks, &o->shape[2], 1, "[Hq] of o");
  }
  if (lse->dtype != SY_DTYPE_F32 || sinks->dtype != SY_DTYPE_F32)
    refuse(&r, "dtype_match", "lse, sinks of another dtype", "lse f32, sinks f32",
           "lse and sinks must be f32");
  return r.n;
}

/* ---- fused decode ---------------------------------------------------------------------- */

enum { FD_X, FD_WQ, FD_WK, FD_WV, FD_POS, FD_O, FD_KC, FD_VC, FD_COUNT };
static const char* const kFdNames[FD_COUNT] = {"x",        "wq", "wk",      "wv",
                                               "position", "o",  "k_cache", "v_cache"};
static const int kFdRanks[FD_COUNT] = {3, 2, 2, 2, 1, 4, 4, 4};

/* The eight operands (and the optional ninth, a scaled rope's inv_freq, input 5), present; 0
 * after refusing when they are not. */
static int fd_operands(refuser* r, const sy_op_desc* op, const sy_tensor_desc* t[FD_COUNT]) {
  int i, present = (op->num_inputs == 5 || op->num_inputs == 6) && op->num_outputs == 3 &&
                   op->inputs && op->outputs;
  for (i = 0; present && i < FD_COUNT; ++i) {
    t[i] = i < 5 ? op->inputs[i] : op->outputs[i - 5];
    present = t[i] && (t[i]->ndim <= 0 || t[i]->shape);
  }
  if (present && op->num_inputs == 6)
    present = op->inputs[5] && (op->inputs[5]->ndim <= 0 || op->inputs[5]->shape);
  if (!present) {
    text64 need = fmt64("%zu inputs, %zu outputs", op->num_inputs, op->num_outputs);
    refuse(r, "arity", need.s, "x, wq, wk, wv, position[, inv_freq] -> o, k_cache, v_cache",
           "the fused decode block takes x, wq, wk, wv, position (and a scaled rope's inv_freq) "
           "and writes o, k_cache, v_cache");
  }
  return present;
}

/* Each operand's rank, every dimension positive; returns 1 when all hold. */
static int fd_ranks(refuser* r, const sy_tensor_desc* const t[FD_COUNT]) {
  int i, j, ok = 1;
  for (i = 0; i < FD_COUNT; ++i) {
    text64 d = dims(t[i]), need = fmt64("%s %s", kFdNames[i], d.s);
    if (t[i]->ndim != kFdRanks[i]) {
      text64 have = fmt64("%s of rank %d", kFdNames[i], kFdRanks[i]);
      refuse(r, "rank", need.s, have.s, "%s must have rank %d, is %s (see docs/operators.md)",
             kFdNames[i], kFdRanks[i], d.s);
      ok = 0;
      continue;
    }
    for (j = 0; j < t[i]->ndim; ++j)
      if (t[i]->shape[j] < 1) {
        refuse(r, "shape", need.s, "positive dimensions",
               "%s has an empty or negative dimension %s", kFdNames[i], d.s);
        ok = 0;
        break;
      }
  }
  return ok;
}

/* Every float operand shares x's dtype. */
/* Every operand is x's dtype, but the projections may be block-quantized (since ABI 1.3), in
 * rows of H = whole blocks. */
static void fd_dtypes(refuser* r, const sy_tensor_desc* const t[FD_COUNT]) {
  int i;
  for (i = FD_WQ; i < FD_COUNT; ++i) {
    if (i == FD_POS) continue;
    if (i <= FD_WV && sy_dtype_is_blocked(t[i]->dtype))
      quantized_weights(r, kFdNames[i], t[i], "x", t[FD_X],
                        t[i]->ndim == 2 && t[i]->shape ? t[i]->shape[1] : -1);
    else
      same_dtype(r, kFdNames[i], t[i], "x", t[FD_X]);
  }
}

/* position is i64 [1]. */
static void fd_position(refuser* r, const sy_tensor_desc* const t[FD_COUNT]) {
  if (t[FD_POS]->dtype != SY_DTYPE_I64 || (t[FD_POS]->ndim == 1 && t[FD_POS]->shape[0] != 1)) {
    text64 d = dims(t[FD_POS]), need = fmt64("position %s %s", dtname(t[FD_POS]->dtype), d.s);
    refuse(r, "position", need.s, "position i64 [1]",
           "position must be an i64 tensor of shape [1], is %s %s", dtname(t[FD_POS]->dtype), d.s);
  }
}

/* One token of one sequence, projections and caches of the heads o and k_cache imply. */
static void fd_geometry(refuser* r, const sy_tensor_desc* const t[FD_COUNT]) {
  const sy_tensor_desc *x = t[FD_X], *o = t[FD_O], *kc = t[FD_KC];
  const int64_t H = x->shape[2], Hq = o->shape[2], Hkv = kc->shape[2], C = kc->shape[1],
                D = o->shape[3];
  const int64_t wq[2] = {Hq * D, H}, wkv[2] = {Hkv * D, H}, cache[4] = {kc->shape[0], C, Hkv, D};
  text64 xd = dims(x), kd = dims(kc), od = dims(o);
  if (x->shape[0] != 1 || o->shape[0] != 1 || kc->shape[0] != 1 || t[FD_VC]->shape[0] != 1) {
    text64 need = fmt64("x %s, k_cache %s", xd.s, kd.s);
    refuse(r, "batch", need.s, "batch 1",
           "the fused decode block serves one sequence (batch 1); x is %s, k_cache %s", xd.s, kd.s);
  }
  if (x->shape[1] != 1 || o->shape[1] != 1) {
    text64 need = fmt64("x %s, o %s", xd.s, od.s);
    refuse(r, "decode", need.s, "one token",
           "the fused decode block serves one token: x must be [1,1,H] and o [1,1,Hq,D], are %s "
           "and %s",
           xd.s, od.s);
  }
  shape_is(r, "wq", t[FD_WQ], wq, 2, "[Hq·D, H]");
  shape_is(r, "wk", t[FD_WK], wkv, 2, "[Hkv·D, H]");
  shape_is(r, "wv", t[FD_WV], wkv, 2, "[Hkv·D, H]");
  shape_is(r, "k_cache", kc, cache, 4, "[1, C, Hkv, D] with o's D");
  shape_is(r, "v_cache", t[FD_VC], cache, 4, "k_cache's shape");
  gqa_divisible(r, Hq, Hkv);
}

/* rope 0|1, rope_style neox, rotary_dim even in [2, D], theta finite > 0, scale finite, no
 * softcap. D is 0 when the shapes are broken (rotary_dim is then not judged). */
static void fd_attributes(refuser* r, const sy_op_desc* op, int64_t D) {
  const int64_t rope = int_attr(r, op, SY_ATTR_ROPE, 1);
  const char* style = string_attr(r, op, SY_ATTR_ROPE_STYLE, "neox");
  const int64_t rotary = int_attr(r, op, SY_ATTR_ROTARY_DIM, D);
  const double theta = float_attr(r, op, SY_ATTR_ROPE_THETA, 10000.0);
  const double scale = float_attr(r, op, SY_ATTR_SCALE, 0.0);
  const double softcap = float_attr(r, op, SY_ATTR_SOFTCAP, 0.0);
  if (rope != 0 && rope != 1) {
    text64 need = fmt64("rope=%lld", (long long)rope);
    refuse(r, "attribute", need.s, "rope 0|1", "attribute rope is %lld, must be 0 (no rotary) or 1",
           (long long)rope);
  }
  if (strcmp(style, "neox") != 0) {
    text64 need = fmt64("rope_style=%s", style);
    refuse(r, "rope_style", need.s, "rope_style neox",
           "the fused decode block rotates neox style only, rope_style is \"%s\"", style);
  }
  if (rope == 1 && D > 0) rotary_dim_in_range(r, rotary, D);
  if (rope == 1) finite_at_least(r, SY_ATTR_ROPE_THETA, theta, 0.0, 1);
  if (op->num_inputs == 6 && rope != 1)
    refuse(r, "attribute", "inv_freq without rope", "inv_freq only with rope 1",
           "a frequency table is given but attribute rope is %lld", (long long)rope);
  rope_scaling(r, op, op->num_inputs == 6 ? op->inputs[5] : NULL, D > 0 ? rotary : 0);
  if (!isfinite(scale)) {
    text64 need = fmt64("scale=%f", scale);
    refuse(r, "attribute", need.s, "scale finite",
           "attribute scale is %f, must be finite (0 = 1/sqrt(D))", scale);
  }
  if (softcap != 0.0) {
    text64 need = fmt64("softcap=%f", softcap);
    refuse(r, "softcap", need.s, "no softcap",
           "the fused decode block has no softcap (softcap is %f)", softcap);
  }
  int_attr(r, op, SY_ATTR_CAUSAL, 1);
  int_attr(r, op, SY_ATTR_WINDOW_LEFT, -1);
}

/* x [1,1,H]; wq [Hq·D,H]; wk, wv [Hkv·D,H]; position i64 [1] -> o [1,1,Hq,D]; caches
 * [1,C,Hkv,D]. */
int sy_contract_fused_decode_attention(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc* t[FD_COUNT] = {0};
  int ranks;
  if (!fd_operands(&r, op, t)) return r.n;
  fd_dtypes(&r, t);
  ranks = fd_ranks(&r, t);
  fd_position(&r, t);
  if (ranks) fd_geometry(&r, t);
  fd_attributes(&r, op, ranks ? t[FD_O]->shape[3] : 0);
  return r.n;
}

/* ---- mixture of experts (1.7) ----------------------------------------------------------- */

/* ids or weights of a router: dtype `dt`, shape [..., k] with `of`'s leading dims. */
static void routing_operand(refuser* r, const char* name, const sy_tensor_desc* t, sy_dtype dt,
                            const sy_tensor_desc* of, int64_t k) {
  int64_t want[16];
  int i, n = of->ndim < 16 ? of->ndim : 16;
  for (i = 0; i + 1 < n; ++i) want[i] = of->shape[i];
  want[n - 1] = k;
  if (t->dtype != dt) {
    text64 need = fmt64("%s %s", name, dtname(t->dtype)), have = fmt64("%s %s", name, dtname(dt));
    refuse(r, dt == SY_DTYPE_I32 ? "index_dtype" : "dtype_match", need.s, have.s,
           "%s must be %s, is %s", name, dtname(dt), dtname(t->dtype));
  }
  shape_is(r, name, t, want, n, "[..., top_k], the tokens' leading dims");
}

int sy_contract_moe_router(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc* logits;
  int64_t k, e;
  if (!operands(&r, op, 1, 2, "logits -> ids, weights")) return r.n;
  logits = op->inputs[0];
  if (!is_float(logits->dtype)) {
    text64 need = fmt64("logits %s", dtname(logits->dtype));
    refuse(&r, "dtype_match", need.s, "logits f32, f16 or bf16",
           "logits must be f32, f16 or bf16, is %s", dtname(logits->dtype));
  }
  if (logits->ndim < 2) {
    rank_at_least(&r, "logits", logits, 2);
    return r.n;
  }
  e = logits->shape[logits->ndim - 1];
  k = int_attr(&r, op, SY_ATTR_TOP_K, 0);
  if (k < 1 || k > e) {
    text64 need = fmt64("top_k=%lld", (long long)k),
           have = fmt64("1 <= top_k <= E=%lld", (long long)e);
    refuse(&r, "attribute", need.s, have.s,
           "attribute top_k is %lld, must be at least 1 and at most the %lld experts", (long long)k,
           (long long)e);
    return r.n;
  }
  routing_operand(&r, "ids", op->outputs[0], SY_DTYPE_I32, logits, k);
  routing_operand(&r, "weights", op->outputs[1], SY_DTYPE_F32, logits, k);
  return r.n;
}

/* An expert weight [E, rows, row]: x's dtype, or block-quantized in rows of whole blocks. */
static void expert_weight(refuser* r, const char* name, const sy_tensor_desc* w,
                          const sy_tensor_desc* x, int64_t e, int64_t rows, int64_t row) {
  int64_t want[3];
  text64 why = fmt64("[E, %s]", name[0] == 'd' ? "H, I" : "I, H");
  want[0] = e;
  want[1] = rows;
  want[2] = row;
  if (sy_dtype_is_blocked(w->dtype))
    quantized_weights(r, name, w, "x", x, row);
  else
    same_dtype(r, name, w, "x", x);
  shape_is(r, name, w, want, 3, why.s);
}

static void expert_activation(refuser* r, const sy_op_desc* op) {
  const char* act = string_attr(r, op, SY_ATTR_EXPERT_ACTIVATION, "");
  one_of(r, SY_ATTR_EXPERT_ACTIVATION, act, "silu", "swiglu_limit");
  if (strcmp(act, "swiglu_limit") != 0) return;
  if (!find_attr(op, SY_ATTR_SWIGLU_ALPHA) || !find_attr(op, SY_ATTR_SWIGLU_LIMIT)) {
    refuse(r, "attribute", "swiglu_limit without swiglu_alpha/swiglu_limit",
           "swiglu_alpha and swiglu_limit",
           "expert_activation swiglu_limit needs the attributes swiglu_alpha and swiglu_limit");
    return;
  }
  finite_at_least(r, SY_ATTR_SWIGLU_ALPHA, float_attr(r, op, SY_ATTR_SWIGLU_ALPHA, 0), -1e30, 0);
  finite_at_least(r, SY_ATTR_SWIGLU_LIMIT, float_attr(r, op, SY_ATTR_SWIGLU_LIMIT, 0), 0, 1);
}

int sy_contract_moe_experts(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  refuser r = {add, ctx, 0};
  const sy_tensor_desc *x, *gate, *up, *down;
  int64_t h, e, i, k;
  const size_t n = op->num_inputs == 9 ? 9 : 6;
  if (!operands(&r, op, n, 1,
                "x, ids, weights, gate, up, down[, gate_bias, up_bias, down_bias] -> y"))
    return r.n;
  x = op->inputs[0];
  gate = op->inputs[3];
  up = op->inputs[4];
  down = op->inputs[5];
  if (!is_float(x->dtype)) {
    text64 need = fmt64("x %s", dtname(x->dtype));
    refuse(&r, "dtype_match", need.s, "x f32, f16 or bf16", "x must be f32, f16 or bf16, is %s",
           dtname(x->dtype));
  }
  if (x->ndim < 2 || op->inputs[1]->ndim < 1) {
    rank_at_least(&r, "x", x, 2);
    rank_at_least(&r, "ids", op->inputs[1], 1);
    return r.n;
  }
  if (!rank_is(&r, "gate", gate, 3, "[E, I, H]")) return r.n;
  h = x->shape[x->ndim - 1];
  k = op->inputs[1]->shape[op->inputs[1]->ndim - 1];
  e = gate->shape[0];
  i = gate->shape[1];
  routing_operand(&r, "ids", op->inputs[1], SY_DTYPE_I32, x, k);
  routing_operand(&r, "weights", op->inputs[2], SY_DTYPE_F32, x, k);
  expert_weight(&r, "gate", gate, x, e, i, h);
  expert_weight(&r, "up", up, x, e, i, h);
  expert_weight(&r, "down", down, x, e, h, i);
  if (n == 9) {
    int64_t bi[2], bh[2];
    bi[0] = bh[0] = e;
    bi[1] = i;
    bh[1] = h;
    same_dtype(&r, "gate_bias", op->inputs[6], "x", x);
    same_dtype(&r, "up_bias", op->inputs[7], "x", x);
    same_dtype(&r, "down_bias", op->inputs[8], "x", x);
    shape_is(&r, "gate_bias", op->inputs[6], bi, 2, "[E, I]");
    shape_is(&r, "up_bias", op->inputs[7], bi, 2, "[E, I]");
    shape_is(&r, "down_bias", op->inputs[8], bh, 2, "[E, H]");
  }
  like(&r, "y", op->outputs[0], "x", x);
  expert_activation(&r, op);
  return r.n;
}

int64_t sy_fused_decode_head_dim(const sy_op_desc* op) {
  const sy_tensor_desc* o = output(op, 0);
  return o && o->ndim == 4 && o->shape && o->shape[3] > 0 ? o->shape[3] : 0;
}

/* ---- dispatch -------------------------------------------------------------------------- */

static int op_kind_contract(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  switch (op->op) {
    case SY_OP_MATMUL: return sy_contract_matmul(op, add, ctx);
    case SY_OP_EMBEDDING: return sy_contract_embedding(op, add, ctx);
    case SY_OP_RMS_NORM: return sy_contract_rms_norm(op, add, ctx);
    case SY_OP_LAYER_NORM: return sy_contract_layer_norm(op, add, ctx);
    case SY_OP_ROPE: return sy_contract_rope(op, add, ctx);
    case SY_OP_SILU:
    case SY_OP_GELU: return sy_contract_unary(op, add, ctx);
    case SY_OP_SILU_MUL:
    case SY_OP_GELU_MUL:
    case SY_OP_ADD:
    case SY_OP_MUL: return sy_contract_binary(op, add, ctx);
    case SY_OP_SOFTMAX: return sy_contract_softmax(op, add, ctx);
    case SY_OP_KV_CACHE_APPEND: return sy_contract_kv_cache_append(op, add, ctx);
    case SY_OP_ATTENTION: return sy_contract_attention(op, add, ctx);
    case SY_OP_ARGMAX: return sy_contract_argmax(op, add, ctx);
    case SY_OP_COPY: return sy_contract_copy(op, add, ctx);
    case SY_OP_FUSED_DECODE_ATTENTION: return sy_contract_fused_decode_attention(op, add, ctx);
    case SY_OP_SINKS_FROM_LSE: return sy_contract_sinks_from_lse(op, add, ctx);
    case SY_OP_SOFTCAP: return sy_contract_softcap(op, add, ctx);
    case SY_OP_SLICE: return sy_contract_slice(op, add, ctx);
    case SY_OP_MOE_ROUTER: return sy_contract_moe_router(op, add, ctx);
    case SY_OP_MOE_EXPERTS: return sy_contract_moe_experts(op, add, ctx);
    default: break;
  }
  return sy_refuse(add, ctx, "operands", "an unknown op kind", "an op of the vocabulary",
                   "the operator kind is not in the vocabulary");
}

int sy_op_contract_check(const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  return blocked_elsewhere(op, add, ctx) + op_kind_contract(op, add, ctx);
}

int sy_contract_is_dtype_constraint(const char* constraint) {
  return constraint &&
         (strcmp(constraint, "dtype_match") == 0 || strcmp(constraint, "index_dtype") == 0 ||
          strcmp(constraint, "block_dtype") == 0);
}
