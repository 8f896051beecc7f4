#include "op_contracts/op_checks.hpp"

#include <cmath>
#include <string>
#include <vector>

namespace sy::contracts {
namespace {

std::string dims(const int64_t* shape, int ndim) {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}
std::string dims(const sy_tensor_desc* t) {
  return dims(t->shape, t->ndim);
}
std::string dims(const std::vector<int64_t>& shape) {
  return dims(shape.data(), static_cast<int>(shape.size()));
}
int64_t elements(const sy_tensor_desc* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}
std::vector<int64_t> shape_of(const sy_tensor_desc* t) {
  return std::vector<int64_t>(t->shape, t->shape + t->ndim);
}
const char* dtype_name(sy_dtype d) {
  const char* n = sy_dtype_name(d);
  return n ? n : "?";
}

// Collects refusals; the strings live until the callback (which copies) returns.
class Refusals {
 public:
  Refusals(sy_refusal_fn add, void* ctx) : add_(add), ctx_(ctx) {}
  void operator()(const char* constraint, const std::string& required, const std::string& offered,
                  const std::string& text) {
    n_ += sy_refuse(add_, ctx_, constraint, required.c_str(), offered.c_str(), text.c_str());
  }
  int count() const { return n_; }

 private:
  sy_refusal_fn add_;
  void* ctx_;
  int n_ = 0;
};

// The operand counts the op kind takes, each a well-formed description with positive
// dimensions. Later filters may dereference every operand once this returned true.
bool operands(Refusals& r, const sy_op_desc* op, size_t inputs, size_t outputs, const char* names) {
  bool ok = true;
  if (op->num_inputs != inputs || op->num_outputs != outputs || (inputs && !op->inputs) ||
      (outputs && !op->outputs)) {
    r("operands",
      std::to_string(op->num_inputs) + " inputs, " + std::to_string(op->num_outputs) + " outputs",
      std::to_string(inputs) + " inputs, " + std::to_string(outputs) + " outputs",
      std::string("the operator takes ") + names);
    return false;
  }
  auto one = [&](const sy_tensor_desc* t, const std::string& label) {
    if (!t || t->ndim < 0 || (t->ndim > 0 && !t->shape)) {
      r("operands", label + " missing", label + " described", label + " is missing or malformed");
      ok = false;
      return;
    }
    int64_t n = 1;
    for (int i = 0; i < t->ndim; ++i) {
      if (t->shape[i] < 1) {
        r("shape", label + " " + dims(t), "positive dimensions",
          label + " has an empty or negative dimension " + dims(t));
        ok = false;
        return;
      }
      if (__builtin_mul_overflow(n, t->shape[i], &n) || n > (int64_t{1} << 48)) {
        r("shape", label + " " + dims(t), "at most 2^48 elements",
          label + " " + dims(t) + " has more elements than any memory holds");
        ok = false;
        return;
      }
    }
  };
  for (size_t i = 0; i < inputs; ++i) one(op->inputs[i], "input " + std::to_string(i));
  for (size_t i = 0; i < outputs; ++i) one(op->outputs[i], "output " + std::to_string(i));
  return ok;
}

void rank_at_least(Refusals& r, const char* name, const sy_tensor_desc* t, int rank) {
  if (t->ndim >= rank) return;
  r("rank", std::string(name) + " of rank " + std::to_string(t->ndim),
    std::string(name) + " of rank >= " + std::to_string(rank),
    std::string(name) + " must have rank >= " + std::to_string(rank) + ", has " + dims(t));
}

bool rank_is(Refusals& r, const char* name, const sy_tensor_desc* t, int rank, const char* layout) {
  if (t->ndim == rank) return true;
  r("rank", std::string(name) + " of rank " + std::to_string(t->ndim),
    std::string(name) + " " + layout,
    std::string(name) + " must be " + layout + " (rank " + std::to_string(rank) + "), has " +
        dims(t));
  return false;
}

void same_dtype(Refusals& r, const char* name, const sy_tensor_desc* t, const char* ref_name,
                const sy_tensor_desc* ref) {
  if (t->dtype == ref->dtype) return;
  r("dtype_match", std::string(name) + " " + dtype_name(t->dtype),
    std::string(name) + " " + dtype_name(ref->dtype),
    std::string(name) + " is " + dtype_name(t->dtype) + " but " + ref_name + " is " +
        dtype_name(ref->dtype) + ": they must share one dtype");
}

void shape_is(Refusals& r, const char* name, const sy_tensor_desc* t,
              const std::vector<int64_t>& want, const std::string& why) {
  if (shape_of(t) == want) return;
  r("shape_match", std::string(name) + " " + dims(t), std::string(name) + " " + dims(want),
    std::string(name) + " is " + dims(t) + ", must be " + dims(want) + " (" + why + ")");
}

// y with x's shape and dtype.
void like(Refusals& r, const char* name, const sy_tensor_desc* t, const char* ref_name,
          const sy_tensor_desc* ref) {
  same_dtype(r, name, t, ref_name, ref);
  shape_is(r, name, t, shape_of(ref), std::string("like ") + ref_name);
}

void index_dtype(Refusals& r, const char* name, const sy_tensor_desc* t) {
  if (t->dtype == SY_DTYPE_I32 || t->dtype == SY_DTYPE_I64) return;
  r("index_dtype", std::string(name) + " " + dtype_name(t->dtype), std::string(name) + " i32,i64",
    std::string(name) + " must be i32 or i64, is " + dtype_name(t->dtype));
}

const sy_attr* find_attr(const sy_op_desc* op, const char* name) {
  for (size_t i = 0; i < op->num_attrs; ++i) {
    const sy_attr* a = op->attrs ? op->attrs[i] : nullptr;
    if (a && a->name && std::string(a->name) == name) return a;
  }
  return nullptr;
}

void wrong_type(Refusals& r, const char* name, const char* type) {
  r("attribute", std::string(name) + " of another type", std::string(name) + " " + type,
    std::string("attribute ") + name + " must be " + type);
}

int64_t int_attr(Refusals& r, const sy_op_desc* op, const char* name, int64_t fallback) {
  const sy_attr* a = find_attr(op, name);
  if (!a) return fallback;
  if (a->type == SY_ATTR_INT) return a->i;
  wrong_type(r, name, "an int");
  return fallback;
}

// Floats accept an int too, as OpCopy::float_attr does.
double float_attr(Refusals& r, const sy_op_desc* op, const char* name, double fallback) {
  const sy_attr* a = find_attr(op, name);
  if (!a) return fallback;
  if (a->type == SY_ATTR_FLOAT) return a->f;
  if (a->type == SY_ATTR_INT) return static_cast<double>(a->i);
  wrong_type(r, name, "a float");
  return fallback;
}

std::string string_attr(Refusals& r, const sy_op_desc* op, const char* name, const char* fallback) {
  const sy_attr* a = find_attr(op, name);
  if (!a) return fallback;
  if (a->type == SY_ATTR_STRING && a->s) return a->s;
  wrong_type(r, name, "a string");
  return fallback;
}

void one_of(Refusals& r, const char* name, const std::string& value, const char* a, const char* b) {
  if (value == a || value == b) return;
  r("attribute", std::string(name) + "=" + value, std::string(name) + " " + a + "|" + b,
    std::string("attribute ") + name + " is \"" + value + "\", must be \"" + a + "\" or \"" + b +
        "\"");
}

void finite_at_least(Refusals& r, const char* name, double value, double min, bool strict) {
  if (std::isfinite(value) && (strict ? value > min : value >= min)) return;
  std::string bound = std::string(strict ? "> " : ">= ") + std::to_string(min);
  r("attribute", std::string(name) + "=" + std::to_string(value), std::string(name) + " " + bound,
    std::string("attribute ") + name + " is " + std::to_string(value) + ", must be finite and " +
        bound);
}

void gelu_approximate(Refusals& r, const sy_op_desc* op) {
  one_of(r, SY_ATTR_GELU_APPROX, string_attr(r, op, SY_ATTR_GELU_APPROX, "none"), "none", "tanh");
}

// x [..., H], weight [H] (and bias [H]) of x's dtype, y like x.
int narrow_norm(const sy_op_desc* op, sy_refusal_fn add, void* ctx, bool with_bias) {
  Refusals r(add, ctx);
  if (!operands(r, op, with_bias ? 3 : 2, 1, with_bias ? "x, weight, bias -> y" : "x, weight -> y"))
    return r.count();
  const sy_tensor_desc* x = op->inputs[0];
  rank_at_least(r, "x", x, 1);
  if (x->ndim >= 1) {
    std::vector<int64_t> h = {x->shape[x->ndim - 1]};
    shape_is(r, "weight", op->inputs[1], h, "[H], H the last dimension of x");
    if (with_bias) shape_is(r, "bias", op->inputs[2], h, "[H], H the last dimension of x");
  }
  same_dtype(r, "weight", op->inputs[1], "x", x);
  if (with_bias) same_dtype(r, "bias", op->inputs[2], "x", x);
  like(r, "y", op->outputs[0], "x", x);
  finite_at_least(r, SY_ATTR_EPS, float_attr(r, op, SY_ATTR_EPS, with_bias ? 1e-5 : 1e-6), 0.0,
                  false);
  if (!with_bias) {
    double offset = float_attr(r, op, SY_ATTR_WEIGHT_OFFSET, 0.0);
    if (!std::isfinite(offset))
      r("attribute", "weight_offset not finite", "weight_offset finite",
        "attribute weight_offset must be finite");
  }
  return r.count();
}

void collect(void* ctx, const sy_refusal* refusal) {
  auto* text = static_cast<std::string*>(ctx);
  *text += std::string(text->empty() ? "" : "; ") +
           (refusal->text ? refusal->text : refusal->constraint);
}

}  // namespace

int narrow_kv_cache_append(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add,
                           void* ctx) {
  Refusals r(add, ctx);
  if (!operands(r, op, 2, 1, "rows, position -> cache")) return r.count();
  const sy_tensor_desc *rows = op->inputs[0], *pos = op->inputs[1], *cache = op->outputs[0];
  bool ranks = rank_is(r, "rows", rows, 4, "[B, T, Hkv, D]");
  ranks = rank_is(r, "cache", cache, 4, "[B, C, Hkv, D]") && ranks;
  if (pos->dtype != SY_DTYPE_I64 || pos->ndim != 1 || pos->shape[0] != 1)
    r("position", std::string("position ") + dtype_name(pos->dtype) + " " + dims(pos),
      "position i64 [1]",
      "position must be an i64 tensor of shape [1], is " + std::string(dtype_name(pos->dtype)) +
          " " + dims(pos));
  same_dtype(r, "cache", cache, "rows", rows);
  if (ranks) {
    std::vector<int64_t> want = shape_of(rows);
    want[1] = cache->shape[1];
    shape_is(r, "cache", cache, want, "[B, C, Hkv, D] with rows' B, Hkv and D");
    if (rows->shape[1] > cache->shape[1])
      r("capacity", "T=" + std::to_string(rows->shape[1]),
        "T <= C=" + std::to_string(cache->shape[1]),
        "appending " + std::to_string(rows->shape[1]) + " rows can never fit a cache of capacity " +
            std::to_string(cache->shape[1]));
  }
  return r.count();
}

// a and c are views (docs/operators.md): any shapes of M·K and M·N elements, K and N
// from b, so a projection may write [B, S, H, D] and the next one read it.
int narrow_matmul(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  Refusals r(add, ctx);
  if (!operands(r, op, 2, 1, "a, b -> c")) return r.count();
  const sy_tensor_desc *a = op->inputs[0], *b = op->inputs[1], *c = op->outputs[0];
  int64_t tb = int_attr(r, op, SY_ATTR_TRANSPOSE_B, 0);
  if (tb != 0 && tb != 1)
    r("attribute", "transpose_b=" + std::to_string(tb), "transpose_b 0|1",
      "attribute transpose_b is " + std::to_string(tb) + ", must be 0 or 1");
  same_dtype(r, "b", b, "a", a);
  same_dtype(r, "c", c, "a", a);
  bool ranks = a->ndim >= 1 && c->ndim >= 1;
  rank_at_least(r, "a", a, 1);
  rank_at_least(r, "c", c, 1);
  ranks = rank_is(r, "b", b, 2, tb == 1 ? "[N, K]" : "[K, N]") && ranks;
  if (!ranks) return r.count();
  const int64_t k = tb == 1 ? b->shape[1] : b->shape[0];
  const int64_t n = tb == 1 ? b->shape[0] : b->shape[1];
  const std::string b_is = "b is " + dims(b) + (tb == 1 ? " [N, K] (transpose_b=1)" : " [K, N]");
  const int64_t ea = elements(a), ec = elements(c);
  if (ea % k != 0) {
    r("shape_match", "a of " + std::to_string(ea) + " elements",
      "a of M·K elements, K=" + std::to_string(k),
      "a " + dims(a) + " has " + std::to_string(ea) +
          " elements, not a multiple of K=" + std::to_string(k) + " (" + b_is + "): K must match");
    return r.count();
  }
  const int64_t m = ea / k;
  if (ec / n != m || ec % n != 0)
    r("shape_match", "c of " + std::to_string(ec) + " elements",
      "c of M·N = " + std::to_string(m) + "·" + std::to_string(n) + " elements",
      "c " + dims(c) + " has " + std::to_string(ec) +
          " elements, must have M·N = " + std::to_string(m) + "·" + std::to_string(n) +
          " (M=" + std::to_string(m) + " rows of a, " + b_is + ")");
  return r.count();
}

int narrow_embedding(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  Refusals r(add, ctx);
  if (!operands(r, op, 2, 1, "table, ids -> rows")) return r.count();
  const sy_tensor_desc *table = op->inputs[0], *ids = op->inputs[1], *rows = op->outputs[0];
  index_dtype(r, "ids", ids);
  same_dtype(r, "rows", rows, "table", table);
  if (rank_is(r, "table", table, 2, "[V, H]")) {
    std::vector<int64_t> want = shape_of(ids);
    want.push_back(table->shape[1]);
    shape_is(r, "rows", rows, want, "[..., H]: ids' shape, then the table's H");
  }
  return r.count();
}

int narrow_rms_norm(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  return narrow_norm(op, add, ctx, false);
}

int narrow_layer_norm(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  return narrow_norm(op, add, ctx, true);
}

int narrow_rope(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  Refusals r(add, ctx);
  if (!operands(r, op, 2, 1, "x, positions -> y")) return r.count();
  const sy_tensor_desc *x = op->inputs[0], *pos = op->inputs[1];
  index_dtype(r, "positions", pos);
  like(r, "y", op->outputs[0], "x", x);
  finite_at_least(r, SY_ATTR_ROPE_THETA, float_attr(r, op, SY_ATTR_ROPE_THETA, 10000.0), 0.0, true);
  one_of(r, SY_ATTR_ROPE_STYLE, string_attr(r, op, SY_ATTR_ROPE_STYLE, "neox"), "neox",
         "interleaved");
  if (!rank_is(r, "x", x, 4, "[B, S, H, D]")) {
    int_attr(r, op, SY_ATTR_ROTARY_DIM, 0);
    return r.count();
  }
  shape_is(r, "positions", pos, {x->shape[0], x->shape[1]}, "[B, S] of x");
  int64_t d = x->shape[3];
  int64_t rot = int_attr(r, op, SY_ATTR_ROTARY_DIM, d);
  if (rot < 2 || rot > d || rot % 2 != 0)
    r("rotary_dim", "rotary_dim=" + std::to_string(rot),
      "even rotary_dim in [2, " + std::to_string(d) + "]",
      "rotary_dim is " + std::to_string(rot) + ", must be even and between 2 and the head dim " +
          std::to_string(d));
  return r.count();
}

int narrow_unary(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  Refusals r(add, ctx);
  if (op->op == SY_OP_GELU) gelu_approximate(r, op);
  if (!operands(r, op, 1, 1, "x -> y")) return r.count();
  like(r, "y", op->outputs[0], "x", op->inputs[0]);
  return r.count();
}

int narrow_binary(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  Refusals r(add, ctx);
  bool gated = op->op == SY_OP_SILU_MUL || op->op == SY_OP_GELU_MUL;
  if (op->op == SY_OP_GELU_MUL) gelu_approximate(r, op);
  if (!operands(r, op, 2, 1, gated ? "gate, up -> y" : "a, b -> c")) return r.count();
  const sy_tensor_desc *a = op->inputs[0], *b = op->inputs[1];
  const char* an = gated ? "gate" : "a";
  const char* bn = gated ? "up" : "b";
  same_dtype(r, bn, b, an, a);
  like(r, gated ? "y" : "c", op->outputs[0], an, a);
  if (gated) {
    shape_is(r, "up", b, shape_of(a), "gate's shape");
  } else {
    bool suffix = b->ndim <= a->ndim;
    for (int i = 1; suffix && i <= b->ndim; ++i)
      suffix = b->shape[b->ndim - i] == a->shape[a->ndim - i];
    if (!suffix)
      r("broadcast", "b " + dims(b), "b of a's shape or a suffix of " + dims(a),
        "b " + dims(b) + " must have a's shape " + dims(a) +
            " or a suffix of it (broadcast over leading dimensions)");
  }
  return r.count();
}

int narrow_softmax(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  Refusals r(add, ctx);
  if (!operands(r, op, 1, 1, "x -> y")) return r.count();
  rank_at_least(r, "x", op->inputs[0], 1);
  like(r, "y", op->outputs[0], "x", op->inputs[0]);
  return r.count();
}

int narrow_argmax(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  Refusals r(add, ctx);
  if (!operands(r, op, 1, 1, "x -> index")) return r.count();
  const sy_tensor_desc *x = op->inputs[0], *index = op->outputs[0];
  if (index->dtype != SY_DTYPE_I64)
    r("dtype_match", std::string("index ") + dtype_name(index->dtype), "index i64",
      std::string("the index output must be i64, is ") + dtype_name(index->dtype));
  if (x->ndim < 1) {
    rank_at_least(r, "x", x, 1);
    return r.count();
  }
  std::vector<int64_t> want(x->shape, x->shape + x->ndim - 1);
  bool scalar_as_one = x->ndim == 1 && index->ndim == 1 && index->shape[0] == 1;
  if (!scalar_as_one) shape_is(r, "index", index, want, "x's shape without its last axis");
  return r.count();
}

int narrow_copy(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  Refusals r(add, ctx);
  if (!operands(r, op, 1, 1, "x -> y")) return r.count();
  const sy_tensor_desc *x = op->inputs[0], *y = op->outputs[0];
  shape_is(r, "y", y, shape_of(x), "x's shape");
  auto is_float = [](sy_dtype d) { return d == SY_DTYPE_F32 || d == SY_DTYPE_BF16; };
  if (x->dtype != y->dtype && !(is_float(x->dtype) && is_float(y->dtype)))
    r("dtype_match", std::string(dtype_name(x->dtype)) + " -> " + dtype_name(y->dtype),
      "the same dtype, or f32 <-> bf16",
      std::string("copy converts only between f32 and bf16, not ") + dtype_name(x->dtype) + " to " +
          dtype_name(y->dtype));
  return r.count();
}

void enforce(sy::edge::NarrowFn narrow, const sy::edge::OpCopy& op, const char* kernel) {
  std::vector<const sy_tensor_desc*> inputs, outputs;
  for (const auto& t : op.inputs) inputs.push_back(&t.desc);
  for (const auto& t : op.outputs) outputs.push_back(&t.desc);
  std::vector<sy_attr> attrs;
  for (const auto& [name, a] : op.attrs) {
    attrs.push_back(a);
    attrs.back().name = name.c_str();  // the copy's own name, not the caller's
  }
  std::vector<const sy_attr*> attr_ptrs;
  for (const auto& a : attrs) attr_ptrs.push_back(&a);
  sy_op_desc d{};
  d.struct_size = sizeof(d);
  d.op = op.op;
  d.inputs = inputs.data();
  d.num_inputs = inputs.size();
  d.outputs = outputs.data();
  d.num_outputs = outputs.size();
  d.attrs = attr_ptrs.data();
  d.num_attrs = attr_ptrs.size();
  d.required_features = op.features;
  std::string text;
  if (narrow(nullptr, &d, collect, &text) > 0)
    throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                std::string(kernel) + " refuses: " + text);
}

}  // namespace sy::contracts
