/*
 * Switchyard capability vocabulary, version 1 (values up to ABI 1.8).
 *
 * The words a plugin and the host share to describe what an operator needs
 * and what a kernel offers: data types, operator kinds, semantic features,
 * operand residency and attribute names. Every enumerator has a fixed
 * numeric value and a stable lower-case string name (the one used in plugin
 * manifests, plan JSON and the CLI).
 *
 * The vocabulary is APPEND-ONLY: a value is never renumbered, renamed or
 * removed, so a plugin built against an older header keeps meaning the same
 * thing. New values are added at the end of their enum, before the *_COUNT
 * sentinel, together with a minor ABI version bump.
 *
 * Pure C99; no C++ and no allocation. The *_name() helpers are static inline
 * so both sides get the same strings without a link dependency.
 */
#ifndef SWITCHYARD_VOCABULARY_H_
#define SWITCHYARD_VOCABULARY_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Data types                                                                */
/* ------------------------------------------------------------------------ */

/* Element types a kernel may accept. Kernel envelopes carry a bit mask of
 * these (bit `1 << value`, see SY_DTYPE_BIT). Tensors that cross the ABI use
 * DLPack's DLDataType; sy_dtype_from_dl() maps one to the other. */
typedef enum sy_dtype {
  SY_DTYPE_F32 = 0,
  SY_DTYPE_F16 = 1,
  SY_DTYPE_BF16 = 2,
  SY_DTYPE_F64 = 3,
  SY_DTYPE_I32 = 4,
  SY_DTYPE_I64 = 5,
  SY_DTYPE_I8 = 6,
  SY_DTYPE_U8 = 7,
  /* Since ABI 1.3: block-quantized types, in GGUF's block layouts (docs/abi.md, "Block-quantized
   * tensors"): the elements of each row (innermost extent) are stored in blocks of
   * sy_dtype_block_elements() elements, each sy_dtype_block_bytes() bytes. */
  SY_DTYPE_Q8_0 = 8,  /* 32 elements: f16 d, i8 q[32]; x = d·q */
  SY_DTYPE_Q4_0 = 9,  /* 32 elements: f16 d, u8 q[16] (nibbles); x = d·(q − 8) */
  SY_DTYPE_Q4_1 = 10, /* 32 elements: f16 d, f16 m, u8 q[16]; x = d·q + m */
  SY_DTYPE_Q4_K = 11, /* 256 elements: f16 d, f16 dmin, u8 scales[12], u8 q[128] */
  SY_DTYPE_Q5_K = 12, /* 256 elements: f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 q[128] */
  SY_DTYPE_Q6_K = 13, /* 256 elements: u8 ql[128], u8 qh[64], i8 scales[16], f16 d */
  /* Since ABI 1.6: the types llama-quantize falls back to for rows that are not a multiple of
   * 256 elements (the attention matrices of hidden 576, 896, 960 ...), iq4_xs, q2_k and q3_k.
   * Nibble order as q4_0 (per 32-element sub-block for iq4_xs): element i in the low nibble of
   * q[i], element i + 16 in its high nibble. */
  SY_DTYPE_Q5_0 = 14,   /* 32 elements: f16 d, u8 qh[4], u8 q[16]; x = d·(q + 16·h − 16), h the
                           element's bit of the 32-bit little-endian qh */
  SY_DTYPE_Q5_1 = 15,   /* 32 elements: f16 d, f16 m, u8 qh[4], u8 q[16]; x = d·(q + 16·h) + m */
  SY_DTYPE_IQ4_NL = 16, /* 32 elements: f16 d, u8 q[16]; x = d·kvalues_iq4nl[q] (the 16 values
                           of sy_iq4nl_value) */
  SY_DTYPE_IQ4_XS = 17, /* 256 elements: f16 d, u16 scales_h, u8 scales_l[4], u8 q[128]; 8
                           sub-blocks of 32, each as iq4_nl with the scale d·(ls − 32), ls 6 bits:
                           the low 4 from scales_l (nibble j of the sub-block j's byte j/2), the
                           high 2 from bits 2j of scales_h */
  SY_DTYPE_Q2_K = 18,   /* 256 elements: u8 scales[16], u8 q[64] (2 bits), f16 d, f16 dmin; 16
                           sub-blocks of 16: d·(sc & 15)·q − dmin·(sc >> 4) (ggml's layout) */
  SY_DTYPE_Q3_K = 19,   /* 256 elements: u8 hmask[32], u8 q[64] (2 low bits), u8 scales[12] (16
                           6-bit scales), f16 d; d·(sc − 32)·(q − 4·(1 − high bit)) */
  /* Since ABI 1.7: OCP Microscaling FP4 (gpt-oss's expert weights; GGUF type 39). 32 elements:
   * u8 e (E8M0: 2^(e − 127)), u8 q[16] (E2M1 nibbles in GGUF's order: element i in the low nibble
   * of q[i], element i + 16 in its high nibble); x = sy_e2m1_value(nibble)·2^(e − 127). e = 0xFF
   * (NaN in E8M0) never reaches a kernel: the host refuses such a file (docs/abi.md, 5a). */
  SY_DTYPE_MXFP4 = 20,
  SY_DTYPE_COUNT /* sentinel, not a dtype; grows with the vocabulary */
} sy_dtype;

