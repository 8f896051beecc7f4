// The parameters of fused_kernels.cuh's kernels: plain structs the host fills (segment.cpp,
// compiled by the host compiler) and the kernels read.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define SY_FUSED_HD __host__ __device__
#else
#define SY_FUSED_HD
#endif

namespace sy::cuda::fused {

constexpr int kMaxRopeJobs = 4;

struct RopeJob {
  const void* x;  // [T, heads, d]
  void* y;        // rope output [T, heads, d], or null (scatter only)
  void* pool;     // paged pool [NB * BS, heads, d] written at slots[t], or null
  int heads;
  int rope;  // 1: rotate, 0: copy
};

struct RopeAppendParams {
  RopeJob jobs[kMaxRopeJobs];
  int num_jobs;
  const void* pos;  // [T] positions, i32 or i64
  int pos64;
  const int64_t* slots;  // [T] pool rows
  int64_t tokens;
  int d, rot, neox;
  double theta, factor;
  const float* table;  // inv_freq [rot / 2] or null
};

// Items of one row: a rotated job has rot/2 pairs and d - rot unrotated elements (as
// rope_kernel), a copied one d elements.
SY_FUSED_HD inline int rope_items(const RopeAppendParams& p, const RopeJob& j) {
  return j.rope ? p.rot / 2 + (p.d - p.rot) : p.d;
}

constexpr int kMaxGemvRows = 16;
constexpr int kMaxGemvJobs = 3;
constexpr int kGemvWarps = 4;  // per block

enum class Gate { kNone = 0, kSilu = 1, kGeluErf = 2, kGeluTanh = 3 };

struct GemvParams {
  const void* a;  // [m, k]
  int m, k;
  // Weights [n_j, k] row-major and outputs [m, n_j]; columns run through the jobs in order.
  const void* w[kMaxGemvJobs];
  void* c[kMaxGemvJobs];
  int n[kMaxGemvJobs];
  int num_jobs;
  // Gated: jobs 0 and 1 are gate and up (same n); g[m, n] = act(c0) * c1 as gated_kernel
  // computes it from the rounded c0 and c1.
  Gate gate;
  void* g;
};

}  // namespace sy::cuda::fused
