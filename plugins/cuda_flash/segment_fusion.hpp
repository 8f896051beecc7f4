// Which entries of a segment cuda_flash runs as one launch (fused_kernels.cuh), decided once at
// prepare from the operators and the dataflow of the tensor table alone. Plain C++ (no CUDA), so
// the decisions are tested on any machine (tests/backends/cuda_segment_test.cpp).
//
// The rules, each a small named test:
//  - add_rms_norm: an add without broadcast, then an rms_norm of its sum (same dtype, last axis
//    the hidden size). The sum is still written: the residual stream reads it.
//  - rope_append: consecutive ropes (one positions tensor, one set of rope attributes, no
//    frequency table) and paged kv_cache_appends (one slot mapping), up to four, where no entry
//    reads what another writes except an append of a rope's output, which becomes "rotate and
//    scatter" in one job.
//  - gemv: consecutive matmuls of one activation tensor against bf16/f16 weights stored [N, K]
//    (transpose_b), K a multiple of 8, up to three (q, k, v); or two followed by the
//    silu_mul/gelu_mul of their outputs (gate, up). At run time a step with more rows than the
//    kernel takes runs the entries' own kernels instead.
//  - everything else runs as its own kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cxx_edge/op_copy.hpp"

namespace sy::cuda {

enum class WorkKind { kernel, upload, add_rms_norm, rope_append, gemv };
const char* work_kind_name(WorkKind k);

// One entry as the fusion pass sees it: an upload (op null) or a kernel's operator and operands.
struct FusionEntry {
  const sy::edge::OpCopy* op = nullptr;
  std::vector<uint32_t> inputs, outputs;
};

struct WorkItem {
  WorkKind kind = WorkKind::kernel;
  std::vector<size_t> entries;  // indices into the segment's entries, in order
  // gemv: the entries are the matmuls, then (gated) the silu_mul/gelu_mul of two of them
  // (gate first, then up, whatever the matmuls' order).
  bool gated = false;
  size_t gate = 0, up = 0;  // gated: positions in `entries` of the gate and up matmuls
};

// The work of a segment: every entry in exactly one item, in an order that keeps every read after
// its write.
std::vector<WorkItem> plan_work(const std::vector<FusionEntry>& entries);

// "30 add_rms_norm, 30 rope_append, 90 gemv, 122 kernel, 7 upload" of a work list.
std::string describe_work(const std::vector<WorkItem>& work);

}  // namespace sy::cuda