#define SY_DTYPE_BIT(d) (UINT64_C(1) << (unsigned)(d))

static inline const char* sy_dtype_name(sy_dtype d) {
  switch (d) {
    case SY_DTYPE_F32: return "f32";
    case SY_DTYPE_F16: return "f16";
    case SY_DTYPE_BF16: return "bf16";
    case SY_DTYPE_F64: return "f64";
    case SY_DTYPE_I32: return "i32";
    case SY_DTYPE_I64: return "i64";
    case SY_DTYPE_I8: return "i8";
    case SY_DTYPE_U8: return "u8";
    case SY_DTYPE_Q8_0: return "q8_0";
    case SY_DTYPE_Q4_0: return "q4_0";
    case SY_DTYPE_Q4_1: return "q4_1";
    case SY_DTYPE_Q4_K: return "q4_k";
    case SY_DTYPE_Q5_K: return "q5_k";
    case SY_DTYPE_Q6_K: return "q6_k";
    case SY_DTYPE_Q5_0: return "q5_0";
    case SY_DTYPE_Q5_1: return "q5_1";
    case SY_DTYPE_IQ4_NL: return "iq4_nl";
    case SY_DTYPE_IQ4_XS: return "iq4_xs";
    case SY_DTYPE_Q2_K: return "q2_k";
    case SY_DTYPE_Q3_K: return "q3_k";
    case SY_DTYPE_MXFP4: return "mxfp4";
    default: return 0;
  }
}

/* Size of one element in bytes; 0 for an unknown value and for a block-quantized type (an element
 * of those has no size of its own: see sy_dtype_block_bytes and sy_tensor_bytes). */
static inline uint32_t sy_dtype_size(sy_dtype d) {
  switch (d) {
    case SY_DTYPE_F64:
    case SY_DTYPE_I64: return 8;
    case SY_DTYPE_F32:
    case SY_DTYPE_I32: return 4;
    case SY_DTYPE_F16:
    case SY_DTYPE_BF16: return 2;
    case SY_DTYPE_I8:
    case SY_DTYPE_U8: return 1;
    default: return 0;
  }
}

/* 1 for a block-quantized type (since ABI 1.3). */
static inline int sy_dtype_is_blocked(sy_dtype d) {
  return d >= SY_DTYPE_Q8_0 && d <= SY_DTYPE_MXFP4;
}

/* The value an E2M1 nibble q stands for (OCP MX: sign, 2 exponent bits, 1 mantissa bit): 0, 0.5,
 * 1, 1.5, 2, 3, 4, 6 and their negatives (since ABI 1.7, mxfp4). */
