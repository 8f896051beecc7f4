// One factory per declared kernel (kernel_table.cpp pairs them with the envelopes).
#pragma once

#include "cpu_kernel.hpp"

namespace sy::cpu {

std::unique_ptr<CpuKernel> make_attention(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_fused_decode(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_kv_cache_append(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_matmul(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_matmul_q16(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_embedding(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_rms_norm(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_layer_norm(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_rope(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_unary(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_binary(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_softmax(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_argmax(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_copy(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_sinks_from_lse(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_softcap(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_slice(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_moe_router(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_moe_experts(const sy::edge::OpCopy& op, const CpuContext& ctx);

// What make_attention builds for the paged form (attention_paged.cpp).
std::unique_ptr<CpuKernel> make_paged_attention(const sy::edge::OpCopy& op, const CpuContext& ctx);

// What make_embedding builds for a block-quantized table (ops_quant.cpp).
std::unique_ptr<CpuKernel> make_quant_embedding(const sy::edge::OpCopy& op, const CpuContext& ctx);

// The scratch the kernel make_matmul would build for `op` keeps until release (check's ABI 1.4
// workspace_bytes): bf16 x widened for a tier that reads f32. The f32 operands of a bf16 [K, N]
// matmul oneDNN cannot run natively are decided at prepare and are not counted.
uint64_t matmul_workspace_bytes(const sy_op_desc* op);
// The scratch make_moe_experts' kernel keeps: a chunk of up to 64 token slots' x rows (f32, and
// bf16), gate, up and down rows (f32), the sort's indices, and (bf16 y) the f32 sums.
uint64_t moe_experts_workspace_bytes(const sy_op_desc* op);

}  // namespace sy::cpu
