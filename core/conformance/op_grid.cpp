#include "core/conformance/op_grid.hpp"

#include <functional>
#include <map>
#include <sstream>

namespace sy::conformance {
namespace {

using Shape = std::vector<int64_t>;
constexpr sy_dtype kFloats[] = {SY_DTYPE_F32, SY_DTYPE_BF16, SY_DTYPE_F16};
constexpr sy_dtype kQuantized[] = {SY_DTYPE_Q8_0,   SY_DTYPE_Q4_0,   SY_DTYPE_Q4_1, SY_DTYPE_Q4_K,
                                   SY_DTYPE_Q5_K,   SY_DTYPE_Q6_K,   SY_DTYPE_Q5_0, SY_DTYPE_Q5_1,
                                   SY_DTYPE_IQ4_NL, SY_DTYPE_IQ4_XS, SY_DTYPE_Q2_K, SY_DTYPE_Q3_K,
                                   SY_DTYPE_MXFP4};

bool has(uint64_t mask, sy_dtype d) {
  return mask & SY_DTYPE_BIT(d);
}
bool has_feature(const Envelope& e, sy_feature f) {
  return e.features & SY_FEATURE_BIT(f);
}

std::string dims(const Shape& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  return o.str() + "]";
}

TensorDesc t(sy_dtype d, Shape s) {
  return TensorDesc{d, std::move(s), SY_MEMORY_HOST};
}

// `d`'s shape with each dynamic dim's bound replaced by its actual extent in `actual`.
Shape actual_shape(const TensorDesc& d, const std::map<int64_t, int64_t>& actual) {
  Shape s = d.shape;
  for (size_t i = 0; i < s.size(); ++i)
    if (d.dynamic_dims >> i & 1u) s[i] = actual.at(s[i]);
  return s;
}

// `d` with dim `axis` dynamic.
TensorDesc dyn(TensorDesc d, int axis) {
  d.dynamic_dims |= 1u << axis;
  return d;
}

// Collects the cases of one kernel: `add` files an operator built for a dtype, inside the
// envelope when every dtype it used is listed.
class Grid {
 public:
  Grid(const Envelope& env, bool quick) : env_(env), quick_(quick) {}

  std::vector<sy_dtype> dtypes() const {
    std::vector<sy_dtype> out;
    for (sy_dtype d : kFloats)
      if (has(env_.dtypes, d)) out.push_back(d);
    return out;
  }
  // A float dtype the envelope lacks (for a case just outside it), or COUNT.
  sy_dtype missing_dtype() const {
    for (sy_dtype d : kFloats)
      if (!has(env_.dtypes, d)) return d;
    return SY_DTYPE_COUNT;
  }
  bool quick() const { return quick_; }
  const Envelope& env() const { return env_; }

  void add(OpDesc op, std::string label, bool inside = true) {
    cases_.push_back({std::move(op), inside, (inside ? "" : "outside: ") + label, {}, {}});
  }
  // A varlen case: inside when the envelope has every feature it uses (varlen among them); its
  // executes carry `actual` extents in place of the bounds (actual_extent).
  void add_varlen(const OpDesc& op, const std::string& label,
                  const std::map<int64_t, int64_t>& actual) {
    const bool inside = (op.required_features() & ~env_.features) == 0;
    GridCase c{op, inside, (inside ? "" : "outside: ") + label, {}, {}};
    for (const auto& d : op.inputs) c.actual_inputs.push_back(actual_shape(d, actual));
    for (const auto& d : op.outputs) c.actual_outputs.push_back(actual_shape(d, actual));
    cases_.push_back(std::move(c));
  }
  std::vector<GridCase> take() { return std::move(cases_); }
  // Whether the last case filed is inside the envelope (one case outside is enough).
  bool cases_inside_last() const { return !cases_.empty() && cases_.back().inside; }