static inline float sy_e2m1_value(unsigned q) {
  static const float kValues[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
  return kValues[q & 15];
}

/* The signed value an iq4_nl nibble q (0-15) stands for (ggml's kvalues_iq4nl[q]). */
static inline int sy_iq4nl_value(unsigned q) {
  static const int8_t kValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};
  return kValues[q & 15];
}

/* Elements per block: 32 or 256 for a block-quantized type, 1 for the others, 0 for an unknown
 * value. */
static inline uint32_t sy_dtype_block_elements(sy_dtype d) {
  switch (d) {
    case SY_DTYPE_Q8_0:
    case SY_DTYPE_Q4_0:
    case SY_DTYPE_Q4_1:
    case SY_DTYPE_Q5_0:
    case SY_DTYPE_Q5_1:
    case SY_DTYPE_IQ4_NL:
    case SY_DTYPE_MXFP4: return 32;
    case SY_DTYPE_Q4_K:
    case SY_DTYPE_Q5_K:
    case SY_DTYPE_Q6_K:
    case SY_DTYPE_IQ4_XS:
    case SY_DTYPE_Q2_K:
    case SY_DTYPE_Q3_K: return 256;
    default: return sy_dtype_size(d) ? 1 : 0;
  }
}

/* Bytes per block: a block-quantized type's block, an element of the others, 0 for an unknown
 * value. */
static inline uint32_t sy_dtype_block_bytes(sy_dtype d) {
  switch (d) {
    case SY_DTYPE_Q8_0: return 34;
    case SY_DTYPE_Q4_0: return 18;
    case SY_DTYPE_Q4_1: return 20;
    case SY_DTYPE_Q4_K: return 144;
    case SY_DTYPE_Q5_K: return 176;
    case SY_DTYPE_Q6_K: return 210;
    case SY_DTYPE_Q5_0: return 22;
    case SY_DTYPE_Q5_1: return 24;
    case SY_DTYPE_IQ4_NL: return 18;
    case SY_DTYPE_IQ4_XS: return 136;
    case SY_DTYPE_Q2_K: return 84;
    case SY_DTYPE_Q3_K: return 110;
    case SY_DTYPE_MXFP4: return 17;
    default: return sy_dtype_size(d);
  }
}

/* Bytes of a compact tensor of dtype `d` and shape `shape` (`ndim` extents, row-major; rank 0 is
 * one element). -1 when a dimension is negative, the count overflows, the dtype is unknown, or a
 * block-quantized tensor's innermost extent is not a whole number of blocks. */
static inline int64_t sy_tensor_bytes(sy_dtype d, int32_t ndim, const int64_t* shape) {
  uint64_t n = 1, be = sy_dtype_block_elements(d), bb = sy_dtype_block_bytes(d), bytes;
  int32_t i;
  if (be == 0 || bb == 0 || ndim < 0) return -1;
  for (i = 0; i < ndim; ++i) {
    if (shape[i] < 0) return -1;
    if (shape[i] != 0 && n > UINT64_MAX / (uint64_t)shape[i]) return -1;
    n *= (uint64_t)shape[i];
  }
  if (ndim > 0 && (uint64_t)shape[ndim - 1] % be != 0) return -1;
  if (ndim == 0 && be != 1) return -1;
  if (n / be > (uint64_t)INT64_MAX / bb) return -1;
  bytes = n / be * bb;
  return (int64_t)bytes;
}

/* ------------------------------------------------------------------------ */
/* Operator kinds                                                            */
/* ------------------------------------------------------------------------ */

/* Operand order and attributes of each kind are specified in docs/abi.md,
 * section "Operators"; the short form is given per value. */
