// Operator and device builders shared by the capability and backend tests.
#pragma once

#include "core/capability/capability.hpp"

namespace sy::test {

struct AttentionSpec {
  sy_dtype dtype = SY_DTYPE_F32;
  int64_t batch = 1, q_len = 16, kv_len = 16, q_heads = 8, kv_heads = 8, head_dim = 64;
  bool causal = false, sinks = false, lse = false;
  int64_t window_left = -1;
  double softcap = 0.0, scale = 0.0;
  sy_memory_kind memory = SY_MEMORY_HOST;
};

inline OpDesc attention_op(const AttentionSpec& s) {
  OpDesc op;
  op.op = SY_OP_ATTENTION;
  auto t = [&](std::vector<int64_t> shape, sy_dtype dt = SY_DTYPE_F32) {
    return TensorDesc{dt, std::move(shape), s.memory};
  };
  op.inputs = {t({s.batch, s.q_len, s.q_heads, s.head_dim}, s.dtype),
               t({s.batch, s.kv_len, s.kv_heads, s.head_dim}, s.dtype),
               t({s.batch, s.kv_len, s.kv_heads, s.head_dim}, s.dtype)};
  if (s.sinks) op.inputs.push_back(t({s.q_heads}));
  op.outputs = {t({s.batch, s.q_len, s.q_heads, s.head_dim}, s.dtype)};
  if (s.lse) op.outputs.push_back(t({s.batch, s.q_heads, s.q_len}));
  if (s.causal) op.set(SY_ATTR_CAUSAL, int64_t{1});
  if (s.window_left >= 0) op.set(SY_ATTR_WINDOW_LEFT, s.window_left);
  if (s.softcap > 0) op.set(SY_ATTR_SOFTCAP, s.softcap);
  if (s.scale != 0) op.set(SY_ATTR_SCALE, s.scale);
  return op;
}

// The paged, varlen form of attention (ABI 1.5): T query tokens of S sequences packed along one
// axis, KV in pools of NB blocks of BS rows, read through a block table of MB entries per
// sequence; with `dynamic`, T and S are upper bounds (dynamic dims).
struct PagedSpec {
  sy_dtype dtype = SY_DTYPE_F32;
  int64_t tokens = 16, sequences = 2, blocks = 8, block_size = 16, max_blocks = 4;
  int64_t q_heads = 8, kv_heads = 2, head_dim = 64;
  bool causal = true, sinks = false, lse = false, dynamic = true;
  int64_t window_left = -1;
  double softcap = 0.0, scale = 0.0;
  sy_memory_kind memory = SY_MEMORY_HOST;
};

inline OpDesc paged_attention_op(const PagedSpec& s) {
  OpDesc op;
  op.op = SY_OP_ATTENTION;
  const uint32_t tok = s.dynamic ? 2u : 0u, seq = s.dynamic ? 1u : 0u;
  auto t = [&](std::vector<int64_t> shape, sy_dtype dt, uint32_t dyn = 0) {
    return TensorDesc{dt, std::move(shape), s.memory, dyn};
  };
  const std::vector<int64_t> pool{s.blocks, s.block_size, s.kv_heads, s.head_dim};
  op.inputs = {t({1, s.tokens, s.q_heads, s.head_dim}, s.dtype, tok), t(pool, s.dtype),
               t(pool, s.dtype)};
  if (s.sinks) op.inputs.push_back(t({s.q_heads}, SY_DTYPE_F32));
  op.inputs.push_back(t({s.sequences + 1}, SY_DTYPE_I32, seq));
  op.inputs.push_back(t({s.sequences}, SY_DTYPE_I32, seq));
  op.inputs.push_back(t({s.sequences, s.max_blocks}, SY_DTYPE_I32, seq));
  op.outputs = {t({1, s.tokens, s.q_heads, s.head_dim}, s.dtype, tok)};
  if (s.lse) op.outputs.push_back(t({1, s.q_heads, s.tokens}, SY_DTYPE_F32, s.dynamic ? 4u : 0u));
  op.set(SY_ATTR_PAGED, int64_t{1});
  if (s.causal) op.set(SY_ATTR_CAUSAL, int64_t{1});
  if (s.window_left >= 0) op.set(SY_ATTR_WINDOW_LEFT, s.window_left);
  if (s.softcap > 0) op.set(SY_ATTR_SOFTCAP, s.softcap);
  if (s.scale != 0) op.set(SY_ATTR_SCALE, s.scale);
  return op;
}

// The paged append: rows [1, T, Hkv, D] and slot_mapping [T] into a pool [NB, BS, Hkv, D].
inline OpDesc paged_append_op(const PagedSpec& s) {
  OpDesc op;
  op.op = SY_OP_KV_CACHE_APPEND;
  const uint32_t tok = s.dynamic ? 2u : 0u;
  op.inputs = {{s.dtype, {1, s.tokens, s.kv_heads, s.head_dim}, s.memory, tok},
               {SY_DTYPE_I64, {s.tokens}, s.memory, s.dynamic ? 1u : 0u}};
  op.outputs = {{s.dtype, {s.blocks, s.block_size, s.kv_heads, s.head_dim}, s.memory, 0}};
  op.set(SY_ATTR_PAGED, int64_t{1});
  return op;
}

inline DeviceInfo cpu_device() {
  DeviceInfo d;
  d.name = "test cpu";
  d.type = kDLCPU;
  d.arch = "avx2";
  d.memory_is_host = true;
  return d;
}

// A device described, not discovered: what a --target profile gives the planner.
inline DeviceInfo described_gpu(const std::string& arch = "sm_90") {
  DeviceInfo d;
  d.name = "NVIDIA H200 (described)";
  d.type = kDLCUDA;
  d.arch = arch;
  d.memory_bytes = 141ull << 30;
  d.memory_is_host = false;
  return d;
}

// Constraint names of a refusal list, in order.
inline std::vector<std::string> constraints(const std::vector<Refusal>& rs) {
  std::vector<std::string> out;
  for (const auto& r : rs)
    out.push_back(r.constraint + (r.constraint == "feature" ? ":" + r.required : ""));
  return out;
}

}  // namespace sy::test
