// flash_attention: f16/bf16 in, f32 accumulate, online softmax (docs/operators.md §Attention
// semantics). One thread block per (query tile of kBQ rows, q head, batch); K/V tiles of kBK
// keys are staged in shared memory. Each warp owns kBQ/kWarps query rows: lane j scores key
// j of the tile, the warp reduces max and sum, and every lane accumulates D/32 output dims.
//
// First executable form: plain CUDA-core FMA, no tensor-core instructions (none could be
// tested on the machine this was written on). Decode (Sq = 1) runs the same kernel with one
// busy warp per block.
// TODO(issue 5): split-KV for decode, tensor-core (mma/wgmma) tiles for prefill.
#include <cmath>

#include "device_math.cuh"

namespace sy::cuda {
namespace {

constexpr int kBQ = 16;    // query rows per block
constexpr int kBK = 32;    // keys per tile: one per lane
constexpr int kWarps = 4;  // kBQ / kWarps rows per warp
constexpr int kThreads = kWarps * 32;

struct FlashParams {
  const void *q, *k, *v;
  const float* sinks;     // [Hq] or null
  const int64_t* kv_len;  // [B] in device memory, or null
  void* o;
  float* lse;  // [B, Hq, Sq] or null
  int B, Sq, Skv, Hq, Hkv;
  float scale, softcap;
  int causal, window;  // window < 0: none
};

template <typename T, int D>
constexpr size_t flash_smem_bytes() {
  return size_t(kBQ) * D * sizeof(float) + size_t(kBK) * (D + 2) * sizeof(T) +
         size_t(kBK) * D * sizeof(T);
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) flash_kernel(FlashParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int KS = D + 2;  // padded K row: lane j reads row j at one d without bank conflicts
  constexpr int R = kBQ / kWarps;
  constexpr int DP = D / 32;
  float* qs = reinterpret_cast<float*>(smem);
  T* ks = reinterpret_cast<T*>(qs + kBQ * D);
  T* vs = ks + kBK * KS;

  const T* q = static_cast<const T*>(p.q);
  const T* k = static_cast<const T*>(p.k);
  const T* v = static_cast<const T*>(p.v);
  T* o = static_cast<T*>(p.o);
  const int h = blockIdx.y, b = blockIdx.z;
  const int q0 = blockIdx.x * kBQ;
  const int hk = h / (p.Hq / p.Hkv);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

  int L = p.Skv;
  if (p.kv_len) {
    long long x = p.kv_len[b];
    L = x < 0 ? 0 : (x > p.Skv ? p.Skv : int(x));
  }

  for (int idx = threadIdx.x; idx < kBQ * D; idx += kThreads) {
    int r = idx / D, d = idx % D, i = q0 + r;
    qs[idx] = i < p.Sq ? to_f32(q[((size_t(b) * p.Sq + i) * p.Hq + h) * D + d]) : 0.0f;
  }

  float m[R], l[R], acc[R][DP];
#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
    m[rr] = -INFINITY;
    l[rr] = 0.0f;
#pragma unroll
    for (int t = 0; t < DP; ++t) acc[rr][t] = 0.0f;
  }

  // Keys any row of this tile may see: [lo, hi).
  const int last_row = min(q0 + kBQ, p.Sq) - 1;
  int hi = L;
  if (p.causal) hi = min(hi, last_row + L - p.Sq + 1);
  int lo = 0;
  if (p.window >= 0) lo = max(0, q0 + L - p.Sq - p.window);