typedef enum sy_op_kind {
  SY_OP_MATMUL = 0,                  /* in: a, b; out: c.  attr transpose_b */
  SY_OP_EMBEDDING = 1,               /* in: table [V,H], ids; out: rows */
  SY_OP_RMS_NORM = 2,                /* in: x, weight; out: y.  attr eps */
  SY_OP_LAYER_NORM = 3,              /* in: x, weight, bias; out: y.  attr eps */
  SY_OP_ROPE = 4,                    /* in: x, positions; out: y.  attrs below */
  SY_OP_SILU = 5,                    /* in: x; out: y */
  SY_OP_GELU = 6,                    /* in: x; out: y.  attr approximate */
  SY_OP_SILU_MUL = 7,                /* in: gate, up; out: silu(gate) * up */
  SY_OP_GELU_MUL = 8,                /* in: gate, up; out: gelu(gate) * up */
  SY_OP_ADD = 9,                     /* in: a, b; out: a + b */
  SY_OP_MUL = 10,                    /* in: a, b; out: a * b */
  SY_OP_SOFTMAX = 11,                /* in: x; out: y (last axis) */
  SY_OP_KV_CACHE_APPEND = 12,        /* in: rows, position; out: cache, written in place */
  SY_OP_ATTENTION = 13,              /* in: q, k, v[, sinks][, kv_len]; out: o[, lse] */
  SY_OP_ARGMAX = 14,                 /* in: x; out: index (last axis) */
  SY_OP_COPY = 15,                   /* in: x; out: y, possibly other memory */
  SY_OP_FUSED_DECODE_ATTENTION = 16, /* q/k/v proj + rope + append + attn */
  /* Since ABI 1.2. in: lse f32 [B,Hq,Sq], sinks f32 [Hq]; out: o [B,Sq,Hq,D], rescaled in
   * place: o *= exp(lse - logaddexp(lse, sink)). Applies attention sinks to the output of
   * an attention that ran without them and returned its LSE. */
  SY_OP_SINKS_FROM_LSE = 17,
  /* Since ABI 1.2. in: x; out: y = softcap · tanh(x / softcap), attr softcap > 0 (Gemma 2's
   * final logit softcapping). */
  SY_OP_SOFTCAP = 18,
  /* Since ABI 1.2. in: x; out: y = x[..., start : start + n, ...] along attr axis, n being y's
   * extent there (every other extent equal to x's). The prefill phase takes the last position's
   * hidden state with it, so the head computes one row of logits, not the prompt's. */
  SY_OP_SLICE = 19,
  /* Since ABI 1.7: a mixture-of-experts router. in: logits [..., E] (the router matmul's, bias
   * included; the leading dims are the T tokens); out: ids i32 [..., k], weights f32 [..., k].
   * attr top_k = k (1 <= k <= E). Per token:
   * the k largest logits, in decreasing order (a tie goes to the lower expert index), and the
   * softmax over those k alone (gpt-oss's order; Mixtral's softmax-then-top-k-then-renormalise
   * is the same numbers). */
  SY_OP_MOE_ROUTER = 20,
  /* Since ABI 1.7: the experts of a mixture-of-experts MLP. in: x [..., H] (the leading dims
   * are the T tokens), ids i32 [..., k], weights f32 [..., k], gate [E, I, H], up [E, I, H],
   * down [E, H, I] (every expert's linear
   * weights stacked, rows of the reduction as matmul's transpose_b; any weight dtype the kernel
   * declares), then optionally gate_bias [E, I], up_bias [E, I], down_bias [E, H] (all three or
   * none); out: y [..., H] = Σ_j weights[t, j] · down[e](act(gate[e]·x + gb[e], up[e]·x + ub[e])) +
   * db[e]), e = ids[t, j]. attr expert_activation: "silu" (silu(g)·u) or "swiglu_limit"
   * (gpt-oss: g = min(g, limit), u = clamp(u, −limit, limit), (u + 1)·g·σ(alpha·g)) with
   * swiglu_alpha and swiglu_limit. */
  SY_OP_MOE_EXPERTS = 21,
  SY_OP_COUNT
} sy_op_kind;

