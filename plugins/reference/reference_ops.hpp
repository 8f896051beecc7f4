// The reference plugin's kernels: one function per operator, computing in double from the
// operands as stored and rounding only on the final store (docs/operators.md is their prose).
// A run-time error (an id outside the table, a position past the cache) is a StatusError
// INVALID_ARGUMENT thrown before anything is written.
#pragma once

#include <dlpack/dlpack.h>

#include <memory>

#include "cxx_edge/op_copy.hpp"

namespace sy::ref {

using Operands = const DLTensor* const*;
using OpFn = void (*)(const sy::edge::OpCopy& op, Operands in, Operands out);

// A prepared operator: its copy and the function that computes it.
class Kernel {
 public:
  Kernel(const sy::edge::OpCopy& op, OpFn fn) : op_(op), fn_(fn) {}
  // With dynamic dims (ABI 1.5), the function sees the operator at this execute's extents.
  void run(Operands in, Operands out) {
    if (!op_.dynamic()) return fn_(op_, in, out);
    sy::edge::ActualOpView view(op_);
    sy_execute_args args{};
    args.struct_size = sizeof args;
    args.inputs = in;
    args.num_inputs = op_.inputs.size();
    args.outputs = out;
    args.num_outputs = op_.outputs.size();
    const sy::edge::OpCopy actual(*view.at(args));
    fn_(actual, in, out);
  }

 private:
  const sy::edge::OpCopy& op_;  // owned by the kit's prepared kernel, which outlives this
  OpFn fn_;
};

void matmul(const sy::edge::OpCopy&, Operands, Operands);
void embedding(const sy::edge::OpCopy&, Operands, Operands);
void rms_norm(const sy::edge::OpCopy&, Operands, Operands);
void layer_norm(const sy::edge::OpCopy&, Operands, Operands);
void rope(const sy::edge::OpCopy&, Operands, Operands);
void unary(const sy::edge::OpCopy&, Operands, Operands);   // silu, gelu, softcap
void gated(const sy::edge::OpCopy&, Operands, Operands);   // silu_mul, gelu_mul
void binary(const sy::edge::OpCopy&, Operands, Operands);  // add, mul
void softmax(const sy::edge::OpCopy&, Operands, Operands);
void argmax(const sy::edge::OpCopy&, Operands, Operands);
void copy(const sy::edge::OpCopy&, Operands, Operands);
void slice(const sy::edge::OpCopy&, Operands, Operands);
void kv_cache_append(const sy::edge::OpCopy&, Operands, Operands);
void attention(const sy::edge::OpCopy&, Operands, Operands);
void sinks_from_lse(const sy::edge::OpCopy&, Operands, Operands);
void fused_decode_attention(const sy::edge::OpCopy&, Operands, Operands);
void moe_router(const sy::edge::OpCopy&, Operands, Operands);   // reference_moe.cpp
void moe_experts(const sy::edge::OpCopy&, Operands, Operands);  // reference_moe.cpp

}  // namespace sy::ref