  for (int j0 = (lo / kBK) * kBK; j0 < hi; j0 += kBK) {
    __syncthreads();  // the previous tile is consumed (and, the first time, qs is written)
    for (int idx = threadIdx.x; idx < kBK * D; idx += kThreads) {
      int r = idx / D, d = idx % D, j = j0 + r;
      size_t src = ((size_t(b) * p.Skv + j) * p.Hkv + hk) * D + d;
      ks[r * KS + d] = j < L ? k[src] : from_f32<T>(0.0f);
      vs[r * D + d] = j < L ? v[src] : from_f32<T>(0.0f);
    }
    __syncthreads();
#pragma unroll
    for (int rr = 0; rr < R; ++rr) {
      const int r = warp * R + rr, i = q0 + r;
      if (i >= p.Sq) continue;  // uniform over the warp
      const int j = j0 + lane, diag = i + L - p.Sq;
      const bool ok = j < L && (!p.causal || j <= diag) && (p.window < 0 || j >= diag - p.window);
      float s = -INFINITY;
      if (ok) {
        const float* qr = qs + r * D;
        const T* kr = ks + lane * KS;
        float dot = 0.0f;
#pragma unroll 16
        for (int d = 0; d < D; ++d) dot = fmaf(qr[d], to_f32(kr[d]), dot);
        s = dot * p.scale;
        if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
      }
      const float tile_max = warp_max(s);
      if (tile_max == -INFINITY) continue;  // no valid key for this row here (uniform)
      const float m_new = fmaxf(m[rr], tile_max);
      const float corr = expf(m[rr] - m_new);  // 0 when m was -inf
      const float pj = ok ? expf(s - m_new) : 0.0f;
      l[rr] = l[rr] * corr + warp_sum(pj);
#pragma unroll
      for (int t = 0; t < DP; ++t) acc[rr][t] *= corr;
      for (int jj = 0; jj < kBK; ++jj) {
        const float w = __shfl_sync(0xffffffffu, pj, jj);
        if (w == 0.0f) continue;  // uniform: every lane got the same w
        const T* vr = vs + jj * D;
#pragma unroll
        for (int t = 0; t < DP; ++t) acc[rr][t] = fmaf(w, to_f32(vr[lane + 32 * t]), acc[rr][t]);
      }
      m[rr] = m_new;
    }
  }

#pragma unroll
  for (int rr = 0; rr < R; ++rr) {
    const int i = q0 + warp * R + rr;
    if (i >= p.Sq) continue;
    const bool any = m[rr] != -INFINITY;  // a row with no valid key: o = 0, lse = -inf
    float denom = l[rr];
    if (any && p.sinks) denom += expf(p.sinks[h] - m[rr]);  // the sink joins once, no value row
    const float inv = any ? 1.0f / denom : 0.0f;
    T* orow = o + ((size_t(b) * p.Sq + i) * p.Hq + h) * D;
#pragma unroll
    for (int t = 0; t < DP; ++t) orow[lane + 32 * t] = from_f32<T>(acc[rr][t] * inv);
    if (p.lse && lane == 0)
      p.lse[(size_t(b) * p.Hq + h) * p.Sq + i] = any ? m[rr] + logf(l[rr]) : -INFINITY;
  }
}

template <typename T, int D>
void launch(const FlashParams& p) {
  constexpr size_t smem = flash_smem_bytes<T, D>();
  check_cuda(cudaFuncSetAttribute(flash_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(smem)),
             "cudaFuncSetAttribute(flash_kernel)");
  dim3 grid((p.Sq + kBQ - 1) / kBQ, p.Hq, p.B);
  flash_kernel<T, D><<<grid, kThreads, smem>>>(p);
  check_launch("flash_kernel");
}

template <typename T>
void launch_d(int d, const FlashParams& p) {
  switch (d) {
    case 64: launch<T, 64>(p); return;
    case 128: launch<T, 128>(p); return;
    case 256: launch<T, 256>(p); return;
    default:
      throw sy::edge::StatusError(SY_STATUS_UNSUPPORTED,
                                  "head dim " + std::to_string(d) + " is not 64, 128 or 256");
  }
}

class FlashAttention final : public CudaKernel {
 public:
  FlashAttention(const sy::edge::OpCopy& op, const CudaContext& ctx) : ctx_(ctx) {
    const auto& q = op.inputs[0].shape;
    const auto& k = op.inputs[1].shape;
    dtype_ = op.inputs[0].dtype;
    d_ = int(q[3]);
    kv_len_input_ = op.int_attr(SY_ATTR_KV_LEN_INPUT, 0) != 0;
    const size_t operands = op.inputs.size() - (kv_len_input_ ? 1 : 0);
    sinks_ = operands > 3;
    lse_ = op.outputs.size() > 1;
    for (int64_t x : {q[0], q[1], q[2], k[1], k[2]})
      if (x > 65535 * 256 || x < 0)
        throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                    "flash_attention: a dimension exceeds the launch grid");
    if (q[0] > 65535 || q[2] > 65535)
      throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                  "flash_attention: batch and heads are limited to 65535");
    p_.B = int(q[0]);
    p_.Sq = int(q[1]);
    p_.Hq = int(q[2]);
    p_.Skv = int(k[1]);
    p_.Hkv = int(k[2]);
    double scale = op.float_attr(SY_ATTR_SCALE, 0.0);
    p_.scale = float(scale != 0.0 ? scale : 1.0 / std::sqrt(double(d_)));
    p_.softcap = float(op.float_attr(SY_ATTR_SOFTCAP, 0.0));
    p_.causal = op.int_attr(SY_ATTR_CAUSAL, 0) != 0;
    int64_t w = op.int_attr(SY_ATTR_WINDOW_LEFT, -1);
    p_.window = w < 0 ? -1 : int(w > (int64_t(1) << 30) ? (int64_t(1) << 30) : w);
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    use_device(ctx_.ordinal);
    FlashParams p = p_;
    p.q = data_of<void>(in[0]);
    p.k = data_of<void>(in[1]);
    p.v = data_of<void>(in[2]);
    p.sinks = sinks_ ? data_of<const float>(in[3]) : nullptr;
    p.kv_len = kv_len_input_ ? data_of<const int64_t>(in[sinks_ ? 4 : 3]) : nullptr;
    p.o = data_of<void>(out[0]);
    p.lse = lse_ ? data_of<float>(out[1]) : nullptr;
    if (p.B == 0 || p.Sq == 0 || p.Hq == 0) return;
    if (dtype_ == SY_DTYPE_F16)
      launch_d<__half>(d_, p);
    else
      launch_d<__nv_bfloat16>(d_, p);
  }

 private:
  CudaContext ctx_;
  FlashParams p_{};
  sy_dtype dtype_ = SY_DTYPE_F16;
  int d_ = 0;
  bool kv_len_input_ = false, sinks_ = false, lse_ = false;
};

}  // namespace

std::unique_ptr<CudaKernel> make_flash_attention(const sy::edge::OpCopy& op,
                                                 const CudaContext& ctx) {
  return std::make_unique<FlashAttention>(op, ctx);
}

}  // namespace sy::cuda