static inline const char* sy_op_kind_name(sy_op_kind k) {
  switch (k) {
    case SY_OP_MATMUL: return "matmul";
    case SY_OP_EMBEDDING: return "embedding";
    case SY_OP_RMS_NORM: return "rms_norm";
    case SY_OP_LAYER_NORM: return "layer_norm";
    case SY_OP_ROPE: return "rope";
    case SY_OP_SILU: return "silu";
    case SY_OP_GELU: return "gelu";
    case SY_OP_SILU_MUL: return "silu_mul";
    case SY_OP_GELU_MUL: return "gelu_mul";
    case SY_OP_ADD: return "add";
    case SY_OP_MUL: return "mul";
    case SY_OP_SOFTMAX: return "softmax";
    case SY_OP_KV_CACHE_APPEND: return "kv_cache_append";
    case SY_OP_ATTENTION: return "attention";
    case SY_OP_ARGMAX: return "argmax";
    case SY_OP_COPY: return "copy";
    case SY_OP_FUSED_DECODE_ATTENTION: return "fused_decode_attention";
    case SY_OP_SINKS_FROM_LSE: return "sinks_from_lse";
    case SY_OP_SOFTCAP: return "softcap";
    case SY_OP_SLICE: return "slice";
    case SY_OP_MOE_ROUTER: return "moe_router";
    case SY_OP_MOE_EXPERTS: return "moe_experts";
    default: return 0;
  }
}

/* ------------------------------------------------------------------------ */
/* Semantic features                                                         */
/* ------------------------------------------------------------------------ */

/* A feature is a piece of semantics an operator may USE and a kernel may
 * OFFER. The host derives the set an operator uses from its attributes and
 * shapes (sy_op_desc.required_features); a kernel whose envelope lacks one
 * of them must refuse the operator. Sinks, sliding window and softcap are
 * hard semantics: never dropped, never approximated. */
typedef enum sy_feature {
  SY_FEATURE_CAUSAL = 0,            /* causal mask, bottom-right aligned when
                                       q_len < kv_len (query i sees keys up to
                                       i + kv_len - q_len) */
  SY_FEATURE_SLIDING_WINDOW = 1,    /* attend to at most window_left keys back */
  SY_FEATURE_GQA = 2,               /* Hq > Hkv, Hq % Hkv == 0 (MQA included) */
  SY_FEATURE_SINKS = 3,             /* per-head learnable logit in the softmax
                                       denominator, no value row */
  SY_FEATURE_LSE = 4,               /* also writes log-sum-exp [B, Hq, Sq] f32 */
  SY_FEATURE_SOFTCAP = 5,           /* logits = softcap * tanh(logits/softcap) */
  SY_FEATURE_DECODE = 6,            /* q_len == 1 against a longer KV */
  SY_FEATURE_BATCH = 7,             /* batch > 1 (several sequences) */
  SY_FEATURE_PAGED_KV = 8,          /* KV cache in a pool of fixed-size blocks read
                                       through a block table and written through
                                       per-token slots (attention and kv_cache_append
                                       with attr paged = 1, since 1.5; a plugin of an
                                       older minor cannot declare it) */
  SY_FEATURE_CUSTOM_SCALE = 9,      /* scale other than 1/sqrt(head_dim) */
  SY_FEATURE_TRANSPOSED_B = 10,     /* matmul b stored [N, K] (HF weights) */
  SY_FEATURE_ROPE_NEOX = 11,        /* rotate halves (GPT-NeoX / Llama HF) */
  SY_FEATURE_ROPE_INTERLEAVED = 12, /* rotate adjacent pairs (GPT-J) */
  SY_FEATURE_PARTIAL_ROTARY = 13,   /* rotary_dim < head_dim */
  SY_FEATURE_CAUSAL_TOP_LEFT = 14,  /* causal aligned top-left instead */
  SY_FEATURE_ROPE_SCALED = 15,      /* since 1.2: rope with a frequency table input
                                       (linear, llama3, yarn scaling) and/or an
                                       attention factor on cos and sin */
  /* Since 1.5: the operator is prepared for upper bounds and each execute carries the
   * actual extents (sy_tensor_desc.dynamic_dims); for attention and kv_cache_append it
   * also means many sequences packed along one token axis, each with its own query
   * start and length (FlashAttention's varlen form, docs/abi.md "Varlen and paged"). */
  SY_FEATURE_VARLEN = 16,
  /* Since 1.8: a kernel property, never an op's requirement. The kernel quantizes its
   * activation input to 8-bit blocks (32 values, one f32 scale: d = max|x| / 127,
   * q = round-half-even(x / d)) and multiplies those integers with the weights' own, as
   * llama.cpp does: faster than products on the dequantized weights, and not the same
   * numbers. The planner gives such a kernel an op only under `--numerics fast`
   * (docs/numerics.md). */
  SY_FEATURE_ACTIVATION_Q8 = 17,
  /* Since 1.9: a kernel property, as activation_q8. The kernel quantizes its activation
   * input to 16-bit blocks (32 values, one f32 scale: d = max|x| / 32258,
   * Q = round-half-even(x / d), |Q| <= 32258 = 127 * 254) and multiplies those integers
   * exactly with the weights' own (for instance as two 8-bit digits, Q = 254 * hi + lo):
   * the speed of integer products, with activations 254 times finer than activation_q8's.
   * The planner gives such a kernel an op under `--numerics auto` (the default since
   * 2026-12-05) and `fast`, not under `exact`. */
  SY_FEATURE_ACTIVATION_Q16 = 18,
  SY_FEATURE_COUNT
} sy_feature;