 private:
  const Envelope& env_;
  bool quick_;
  std::vector<GridCase> cases_;
};

OpDesc op_of(sy_op_kind kind, std::vector<TensorDesc> in, std::vector<TensorDesc> out) {
  OpDesc op;
  op.op = kind;
  op.inputs = std::move(in);
  op.outputs = std::move(out);
  return op;
}

// Every dtype over `shapes`, then one case in a dtype the envelope lacks.
template <typename Make>
void per_dtype(Grid& g, const std::vector<Shape>& shapes, Make make) {
  for (sy_dtype d : g.dtypes())
    for (size_t i = 0; i < (g.quick() ? 1 : shapes.size()); ++i)
      g.add(make(d, shapes[i]), std::string(sy_dtype_name(d)) + " " + dims(shapes[i]));
  if (sy_dtype d = g.missing_dtype(); d != SY_DTYPE_COUNT)
    g.add(make(d, shapes[0]), std::string("dtype ") + sy_dtype_name(d), false);
}

void elementwise(Grid& g, sy_op_kind k) {
  const std::vector<Shape> shapes = {{3, 17}, {1, 1}, {2, 5, 64}};
  per_dtype(g, shapes, [&](sy_dtype d, const Shape& s) {
    switch (k) {
      case SY_OP_SILU_MUL:
      case SY_OP_GELU_MUL:
      case SY_OP_ADD:
      case SY_OP_MUL: return op_of(k, {t(d, s), t(d, s)}, {t(d, s)});
      case SY_OP_ARGMAX:
        return op_of(k, {t(d, s)}, {t(SY_DTYPE_I64, Shape(s.begin(), s.end() - 1))});
      default: {
        OpDesc op = op_of(k, {t(d, s)}, {t(d, s)});
        if (k == SY_OP_SOFTCAP) op.set(SY_ATTR_SOFTCAP, 5.0);
        return op;
      }
    }
  });
  if (k == SY_OP_GELU || k == SY_OP_GELU_MUL)
    for (sy_dtype d : g.dtypes()) {
      OpDesc op = k == SY_OP_GELU ? op_of(k, {t(d, {4, 33})}, {t(d, {4, 33})})
                                  : op_of(k, {t(d, {4, 33}), t(d, {4, 33})}, {t(d, {4, 33})});
      op.set(SY_ATTR_GELU_APPROX, std::string("tanh"));
      g.add(op, std::string(sy_dtype_name(d)) + " tanh");
    }
  if (k == SY_OP_ADD || k == SY_OP_MUL)
    for (sy_dtype d : g.dtypes())
      g.add(op_of(k, {t(d, {3, 17}), t(d, {17})}, {t(d, {3, 17})}),
            std::string(sy_dtype_name(d)) + " broadcast [17]");
}

void norms(Grid& g, sy_op_kind k) {
  per_dtype(g, {{3, 64}, {1, 96}, {2, 3, 128}}, [&](sy_dtype d, const Shape& s) {
    const Shape w = {s.back()};
    OpDesc op = k == SY_OP_RMS_NORM ? op_of(k, {t(d, s), t(d, w)}, {t(d, s)})
                                    : op_of(k, {t(d, s), t(d, w), t(d, w)}, {t(d, s)});
    op.set(SY_ATTR_EPS, 1e-5);
    return op;
  });
  if (k == SY_OP_RMS_NORM)
    for (sy_dtype d : g.dtypes()) {
      OpDesc op = op_of(k, {t(d, {3, 64}), t(d, {64})}, {t(d, {3, 64})});
      op.set(SY_ATTR_WEIGHT_OFFSET, 1.0);
      g.add(op, std::string(sy_dtype_name(d)) + " weight_offset 1");
    }
}

void matmul(Grid& g) {
  const bool tb = has_feature(g.env(), SY_FEATURE_TRANSPOSED_B);
  per_dtype(g, {{5, 64, 48}, {1, 64, 48}, {17, 96, 33}}, [&](sy_dtype d, const Shape& s) {
    OpDesc op =
        op_of(SY_OP_MATMUL, {t(d, {s[0], s[1]}), t(d, tb ? Shape{s[2], s[1]} : Shape{s[1], s[2]})},
              {t(d, {s[0], s[2]})});
    op.set(SY_ATTR_TRANSPOSE_B, int64_t(tb));
    return op;
  });
  if (!tb) {  // a transposed b the kernel does not declare
    OpDesc op = op_of(SY_OP_MATMUL, {t(SY_DTYPE_F32, {2, 64}), t(SY_DTYPE_F32, {48, 64})},
                      {t(SY_DTYPE_F32, {2, 48})});
    op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
    g.add(op, "feature transposed_b", false);
  }
  for (sy_dtype q : kQuantized) {
    if (!tb || g.dtypes().empty()) break;
    const sy_dtype a = g.dtypes()[0];
    // One row (decode), 7 and 8 (a few rows: packed groups read as stored, cpu_onednn's
    // rows8_packed and two_groups), 13 (panels), 21 (past 16: a tile path such as the amx tier's).
    // K = 512: two super-blocks of the K-quants, so a packed layout's second unit is read too.
    for (int64_t m : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{13}, int64_t{21}}) {
      OpDesc op = op_of(SY_OP_MATMUL, {t(a, {m, 512}), t(q, {40, 512})}, {t(a, {m, 40})});
      op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
      g.add(op, std::string("weights ") + sy_dtype_name(q) + " M=" + std::to_string(m),
            has(g.env().weight_dtypes, q));
      if (g.quick()) break;
    }
  }
}

void embedding(Grid& g) {
  per_dtype(g, {{50, 64, 5}, {7, 32, 1}}, [&](sy_dtype d, const Shape& s) {
    return op_of(SY_OP_EMBEDDING, {t(d, {s[0], s[1]}), t(SY_DTYPE_I64, {s[2]})},
                 {t(d, {s[2], s[1]})});
  });
  for (sy_dtype q : kQuantized)
    if (!g.dtypes().empty())
      g.add(op_of(SY_OP_EMBEDDING, {t(q, {20, 256}), t(SY_DTYPE_I32, {3})},
                  {t(g.dtypes()[0], {3, 256})}),
            std::string("table ") + sy_dtype_name(q), has(g.env().weight_dtypes, q));
}

void rope(Grid& g) {
  struct Variant {
    const char* name;
    sy_feature feature;
    int64_t rotary;
    bool table;
  };
  const Variant variants[] = {{"neox", SY_FEATURE_ROPE_NEOX, 0, false},
                              {"interleaved", SY_FEATURE_ROPE_INTERLEAVED, 0, false},
                              {"partial", SY_FEATURE_PARTIAL_ROTARY, 32, false},
                              {"table", SY_FEATURE_ROPE_SCALED, 0, true}};
  for (const Variant& v : variants) {
    const bool inside = has_feature(g.env(), v.feature);
    for (sy_dtype d : g.dtypes()) {
      OpDesc op =
          op_of(SY_OP_ROPE, {t(d, {2, 3, 2, 64}), t(SY_DTYPE_I64, {2, 3})}, {t(d, {2, 3, 2, 64})});
      op.set(SY_ATTR_ROPE_THETA, 10000.0);
      op.set(SY_ATTR_ROPE_STYLE,
             std::string(v.feature == SY_FEATURE_ROPE_INTERLEAVED ? "interleaved" : "neox"));
      if (v.rotary) op.set(SY_ATTR_ROTARY_DIM, v.rotary);
      if (v.table) {
        op.inputs.push_back(t(SY_DTYPE_F32, {32}));
        op.set(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.2);
      }
      g.add(op, std::string(sy_dtype_name(d)) + " " + v.name, inside);
      if (!inside) break;
    }
  }
}

void kv_cache_append(Grid& g) {
  per_dtype(g, {{1, 2, 2, 64, 8}, {2, 1, 1, 32, 5}}, [&](sy_dtype d, const Shape& s) {
    return op_of(SY_OP_KV_CACHE_APPEND, {t(d, {s[0], s[1], s[2], s[3]}), t(SY_DTYPE_I64, {1})},
                 {t(d, {s[0], s[4], s[2], s[3]})});
  });
}

void slice_and_copy(Grid& g, sy_op_kind k) {
  per_dtype(g, {{2, 5, 16}, {1, 7, 3}}, [&](sy_dtype d, const Shape& s) {
    if (k == SY_OP_COPY) return op_of(k, {t(d, s)}, {t(d, s)});
    Shape y = s;
    y[1] = 2;
    OpDesc op = op_of(k, {t(d, s)}, {t(d, y)});
    op.set(SY_ATTR_AXIS, int64_t{1});
    op.set(SY_ATTR_START, int64_t{1});
    return op;
  });
}

// The first head dim the envelope accepts among common ones.
int64_t head_dim_for(const Envelope& e) {
  for (int64_t d : {64, 128, 32, 256, 80, 96, 16})
    if (e.accepts_head_dim(d)) return d;
  return 64;
}

// Files `op` in every dtype of the envelope, inside when it lists every feature the op uses.
void add_by_features(Grid& g, const std::string& name,
                     const std::function<OpDesc(sy_dtype)>& make) {
  for (sy_dtype d : g.dtypes()) {
    OpDesc op = make(d);
    const uint64_t missing = op.required_features() & ~g.env().features;
    g.add(op, std::string(sy_dtype_name(d)) + " " + name, missing == 0);
    if (missing) return;  // one case outside is enough
  }
}

struct AttentionCase {
  int64_t B = 1, Sq = 6, Skv = 6, Hq = 2, Hkv = 2, D = 64;
  bool causal = false, sinks = false, lse = false;
  int64_t window = -1;
  double softcap = 0, scale = 0;
  std::vector<int64_t> kv_len;
};

OpDesc attention_op(const AttentionCase& c, sy_dtype d) {
  OpDesc op = op_of(SY_OP_ATTENTION,
                    {t(d, {c.B, c.Sq, c.Hq, c.D}), t(d, {c.B, c.Skv, c.Hkv, c.D}),
                     t(d, {c.B, c.Skv, c.Hkv, c.D})},
                    {t(d, {c.B, c.Sq, c.Hq, c.D})});
  if (c.sinks) op.inputs.push_back(t(SY_DTYPE_F32, {c.Hq}));
  if (!c.kv_len.empty()) {
    op.inputs.push_back(t(SY_DTYPE_I64, {c.B}));
    op.set(SY_ATTR_KV_LEN_INPUT, int64_t{1});
  }
  if (c.lse) op.outputs.push_back(t(SY_DTYPE_F32, {c.B, c.Hq, c.Sq}));
  op.set(SY_ATTR_CAUSAL, int64_t(c.causal));
  op.set(SY_ATTR_WINDOW_LEFT, c.window);
  if (c.softcap > 0) op.set(SY_ATTR_SOFTCAP, c.softcap);
  if (c.scale != 0) op.set(SY_ATTR_SCALE, c.scale);
  return op;
}

void attention(Grid& g) {
  const int64_t D = head_dim_for(g.env());
  std::vector<std::pair<std::string, AttentionCase>> cases;
  AttentionCase base;
  base.D = D;
  auto variant = [&](const char* name, auto edit) {
    AttentionCase c = base;
    edit(c);
    cases.emplace_back(name, c);
  };
  variant("plain", [](AttentionCase&) {});
  variant("causal", [](AttentionCase& c) { c.causal = true; });
  variant("gqa", [](AttentionCase& c) { c.Hq = 4; });
  variant("window", [](AttentionCase& c) { c.causal = true, c.window = 2; });
  variant("sinks", [](AttentionCase& c) { c.sinks = true; });
  variant("lse", [](AttentionCase& c) { c.lse = true; });
  variant("softcap", [](AttentionCase& c) { c.softcap = 20; });
  variant("decode", [](AttentionCase& c) { c.Sq = 1, c.Skv = 9, c.causal = true; });
  variant("batch kv_len", [](AttentionCase& c) {
    c.B = 2, c.Sq = 1, c.Skv = 9, c.causal = true, c.kv_len = {9, 4};
  });
  variant("scale", [](AttentionCase& c) { c.scale = 0.3; });
  variant("everything", [](AttentionCase& c) {
    c.B = 2, c.Sq = 3, c.Skv = 9, c.Hq = 4, c.causal = c.sinks = c.lse = true, c.window = 4,
    c.softcap = 20, c.scale = 0.2, c.kv_len = {9, 5};
  });
  for (size_t i = 0; i < cases.size(); ++i) {
    if (g.quick() && i % 3 == 1) continue;
    const AttentionCase c = cases[i].second;
    add_by_features(g, cases[i].first, [&](sy_dtype d) { return attention_op(c, d); });
  }
  for (int64_t other : {48, 72, 512})
    if (!g.env().accepts_head_dim(other) && !g.dtypes().empty()) {
      AttentionCase c = base;
      c.D = other;
      g.add(attention_op(c, g.dtypes()[0]), "head dim " + std::to_string(other), false);
      break;
    }
}

struct FusedCase {
  int64_t H = 64, Hq = 2, Hkv = 2, D = 64, C = 8, rope = 1, rotary = 0, window = -1;
  bool table = false;
  double scale = 0;
  sy_dtype weights = SY_DTYPE_COUNT;  // COUNT: x's dtype
};

OpDesc fused_op(const FusedCase& c, sy_dtype d) {
  const sy_dtype w = c.weights == SY_DTYPE_COUNT ? d : c.weights;
  OpDesc op =
      op_of(SY_OP_FUSED_DECODE_ATTENTION,
            {t(d, {1, 1, c.H}), t(w, {c.Hq * c.D, c.H}), t(w, {c.Hkv * c.D, c.H}),
             t(w, {c.Hkv * c.D, c.H}), t(SY_DTYPE_I64, {1})},
            {t(d, {1, 1, c.Hq, c.D}), t(d, {1, c.C, c.Hkv, c.D}), t(d, {1, c.C, c.Hkv, c.D})});
  if (c.table) op.inputs.push_back(t(SY_DTYPE_F32, {(c.rotary ? c.rotary : c.D) / 2}));
  op.set(SY_ATTR_ROPE, c.rope);
  op.set(SY_ATTR_ROPE_THETA, 10000.0);
  if (c.rotary) op.set(SY_ATTR_ROTARY_DIM, c.rotary);
  op.set(SY_ATTR_CAUSAL, int64_t{1});
  op.set(SY_ATTR_WINDOW_LEFT, c.window);
  if (c.scale != 0) op.set(SY_ATTR_SCALE, c.scale);
  return op;
}

void fused(Grid& g) {
  FusedCase base;
  base.D = head_dim_for(g.env());
  std::vector<std::pair<std::string, FusedCase>> cases;
  auto variant = [&](std::string name, auto edit) {
    FusedCase c = base;
    edit(c);
    cases.emplace_back(std::move(name), c);
  };
  variant("plain", [](FusedCase&) {});
  variant("gqa", [](FusedCase& c) { c.Hq = 4, c.Hkv = 1; });
  variant("window", [](FusedCase& c) { c.window = 3; });
  variant("no rope", [](FusedCase& c) { c.rope = 0; });
  variant("partial", [](FusedCase& c) { c.rotary = 32; });
  variant("table", [](FusedCase& c) { c.table = true; });
  variant("scale", [](FusedCase& c) { c.scale = 0.25; });
  for (sy_dtype q : kQuantized)
    variant(std::string("weights ") + sy_dtype_name(q),
            [&](FusedCase& c) { c.H = 256, c.weights = q; });
  for (size_t i = 0; i < cases.size(); ++i) {
    if (g.quick() && i % 2 == 1) continue;
    const FusedCase c = cases[i].second;
    if (c.weights != SY_DTYPE_COUNT) {
      if (!g.dtypes().empty())
        g.add(fused_op(c, g.dtypes()[0]), cases[i].first, has(g.env().weight_dtypes, c.weights));
      continue;
    }
    add_by_features(g, cases[i].first, [&](sy_dtype d) { return fused_op(c, d); });
  }
}

void sinks_from_lse(Grid& g) {
  for (sy_dtype o : {SY_DTYPE_F32, SY_DTYPE_BF16})
    g.add(op_of(SY_OP_SINKS_FROM_LSE, {t(SY_DTYPE_F32, {2, 3, 4}), t(SY_DTYPE_F32, {3})},
                {t(o, {2, 4, 3, 64})}),
          std::string("o ") + sy_dtype_name(o), has(g.env().dtypes, SY_DTYPE_F32));
}

// ---- mixture of experts (ABI 1.7) -----------------------------------------------------------

OpDesc router_op(sy_dtype d, int64_t tokens, int64_t experts, int64_t k) {
  OpDesc op = op_of(SY_OP_MOE_ROUTER, {t(d, {tokens, experts})},
                    {t(SY_DTYPE_I32, {tokens, k}), t(SY_DTYPE_F32, {tokens, k})});
  op.set(SY_ATTR_TOP_K, k);
  return op;
}

void moe_router(Grid& g) {
  per_dtype(g, {{5, 8, 2}, {1, 32, 4}, {7, 4, 4}},
            [&](sy_dtype d, const Shape& s) { return router_op(d, s[0], s[1], s[2]); });
  for (sy_dtype d : g.dtypes()) {  // the contiguous layout's [B, S, E] logits
    OpDesc op = router_op(d, 6, 8, 3);
    for (TensorDesc* v : {&op.inputs[0], &op.outputs[0], &op.outputs[1]})
      v->shape = {2, 3, v->shape[1]};
    g.add(op, std::string(sy_dtype_name(d)) + " logits [2,3,8]");
  }
}

// x [T, H], ids and weights [T, k], gate/up [E, I, H] and down [E, H, I] of weight dtype w, with
// the three biases when `biased`.
OpDesc experts_op(sy_dtype d, sy_dtype w, const Shape& s, bool biased, bool swiglu,
                  double limit = 0.5) {
  const int64_t T = s[0], H = s[1], I = s[2], E = s[3], k = s[4];
  std::vector<TensorDesc> in = {t(d, {T, H}),    t(SY_DTYPE_I32, {T, k}), t(SY_DTYPE_F32, {T, k}),
                                t(w, {E, I, H}), t(w, {E, I, H}),         t(w, {E, H, I})};
  if (biased) in.insert(in.end(), {t(d, {E, I}), t(d, {E, I}), t(d, {E, H})});
  OpDesc op = op_of(SY_OP_MOE_EXPERTS, std::move(in), {t(d, {T, H})});
  op.set(SY_ATTR_EXPERT_ACTIVATION, std::string(swiglu ? "swiglu_limit" : "silu"));
  if (swiglu) {
    op.set(SY_ATTR_SWIGLU_ALPHA, 1.702);
    op.set(SY_ATTR_SWIGLU_LIMIT, limit);  // 0.5: the random values reach the clamp
  }
  return op;
}

void moe_experts(Grid& g) {
  // The last: 70 tokens over 2 experts, more rows than a kernel may take per chunk.
  per_dtype(g, {{5, 64, 32, 4, 2}, {1, 32, 64, 8, 4}, {9, 32, 32, 3, 3}, {70, 32, 16, 2, 2}},
            [&](sy_dtype d, const Shape& s) { return experts_op(d, d, s, true, true); });
  for (sy_dtype d : g.dtypes()) {
    g.add(experts_op(d, d, {4, 64, 32, 4, 2}, false, false),
          std::string(sy_dtype_name(d)) + " silu");
    // The contiguous layout's [B, S, H] tokens.
    OpDesc op = experts_op(d, d, {6, 32, 32, 4, 2}, true, true);
    for (TensorDesc* v : {&op.inputs[0], &op.inputs[1], &op.inputs[2], &op.outputs[0]})
      v->shape = {2, 3, v->shape[1]};
    g.add(op, std::string(sy_dtype_name(d)) + " x [2,3,32]");
    if (g.quick()) break;
  }
  for (sy_dtype q : kQuantized) {
    if (g.dtypes().empty()) break;
    const sy_dtype a = g.dtypes()[0];
    g.add(experts_op(a, q, {3, 256, 256, 4, 2}, true, true),
          std::string("weights ") + sy_dtype_name(q), has(g.env().weight_dtypes, q));
  }
}

// ---- varlen (ABI 1.5): prepared for T = 9 tokens, run on 5 ----------------------------------

constexpr int64_t kBoundT = 9, kActualT = 5;

void varlen(Grid& g, sy_op_kind k) {
  const std::map<int64_t, int64_t> actual = {{kBoundT, kActualT}};
  for (sy_dtype d : g.dtypes()) {
    const std::string label = std::string(sy_dtype_name(d)) + " varlen 5 of 9";
    const TensorDesc x = dyn(t(d, {kBoundT, 64}), 0);
    OpDesc op;
    switch (k) {
      case SY_OP_SILU:
      case SY_OP_GELU:
      case SY_OP_SOFTCAP:
      case SY_OP_SOFTMAX:
      case SY_OP_COPY:
        op = op_of(k, {x}, {x});
        if (k == SY_OP_SOFTCAP) op.set(SY_ATTR_SOFTCAP, 5.0);
        break;
      case SY_OP_SILU_MUL:
      case SY_OP_GELU_MUL:
      case SY_OP_ADD:
      case SY_OP_MUL: op = op_of(k, {x, x}, {x}); break;
      case SY_OP_ARGMAX: op = op_of(k, {x}, {dyn(t(SY_DTYPE_I64, {kBoundT}), 0)}); break;
      case SY_OP_RMS_NORM:
      case SY_OP_LAYER_NORM:
        op = op_of(k, {x, t(d, {64})}, {x});
        if (k == SY_OP_LAYER_NORM) op.inputs.push_back(t(d, {64}));
        op.set(SY_ATTR_EPS, 1e-5);
        break;
      case SY_OP_MATMUL: {
        const bool tb = has_feature(g.env(), SY_FEATURE_TRANSPOSED_B);
        op = op_of(k, {x, t(d, tb ? Shape{48, 64} : Shape{64, 48})}, {dyn(t(d, {kBoundT, 48}), 0)});
        op.set(SY_ATTR_TRANSPOSE_B, int64_t(tb));
        break;
      }
      case SY_OP_EMBEDDING:
        op = op_of(k, {t(d, {50, 64}), dyn(t(SY_DTYPE_I64, {kBoundT}), 0)}, {x});
        break;
      case SY_OP_ROPE:
        op = op_of(k, {dyn(t(d, {1, kBoundT, 2, 64}), 1), dyn(t(SY_DTYPE_I64, {1, kBoundT}), 1)},
                   {dyn(t(d, {1, kBoundT, 2, 64}), 1)});
        op.set(SY_ATTR_ROPE_THETA, 10000.0);
        break;
      case SY_OP_SLICE:
        op = op_of(k, {dyn(t(d, {kBoundT, 5, 16}), 0)}, {dyn(t(d, {kBoundT, 2, 16}), 0)});
        op.set(SY_ATTR_AXIS, int64_t{1});
        op.set(SY_ATTR_START, int64_t{1});
        break;
      case SY_OP_MOE_ROUTER:
        op = router_op(d, kBoundT, 8, 2);
        for (auto& v : op.inputs) v = dyn(v, 0);
        for (auto& v : op.outputs) v = dyn(v, 0);
        break;
      case SY_OP_MOE_EXPERTS:
        op = experts_op(d, d, {kBoundT, 64, 32, 4, 2}, true, true);
        for (size_t i = 0; i < 3; ++i) op.inputs[i] = dyn(op.inputs[i], 0);
        op.outputs[0] = dyn(op.outputs[0], 0);
        break;
      case SY_OP_SINKS_FROM_LSE:
        if (d != SY_DTYPE_F32) continue;  // the op's dtype is lse's, always f32
        op = op_of(k, {dyn(t(SY_DTYPE_F32, {1, 3, kBoundT}), 2), t(SY_DTYPE_F32, {3})},
                   {dyn(t(d, {1, kBoundT, 3, 64}), 1)});
        break;
      default: return;
    }
    g.add_varlen(op, label, actual);
    if (!g.cases_inside_last()) return;  // one case outside is enough
  }
}

// ---- the paged forms (ABI 1.5): a pool of NB blocks of BS rows, S sequences packed along T ---

constexpr int64_t kPoolBlocks = 10, kBlockRows = 4, kTableBlocks = 4;  // a sequence: <= 16 keys
constexpr int64_t kBoundS = 3, kActualS = 2;

void paged_append(Grid& g) {
  for (sy_dtype d : g.dtypes()) {
    OpDesc op = op_of(SY_OP_KV_CACHE_APPEND,
                      {dyn(t(d, {1, kBoundT, 2, 64}), 1), dyn(t(SY_DTYPE_I64, {kBoundT}), 0)},
                      {t(d, {kPoolBlocks, kBlockRows, 2, 64})});
    op.set(SY_ATTR_PAGED, int64_t{1});
    g.add_varlen(op, std::string(sy_dtype_name(d)) + " paged, varlen 5 of 9",
                 {{kBoundT, kActualT}});
    if (!g.cases_inside_last()) return;
  }
}

struct PagedCase {
  int64_t Hq = 2, Hkv = 2, D = 64, window = -1;
  bool causal = true, sinks = false, lse = false;
  double softcap = 0, scale = 0;
};

OpDesc paged_op(const PagedCase& c, sy_dtype d) {
  std::vector<TensorDesc> in = {dyn(t(d, {1, kBoundT, c.Hq, c.D}), 1),
                                t(d, {kPoolBlocks, kBlockRows, c.Hkv, c.D}),
                                t(d, {kPoolBlocks, kBlockRows, c.Hkv, c.D})};
  if (c.sinks) in.push_back(t(SY_DTYPE_F32, {c.Hq}));
  in.push_back(dyn(t(SY_DTYPE_I32, {kBoundS + 1}), 0));
  in.push_back(dyn(t(SY_DTYPE_I32, {kBoundS}), 0));
  in.push_back(dyn(t(SY_DTYPE_I32, {kBoundS, kTableBlocks}), 0));
  std::vector<TensorDesc> out = {dyn(t(d, {1, kBoundT, c.Hq, c.D}), 1)};
  if (c.lse) out.push_back(dyn(t(SY_DTYPE_F32, {1, c.Hq, kBoundT}), 2));
  OpDesc op = op_of(SY_OP_ATTENTION, std::move(in), std::move(out));
  op.set(SY_ATTR_PAGED, int64_t{1});
  op.set(SY_ATTR_CAUSAL, int64_t(c.causal));
  op.set(SY_ATTR_WINDOW_LEFT, c.window);
  if (c.softcap > 0) op.set(SY_ATTR_SOFTCAP, c.softcap);
  if (c.scale != 0) op.set(SY_ATTR_SCALE, c.scale);
  return op;
}

void paged_attention(Grid& g) {
  PagedCase base;
  base.D = head_dim_for(g.env());
  std::vector<std::pair<std::string, PagedCase>> cases;
  auto variant = [&](const char* name, auto edit) {
    PagedCase c = base;
    edit(c);
    cases.emplace_back(name, c);
  };
  variant("paged causal", [](PagedCase&) {});
  variant("paged gqa", [](PagedCase& c) { c.Hq = 4; });
  variant("paged window", [](PagedCase& c) { c.window = 3; });
  variant("paged sinks lse", [](PagedCase& c) { c.sinks = c.lse = true; });
  variant("paged softcap scale", [](PagedCase& c) { c.softcap = 20, c.scale = 0.2; });
  variant("paged everything", [](PagedCase& c) {
    c.Hq = 4, c.window = 4, c.sinks = c.lse = true, c.softcap = 20, c.scale = 0.2;
  });
  for (size_t i = 0; i < cases.size(); ++i) {
    if (g.quick() && i % 2 == 1) continue;
    for (sy_dtype d : g.dtypes()) {
      g.add_varlen(paged_op(cases[i].second, d),
                   std::string(sy_dtype_name(d)) + " " + cases[i].first,
                   {{kBoundT, kActualT}, {kBoundS + 1, kActualS + 1}, {kBoundS, kActualS}});
      if (!g.cases_inside_last()) break;
    }
  }
}

}  // namespace

