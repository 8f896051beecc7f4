// One factory per declared kernel (kernel_table.cpp pairs them with the envelopes).
#pragma once

#include "cpu_kernel.hpp"

namespace sy::cpu {

std::unique_ptr<CpuKernel> make_attention(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_fused_decode(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_kv_cache_append(const sy::edge::OpCopy& op, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_matmul(const sy::edge::OpCopy& op, const CpuContext& ctx);
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

// What make_matmul and make_embedding build for block-quantized weights (ops_quant.cpp).
std::unique_ptr<CpuKernel> make_quant_matmul(int64_t m, int64_t k, int64_t n, sy_dtype wtype,
                                             bool bf16, const CpuContext& ctx);
std::unique_ptr<CpuKernel> make_quant_embedding(const sy::edge::OpCopy& op, const CpuContext& ctx);

// The scratch the kernel make_matmul / make_quant_matmul would build for `op` keeps until
// release (check's ABI 1.4 workspace_bytes). The f32 operands of a bf16 matmul oneDNN cannot
// run natively are decided at prepare and are not counted.
uint64_t matmul_workspace_bytes(const sy_op_desc* op);
uint64_t quant_matmul_workspace_bytes(int64_t m, int64_t k, int64_t n, bool bf16);

}  // namespace sy::cpu