#define SY_FEATURE_BIT(f) (UINT64_C(1) << (unsigned)(f))

static inline const char* sy_feature_name(sy_feature f) {
  switch (f) {
    case SY_FEATURE_CAUSAL: return "causal";
    case SY_FEATURE_SLIDING_WINDOW: return "sliding_window";
    case SY_FEATURE_GQA: return "gqa";
    case SY_FEATURE_SINKS: return "sinks";
    case SY_FEATURE_LSE: return "lse";
    case SY_FEATURE_SOFTCAP: return "softcap";
    case SY_FEATURE_DECODE: return "decode";
    case SY_FEATURE_BATCH: return "batch";
    case SY_FEATURE_PAGED_KV: return "paged_kv";
    case SY_FEATURE_CUSTOM_SCALE: return "custom_scale";
    case SY_FEATURE_TRANSPOSED_B: return "transposed_b";
    case SY_FEATURE_ROPE_NEOX: return "rope_neox";
    case SY_FEATURE_ROPE_INTERLEAVED: return "rope_interleaved";
    case SY_FEATURE_PARTIAL_ROTARY: return "partial_rotary";
    case SY_FEATURE_CAUSAL_TOP_LEFT: return "causal_top_left";
    case SY_FEATURE_ROPE_SCALED: return "rope_scaled";
    case SY_FEATURE_VARLEN: return "varlen";
    case SY_FEATURE_ACTIVATION_Q8: return "activation_q8";
    case SY_FEATURE_ACTIVATION_Q16: return "activation_q16";
    default: return 0;
  }
}

/* ------------------------------------------------------------------------ */
/* Residency: where an operand's bytes must live                             */
/* ------------------------------------------------------------------------ */

/* A kernel states, per operand, which memory it can read or write. For a CPU
 * device, device memory IS host memory. The distinction matters for kernels
 * of accelerator plugins and for host-only fused paths: a kernel that reads
 * raw host slices of a tensor declares SY_RESIDENCY_HOST for it, and the
 * planner refuses to feed it a device tensor (the `Expected CPU` /
 * `Expected CPU storage` failures of other stacks, made a plan-time fact). */
typedef enum sy_residency {
  SY_RESIDENCY_DEVICE = 0, /* memory of the device the kernel runs on */
  SY_RESIDENCY_HOST = 1,   /* host memory, whatever the kernel's device */
  SY_RESIDENCY_ANY = 2,    /* either; the kernel copies or maps as needed */
  SY_RESIDENCY_COUNT
} sy_residency;

