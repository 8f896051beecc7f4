// ModelSpec -> Graph: a pre-norm decoder in one of two KV layouts (graph.hpp's KvLayout).
//  paged:      one "step" phase over T packed tokens of up to S sequences: hidden states
//              [T, H], per-head tensors [1, T, heads, D], KV pools of blocks written through
//              slot_mapping and read through block tables, the logits of the R tokens
//              output_rows names (an embedding lookup over the last hidden states gathers them).
//  contiguous: "prefill" [B, S] and "decode" [B, 1] phases over caches of C rows, with the
//              fused decode-attention alternatives.
// The runtime finds the inputs and outputs by their roles (docs/graph-format.md, "Imported
// graphs"), never by name.
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
        paged(o.kv_layout == KvLayout::paged),
        B(paged ? 1 : o.batch),
        S(seq),
        C(o.context),
        decode(name == "decode"),
        weight_dtypes(o.weight_dtypes),
        file_(file) {
    p_.name = name;
  }

  // A per-token activation of `width` features: [T, width] (paged) or [B, S, width].
  Shape hidden_shape(int64_t width) const { return paged ? Shape{S, width} : Shape{B, S, width}; }
  std::string hidden(const std::string& name, int64_t width) {
    return act(name, hidden_shape(width));
  }
  // Per-head rows: [1, T, heads, D] (paged) or [B, S, heads, D].
  Shape heads_shape(int64_t heads) const { return {B, S, heads, m.head_dim}; }
  std::string heads(const std::string& name, int64_t heads) {
    return act(name, heads_shape(heads));
  }
  // Marks axis `axis` of value `name` as the step's token count (or `extent`).
  std::string dyn(const std::string& name, int axis, StepExtent extent = StepExtent::tokens) {
    for (auto& v : p_.values)
      if (v.name == name) v.dynamic = {axis, extent};
    return name;
  }
  std::string role(const std::string& name, ValueRole r) {
    for (auto& v : p_.values)
      if (v.name == name) v.role = r;
    return name;
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
  // An activation. Paged, every activation is per token: [T, width] varies along axis 0 and
  // [1, T, heads, D] along axis 1 (the head's rows and logits are re-marked as outputs).
  std::string act(const std::string& name, const Shape& shape) {
    std::string v = value(name, shape, ValueKind::activation, m.dtype);
    if (paged && (shape.size() == 2 || shape.size() == 4)) dyn(v, shape.size() == 2 ? 0 : 1);
    return v;
  }
  std::string weight(const std::string& name, const Shape& shape,
                     std::optional<sy_dtype> stored = std::nullopt) {
    auto it = weight_dtypes.find(name);
    return value(name, shape, ValueKind::weight,
                 it != weight_dtypes.end() ? it->second : stored.value_or(m.dtype));
  }
  // A per-token activation of another dtype than the model's (a router's ids and weights).
  std::string typed_act(const std::string& name, const Shape& shape, sy_dtype dtype) {
    std::string v = value(name, shape, ValueKind::activation, dtype);
    if (paged) dyn(v, 0);
    return v;
  }
  std::string input(const std::string& name, const Shape& shape, sy_dtype dtype = SY_DTYPE_I64) {
    return value(name, shape, ValueKind::input, dtype);
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
  const bool paged;
  const int64_t B, S, C;  // paged: B = 1 and S = T, the step's tokens
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
  const Shape shape = b.heads_shape(heads), bias{heads, m.head_dim};
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
  b.op(lname(i, which + "_rope"), SY_OP_ROPE, in, {b.heads(rotated, heads)}, i, rope_attrs(m, l));
  return rotated;
}

// Whether the decode attention block of a layer is what fused_decode_attention computes (its
// projections may be block-quantized, as the unfused matmuls' may).
bool fusable(const PhaseBuilder& b) {
  const ModelSpec& m = b.m;
  return !b.paged && b.decode && b.B == 1 && !m.qk_norm && !m.qkv_bias && !m.sinks &&
         m.softcap == 0;
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

// The KV caches of layer i and the ops that write k and v into them; returns {k_cache,
// v_cache}. Paged: pools [NB, BS, Hkv, D] written at the tokens' slots. Contiguous: caches
// [B, C, Hkv, D] written from cache_position on.
std::pair<std::string, std::string> kv_caches(PhaseBuilder& b, int64_t i, const std::string& k,
                                              const std::string& v, const ImportOptions& o) {
  const ModelSpec& m = b.m;
  const Shape cache = b.paged ? Shape{o.kv_blocks, o.kv_block_size, m.kv_heads, m.head_dim}
                              : Shape{b.B, b.C, m.kv_heads, m.head_dim};
  std::string k_cache = b.value(lname(i, "k_cache"), cache, ValueKind::kv_cache, m.dtype);
  std::string v_cache = b.value(lname(i, "v_cache"), cache, ValueKind::kv_cache, m.dtype);
  const std::string where = b.paged ? "slot_mapping" : "cache_position";
  std::vector<Attr> attrs;
  if (b.paged) {
    b.dyn(k_cache, 0, StepExtent::pool_blocks);
    b.dyn(v_cache, 0, StepExtent::pool_blocks);
    attrs.push_back({SY_ATTR_PAGED, int64_t(1)});
  }
  b.op(lname(i, "k_append"), SY_OP_KV_CACHE_APPEND, {k, where}, {k_cache}, i, attrs);
  b.op(lname(i, "v_append"), SY_OP_KV_CACHE_APPEND, {v, where}, {v_cache}, i, attrs);
  return {k_cache, v_cache};
}

// The attention block of layer i; returns the residual stream after it.
std::string attention_block(PhaseBuilder& b, int64_t i, const std::string& x,
                            const ImportOptions& options) {
  const ModelSpec& m = b.m;
  const Shape hidden = b.hidden_shape(m.hidden);
  std::string n = rms_norm(b, i, lname(i, "input_layernorm"), lname(i, "input_layernorm"), x,
                           lname(i, "attn_norm"), hidden);
  std::string q = qkv(b, i, "q", m.heads, n);
  std::string k = qkv(b, i, "k", m.kv_heads, n);
  std::string v = qkv(b, i, "v", m.kv_heads, n);
  auto [k_cache, v_cache] = kv_caches(b, i, k, v, options);

  // Paged: every token attends over its sequence's pool blocks, this step's rows included.
  // Contiguous prefill attends over the prompt's fresh k/v; decode over the caches, kv_len
  // rows valid.
  const bool cached = b.paged || b.decode;
  std::vector<std::string> in{q, cached ? k_cache : k, cached ? v_cache : v};
  if (m.sinks) in.push_back(b.value(lname(i, "sinks"), {m.heads}, ValueKind::weight, SY_DTYPE_F32));
  if (b.paged) in.insert(in.end(), {"query_start", "seq_lens", "block_table"});
  if (b.decode) in.push_back("kv_len");
  std::string o = b.heads(lname(i, "attn_out"), m.heads);
  std::vector<Attr> attrs = attention_attrs(b, m.layer[size_t(i)]);
  if (b.paged) attrs.push_back({SY_ATTR_PAGED, int64_t(1)});
  b.op(lname(i, "attn"), SY_OP_ATTENTION, in, {o}, i, attrs);
  if (fusable(b)) add_decode_fusion(b, i, n);

  const Shape o_bias{m.hidden};
  std::string y = linear(b, i, "o_proj", o, {m.hidden, m.heads * m.head_dim}, lname(i, "o"), hidden,
                         m.o_bias ? &o_bias : nullptr, "o_bias");
  if (m.gemma)
    y = rms_norm(b, i, lname(i, "post_attention_layernorm"), lname(i, "post_attention_layernorm"),
                 y, lname(i, "o_normed"), hidden);
  std::string h = b.hidden(lname(i, "h"), m.hidden);
  b.op(lname(i, "attn_residual"), SY_OP_ADD, {x, y}, {h}, i);
  return h;
}

// A mixture of experts on the normed hidden states n: the router matmul (biased for gpt-oss),
// its top-k softmax (moe_router "l{i}.router_topk"), then the routed experts (moe_experts
// "l{i}.experts", weights "l{i}.experts.{gate,up,down}_proj" and, for gpt-oss, their "_bias");
// returns the MLP's output.
std::string moe_block(PhaseBuilder& b, int64_t i, const std::string& n) {
  const ModelSpec& m = b.m;
  const int64_t E = m.experts, I = m.expert_intermediate, H = m.hidden;
  const Shape router_bias{E}, routed = b.hidden_shape(m.experts_per_token);
  std::string logits =
      linear(b, i, "router", n, {E, H}, lname(i, "router_logits"), b.hidden_shape(E),
             m.router_bias ? &router_bias : nullptr, "router_bias");
  std::string ids = b.typed_act(lname(i, "expert_ids"), routed, SY_DTYPE_I32);
  std::string weights = b.typed_act(lname(i, "expert_weights"), routed, SY_DTYPE_F32);
  b.op(lname(i, "router_topk"), SY_OP_MOE_ROUTER, {logits}, {ids, weights}, i,
       {{SY_ATTR_TOP_K, m.experts_per_token}});
  std::vector<std::string> in = {
      n,
      ids,
      weights,
      b.weight(lname(i, "experts.gate_proj"), {E, I, H}, m.expert_dtype),
      b.weight(lname(i, "experts.up_proj"), {E, I, H}, m.expert_dtype),
      b.weight(lname(i, "experts.down_proj"), {E, H, I}, m.expert_dtype)};
  if (m.expert_bias)
    for (auto [name, shape] : {std::pair{"experts.gate_proj_bias", Shape{E, I}},
                               {"experts.up_proj_bias", Shape{E, I}},
                               {"experts.down_proj_bias", Shape{E, H}}})
      in.push_back(b.weight(lname(i, name), shape));
  std::vector<Attr> attrs = {{SY_ATTR_EXPERT_ACTIVATION, std::string("silu")}};
  if (m.swiglu_limit)
    attrs = {{SY_ATTR_EXPERT_ACTIVATION, std::string("swiglu_limit")},
             {SY_ATTR_SWIGLU_ALPHA, m.swiglu_alpha},
             {SY_ATTR_SWIGLU_LIMIT, m.swiglu_limit_value}};
  std::string y = b.hidden(lname(i, "mlp_out"), H);
  b.op(lname(i, "experts"), SY_OP_MOE_EXPERTS, in, {y}, i, attrs);
  return y;
}

// The MLP block of layer i (dense, or a mixture of experts); returns the residual stream after
// it.
std::string mlp_block(PhaseBuilder& b, int64_t i, const std::string& h) {
  const ModelSpec& m = b.m;
  const Shape hidden = b.hidden_shape(m.hidden);
  const char* norm = m.gemma ? "pre_feedforward_layernorm" : "post_attention_layernorm";
  std::string n = rms_norm(b, i, lname(i, norm), lname(i, norm), h, lname(i, "mlp_norm"), hidden);
  if (m.experts > 0 && !m.layer[size_t(i)].dense_mlp) {
    std::string out = b.act(lname(i, "out"), hidden);
    b.op(lname(i, "mlp_residual"), SY_OP_ADD, {h, moe_block(b, i, n)}, {out}, i);
    return out;
  }
  const bool bias = m.mlp_bias;
  const int64_t width = m.intermediate;
  const Shape wide = b.hidden_shape(width), wide_bias{width}, hidden_bias{m.hidden};
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

// The inputs a step writes, by role. Paged: the packed tokens and positions, the pool slots
// they are written to, each sequence's query start, length and block table, and the tokens
// whose logits are computed. Contiguous: tokens and positions [B, S], the first cache row
// written, and (decode) the valid cache rows.
void step_inputs(PhaseBuilder& b, const ImportOptions& o) {
  if (b.paged) {
    const int64_t seqs = o.max_sequences, outputs = o.max_outputs > 0 ? o.max_outputs : seqs;
    const int64_t blocks_per_seq = (o.context + o.kv_block_size - 1) / o.kv_block_size;
    b.role(b.dyn(b.input("tokens", {b.S}), 0), ValueRole::token_ids);
    b.role(b.dyn(b.input("positions", {1, b.S}), 1), ValueRole::positions);
    b.role(b.dyn(b.input("slot_mapping", {b.S}), 0), ValueRole::slot_mapping);
    b.role(
        b.dyn(b.input("query_start", {seqs + 1}, SY_DTYPE_I32), 0, StepExtent::sequences_plus_one),
        ValueRole::query_start);
    b.role(b.dyn(b.input("seq_lens", {seqs}, SY_DTYPE_I32), 0, StepExtent::sequences),
           ValueRole::seq_lens);
    b.role(b.dyn(b.input("block_table", {seqs, blocks_per_seq}, SY_DTYPE_I32), 0,
                 StepExtent::sequences),
           ValueRole::block_table);
    b.role(b.dyn(b.input("output_rows", {outputs}), 0, StepExtent::outputs),
           ValueRole::output_rows);
    return;
  }
  b.role(b.input("tokens", {b.B, b.S}), ValueRole::token_ids);
  b.role(b.input("positions", {b.B, b.S}), ValueRole::positions);
  b.role(b.input("cache_position", {1}), ValueRole::cache_position);
  if (b.decode) b.role(b.input("kv_len", {b.B}), ValueRole::kv_len);
}

// The hidden states whose logits the phase computes. Paged: the R rows output_rows names,
// gathered by an embedding lookup over [T, H] (a gather of rows is what an embedding is).
// Contiguous: every position, or (ImportOptions) the last one, sliced.
std::string rows_for_logits(PhaseBuilder& b, const ImportOptions& o, const std::string& x,
                            int64_t& rows) {
  const ModelSpec& m = b.m;
  rows = b.S;
  if (b.paged) {
    rows = o.max_outputs > 0 ? o.max_outputs : o.max_sequences;
    std::string picked = b.dyn(b.act("output_hidden", {rows, m.hidden}), 0, StepExtent::outputs);
    b.op("output_rows", SY_OP_EMBEDDING, {x, "output_rows"}, {picked}, -1);
    return picked;
  }
  if (b.decode || o.every_position_logits || b.S == 1) return x;
  std::string last = b.act("last_hidden", {b.B, 1, m.hidden});
  b.op("last_position", SY_OP_SLICE, {x}, {last}, -1,
       {{SY_ATTR_AXIS, int64_t(1)}, {SY_ATTR_START, b.S - 1}});
  rows = 1;
  return last;
}

Phase build_phase(const ModelSpec& m, const ImportOptions& o, const std::string& name, int64_t seq,
                  const std::string& file) {
  PhaseBuilder b(m, o, name, seq, file);
  const Shape hidden = b.hidden_shape(m.hidden);
  step_inputs(b, o);

  std::string x = b.act("embeddings", hidden);
  b.op(
      "embed", SY_OP_EMBEDDING,
      {b.role(b.weight("embed_tokens", {m.vocab, m.hidden}), ValueRole::token_embedding), "tokens"},
      {x}, -1);
  if (m.gemma) {
    // Gemma scales embeddings by sqrt(hidden_size), rounded to the model's dtype as transformers
    // rounds it: a [H] constant of the graph.
    std::string scaled = b.act("embeddings_scaled", hidden);
    std::string scale = b.constant(
        "embed_scale", m.dtype, std::vector<double>(size_t(m.hidden), std::sqrt(double(m.hidden))));
    b.op("embed_scale", SY_OP_MUL, {x, scale}, {scaled}, -1);
    x = scaled;
  }
  for (int64_t i = 0; i < m.layers; ++i) x = mlp_block(b, i, attention_block(b, i, x, o));

  int64_t rows = 0;
  x = rows_for_logits(b, o, x, rows);
  // Paged, the head's values are [R, ...]: their varying extent is the outputs', not T.
  auto head_act = [&](const std::string& name, int64_t width) {
    std::string v = b.act(name, b.paged ? Shape{rows, width} : Shape{b.B, rows, width});
    return b.paged ? b.dyn(v, 0, StepExtent::outputs) : v;
  };
  std::string final_hidden = head_act("final_hidden", m.hidden);
  b.op("final_norm", SY_OP_RMS_NORM, {x, b.weight("norm", {m.hidden})}, {final_hidden}, -1,
       norm_attrs(m));
  std::string head = m.tie_embeddings ? "embed_tokens" : b.weight("lm_head", {m.vocab, m.hidden});
  std::string logits = head_act(m.final_softcap > 0 ? "logits_raw" : "logits", m.vocab);
  b.op("lm_head", SY_OP_MATMUL, {final_hidden, head}, {logits}, -1,
       {{SY_ATTR_TRANSPOSE_B, int64_t(1)}});
  if (m.final_softcap > 0) {  // Gemma 2: logits = c·tanh(logits / c)
    b.op("final_softcap", SY_OP_SOFTCAP, {logits}, {head_act("logits", m.vocab)}, -1,
         {{SY_ATTR_SOFTCAP, m.final_softcap}});
    logits = "logits";
  }
  b.role(logits, ValueRole::logits);
  if (!b.paged)  // the contiguous graphs keep their device-side greedy pick
    b.op("argmax", SY_OP_ARGMAX, {logits},
         {b.value("next_token", {b.B, rows}, ValueKind::activation, SY_DTYPE_I64)}, -1);
  else  // each row's first maximum where the logits are: a greedy stream reads R ids, not R rows
    b.op("argmax", SY_OP_ARGMAX, {logits},
         {b.role(b.dyn(b.value("greedy_ids", {rows}, ValueKind::activation, SY_DTYPE_I64), 0,
                       StepExtent::outputs),
                 ValueRole::greedy_ids)},
         -1);
  Phase p = b.take();
  validate(p, file + ":" + name);
  return p;
}

}  // namespace

Graph build_graph(const ModelSpec& m, const ImportOptions& o, const std::string& file) {
  Graph g;
  g.source = file + " (" + m.model_type + ")";
  StepBounds& bounds = g.bounds;
  bounds.kv_layout = o.kv_layout;
  bounds.max_batch_tokens = o.max_batch_tokens;
  bounds.context = o.context;
  if (o.kv_layout == KvLayout::paged) {
    bounds.max_sequences = o.max_sequences;
    bounds.max_outputs = o.max_outputs > 0 ? o.max_outputs : o.max_sequences;
    bounds.kv_block_size = o.kv_block_size;
    bounds.kv_blocks = o.kv_blocks;
    g.phases.push_back(build_phase(m, o, "step", o.max_batch_tokens, file));
    return g;
  }
  bounds.max_sequences = o.batch;
  bounds.max_outputs = o.every_position_logits ? o.max_batch_tokens : 1;
  g.phases.push_back(build_phase(m, o, "prefill", o.max_batch_tokens, file));
  g.phases.push_back(build_phase(m, o, "decode", 1, file));
  return g;
}

}  // namespace sy::importer
