// ModelSpec -> Graph: the prefill and decode phases of a pre-norm decoder, named by the
// convention of docs/graph-format.md ("Imported graphs"), which the executor relies on.
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>

#include "core/importer/model_spec.hpp"

namespace sy::importer {
namespace {

using Shape = std::vector<int64_t>;
constexpr int64_t kMaxElements = int64_t(1) << 50;  // what the graph parser accepts

std::string lname(int64_t i, const std::string& what) {
  std::string s = "l";  // built by appending: GCC 12 warns (-Wrestrict) on "l" + to_string()
  s += std::to_string(i);
  s += '.';
  s += what;
  return s;
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s[i]);
  }
  return out + "]";
}

// Collects the values and ops of one phase. Every value is declared once with its shape; its
// element count is checked against 2^50 without overflowing.
class PhaseBuilder {
 public:
  PhaseBuilder(const ModelSpec& m, const ImportOptions& o, const std::string& name, int64_t seq,
               const std::string& file)
      : m(m),
        B(o.batch),
        S(seq),
        C(o.context),
        decode(name == "decode"),
        weight_dtypes(o.weight_dtypes),
        file_(file) {
    p_.name = name;
  }

  std::string value(const std::string& name, const Shape& shape, ValueKind kind, sy_dtype dtype) {
    if (!names_.insert(name).second) {
      const Value* v = p_.value(name);
      if (v->shape != shape || v->kind != kind || v->dtype != dtype)
        throw std::logic_error("importer: value '" + name + "' declared twice differently");
      return name;
    }
    int64_t elements = 1;
    for (int64_t d : shape)
      if (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxElements)
        throw Error(Errc::bad_config,
                    "invalid model config: value '" + name + "' " + shape_text(shape) +
                        " would hold more than 2^50 elements: the config's sizes or the "
                        "import options (batch, prompt_len, context) are too large",
                    file_);
    p_.values.push_back({name, dtype, shape, kind});
    return name;
  }
  std::string act(const std::string& name, const Shape& shape) {
    return value(name, shape, ValueKind::activation, m.dtype);
  }
  std::string weight(const std::string& name, const Shape& shape) {
    auto it = weight_dtypes.find(name);
    return value(name, shape, ValueKind::weight, it == weight_dtypes.end() ? m.dtype : it->second);
  }
  std::string input(const std::string& name, const Shape& shape) {
    return value(name, shape, ValueKind::input, SY_DTYPE_I64);
  }
  // A constant the graph holds itself (Gemma's embedding scale, a scaled rope's table).
  std::string constant(const std::string& name, sy_dtype dtype, std::vector<double> data) {
    if (!names_.insert(name).second) return name;  // one per name: every layer shares it
    p_.values.push_back(
        {name, dtype, {int64_t(data.size())}, ValueKind::constant, std::move(data)});
    return name;
  }

  void op(const std::string& id, sy_op_kind kind, std::vector<std::string> in,
          std::vector<std::string> out, int64_t layer, std::vector<Attr> attrs = {}) {
    p_.nodes.push_back({id, kind, std::move(in), std::move(out), std::move(attrs), int(layer)});
  }
  void fusion(Fusion f) { p_.fusions.push_back(std::move(f)); }
  Phase take() { return std::move(p_); }

  const ModelSpec& m;
  const int64_t B, S, C;
  const bool decode;
  const std::map<std::string, sy_dtype>& weight_dtypes;

 private:
  std::string file_;
  Phase p_;
  std::set<std::string> names_;
};

std::vector<Attr> norm_attrs(const ModelSpec& m) {
  std::vector<Attr> a{{SY_ATTR_EPS, m.eps}};
  if (m.gemma) a.push_back({SY_ATTR_WEIGHT_OFFSET, 1.0});
  return a;
}

// rms_norm of x over its last dimension; the weight is named like the op.
std::string rms_norm(PhaseBuilder& b, int64_t layer, const std::string& id,
                     const std::string& weight, const std::string& x, const std::string& out,
                     const Shape& shape) {
  b.op(id, SY_OP_RMS_NORM, {x, b.weight(weight, {shape.back()})}, {b.act(out, shape)}, layer,
       norm_attrs(b.m));
  return out;
}

