// fused_decode_attention on the CPU: one token of one sequence, f32 or bf16, every operand in
// host memory. In one call:
//   1. q, k, v = wq·x, wk·x, wv·x (Hugging Face layout [out, in], any weight dtype): the active
//      tier's rowdot (rowdot.hpp, as the unfused matmul runs it), over the three weight matrices
//      in one parallel region, each thread taking its share of the rows of each, f32 results;
//      bf16 rounds them to bf16 as the unfused graph's matmuls do, so rope sees the same inputs;
//   2. rope (neox, partial rotary, rope_math.hpp: the rope kernel's own math) on q and k at
//      `position`, unless rope = 0 (SmolLM3's NoPE layers);
//   3. the k and v rows written into the caches at `position`;
//   4. attention of q over keys 0…position by the plugin's sdpa kernel (attention.cpp), built
//      at prepare time for q [1,1,Hq,D] against the caches with a kv_len input of
//      position + 1, so the masks, GQA and scale semantics are that kernel's.
// `position` outside [0, C) is INVALID_ARGUMENT, checked before anything is written. Every
// buffer (q/k/v rows, cos/sin, kv_len) is allocated once here: a run allocates nothing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <omp.h>

#include "elementwise/elementwise_tier.hpp"
#include "kernel_factories.hpp"
#include "ops_common.hpp"
#include "elementwise/rope_math.hpp"
#include "rowdot/rowdot.hpp"

namespace sy::cpu {
namespace {

struct FusedShape {
  int64_t H, Hq, Hkv, D, C;
  bool bf16;
  bool rope;
  bool table;     // a scaled rope's inv_freq is input 5
  double factor;  // on cos and sin
  int64_t rotary;
  sy_dtype w[3];  // wq, wk, wv: x's dtype or block-quantized
};

// The sdpa attention kernel for q [1,1,Hq,D] over k, v [1,C,Hkv,D] with a kv_len input, as the
// plugin would prepare it for that operator (and only after its own check accepts it).
std::unique_ptr<CpuKernel> make_inner_attention(const FusedShape& s, const sy::edge::OpCopy& fused,
                                                const CpuContext& ctx) {
  int64_t q_shape[4] = {1, 1, s.Hq, s.D}, kv_shape[4] = {1, s.C, s.Hkv, s.D}, len_shape[1] = {1};
  auto tensor = [](sy_dtype dt, int64_t* shape, int32_t ndim) {
    sy_tensor_desc t{};
    t.struct_size = sizeof(t);
    t.dtype = dt;
    t.ndim = ndim;
    t.shape = shape;
    t.memory = SY_MEMORY_HOST;
    return t;
  };
  const sy_dtype dt = s.bf16 ? SY_DTYPE_BF16 : SY_DTYPE_F32;
  sy_tensor_desc q = tensor(dt, q_shape, 4), kv = tensor(dt, kv_shape, 4),
                 len = tensor(SY_DTYPE_I64, len_shape, 1), o = tensor(dt, q_shape, 4);
  const sy_tensor_desc* inputs[] = {&q, &kv, &kv, &len};
  const sy_tensor_desc* outputs[] = {&o};

  const int64_t causal = fused.int_attr(SY_ATTR_CAUSAL, 1);
  const int64_t window = fused.int_attr(SY_ATTR_WINDOW_LEFT, -1);
  const double scale = fused.float_attr(SY_ATTR_SCALE, 0.0);
  auto int_attr = [](const char* name, int64_t v) {
    sy_attr a{};
    a.struct_size = sizeof(a);
    a.name = name;
    a.type = SY_ATTR_INT;
    a.i = v;
    return a;
  };
  sy_attr attrs[4] = {int_attr(SY_ATTR_CAUSAL, causal),
                      int_attr(SY_ATTR_WINDOW_LEFT, window),
                      int_attr(SY_ATTR_KV_LEN_INPUT, 1),
                      {}};
  attrs[3].struct_size = sizeof(sy_attr);
  attrs[3].name = SY_ATTR_SCALE;
  attrs[3].type = SY_ATTR_FLOAT;
  attrs[3].f = scale;
  const sy_attr* attr_ptrs[] = {&attrs[0], &attrs[1], &attrs[2], &attrs[3]};

  uint64_t features = SY_FEATURE_BIT(SY_FEATURE_DECODE);
  if (causal) features |= SY_FEATURE_BIT(SY_FEATURE_CAUSAL);
  if (window >= 0) features |= SY_FEATURE_BIT(SY_FEATURE_SLIDING_WINDOW);
  if (s.Hq != s.Hkv) features |= SY_FEATURE_BIT(SY_FEATURE_GQA);
  if (scale != 0.0) features |= SY_FEATURE_BIT(SY_FEATURE_CUSTOM_SCALE);

  sy_op_desc d{};
  d.struct_size = sizeof(d);
  d.op = SY_OP_ATTENTION;
  d.inputs = inputs;
  d.num_inputs = 4;
  d.outputs = outputs;
  d.num_outputs = 1;
  d.attrs = attr_ptrs;
  d.num_attrs = 4;
  d.required_features = features;
  sy::edge::OpCopy op(d);
  sy::edge::enforce_contract(op, "sdpa_attention (inside fused_decode_attention)");
  return make_attention(op, ctx);
}

class FusedDecodeKernel final : public CpuKernel {
 public:
  FusedDecodeKernel(const FusedShape& s, double theta, std::unique_ptr<CpuKernel> attention,
                    const CpuContext& ctx)
      : s_(s),
        ctx_(ctx),
        rowdot_(rowdot_tier(active_tier())),
        elementwise_(elementwise_tier(active_tier())),
        attention_(std::move(attention)),
        qkv_(static_cast<size_t>((s.Hq + 2 * s.Hkv) * s.D)),
        qkv16_(s.bf16 ? qkv_.size() : 0),
        x32_(s.bf16 ? size_t(s.H) : 0),
        inv_freq_(s.rope ? rope_inv_freq(theta, s.rotary) : std::vector<double>{}),
        cos_sin_(static_cast<size_t>(s.rope ? s.rotary : 0)) {
    q_shape_[0] = q_shape_[1] = 1;
    q_shape_[2] = s.Hq;
    q_shape_[3] = s.D;
    q_dl_.data = s.bf16 ? static_cast<void*>(qkv16_.data()) : static_cast<void*>(qkv_.data());
    q_dl_.device = {kDLCPU, 0};
    q_dl_.ndim = 4;
    q_dl_.dtype = s.bf16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
    q_dl_.shape = q_shape_;
    kv_len_dl_.data = &kv_len_;
    kv_len_dl_.device = {kDLCPU, 0};
    kv_len_dl_.ndim = 1;
    kv_len_dl_.dtype = {kDLInt, 64, 1};
    kv_len_dl_.shape = &one_;
  }