static inline const char* sy_residency_name(sy_residency r) {
  switch (r) {
    case SY_RESIDENCY_DEVICE: return "device";
    case SY_RESIDENCY_HOST: return "host";
    case SY_RESIDENCY_ANY: return "any";
    default: return 0;
  }
}

/* Where a described tensor will live (sy_tensor_desc.memory). */
typedef enum sy_memory_kind {
  SY_MEMORY_HOST = 0,   /* host memory */
  SY_MEMORY_DEVICE = 1, /* memory of an accelerator device */
  SY_MEMORY_COUNT
} sy_memory_kind;

static inline const char* sy_memory_kind_name(sy_memory_kind m) {
  switch (m) {
    case SY_MEMORY_HOST: return "host";
    case SY_MEMORY_DEVICE: return "device";
    default: return 0;
  }
}

/* ------------------------------------------------------------------------ */
/* Attribute names (sy_attr.name). Units and defaults in docs/abi.md.        */
/* ------------------------------------------------------------------------ */

#define SY_ATTR_CAUSAL "causal"               /* int 0/1 */
#define SY_ATTR_WINDOW_LEFT "window_left"     /* int, keys back; <0 = none */
#define SY_ATTR_SOFTCAP "softcap"             /* float, 0 = none */
#define SY_ATTR_SCALE "scale"                 /* float, 0 = 1/sqrt(D) */
#define SY_ATTR_EPS "eps"                     /* float */
#define SY_ATTR_TRANSPOSE_B "transpose_b"     /* int 0/1 */
#define SY_ATTR_ROPE_THETA "rope_theta"       /* float */
#define SY_ATTR_ROTARY_DIM "rotary_dim"       /* int, <= head_dim */
#define SY_ATTR_ROPE_STYLE "rope_style"       /* string "neox"|"interleaved" */
#define SY_ATTR_GELU_APPROX "approximate"     /* string "none"|"tanh" */
#define SY_ATTR_WEIGHT_OFFSET "weight_offset" /* float, rms_norm: y = x^ * (w + offset) */
#define SY_ATTR_KV_LEN_INPUT "kv_len_input"   /* int 0/1: last input is kv_len i64 [B] */
#define SY_ATTR_ROPE "rope"                   /* int 0/1, fused_decode_attention: rotary on */
/* float, rope and fused_decode_attention (since 1.2): cos and sin are multiplied by it (yarn's
 * attention factor); absent or 1 = none. */
#define SY_ATTR_ROPE_ATTENTION_FACTOR "rope_attention_factor"
#define SY_ATTR_AXIS "axis"   /* int, slice (since 1.2): the axis cut, 0 <= axis < rank */
#define SY_ATTR_START "start" /* int, slice (since 1.2): first index kept, >= 0 */
/* int 0/1, attention and kv_cache_append (since 1.5): the paged form, whose KV operands are a
 * pool of blocks [NB, BS, Hkv, D] with a block table (attention) or per-token slots (append);
 * operand order in docs/abi.md "Varlen and paged". */
#define SY_ATTR_PAGED "paged"
/* moe_router (since 1.7): int, experts per token, 1 <= top_k <= E. */
#define SY_ATTR_TOP_K "top_k"
/* moe_experts (since 1.7): string "silu" | "swiglu_limit" (operator comment above). */
#define SY_ATTR_EXPERT_ACTIVATION "expert_activation"
/* moe_experts with expert_activation swiglu_limit (since 1.7): floats, the sigmoid's slope alpha
 * (gpt-oss: 1.702) and the clamp limit > 0 (gpt-oss: 7.0). Both required. */
#define SY_ATTR_SWIGLU_ALPHA "swiglu_alpha"
#define SY_ATTR_SWIGLU_LIMIT "swiglu_limit"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SWITCHYARD_VOCABULARY_H_ */