// A Hugging Face linear layer of layer i: matmul with the weight "l{i}.<what>" [N, K]
// (transpose_b), then, with `bias_shape`, an add of "l{i}.<what>_bias" (op "l{i}.<bias_id>").
std::string linear(PhaseBuilder& b, int64_t i, const std::string& what, const std::string& x,
                   const Shape& w, const std::string& out, const Shape& out_shape,
                   const Shape* bias_shape = nullptr, const std::string& bias_id = "") {
  b.op(lname(i, what), SY_OP_MATMUL, {x, b.weight(lname(i, what), w)}, {b.act(out, out_shape)}, i,
       {{SY_ATTR_TRANSPOSE_B, int64_t(1)}});
  if (!bias_shape) return out;
  std::string biased = out + "_b";
  b.op(lname(i, bias_id), SY_OP_ADD, {out, b.weight(lname(i, what + "_bias"), *bias_shape)},
       {b.act(biased, out_shape)}, i);
  return biased;
}

std::vector<Attr> rope_attrs(const ModelSpec& m, const LayerSpec& l) {
  std::vector<Attr> a{{SY_ATTR_ROPE_THETA, l.rope_spec.theta},
                      {SY_ATTR_ROTARY_DIM, m.rotary_dim},
                      {SY_ATTR_ROPE_STYLE, std::string("neox")}};
  if (l.rope_spec.attention_factor != 1.0)
    a.push_back({SY_ATTR_ROPE_ATTENTION_FACTOR, l.rope_spec.attention_factor});
  return a;
}

// The rope's frequency table of layer l, as a graph constant (none for an unscaled rope).
std::optional<std::string> rope_table(PhaseBuilder& b, const LayerSpec& l) {
  if (l.rope_spec.inv_freq.empty()) return std::nullopt;
  return b.constant(l.rope_spec.table, SY_DTYPE_F32,
                    std::vector<double>(l.rope_spec.inv_freq.begin(), l.rope_spec.inv_freq.end()));
}

std::vector<Attr> attention_attrs(const PhaseBuilder& b, const LayerSpec& l) {
  std::vector<Attr> a{{SY_ATTR_CAUSAL, int64_t(1)}};
  if (l.window_left >= 0) a.push_back({SY_ATTR_WINDOW_LEFT, l.window_left});
  if (b.m.scale != 0) a.push_back({SY_ATTR_SCALE, b.m.scale});
  if (b.m.softcap > 0) a.push_back({SY_ATTR_SOFTCAP, b.m.softcap});
  if (b.decode) a.push_back({SY_ATTR_KV_LEN_INPUT, int64_t(1)});
  return a;
}

// q, k or v of layer i: projection [B,S,heads,D], bias, q/k norm, rope.
std::string qkv(PhaseBuilder& b, int64_t i, const std::string& which, int64_t heads,
                const std::string& x) {
  const ModelSpec& m = b.m;
  const Shape shape{b.B, b.S, heads, m.head_dim}, bias{heads, m.head_dim};
  std::string y = linear(b, i, which + "_proj", x, {heads * m.head_dim, m.hidden}, lname(i, which),
                         shape, m.qkv_bias ? &bias : nullptr, which + "_bias");
  if (which == "v") return y;
  if (m.qk_norm)
    y = rms_norm(b, i, lname(i, which + "_norm"), lname(i, which + "_norm"), y,
                 lname(i, which + "_normed"), shape);
  const LayerSpec& l = m.layer[size_t(i)];
  if (!l.rope) return y;
  std::string rotated = lname(i, which + "_rot");
  std::vector<std::string> in{y, "positions"};
  if (auto table = rope_table(b, l)) in.push_back(*table);
  b.op(lname(i, which + "_rope"), SY_OP_ROPE, in, {b.act(rotated, shape)}, i, rope_attrs(m, l));
  return rotated;
}

// Whether the decode attention block of a layer is what fused_decode_attention computes (its
// projections may be block-quantized, as the unfused matmuls' may).
bool fusable(const PhaseBuilder& b) {
  const ModelSpec& m = b.m;
  return b.decode && b.B == 1 && !m.qk_norm && !m.qkv_bias && !m.sinks && m.softcap == 0;
}

void add_decode_fusion(PhaseBuilder& b, int64_t i, const std::string& normed) {
  const LayerSpec& l = b.m.layer[size_t(i)];
  Fusion f;
  f.group = lname(i, "decode_attention");
  for (const char* id :
       {"q_proj", "k_proj", "v_proj", "q_rope", "k_rope", "k_append", "v_append", "attn"}) {
    std::string what = id;
    if (!l.rope && what.ends_with("_rope")) continue;
    f.replaces.push_back(lname(i, what));
  }
  f.fused.id = f.group;
  f.fused.op = SY_OP_FUSED_DECODE_ATTENTION;
  f.fused.layer = int(i);
  f.fused.inputs = {normed, lname(i, "q_proj"), lname(i, "k_proj"), lname(i, "v_proj"),
                    "cache_position"};
  if (l.rope)
    if (auto table = rope_table(b, l)) f.fused.inputs.push_back(*table);
  f.fused.outputs = {lname(i, "attn_out"), lname(i, "k_cache"), lname(i, "v_cache")};
  f.fused.attrs = {{SY_ATTR_ROPE, int64_t(l.rope ? 1 : 0)}, {SY_ATTR_ROPE_THETA, l.rope_spec.theta},
                   {SY_ATTR_ROTARY_DIM, b.m.rotary_dim},    {SY_ATTR_CAUSAL, int64_t(1)},
                   {SY_ATTR_WINDOW_LEFT, l.window_left},    {SY_ATTR_SCALE, b.m.scale}};
  if (l.rope && l.rope_spec.attention_factor != 1.0)
    f.fused.attrs.push_back({SY_ATTR_ROPE_ATTENTION_FACTOR, l.rope_spec.attention_factor});
  b.fusion(std::move(f));
}

