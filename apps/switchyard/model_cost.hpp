// What one step of an imported model reads and computes, from its graph alone: the figures
// `bench decode` and `run --json` divide by the machine's ceilings. Counted per the model, not
// per kernel: a plan's fused kernels read the same weights and cache rows.
#pragma once

#include <cstdint>

#include "core/graph/graph.hpp"

namespace sy::cli {

struct StepBytes {
  double weights = 0;  // every weight once; an embedding table only for the rows it looks up
  double kv = 0;       // the K and V cache rows the step's attention reads
  double total() const { return weights + kv; }
};

// Bytes a decode step reads with `kv_len` positions in the cache (this step's included); a
// sliding-window layer reads at most window + 1 of them.
StepBytes decode_step_bytes(const Phase& decode, int64_t kv_len);

// Query-key pairs a (causal, windowed: window < 0 = none) attention lets through per batch and
// head, bottom-right aligned: the useful work of Sq queries over Skv keys.
double visible_pairs(int64_t sq, int64_t skv, bool causal, int64_t window);

// FLOPs of a phase's matmuls (2·M·K·N) and attentions (4·D per visible query-key pair per query
// head), the prompt attending to itself.
double phase_flops(const Phase& phase);

}  // namespace sy::cli
