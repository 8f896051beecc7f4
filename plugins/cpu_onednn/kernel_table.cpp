// The envelopes are the capability `switchyard caps`, the manifest and the planner read;
// `check` and `prepare` apply exactly these, the operator contract and the limits below.
#include "kernel_table.hpp"
#include "rowdot/weight_layout.hpp"

#include <cstdio>

#include "kernel_factories.hpp"

namespace sy::cpu {
namespace {

constexpr uint64_t F32 = SY_DTYPE_BIT(SY_DTYPE_F32);
constexpr uint64_t BF16 = SY_DTYPE_BIT(SY_DTYPE_BF16);
constexpr uint64_t I32 = SY_DTYPE_BIT(SY_DTYPE_I32);
constexpr uint64_t I64 = SY_DTYPE_BIT(SY_DTYPE_I64);
// Every block-quantized dtype, as matmul weights and embedding tables (ops_quant.cpp).
constexpr uint64_t kQuantized =
    SY_DTYPE_BIT(SY_DTYPE_Q8_0) | SY_DTYPE_BIT(SY_DTYPE_Q4_0) | SY_DTYPE_BIT(SY_DTYPE_Q4_1) |
    SY_DTYPE_BIT(SY_DTYPE_Q4_K) | SY_DTYPE_BIT(SY_DTYPE_Q5_K) | SY_DTYPE_BIT(SY_DTYPE_Q6_K) |
    SY_DTYPE_BIT(SY_DTYPE_Q5_0) | SY_DTYPE_BIT(SY_DTYPE_Q5_1) | SY_DTYPE_BIT(SY_DTYPE_IQ4_NL) |
    SY_DTYPE_BIT(SY_DTYPE_IQ4_XS) | SY_DTYPE_BIT(SY_DTYPE_Q2_K) | SY_DTYPE_BIT(SY_DTYPE_Q3_K) |
    SY_DTYPE_BIT(SY_DTYPE_MXFP4);

using sy::edge::feature_mask;

// The weights the activation_q16 matmul serves (rowdot_q8.hpp).
constexpr uint64_t kQ8Weights = SY_DTYPE_BIT(SY_DTYPE_Q8_0) | SY_DTYPE_BIT(SY_DTYPE_Q4_0) |
                                SY_DTYPE_BIT(SY_DTYPE_Q4_1) | SY_DTYPE_BIT(SY_DTYPE_Q5_0) |
                                SY_DTYPE_BIT(SY_DTYPE_Q5_1) | SY_DTYPE_BIT(SY_DTYPE_Q4_K) |
                                SY_DTYPE_BIT(SY_DTYPE_Q5_K) | SY_DTYPE_BIT(SY_DTYPE_Q6_K) |
                                SY_DTYPE_BIT(SY_DTYPE_IQ4_NL) | SY_DTYPE_BIT(SY_DTYPE_IQ4_XS);

constexpr uint64_t kAttentionFeatures =
    feature_mask({SY_FEATURE_CAUSAL, SY_FEATURE_SLIDING_WINDOW, SY_FEATURE_GQA, SY_FEATURE_SINKS,
                  SY_FEATURE_LSE, SY_FEATURE_SOFTCAP, SY_FEATURE_DECODE, SY_FEATURE_BATCH,
                  SY_FEATURE_CUSTOM_SCALE, SY_FEATURE_PAGED_KV});

// Every kernel but the fused decode block (one token of one contiguous cache) runs on the actual
// extents of each execute (ABI 1.5 varlen): prepared for the bounds, it computes what the
// tensors hold.
constexpr sy_kernel_envelope envelope(const char* kernel, sy_op_kind op, const char* family,
                                      uint64_t dtypes, uint64_t features = 0) {
  sy_kernel_envelope e{};
  e.struct_size = sizeof(sy_kernel_envelope);
  e.kernel = kernel;
  e.op = op;
  e.family = family;
  e.device_type = kDLCPU;
  e.dtypes = dtypes;
  e.features =
      features | (op == SY_OP_FUSED_DECODE_ATTENTION ? 0 : SY_FEATURE_BIT(SY_FEATURE_VARLEN));
  e.default_residency = SY_RESIDENCY_DEVICE;  // a CPU's device memory is host memory
  e.cost_hint = 1.0;
  return e;
}

constexpr sy_kernel_envelope with_weights(sy_kernel_envelope e, uint64_t weight_dtypes) {
  e.weight_dtypes = weight_dtypes;
  return e;
}

constexpr sy_kernel_envelope cheaper(sy_kernel_envelope e, double cost_hint) {
  e.cost_hint = cost_hint;
  return e;
}

constexpr sy_kernel_envelope attention_envelope() {
  sy_kernel_envelope e =
      envelope("sdpa_attention", SY_OP_ATTENTION, "sdpa", F32 | BF16, kAttentionFeatures);
  e.head_dim_multiple = kAttentionHeadDimMultiple;
  e.head_dim_max = kAttentionHeadDimMax;
  return e;
}

// The fused decode block reads raw host slices of every operand: host-only, by design. Its
// projections may be block-quantized (rowdot.hpp, as the unfused matmul).
constexpr sy_kernel_envelope fused_decode_envelope() {
  sy_kernel_envelope e = envelope(
      "fused_decode_attention", SY_OP_FUSED_DECODE_ATTENTION, "fused_decode", F32 | BF16,
      feature_mask({SY_FEATURE_CAUSAL, SY_FEATURE_GQA, SY_FEATURE_DECODE, SY_FEATURE_ROPE_NEOX,
                    SY_FEATURE_SLIDING_WINDOW, SY_FEATURE_CUSTOM_SCALE, SY_FEATURE_ROPE_SCALED}));
  e.head_dim_multiple = kAttentionHeadDimMultiple;
  e.head_dim_max = kAttentionHeadDimMax;
  e.default_residency = SY_RESIDENCY_HOST;
  e.cost_hint = 0.5;
  return with_weights(e, kQuantized);
}

constexpr sy_kernel_envelope fused_envelope = fused_decode_envelope();

// The head dims the attention blocks serve, for the fused block whose D the envelope filters
// cannot see (it is o's last extent, not q's).
int limit_fused_decode(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  const int64_t d = sy_fused_decode_head_dim(op);
  if (d == 0 || sy_envelope_accepts_head_dim(&fused_envelope, d)) return 0;
  char need[32], have[64], text[160];
  std::snprintf(need, sizeof need, "%lld", (long long)d);
  std::snprintf(have, sizeof have, "multiple of %d up to %d", kAttentionHeadDimMultiple,
                kAttentionHeadDimMax);
  std::snprintf(text, sizeof text, "head dim %lld is outside the kernel's set (%s)", (long long)d,
                have);
  return sy_refuse(add, ctx, "head_dim", need, have, text);
}

// The contiguous form runs on the extents it was prepared for; a step of varying length is the
// paged form's (attention_paged.hpp).
int limit_attention(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  if (sy_op_int_attr(op, SY_ATTR_PAGED, 0) == 1) return 0;
  if (!sy_op_has_dynamic_dims(op)) return 0;
  return sy_refuse(add, ctx, "varlen", "contiguous attention with dynamic extents",
                   "dynamic extents with paged=1 only",
                   "sdpa_attention runs dynamic extents in its paged form only; the contiguous "
                   "form is prepared for fixed shapes");
}

// copy converts between f32 and bf16 only; the contract also allows f16, which this plugin
// does not store.
int limit_copy(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  if (op->num_inputs != 1 || op->num_outputs != 1 || !op->inputs[0] || !op->outputs[0]) return 0;
  const sy_dtype from = op->inputs[0]->dtype, to = op->outputs[0]->dtype;
  if (from == to || (from != SY_DTYPE_F16 && to != SY_DTYPE_F16)) return 0;
  char need[48], text[128];
  std::snprintf(need, sizeof need, "%s -> %s", sy_dtype_name(from) ? sy_dtype_name(from) : "?",
                sy_dtype_name(to) ? sy_dtype_name(to) : "?");
  std::snprintf(text, sizeof text, "copy converts only between f32 and bf16, not %s", need);
  return sy_refuse(add, ctx, "dtype_match", need, "the same dtype, or f32 <-> bf16", text);
}

// Block-quantized weights only: its product is the weights' integers times the activations'.
int limit_matmul_q16(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add, void* ctx) {
  if (op->num_inputs < 2 || !op->inputs[1] || sy_dtype_is_blocked(op->inputs[1]->dtype)) return 0;
  const char* have = sy_dtype_name(op->inputs[1]->dtype);
  char text[128];
  std::snprintf(text, sizeof text,
                "matmul_q16 multiplies block-quantized weights only, not %s (the matmul kernel "
                "serves those)",
                have ? have : "?");
  return sy_refuse(add, ctx, "weight_dtype", have ? have : "?",
                   "q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k|iq4_nl|iq4_xs", text);
}

// matmul_q16's weight (input 1, [N, K]) in the layout the tier reads fastest (weight_layout.hpp).
sy::edge::WeightLayout layout_matmul_q16(const sy_device_desc*, const sy_op_desc* op,
                                         uint32_t input) {
  if (input != 1 || op->num_inputs < 2 || !op->inputs[1] || op->inputs[1]->ndim != 2) return {};
  return q16_weight_layout(op->inputs[1]->dtype, op->inputs[1]->shape[0], op->inputs[1]->shape[1]);
}

// o in f32 or bf16 (the contract allows f16 too).
int limit_sinks_from_lse(const sy_device_desc*, const sy_op_desc* op, sy_refusal_fn add,
                         void* ctx) {
  if (op->num_outputs != 1 || !op->outputs[0] || op->outputs[0]->dtype != SY_DTYPE_F16) return 0;
  return sy_refuse(add, ctx, "dtype_match", "o f16", "o f32|bf16",
                   "sinks_from_lse rescales f32 and bf16 outputs, not f16");
}

// matmul: what make_matmul's kernel for this op keeps from prepare to release.
uint64_t matmul_workspace(const sy_device_desc*, const sy_op_desc* op) {
  return matmul_workspace_bytes(op);
}
// moe_experts: its sorted slots' rows and intermediates (ops_moe.cpp).
uint64_t experts_workspace(const sy_device_desc*, const sy_op_desc* op) {
  return moe_experts_workspace_bytes(op);
}
using Row = sy::edge::KernelRow<CpuKernel, CpuContext>;

// One row per kernel: its envelope, its limits beyond the operator contract, its factory and
// its workspace.
const Row kRows[] = {
    {attention_envelope(), limit_attention, make_attention, nullptr},
    {fused_decode_envelope(), limit_fused_decode, make_fused_decode, nullptr},
    {envelope("kv_cache_append", SY_OP_KV_CACHE_APPEND, "generic", F32 | BF16,
              feature_mask({SY_FEATURE_PAGED_KV})),
     nullptr, make_kv_cache_append, nullptr},
    {with_weights(envelope("matmul", SY_OP_MATMUL, "generic", F32 | BF16,
                           feature_mask({SY_FEATURE_TRANSPOSED_B})),
                  kQuantized),
     nullptr, make_matmul, matmul_workspace},
    // Activations quantized to 16-bit blocks, multiplied as integers (rowdot_q8.hpp), chosen
    // under --numerics auto (the default) and fast.
    {cheaper(
         with_weights(envelope("matmul_q16", SY_OP_MATMUL, "generic", F32 | BF16,
                               feature_mask({SY_FEATURE_TRANSPOSED_B, SY_FEATURE_ACTIVATION_Q16})),
                      kQ8Weights),
         0.5),
     // No workspace: its quantized activations and panels are the thread's scratch, shared by
     // every kernel the thread runs (ABI 1.4's workspace is memory one kernel holds; summed over
     // 211 ops it predicted 345 MB for SmolLM2, against the one op's bound the threads hold).
     limit_matmul_q16, make_matmul_q16, nullptr, layout_matmul_q16},
    {with_weights(envelope("embedding", SY_OP_EMBEDDING, "generic", F32 | BF16), kQuantized),
     nullptr, make_embedding, nullptr},
    {envelope("rms_norm", SY_OP_RMS_NORM, "generic", F32 | BF16), nullptr, make_rms_norm, nullptr},
    {envelope("layer_norm", SY_OP_LAYER_NORM, "generic", F32 | BF16), nullptr, make_layer_norm,
     nullptr},
    {envelope("rope", SY_OP_ROPE, "generic", F32 | BF16,
              feature_mask({SY_FEATURE_ROPE_NEOX, SY_FEATURE_ROPE_INTERLEAVED,
                            SY_FEATURE_PARTIAL_ROTARY, SY_FEATURE_ROPE_SCALED})),
     nullptr, make_rope, nullptr},
    {envelope("silu", SY_OP_SILU, "generic", F32 | BF16), nullptr, make_unary, nullptr},
    {envelope("gelu", SY_OP_GELU, "generic", F32 | BF16), nullptr, make_unary, nullptr},
    {envelope("silu_mul", SY_OP_SILU_MUL, "generic", F32 | BF16), nullptr, make_binary, nullptr},
    {envelope("gelu_mul", SY_OP_GELU_MUL, "generic", F32 | BF16), nullptr, make_binary, nullptr},
    {envelope("add", SY_OP_ADD, "generic", F32 | BF16), nullptr, make_binary, nullptr},
    {envelope("mul", SY_OP_MUL, "generic", F32 | BF16), nullptr, make_binary, nullptr},
    {envelope("softmax", SY_OP_SOFTMAX, "generic", F32 | BF16), nullptr, make_softmax, nullptr},
    {envelope("argmax", SY_OP_ARGMAX, "generic", F32 | BF16), nullptr, make_argmax, nullptr},
    {envelope("copy", SY_OP_COPY, "generic", F32 | BF16 | I32 | I64), limit_copy, make_copy,
     nullptr},
    // The dtype of the op is its first input's: lse, always f32; o may be f32 or bf16.
    {envelope("sinks_from_lse", SY_OP_SINKS_FROM_LSE, "generic", F32), limit_sinks_from_lse,
     make_sinks_from_lse, nullptr},
    {envelope("softcap", SY_OP_SOFTCAP, "generic", F32 | BF16), nullptr, make_softcap, nullptr},
    {envelope("slice", SY_OP_SLICE, "generic", F32 | BF16 | I32 | I64), nullptr, make_slice,
     nullptr},
    {envelope("moe_router", SY_OP_MOE_ROUTER, "generic", F32 | BF16), nullptr, make_moe_router,
     nullptr},
    // Every weight dtype the matmul serves, through the same rowdot kernels (ops_moe.cpp).
    {with_weights(envelope("moe_experts", SY_OP_MOE_EXPERTS, "generic", F32 | BF16), kQuantized),
     nullptr, make_moe_experts, experts_workspace},
};
constexpr size_t kCount = sizeof(kRows) / sizeof(kRows[0]);

}  // namespace

const Kernels& kernels() {
  static const sy::edge::KernelSet<CpuKernel, CpuContext, kCount> set(kRows);
  static const Kernels list = set.list();
  return list;
}

}  // namespace sy::cpu