// The attention block of layer i; returns the residual stream after it.
std::string attention_block(PhaseBuilder& b, int64_t i, const std::string& x) {
  const ModelSpec& m = b.m;
  const Shape hidden{b.B, b.S, m.hidden}, q_shape{b.B, b.S, m.heads, m.head_dim};
  const Shape cache{b.B, b.C, m.kv_heads, m.head_dim};
  std::string n = rms_norm(b, i, lname(i, "input_layernorm"), lname(i, "input_layernorm"), x,
                           lname(i, "attn_norm"), hidden);
  std::string q = qkv(b, i, "q", m.heads, n);
  std::string k = qkv(b, i, "k", m.kv_heads, n);
  std::string v = qkv(b, i, "v", m.kv_heads, n);
  std::string k_cache = b.value(lname(i, "k_cache"), cache, ValueKind::kv_cache, m.dtype);
  std::string v_cache = b.value(lname(i, "v_cache"), cache, ValueKind::kv_cache, m.dtype);
  b.op(lname(i, "k_append"), SY_OP_KV_CACHE_APPEND, {k, "cache_position"}, {k_cache}, i);
  b.op(lname(i, "v_append"), SY_OP_KV_CACHE_APPEND, {v, "cache_position"}, {v_cache}, i);

  // Prefill attends over the prompt's fresh k/v; decode over the caches, kv_len rows valid.
  std::vector<std::string> in{q, b.decode ? k_cache : k, b.decode ? v_cache : v};
  if (m.sinks) in.push_back(b.value(lname(i, "sinks"), {m.heads}, ValueKind::weight, SY_DTYPE_F32));
  if (b.decode) in.push_back("kv_len");
  std::string o = b.act(lname(i, "attn_out"), q_shape);
  b.op(lname(i, "attn"), SY_OP_ATTENTION, in, {o}, i, attention_attrs(b, m.layer[size_t(i)]));
  if (fusable(b)) add_decode_fusion(b, i, n);

  const Shape o_bias{m.hidden};
  std::string y = linear(b, i, "o_proj", o, {m.hidden, m.heads * m.head_dim}, lname(i, "o"), hidden,
                         m.o_bias ? &o_bias : nullptr, "o_bias");
  if (m.gemma)
    y = rms_norm(b, i, lname(i, "post_attention_layernorm"), lname(i, "post_attention_layernorm"),
                 y, lname(i, "o_normed"), hidden);
  std::string h = b.act(lname(i, "h"), hidden);
  b.op(lname(i, "attn_residual"), SY_OP_ADD, {x, y}, {h}, i);
  return h;
}