  // in: x, wq, wk, wv, position[, inv_freq]; out: o, k_cache, v_cache.
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const FusedShape s = s_;
    const int64_t position = *data_of<const int64_t>(in[4]);
    if (position < 0 || position >= s.C)
      throw sy::edge::StatusError(
          SY_STATUS_INVALID_ARGUMENT,
          "fused_decode_attention: position " + std::to_string(position) +
              (position < 0 ? std::string(" is negative")
                            : " is past the caches' last row " + std::to_string(s.C - 1) +
                                  " (capacity " + std::to_string(s.C) + " rows)") +
              " (valid positions: 0 to " + std::to_string(s.C - 1) + "); nothing was written");
    project(in);
    if (s.rope) {
      const int64_t half = s.rotary / 2;
      float* cs = cos_sin_.data();
      if (s.table) rope_table(data_of<const float>(in[5]), inv_freq_);
      rope_cos_sin(static_cast<double>(position), inv_freq_.data(), half, s.factor, cs, cs + half);
    }
    if (s.bf16) {
      bf16_bits* q = qkv16_.data();
      elementwise_.convert[0](qkv_.data(), q, 0, int64_t(qkv_.size()));
      finish(q, out, position);
    } else {
      finish(qkv_.data(), out, position);
    }
    kv_len_ = position + 1;
    const DLTensor* attention_in[] = {&q_dl_, out[1], out[2], &kv_len_dl_};
    const DLTensor* attention_out[] = {out[0]};
    attention_->run(attention_in, attention_out);
  }

