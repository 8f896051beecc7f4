// op_contracts/ — the operand contracts of docs/operators.md as narrowing filters, compiled into
// every built-in plugin (cpu_onednn, cuda_flash): the operand shapes, dtypes and
// attribute values of docs/operators.md that an envelope cannot express. `check` and
// `prepare` run them after the envelope; the factories run them again through enforce()
// so a kernel is never built for an operator they refuse.
#pragma once

#include "cxx_edge/cxx_edge.hpp"
#include "cxx_edge/op_copy.hpp"
#include "switchyard/envelope_check.h"

namespace sy::contracts {

// Each reports every violation it finds and returns how many.
int narrow_kv_cache_append(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                           void* ctx);
int narrow_matmul(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int narrow_embedding(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                     void* ctx);
int narrow_rms_norm(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                    void* ctx);
int narrow_layer_norm(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                      void* ctx);
int narrow_rope(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add, void* ctx);
// silu, gelu
int narrow_unary(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add, void* ctx);
// add, mul, silu_mul, gelu_mul
int narrow_binary(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int narrow_softmax(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add,
                   void* ctx);
int narrow_argmax(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add, void* ctx);
int narrow_copy(const sy_device_desc* device, const sy_op_desc* op, sy_refusal_fn add, void* ctx);

// Runs `narrow` on a prepared operator; throws StatusError(INVALID_ARGUMENT) naming every
// refusal if there is any.
void enforce(sy::edge::NarrowFn narrow, const sy::edge::OpCopy& op, const char* kernel);

}  // namespace sy::contracts
