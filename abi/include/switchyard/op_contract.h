/*
 * The operator contracts of docs/operators.md as code: for each op kind, the operands it takes,
 * their ranks, shapes and dtypes relative to each other, and the attribute values that mean
 * something. Whatever kernel serves an op, the op must satisfy its contract; a kernel's own
 * limits (dtypes, head dims, one rope style) come on top, in its envelope and narrowing.
 *
 * Three sides use the same code: the host's graph validator (a graph that breaks a contract is
 * refused before planning, SY204/SY205), every built-in plugin's `check` and `prepare`, and any
 * third-party plugin that links it (Switchyard::plugin_kit). C99; the definitions are in
 * abi/src/op_contract.c.
 *
 * Each function reports EVERY violation it finds through `add` (as sy_check_args'
 * add_refusal: constraint, required, offered, text; the strings live for the call) and returns
 * how many. Constraint names: "operands" (arity or a missing operand), "rank", "shape"
 * (an empty, negative or absurd dimension), "shape_match", "dtype_match", "index_dtype",
 * "attribute", "broadcast", "capacity", "position", "batch", "decode", "gqa_divisible",
 * "sinks_shape", "kv_len_shape", "lse_shape", "rotary_dim", "rope_style", "softcap",
 * "block_dtype" (since ABI 1.3: a block-quantized operand where none may be, or its rows not
 * whole blocks). A "dtype_match", "index_dtype" or "block_dtype" refusal is a dtype error, every
 * other one a shape error.
 */
#ifndef SWITCHYARD_OP_CONTRACT_H_
#define SWITCHYARD_OP_CONTRACT_H_

#include "switchyard/envelope_check.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The contract of op->op, whichever kind it is. An unknown kind is one "operands" refusal. */
int sy_op_contract_check(const sy_op_desc* op, sy_refusal_fn add, void* ctx);

/* The contract of each kind (sy_op_contract_check dispatches to these). */
int sy_contract_matmul(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_embedding(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_rms_norm(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_layer_norm(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_rope(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_unary(const sy_op_desc* op, sy_refusal_fn add, void* ctx);  /* silu, gelu */
int sy_contract_binary(const sy_op_desc* op, sy_refusal_fn add, void* ctx); /* add, mul, gated */
int sy_contract_softmax(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_argmax(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_copy(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_kv_cache_append(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_attention(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_fused_decode_attention(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_sinks_from_lse(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_slice(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_softcap(const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int sy_contract_moe_router(const sy_op_desc* op, sy_refusal_fn add, void* ctx);  /* since 1.7 */
int sy_contract_moe_experts(const sy_op_desc* op, sy_refusal_fn add, void* ctx); /* since 1.7 */

/* The head dim D of a fused_decode_attention op (o's last extent), or 0 when o is not a
 * rank-4 tensor: the envelope filters cannot see it, so kernels check it themselves. */
int64_t sy_fused_decode_head_dim(const sy_op_desc* op);

/* 1 when refusal constraint `constraint` (from the functions above) is about dtypes. */
int sy_contract_is_dtype_constraint(const char* constraint);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SWITCHYARD_OP_CONTRACT_H_ */
