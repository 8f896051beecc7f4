// What one step of an imported model reads and computes, from its graph alone: the figures
// `bench decode` and `run --json` divide by the machine's ceilings. Counted per the model, not
// per kernel: a plan's fused kernels read the same weights and cache rows.
#pragma once

#include <cstdint>

#include "core/graph/graph.hpp"

namespace sy::cli {

struct StepBytes {
  // Every weight once; an embedding table only for the rows it looks up; a stacked expert weight
  // only for the experts the step's tokens can route to (at most tokens · top_k of E).
  double weights = 0;
  double kv = 0;  // the K and V cache rows the step's attention reads
  double total() const { return weights + kv; }
};

// A step's extents: its tokens, sequences (each with the same share of the tokens), the tokens
// whose logits it computes, and each sequence's length after the step. Values of fixed shape
// (a contiguous phase's) ignore the first three.
struct StepShape {
  int64_t tokens = 1, sequences = 1, outputs = 1, kv_len = 1;
};

// Bytes a step reads; a sliding-window layer reads at most window + 1 cached rows per sequence.
StepBytes step_bytes(const Phase& phase, const StepShape& shape);

// Query-key pairs a (causal, windowed: window < 0 = none) attention lets through per batch and
// head, bottom-right aligned: the useful work of Sq queries over Skv keys.
double visible_pairs(int64_t sq, int64_t skv, bool causal, int64_t window);

// FLOPs of a step's matmuls (2·M·K·N), experts (2·T·top_k·3·I·H) and attentions (4·D per visible
// query-key pair per query head): each sequence's tokens attend to its kv_len rows, bottom-right
// aligned.
double step_flops(const Phase& phase, const StepShape& shape);

}  // namespace sy::cli