 private:
  // Rope on q and k in place (q, k, v adjacent in `q`), then the k and v rows into the caches.
  template <typename T>
  void finish(T* q, const DLTensor* const* out, int64_t position) {
    const FusedShape& s = s_;
    const int64_t kv_row = s.Hkv * s.D;
    T* k = q + s.Hq * s.D;
    T* v = k + kv_row;
    if (s.rope) {
      const float* cs = cos_sin_.data();
      const float* sn = cs + s.rotary / 2;
      const auto rope_head = elementwise_.rope_head[s.bf16];
      for (int64_t h = 0; h < s.Hq; ++h)
        rope_head(q + h * s.D, q + h * s.D, s.D, s.rotary, false, cs, sn);
      for (int64_t h = 0; h < s.Hkv; ++h)
        rope_head(k + h * s.D, k + h * s.D, s.D, s.rotary, false, cs, sn);
    }
    std::memcpy(data_of<T>(out[1]) + position * kv_row, k, sizeof(T) * size_t(kv_row));
    std::memcpy(data_of<T>(out[2]) + position * kv_row, v, sizeof(T) * size_t(kv_row));
  }

  // qkv_ = [wq; wk; wv] · x in f32: one parallel region, each thread its share of each matrix.
  void project(const DLTensor* const* in) {
    const FusedShape& s = s_;
    RowdotArgs base{};
    base.M = 1;
    base.K = s.H;
    if (s.bf16) {  // bf16 x as it is, and widened for the matrices the tier reads in f32
      base.xb = data_of<const uint16_t>(in[0]);
      elementwise_.convert[1](base.xb, x32_.data(), 0, s.H);
      base.xf = x32_.data();
    } else {
      base.xf = data_of<const float>(in[0]);
    }
    const int64_t rows[3] = {s.Hq * s.D, s.Hkv * s.D, s.Hkv * s.D};
    RowdotArgs parts[3];
    float* y = qkv_.data();
    for (int i = 0; i < 3; ++i) {
      parts[i] = base;
      parts[i].wtype = s.w[i];
      parts[i].w = data_of<const void>(in[1 + i]);
      parts[i].y = y;
      parts[i].N = rows[i];
      if (!rowdot_.reads_bf16_x(s.w[i], s.bf16)) parts[i].xb = nullptr;
      y += rows[i];
    }
    const int64_t total = (rows[0] + 2 * rows[1]) * s.H;
    const int threads = total >= kParallelWork ? ctx_.num_threads : 1;
    const RowdotTier& tier = rowdot_;
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      for (int i = 0; i < 3; ++i) {  // whole tiles per thread, as in ops_matmul
        const int64_t n = rows[i], unit = tier.row_multiple, units = (n + unit - 1) / unit;
        const int64_t n0 = std::min(n, units * t / nt * unit);
        const int64_t n1 = std::min(n, units * (t + 1) / nt * unit);
        if (n1 > n0) tier.columns(parts[i], n0, n1);
      }
    }
  }

  FusedShape s_;
  CpuContext ctx_;
  const RowdotTier& rowdot_;
  const ElementwiseTier& elementwise_;
  std::unique_ptr<CpuKernel> attention_;
  std::vector<float> qkv_;        // q [Hq·D], then k [Hkv·D], then v [Hkv·D], f32
  std::vector<bf16_bits> qkv16_;  // the same rounded to bf16 (bf16 blocks)
  std::vector<float> x32_;        // bf16 x widened (the matrices the tier reads in f32)
  std::vector<double> inv_freq_;  // [rotary/2]
  std::vector<float> cos_sin_;    // rotary/2 cosines, then rotary/2 sines
  int64_t kv_len_ = 0, one_ = 1;
  int64_t q_shape_[4] = {};
  DLTensor q_dl_{}, kv_len_dl_{};  // the inner attention's q and kv_len, over our buffers
};

}  // namespace

std::unique_ptr<CpuKernel> make_fused_decode(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "fused_decode_attention");
  FusedShape s{};
  s.H = op.inputs[0].shape[2];
  s.Hq = op.outputs[0].shape[2];
  s.D = op.outputs[0].shape[3];
  s.C = op.outputs[1].shape[1];
  s.Hkv = op.outputs[1].shape[2];
  s.bf16 = op.inputs[0].dtype == SY_DTYPE_BF16;
  s.rope = op.int_attr(SY_ATTR_ROPE, 1) != 0;
  s.table = op.inputs.size() == 6;
  s.factor = op.float_attr(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.0);
  s.rotary = op.int_attr(SY_ATTR_ROTARY_DIM, s.D);
  for (int i = 0; i < 3; ++i) s.w[i] = op.inputs[1 + size_t(i)].dtype;
  const double theta = op.float_attr(SY_ATTR_ROPE_THETA, 10000.0);
  return std::make_unique<FusedDecodeKernel>(s, theta, make_inner_attention(s, op, ctx), ctx);
}

}  // namespace sy::cpu