// The MLP block of layer i (dense, or gpt-oss's MoE as its dense stand-in); returns the
// residual stream after it.
std::string mlp_block(PhaseBuilder& b, int64_t i, const std::string& h) {
  const ModelSpec& m = b.m;
  const Shape hidden{b.B, b.S, m.hidden};
  const char* norm = m.gemma ? "pre_feedforward_layernorm" : "post_attention_layernorm";
  std::string n = rms_norm(b, i, lname(i, norm), lname(i, norm), h, lname(i, "mlp_norm"), hidden);
  const bool bias = m.mlp_bias || m.experts > 0;
  if (m.experts > 0) {
    const Shape router_bias{m.experts};
    linear(b, i, "router", n, {m.experts, m.hidden}, lname(i, "router_logits"),
           {b.B, b.S, m.experts}, &router_bias, "router_bias");
  }
  const int64_t width = m.experts > 0 ? m.experts_per_token * m.intermediate : m.intermediate;
  const Shape wide{b.B, b.S, width}, wide_bias{width}, hidden_bias{m.hidden};
  std::string gate = linear(b, i, "gate_proj", n, {width, m.hidden}, lname(i, "gate"), wide,
                            bias ? &wide_bias : nullptr, "gate_bias");
  std::string up = linear(b, i, "up_proj", n, {width, m.hidden}, lname(i, "up"), wide,
                          bias ? &wide_bias : nullptr, "up_bias");
  std::string a = b.act(lname(i, "act"), wide);
  if (m.gelu.empty())
    b.op(lname(i, "act"), SY_OP_SILU_MUL, {gate, up}, {a}, i);
  else
    b.op(lname(i, "act"), SY_OP_GELU_MUL, {gate, up}, {a}, i, {{SY_ATTR_GELU_APPROX, m.gelu}});
  std::string y = linear(b, i, "down_proj", a, {m.hidden, width}, lname(i, "mlp_out"), hidden,
                         bias ? &hidden_bias : nullptr, "down_bias");
  if (m.gemma)
    y = rms_norm(b, i, lname(i, "post_feedforward_layernorm"),
                 lname(i, "post_feedforward_layernorm"), y, lname(i, "mlp_normed"), hidden);
  std::string out = b.act(lname(i, "out"), hidden);
  b.op(lname(i, "mlp_residual"), SY_OP_ADD, {h, y}, {out}, i);
  return out;
}

Phase build_phase(const ModelSpec& m, const ImportOptions& o, const std::string& name, int64_t seq,
                  const std::string& file) {
  PhaseBuilder b(m, o, name, seq, file);
  const Shape tokens{b.B, b.S}, hidden{b.B, b.S, m.hidden};
  b.input("tokens", tokens);
  b.input("positions", tokens);
  b.input("cache_position", {1});
  if (b.decode) b.input("kv_len", {b.B});

  std::string x = b.act("embeddings", hidden);
  b.op("embed", SY_OP_EMBEDDING, {b.weight("embed_tokens", {m.vocab, m.hidden}), "tokens"}, {x},
       -1);
  if (m.gemma) {
    // Gemma scales embeddings by sqrt(hidden_size), rounded to the model's dtype as transformers
    // rounds it: a [H] constant of the graph.
    std::string scaled = b.act("embeddings_scaled", hidden);
    std::string scale = b.constant(
        "embed_scale", m.dtype, std::vector<double>(size_t(m.hidden), std::sqrt(double(m.hidden))));
    b.op("embed_scale", SY_OP_MUL, {x, scale}, {scaled}, -1);
    x = scaled;
  }
  for (int64_t i = 0; i < m.layers; ++i) x = mlp_block(b, i, attention_block(b, i, x));

  // Positions whose logits the phase computes: all of them, or the last one (ImportOptions).
  int64_t rows = b.S;
  if (!b.decode && !o.every_position_logits && b.S > 1) {
    std::string last = b.act("last_hidden", {b.B, 1, m.hidden});
    b.op("last_position", SY_OP_SLICE, {x}, {last}, -1,
         {{SY_ATTR_AXIS, int64_t(1)}, {SY_ATTR_START, b.S - 1}});
    x = last;
    rows = 1;
  }
  const Shape out_hidden{b.B, rows, m.hidden}, out_tokens{b.B, rows};
  std::string final_hidden = rms_norm(b, -1, "final_norm", "norm", x, "final_hidden", out_hidden);
  std::string head = m.tie_embeddings ? "embed_tokens" : b.weight("lm_head", {m.vocab, m.hidden});
  std::string logits = b.act(m.final_softcap > 0 ? "logits_raw" : "logits", {b.B, rows, m.vocab});
  b.op("lm_head", SY_OP_MATMUL, {final_hidden, head}, {logits}, -1,
       {{SY_ATTR_TRANSPOSE_B, int64_t(1)}});
  if (m.final_softcap > 0) {  // Gemma 2: logits = c·tanh(logits / c)
    b.op("final_softcap", SY_OP_SOFTCAP, {logits}, {b.act("logits", {b.B, rows, m.vocab})}, -1,
         {{SY_ATTR_SOFTCAP, m.final_softcap}});
    logits = "logits";
  }
  b.op("argmax", SY_OP_ARGMAX, {logits},
       {b.value("next_token", out_tokens, ValueKind::activation, SY_DTYPE_I64)}, -1);
  Phase p = b.take();
  validate(p, file + ":" + name);
  return p;
}

}  // namespace

Graph build_graph(const ModelSpec& m, const ImportOptions& o, const std::string& file) {
  Graph g;
  g.source = file + " (" + m.model_type + ")";
  g.phases.push_back(build_phase(m, o, "prefill", o.prompt_len, file));
  g.phases.push_back(build_phase(m, o, "decode", 1, file));
  return g;
}

}  // namespace sy::importer
