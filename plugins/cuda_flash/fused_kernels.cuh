// The kernels a segment fuses its decoder ops into (segment_fusion.hpp says which ops), each
// computing what the unfused kernels of ops.cu compute, in the same order where they round:
//  - add_rms_norm: h = a + b rounded to the dtype, then rms_norm(h) (ops.cu's two kernels in
//    one pass; the same 256-thread reduction, so the same sums);
//  - rope_append: up to four jobs of one step's tokens in one launch (blockIdx.y picks the job):
//    rope x -> y, rope x -> y and scatter the rotated rows into a paged KV pool, or scatter x
//    into a pool (ops.cu's rope_kernel and scatter_rows), the rotation from rope_cos_sin;
//  - gemv: matmuls with few rows (decode) against row-major [N, K] weights (transpose_b),
//    one warp per output column, up to three weights sharing the activations (q, k, v) in one
//    launch, or a gate and an up projection with the gated product written too.
//
// Compiled by nvcc for the plugin and, under SY_CUDA_EMULATION, by the host compiler for the
// tests (tests/support/cuda_emulation.hpp), as flash_kernel.cuh is.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "device_math.cuh"
#include "fused_kernels_params.hpp"

// 32 floats of shared memory for block_reduce. The emulation's threads are OS threads, so a
// __shared__ array there would be each thread's own: it takes the block's dynamic shared memory
// instead (launch it with at least 128 bytes).
#ifdef SY_CUDA_EMULATION
#define SY_BLOCK_SCRATCH(name) float* name = reinterpret_cast<float*>(sy_emu::dynamic_shared())
#else
#define SY_BLOCK_SCRATCH(name) __shared__ float name[32]
#endif

namespace sy::cuda::fused {

// cos and sin of pair p of a rotary dim `rot` at position `pos`, times `factor`: the one
// definition rope_kernel (ops.cu) and rope_append use.
__device__ __forceinline__ void rope_cos_sin(double pos, int p, int rot, double theta,
                                             const float* table, double factor, float& c,
                                             float& s) {
  const double freq = table ? double(table[p]) : pow(theta, -2.0 * p / rot);
  double sn, cs;
  sincos(pos * freq, &sn, &cs);
  c = float(factor * cs);
  s = float(factor * sn);
}

// ---- add + rms_norm ------------------------------------------------------------------------

// One block per row; blockDim 256 as ops.cu's rms_norm_kernel, so the reduction is the same.
template <typename T>
__global__ void add_rms_norm_kernel(const T* a, const T* b, T* h, const T* w, T* y, int64_t hidden,
                                    float eps, float offset) {
  SY_BLOCK_SCRATCH(scratch);
  const int64_t row = blockIdx.x;
  const T* ar = a + row * hidden;
  const T* br = b + row * hidden;
  T* hr = h + row * hidden;
  T* yr = y + row * hidden;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    const T hv = from_f32<T>(to_f32(ar[c]) + to_f32(br[c]));
    hr[c] = hv;
    const float v = to_f32(hv);
    ss = fmaf(v, v, ss);
  }
  ss = block_reduce<false>(ss, scratch);
  const float inv = rsqrtf(ss / float(hidden) + eps);
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)  // this thread's own writes
    yr[c] = from_f32<T>(to_f32(hr[c]) * inv * (to_f32(w[c]) + offset));
}

// ---- rope and paged append --------------------------------------------------------------

template <typename T>
__device__ __forceinline__ void put(const RopeJob& j, T* y, T* pool, int c, T v) {
  if (j.y) y[c] = v;
  if (j.pool) pool[c] = v;
}

