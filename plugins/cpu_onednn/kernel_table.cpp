// The envelopes are the contract `switchyard caps`, the manifest and the planner read;
// `check` and (from the kernels issue on) `prepare` apply exactly these plus `narrow`.
#include "kernel_table.hpp"

#include "kernel_factories.hpp"
#include "op_contracts/attention_check.hpp"
#include "op_contracts/op_checks.hpp"

namespace sy::cpu {
namespace {

constexpr uint64_t F32 = SY_DTYPE_BIT(SY_DTYPE_F32);
constexpr uint64_t BF16 = SY_DTYPE_BIT(SY_DTYPE_BF16);
constexpr uint64_t I32 = SY_DTYPE_BIT(SY_DTYPE_I32);
constexpr uint64_t I64 = SY_DTYPE_BIT(SY_DTYPE_I64);

using sy::edge::feature_mask;

constexpr uint64_t kAttentionFeatures = feature_mask(
    {SY_FEATURE_CAUSAL, SY_FEATURE_SLIDING_WINDOW, SY_FEATURE_GQA, SY_FEATURE_SINKS, SY_FEATURE_LSE,
     SY_FEATURE_SOFTCAP, SY_FEATURE_DECODE, SY_FEATURE_BATCH, SY_FEATURE_CUSTOM_SCALE});

constexpr sy_kernel_envelope envelope(const char* kernel, sy_op_kind op, const char* family,
                                      uint64_t dtypes, uint64_t features = 0) {
  sy_kernel_envelope e{};
  e.struct_size = sizeof(sy_kernel_envelope);
  e.kernel = kernel;
  e.op = op;
  e.family = family;
  e.device_type = kDLCPU;
  e.dtypes = dtypes;
  e.features = features;
  e.default_residency = SY_RESIDENCY_DEVICE;  // a CPU's device memory is host memory
  e.cost_hint = 1.0;
  return e;
}

constexpr sy_kernel_envelope attention_envelope() {
  sy_kernel_envelope e =
      envelope("sdpa_attention", SY_OP_ATTENTION, "sdpa", F32 | BF16, kAttentionFeatures);
  e.head_dim_multiple = contracts::kAttentionHeadDimMultiple;
  e.head_dim_max = contracts::kAttentionHeadDimMax;
  return e;
}

// The fused decode block reads raw host slices of every operand: host-only, by design.
constexpr sy_kernel_envelope fused_decode_envelope() {
  sy_kernel_envelope e = envelope(
      "fused_decode_attention", SY_OP_FUSED_DECODE_ATTENTION, "fused_decode", F32,
      feature_mask({SY_FEATURE_CAUSAL, SY_FEATURE_GQA, SY_FEATURE_DECODE, SY_FEATURE_ROPE_NEOX,
                    SY_FEATURE_SLIDING_WINDOW, SY_FEATURE_CUSTOM_SCALE}));
  e.head_dim_multiple = contracts::kAttentionHeadDimMultiple;
  e.head_dim_max = contracts::kAttentionHeadDimMax;
  e.default_residency = SY_RESIDENCY_HOST;
  e.cost_hint = 0.5;
  return e;
}

const sy_kernel_envelope kEnvelopes[] = {
    attention_envelope(),
    fused_decode_envelope(),
    envelope("kv_cache_append", SY_OP_KV_CACHE_APPEND, "generic", F32 | BF16),
    envelope("matmul", SY_OP_MATMUL, "generic", F32 | BF16,
             feature_mask({SY_FEATURE_TRANSPOSED_B})),
    envelope("embedding", SY_OP_EMBEDDING, "generic", F32 | BF16),
    envelope("rms_norm", SY_OP_RMS_NORM, "generic", F32 | BF16),
    envelope("layer_norm", SY_OP_LAYER_NORM, "generic", F32 | BF16),
    envelope("rope", SY_OP_ROPE, "generic", F32 | BF16,
             feature_mask(
                 {SY_FEATURE_ROPE_NEOX, SY_FEATURE_ROPE_INTERLEAVED, SY_FEATURE_PARTIAL_ROTARY})),
    envelope("silu", SY_OP_SILU, "generic", F32 | BF16),
    envelope("gelu", SY_OP_GELU, "generic", F32 | BF16),
    envelope("silu_mul", SY_OP_SILU_MUL, "generic", F32 | BF16),
    envelope("gelu_mul", SY_OP_GELU_MUL, "generic", F32 | BF16),
    envelope("add", SY_OP_ADD, "generic", F32 | BF16),
    envelope("mul", SY_OP_MUL, "generic", F32 | BF16),
    envelope("softmax", SY_OP_SOFTMAX, "generic", F32 | BF16),
    envelope("argmax", SY_OP_ARGMAX, "generic", F32 | BF16),
    envelope("copy", SY_OP_COPY, "generic", F32 | BF16 | I32 | I64),
};

constexpr size_t kCount = sizeof(kEnvelopes) / sizeof(kEnvelopes[0]);

// Index-aligned with kEnvelopes.
const KernelFactory kFactories[] = {
    make_attention, make_fused_decode, make_kv_cache_append, make_matmul,
    make_embedding, make_rms_norm,     make_layer_norm,      make_rope,
    make_unary,     make_unary,        make_binary,          make_binary,
    make_binary,    make_binary,       make_softmax,         make_argmax,
    make_copy,
};
static_assert(sizeof(kFactories) / sizeof(kFactories[0]) == kCount);

struct Table : sy::edge::KernelTable<kCount> {
  Table() : KernelTable(kEnvelopes, nullptr) {
    entries[0].narrow = contracts::narrow_attention;
    entries[1].narrow = contracts::narrow_fused_decode;
    // Index-aligned with kEnvelopes, as kFactories is.
    const sy::edge::NarrowFn ops[] = {
        contracts::narrow_kv_cache_append,
        contracts::narrow_matmul,
        contracts::narrow_embedding,
        contracts::narrow_rms_norm,
        contracts::narrow_layer_norm,
        contracts::narrow_rope,
        contracts::narrow_unary,
        contracts::narrow_unary,
        contracts::narrow_binary,
        contracts::narrow_binary,
        contracts::narrow_binary,
        contracts::narrow_binary,
        contracts::narrow_softmax,
        contracts::narrow_argmax,
        contracts::narrow_copy,
    };
    static_assert(sizeof(ops) / sizeof(ops[0]) == kCount - 2);
    for (size_t i = 0; i < kCount - 2; ++i) entries[i + 2].narrow = ops[i];
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const sy::edge::KernelEntry* kernel_table(size_t* count) {
  *count = kCount;
  return table().entries;
}

KernelFactory kernel_factory(size_t index) {
  return index < kCount ? kFactories[index] : nullptr;
}

const sy_kernel_envelope* const* kernel_envelopes(size_t* count) {
  *count = kCount;
  return table().pointers;
}

}  // namespace sy::cpu