std::vector<GridCase> op_grid(const Envelope& env, bool quick) {
  Grid g(env, quick);
  switch (env.op) {
    case SY_OP_SILU:
    case SY_OP_GELU:
    case SY_OP_SOFTCAP:
    case SY_OP_SILU_MUL:
    case SY_OP_GELU_MUL:
    case SY_OP_ADD:
    case SY_OP_MUL:
    case SY_OP_SOFTMAX:
    case SY_OP_ARGMAX: elementwise(g, env.op); break;
    case SY_OP_RMS_NORM:
    case SY_OP_LAYER_NORM: norms(g, env.op); break;
    case SY_OP_MATMUL: matmul(g); break;
    case SY_OP_EMBEDDING: embedding(g); break;
    case SY_OP_ROPE: rope(g); break;
    case SY_OP_KV_CACHE_APPEND: kv_cache_append(g); break;
    case SY_OP_COPY:
    case SY_OP_SLICE: slice_and_copy(g, env.op); break;
    case SY_OP_ATTENTION: attention(g); break;
    case SY_OP_FUSED_DECODE_ATTENTION: fused(g); break;
    case SY_OP_SINKS_FROM_LSE: sinks_from_lse(g); break;
    case SY_OP_MOE_ROUTER: moe_router(g); break;
    case SY_OP_MOE_EXPERTS: moe_experts(g); break;
    default: break;
  }
  varlen(g, env.op);
  if (env.op == SY_OP_KV_CACHE_APPEND) paged_append(g);
  if (env.op == SY_OP_ATTENTION) paged_attention(g);
  return g.take();
}

}  // namespace sy::conformance