template <typename T>
__global__ void rope_append_kernel(const RopeAppendParams p) {
  const RopeJob& j = p.jobs[blockIdx.y];
  const int items = rope_items(p, j), half = p.rot / 2;
  const int64_t n = p.tokens * j.heads * items;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = e / items;  // (t, h)
    const int item = int(e % items);
    const int64_t t = row / j.heads, h = row % j.heads;
    const T* xr = static_cast<const T*>(j.x) + row * p.d;
    T* yr = j.y ? static_cast<T*>(j.y) + row * p.d : nullptr;
    T* pr = j.pool ? static_cast<T*>(j.pool) + (p.slots[t] * j.heads + h) * p.d : nullptr;
    if (!j.rope || item >= half) {
      const int c = j.rope ? p.rot + (item - half) : item;
      put(j, yr, pr, c, xr[c]);
      continue;
    }
    const double pos = p.pos64 ? double(static_cast<const int64_t*>(p.pos)[t])
                               : double(static_cast<const int32_t*>(p.pos)[t]);
    float c, s;
    rope_cos_sin(pos, item, p.rot, p.theta, p.table, p.factor, c, s);
    const int i1 = p.neox ? item : 2 * item, i2 = p.neox ? item + half : 2 * item + 1;
    const float x1 = to_f32(xr[i1]), x2 = to_f32(xr[i2]);
    put(j, yr, pr, i1, from_f32<T>(x1 * c - x2 * s));
    put(j, yr, pr, i2, from_f32<T>(x2 * c + x1 * s));
  }
}

// ---- gemv: few rows against [N, K] weights -----------------------------------------------

__device__ __forceinline__ float gate_of(Gate g, float x) {
  if (g == Gate::kSilu) return x / (1.0f + expf(-x));
  if (g == Gate::kGeluErf) return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}

// acc[r] += dot(a[r, :], w_row) for the first m rows; 8 elements (16 bytes) per lane and step.
template <typename T>
__device__ __forceinline__ void dot_rows(const T* a, const T* w, int m, int k, int lane,
                                         float (&acc)[kMaxGemvRows]) {
  for (int k0 = lane * 8; k0 < k; k0 += 256) {
    // One 16-byte load; memcpy, not a cast, views it as 8 elements (no aliasing question).
    const uint4 wv = *reinterpret_cast<const uint4*>(w + k0);
    T we[8];
    memcpy(static_cast<void*>(we), &wv, sizeof wv);
    float wf[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) wf[i] = to_f32(we[i]);
#pragma unroll
    for (int r = 0; r < kMaxGemvRows; ++r) {
      if (r >= m) break;
      const uint4 av = *reinterpret_cast<const uint4*>(a + int64_t(r) * k + k0);
      T ae[8];
      memcpy(static_cast<void*>(ae), &av, sizeof av);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[r] = fmaf(to_f32(ae[i]), wf[i], acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < kMaxGemvRows; ++r)
    if (r < m) acc[r] = warp_sum(acc[r]);
}

// One warp per output column (gated: per column of gate and up together).
template <typename T>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(const GemvParams p) {
  const int lane = threadIdx.x & 31;
  int col = int(blockIdx.x) * kGemvWarps + int(threadIdx.x >> 5);
  const T* a = static_cast<const T*>(p.a);
  float acc[kMaxGemvRows], acc2[kMaxGemvRows];
#pragma unroll
  for (int r = 0; r < kMaxGemvRows; ++r) acc[r] = acc2[r] = 0.0f;
  if (p.gate != Gate::kNone) {
    if (col >= p.n[0]) return;  // warp-uniform
    const int64_t off = int64_t(col) * p.k;
    dot_rows(a, static_cast<const T*>(p.w[0]) + off, p.m, p.k, lane, acc);
    dot_rows(a, static_cast<const T*>(p.w[1]) + off, p.m, p.k, lane, acc2);
    if (lane >= p.m) return;
#pragma unroll
    for (int r = 0; r < kMaxGemvRows; ++r)
      if (r == lane) {
        const int64_t at = int64_t(r) * p.n[0] + col;
        const T gv = from_f32<T>(acc[r]), uv = from_f32<T>(acc2[r]);
        static_cast<T*>(p.c[0])[at] = gv;
        static_cast<T*>(p.c[1])[at] = uv;
        static_cast<T*>(p.g)[at] = from_f32<T>(gate_of(p.gate, to_f32(gv)) * to_f32(uv));
      }
    return;
  }
  int job = 0;
  while (job < p.num_jobs && col >= p.n[job]) col -= p.n[job++];
  if (job == p.num_jobs) return;  // warp-uniform
  dot_rows(a, static_cast<const T*>(p.w[job]) + int64_t(col) * p.k, p.m, p.k, lane, acc);
#pragma unroll
  for (int r = 0; r < kMaxGemvRows; ++r)
    if (r == lane && r < p.m)
      static_cast<T*>(p.c[job])[int64_t(r) * p.n[job] + col] = from_f32<T>(acc[r]);
}

}  // namespace sy::cuda::fused
