// The decoder ops of the generic envelopes (docs/operators.md): embedding, rms_norm, rope,
// silu_mul, gelu_mul, add, softmax, argmax, kv_cache_append (contiguous and paged), copy,
// softcap, slice. f32/f16/bf16 computed in f32 and rounded to nearest even on store.
// Correctness first: simple grid-stride kernels and one block per row for the reductions;
// every launch is checked. Every kernel runs on the extents of its execute's tensors (ABI 1.5
// varlen), up to those it was prepared for.
#include <cuda_runtime_api.h>

#include <cmath>
#include <vector>

#include "device_math.cuh"
#include "device_queue.hpp"
#include "fused_kernels.cuh"

namespace sy::cuda {
namespace {

using sy::edge::OpCopy;
using sy::edge::StatusError;

constexpr int kBlock = 256;

#define SY_GRID_STRIDE(i, n)                                                \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// Elements of `t` at this execute's extents.
int64_t elements_of(const DLTensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

// ---- embedding -------------------------------------------------------------------------

template <typename I>
__global__ void find_bad_id(const I* ids, int64_t n, int64_t vocab, unsigned long long* first) {
  SY_GRID_STRIDE(i, n) {
    long long id = static_cast<long long>(ids[i]);
    if (id < 0 || id >= vocab) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

template <typename T, typename I>
__global__ void gather_rows(const T* table, const I* ids, T* rows, int64_t n, int64_t hidden) {
  SY_GRID_STRIDE(e, n * hidden) {
    int64_t r = e / hidden, c = e % hidden;
    rows[e] = table[static_cast<int64_t>(ids[r]) * hidden + c];
  }
}

class Embedding final : public CudaKernel {
 public:
  Embedding(const OpCopy& op, const CudaContext& ctx)
      : CudaKernel(ctx), scratch_((use_device(ctx.ordinal), sizeof(unsigned long long))) {
    dtype_ = op.inputs[0].dtype;
    ids64_ = op.inputs[1].dtype == SY_DTYPE_I64;
    vocab_ = op.inputs[0].shape[0];
    hidden_ = op.inputs[0].shape[1];
    n_ = op.inputs[1].elements();
  }
  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    n_ = elements_of(in[1]);
    if (n_ == 0) return;
    if (!step) check_ids(in[1]);  // a segment's ids were checked by the host
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      if (ids64_)
        gather_rows<<<grid_for(n_ * hidden_, kBlock), kBlock, 0, stream()>>>(
            data_of<const T>(in[0]), data_of<const int64_t>(in[1]), data_of<T>(out[0]), n_,
            hidden_);
      else
        gather_rows<<<grid_for(n_ * hidden_, kBlock), kBlock, 0, stream()>>>(
            data_of<const T>(in[0]), data_of<const int32_t>(in[1]), data_of<T>(out[0]), n_,
            hidden_);
    });
    check_launch("gather_rows");
  }

 private:
  // Every id is checked before any row is written (op by op: read back, a blocking wait).
  void check_ids(const DLTensor* ids) {
    unsigned long long none = ~0ull, first = 0;
    auto* flag = scratch_.as<unsigned long long>();
    check_cuda(cudaMemcpyAsync(flag, &none, sizeof none, cudaMemcpyHostToDevice, stream()),
               "cudaMemcpyAsync");
    if (ids64_)
      find_bad_id<<<grid_for(n_, kBlock), kBlock, 0, stream()>>>(data_of<const int64_t>(ids), n_,
                                                                 vocab_, flag);
    else
      find_bad_id<<<grid_for(n_, kBlock), kBlock, 0, stream()>>>(data_of<const int32_t>(ids), n_,
                                                                 vocab_, flag);
    check_launch("find_bad_id");
    read_back(ctx_, &first, flag, sizeof first);
    if (first == none) return;
    int64_t id = 0;
    const char* base = static_cast<const char*>(ids->data) + ids->byte_offset;
    if (ids64_) {
      read_back(ctx_, &id, base + first * 8, 8);
    } else {
      int32_t v = 0;
      read_back(ctx_, &v, base + first * 4, 4);
      id = v;
    }
    throw StatusError(SY_STATUS_INVALID_ARGUMENT,
                      "embedding: id " + std::to_string(id) + " at index " + std::to_string(first) +
                          " is outside [0, " + std::to_string(vocab_) + ")");
  }

  DeviceScratch scratch_;
  sy_dtype dtype_;
  bool ids64_ = false;
  int64_t vocab_ = 0, hidden_ = 0, n_ = 0;
};

// ---- rms_norm, softmax, argmax: one block per row ---------------------------------------

template <typename T>
__global__ void rms_norm_kernel(const T* x, const T* w, T* y, int64_t hidden, float eps,
                                float offset) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
    float v = to_f32(xr[c]);
    ss = fmaf(v, v, ss);
  }
  ss = block_reduce<false>(ss, scratch);
  const float inv = rsqrtf(ss / float(hidden) + eps);
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
    yr[c] = from_f32<T>(to_f32(xr[c]) * inv * (to_f32(w[c]) + offset));
}

template <typename T>
__global__ void softmax_kernel(const T* x, T* y, int64_t n) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * n;
  T* yr = y + row * n;
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) mx = fmaxf(mx, to_f32(xr[c]));
  mx = block_reduce<true>(mx, scratch);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) sum += expf(to_f32(xr[c]) - mx);
  sum = block_reduce<false>(sum, scratch);
  const float inv = 1.0f / sum;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
    yr[c] = from_f32<T>(expf(to_f32(xr[c]) - mx) * inv);
}

// NaN counts as larger than any number; among equals the first index wins.
__device__ __forceinline__ bool better(float a, int64_t ia, float b, int64_t ib) {
  bool na = isnan(a), nb = isnan(b);
  if (na || nb) return na && nb ? ia < ib : na;
  if (a != b) return a > b;
  return ia < ib;
}

template <typename T>
__global__ void argmax_kernel(const T* x, int64_t* index, int64_t n) {
  __shared__ float vals[32];
  __shared__ int64_t idxs[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * n;
  float best = -INFINITY;
  int64_t at = n;  // "none yet": loses to any real element
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    float v = to_f32(xr[c]);
    if (at == n || better(v, c, best, at)) best = v, at = c;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, best, o);
    int64_t oi = __shfl_xor_sync(0xffffffffu, at, o);
    if (oi != n && (at == n || better(ov, oi, best, at))) best = ov, at = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) vals[warp] = best, idxs[warp] = at;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
      if (idxs[w] != n && (at == n || better(vals[w], idxs[w], best, at)))
        best = vals[w], at = idxs[w];
    index[row] = at == n ? 0 : at;
  }
}

int64_t rows_of(const sy::edge::TensorCopy& t, int64_t last) {
  return last > 0 ? t.elements() / last : 0;
}

class RowKernel final : public CudaKernel {
 public:
  RowKernel(const OpCopy& op, const CudaContext& ctx) : CudaKernel(ctx), kind_(op.op) {
    const auto& x = op.inputs[0];
    dtype_ = x.dtype;
    n_ = x.shape.empty() ? 1 : x.shape.back();
    rows_ = rows_of(x, n_);
    eps_ = float(op.float_attr(SY_ATTR_EPS, 1e-6));
    offset_ = float(op.float_attr(SY_ATTR_WEIGHT_OFFSET, 0.0));
    if (rows_ > 0x7fffffff)
      throw StatusError(SY_STATUS_INVALID_ARGUMENT, "more than 2^31 rows in one call");
  }
  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    rows_ = n_ > 0 ? elements_of(in[0]) / n_ : 0;
    if (rows_ == 0) return;
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      const unsigned g = unsigned(rows_);
      if (kind_ == SY_OP_RMS_NORM)
        rms_norm_kernel<<<g, kBlock, 0, stream()>>>(data_of<const T>(in[0]),
                                                    data_of<const T>(in[1]), data_of<T>(out[0]), n_,
                                                    eps_, offset_);
      else if (kind_ == SY_OP_SOFTMAX)
        softmax_kernel<<<g, kBlock, 0, stream()>>>(data_of<const T>(in[0]), data_of<T>(out[0]), n_);
      else
        argmax_kernel<<<g, kBlock, 0, stream()>>>(data_of<const T>(in[0]), data_of<int64_t>(out[0]),
                                                  n_);
    });
    check_launch(kind_ == SY_OP_RMS_NORM  ? "rms_norm_kernel"
                 : kind_ == SY_OP_SOFTMAX ? "softmax_kernel"
                                          : "argmax_kernel");
  }

 private:
  sy_op_kind kind_;
  sy_dtype dtype_;
  int64_t n_ = 0, rows_ = 0;
  float eps_ = 1e-6f, offset_ = 0.0f;
};

// ---- rope ------------------------------------------------------------------------------

// Item p of a row of D: p < R/2 rotates one pair, the rest copy the unrotated tail (so the op
// works in place: every element is read and written by one thread). A scaled rope passes its
// frequency table (inv_freq [R/2], else theta^(-2p/R)) and the factor on cos and sin.
template <typename T, typename P>
__global__ void rope_kernel(const T* x, const P* pos, T* y, int64_t rows, int64_t heads, int d,
                            int rot, bool neox, double theta, const float* table, double factor) {
  const int half = rot / 2, items = half + (d - rot);
  SY_GRID_STRIDE(e, rows * items) {
    const int64_t row = e / items;  // (b, s, h)
    const int p = int(e % items);
    const int64_t token = row / heads;  // (b, s)
    const T* xr = x + row * d;
    T* yr = y + row * d;
    if (p >= half) {
      const int c = rot + (p - half);
      yr[c] = xr[c];
      continue;
    }
    float c, s;
    fused::rope_cos_sin(double(pos[token]), p, rot, theta, table, factor, c, s);
    const int i1 = neox ? p : 2 * p, i2 = neox ? p + half : 2 * p + 1;
    const float x1 = to_f32(xr[i1]), x2 = to_f32(xr[i2]);
    yr[i1] = from_f32<T>(x1 * c - x2 * s);
    yr[i2] = from_f32<T>(x2 * c + x1 * s);
  }
}

class Rope final : public CudaKernel {
 public:
  Rope(const OpCopy& op, const CudaContext& ctx) : CudaKernel(ctx) {
    const auto& x = op.inputs[0].shape;
    dtype_ = op.inputs[0].dtype;
    pos64_ = op.inputs[1].dtype == SY_DTYPE_I64;
    d_ = int(x[3]);
    heads_ = x[2];
    rows_ = x[0] * x[1] * x[2];
    rot_ = int(op.int_attr(SY_ATTR_ROTARY_DIM, d_));
    neox_ = op.string_attr(SY_ATTR_ROPE_STYLE, "neox") == "neox";
    theta_ = op.float_attr(SY_ATTR_ROPE_THETA, 10000.0);
    table_ = op.inputs.size() == 3;
    factor_ = op.float_attr(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.0);
  }
  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    rows_ = in[0]->shape[0] * in[0]->shape[1] * in[0]->shape[2];
    const int64_t n = rows_ * (rot_ / 2 + (d_ - rot_));
    if (n == 0) return;
    const float* table = table_ ? data_of<const float>(in[2]) : nullptr;
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      if (pos64_)
        rope_kernel<<<grid_for(n, kBlock), kBlock, 0, stream()>>>(
            data_of<const T>(in[0]), data_of<const int64_t>(in[1]), data_of<T>(out[0]), rows_,
            heads_, d_, rot_, neox_, theta_, table, factor_);
      else
        rope_kernel<<<grid_for(n, kBlock), kBlock, 0, stream()>>>(
            data_of<const T>(in[0]), data_of<const int32_t>(in[1]), data_of<T>(out[0]), rows_,
            heads_, d_, rot_, neox_, theta_, table, factor_);
    });
    check_launch("rope_kernel");
  }

 private:
  sy_dtype dtype_;
  bool pos64_ = false, neox_ = true, table_ = false;
  int d_ = 0, rot_ = 0;
  int64_t heads_ = 0, rows_ = 0;
  double theta_ = 10000.0, factor_ = 1.0;
};

// ---- silu_mul, gelu_mul, add -------------------------------------------------------------

enum class Act { kSilu, kGeluErf, kGeluTanh };

template <typename T>
__global__ void gated_kernel(const T* gate, const T* up, T* y, int64_t n, Act act) {
  SY_GRID_STRIDE(i, n) {
    const float g = to_f32(gate[i]), u = to_f32(up[i]);
    float a;
    if (act == Act::kSilu)
      a = g / (1.0f + expf(-g));
    else if (act == Act::kGeluErf)
      a = 0.5f * g * (1.0f + erff(g * 0.70710678118654752f));
    else
      a = 0.5f * g * (1.0f + tanhf(0.79788456080286536f * (g + 0.044715f * g * g * g)));
    y[i] = from_f32<T>(a * u);
  }
}

template <typename T>
__global__ void add_kernel(const T* a, const T* b, T* c, int64_t n, int64_t nb) {
  SY_GRID_STRIDE(i, n) c[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i % nb]));
}

class Elementwise final : public CudaKernel {
 public:
  Elementwise(const OpCopy& op, const CudaContext& ctx) : CudaKernel(ctx), kind_(op.op) {
    dtype_ = op.inputs[0].dtype;
    n_ = op.inputs[0].elements();
    nb_ = op.inputs[1].elements();
    act_ = op.op == SY_OP_SILU_MUL                                 ? Act::kSilu
           : op.string_attr(SY_ATTR_GELU_APPROX, "none") == "tanh" ? Act::kGeluTanh
                                                                   : Act::kGeluErf;
  }
  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    n_ = elements_of(in[0]);
    nb_ = elements_of(in[1]);
    if (n_ == 0) return;
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      if (kind_ == SY_OP_ADD)
        add_kernel<<<grid_for(n_, kBlock), kBlock, 0, stream()>>>(
            data_of<const T>(in[0]), data_of<const T>(in[1]), data_of<T>(out[0]), n_, nb_);
      else
        gated_kernel<<<grid_for(n_, kBlock), kBlock, 0, stream()>>>(
            data_of<const T>(in[0]), data_of<const T>(in[1]), data_of<T>(out[0]), n_, act_);
    });
    check_launch(kind_ == SY_OP_ADD ? "add_kernel" : "gated_kernel");
  }

 private:
  sy_op_kind kind_;
  sy_dtype dtype_;
  int64_t n_ = 0, nb_ = 1;
  Act act_ = Act::kSilu;
};

// ---- softcap -----------------------------------------------------------------------------

// y = c · tanh(x / c) in double, as cpu_onednn computes it (Gemma's final logit softcap).
template <typename T>
__global__ void softcap_kernel(const T* x, T* y, int64_t n, double cap) {
  SY_GRID_STRIDE(i, n) y[i] = from_f32<T>(float(cap * tanh(double(to_f32(x[i])) / cap)));
}

class Softcap final : public CudaKernel {
 public:
  Softcap(const OpCopy& op, const CudaContext& ctx)
      : CudaKernel(ctx),
        dtype_(op.inputs[0].dtype),
        n_(op.inputs[0].elements()),
        cap_(op.float_attr(SY_ATTR_SOFTCAP, 0.0)) {}
  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    n_ = elements_of(in[0]);
    if (n_ == 0) return;
    dispatch_float(dtype_, [&](auto tag) {
      using T = decltype(tag);
      softcap_kernel<<<grid_for(n_, kBlock), kBlock, 0, stream()>>>(data_of<const T>(in[0]),
                                                                    data_of<T>(out[0]), n_, cap_);
    });
    check_launch("softcap_kernel");
  }

 private:
  sy_dtype dtype_;
  int64_t n_ = 0;
  double cap_ = 0;
};

// ---- kv_cache_append ---------------------------------------------------------------------

// Rows [B, t, words] into the cache [B, C, words] from the position the device holds.
template <typename W>
__global__ void append_at(const W* rows, const int64_t* position, W* cache, int64_t t, int64_t c,
                          int64_t words, int64_t n) {
  const int64_t pos = *position;
  SY_GRID_STRIDE(e, n) {
    const int64_t w = e % words, r = e / words, b = r / t, i = r % t;
    cache[(b * c + pos + i) * words + w] = rows[e];
  }
}

class KvCacheAppend final : public CudaKernel {
 public:
  KvCacheAppend(const OpCopy& op, const CudaContext& ctx) : CudaKernel(ctx) {
    const auto& rows = op.inputs[0].shape;
    const auto& cache = op.outputs[0].shape;
    b_ = rows[0];
    c_ = cache[1];
    row_bytes_ = size_t(rows[2] * rows[3]) * sy_dtype_size(op.inputs[0].dtype);
  }
  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    const int64_t t = in[0]->shape[1];
    if (step) {
      // In a segment the host checked the position (the cache holds max_kv_len keys after
      // this step's t), and the kernel reads it on the device: a captured graph replays the
      // launch for every position.
      const int64_t pos = step->max_kv_len - t;
      if (pos < 0 || pos > c_ - t) throw overflow(t, pos);
      if (t == 0 || b_ == 0) return;
      const bool wide = row_bytes_ % 16 == 0;
      const int64_t words = int64_t(wide ? row_bytes_ / 16 : row_bytes_);
      const int64_t n = b_ * t * words;
      if (wide)
        append_at<<<grid_for(n, kBlock), kBlock, 0, stream()>>>(
            data_of<const uint4>(in[0]), data_of<const int64_t>(in[1]), data_of<uint4>(out[0]), t,
            c_, words, n);
      else
        append_at<<<grid_for(n, kBlock), kBlock, 0, stream()>>>(
            data_of<const uint8_t>(in[0]), data_of<const int64_t>(in[1]), data_of<uint8_t>(out[0]),
            t, c_, words, n);
      check_launch("append_at");
      return;
    }
    int64_t pos = 0;  // op by op: read back, so a refused append writes nothing
    read_back(ctx_, &pos, data_of<const int64_t>(in[1]), sizeof pos);
    if (pos < 0 || pos > c_ - t) throw overflow(t, pos);
    if (t == 0 || b_ == 0) return;
    char* dst = data_of<char>(out[0]) + size_t(pos) * row_bytes_;
    check_cuda(cudaMemcpy2DAsync(dst, size_t(c_) * row_bytes_, data_of<const char>(in[0]),
                                 size_t(t) * row_bytes_, size_t(t) * row_bytes_, size_t(b_),
                                 cudaMemcpyDeviceToDevice, stream()),
               "cudaMemcpy2DAsync(kv_cache_append)");
    check_launch("cudaMemcpy2DAsync(kv_cache_append)");
  }

 private:
  StatusError overflow(int64_t t, int64_t pos) const {
    return StatusError(SY_STATUS_INVALID_ARGUMENT, "kv_cache_append: writing " + std::to_string(t) +
                                                       " rows at position " + std::to_string(pos) +
                                                       " exceeds the cache capacity " +
                                                       std::to_string(c_));
  }

  int64_t b_ = 0, c_ = 0;
  size_t row_bytes_ = 0;
};

// Row t of `rows` to pool row slots[t] (16-byte words: a row is Hkv·D elements of 2 or 4 bytes,
// and the contract's head dims make it a multiple of 16 bytes; else byte by byte).
template <typename W>
__global__ void scatter_rows(const W* rows, const int64_t* slots, W* pool, int64_t t,
                             int64_t words) {
  SY_GRID_STRIDE(e, t * words) {
    const int64_t r = e / words, w = e % words;
    pool[slots[r] * words + w] = rows[e];
  }
}

// The paged append: rows [1, T, Hkv, D] written at the pool rows slot_mapping names (block ·
// BS + offset, vLLM's slot mapping). The slots are read back and checked first: a refused
// append writes nothing.
class PagedAppend final : public CudaKernel {
 public:
  PagedAppend(const OpCopy& op, const CudaContext& ctx) : CudaKernel(ctx) {
    const auto& rows = op.inputs[0].shape;
    const auto& pool = op.outputs[0].shape;
    row_bytes_ = size_t(rows[2] * rows[3]) * sy_dtype_size(op.inputs[0].dtype);
    capacity_ = pool[0] * pool[1];
    slots_.resize(size_t(rows[1]));
  }
  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    const int64_t t = in[0]->shape[1];
    if (t == 0) return;
    if (!step) check_slots(in[1], t);  // a segment's slots were checked by the host
    const int64_t* slots = data_of<const int64_t>(in[1]);
    if (row_bytes_ % 16 == 0) {
      const int64_t words = int64_t(row_bytes_ / 16);
      scatter_rows<<<grid_for(t * words, kBlock), kBlock, 0, stream()>>>(
          data_of<const uint4>(in[0]), slots, data_of<uint4>(out[0]), t, words);
    } else {
      const int64_t words = int64_t(row_bytes_);
      scatter_rows<<<grid_for(t * words, kBlock), kBlock, 0, stream()>>>(
          data_of<const uint8_t>(in[0]), slots, data_of<uint8_t>(out[0]), t, words);
    }
    check_launch("scatter_rows");
  }

 private:
  // Op by op the slots are read back (a blocking wait) and checked: nothing is written when
  // one is outside the pool.
  void check_slots(const DLTensor* slots_t, int64_t t) {
    read_back(ctx_, slots_.data(), data_of<const int64_t>(slots_t), sizeof(int64_t) * t);
    for (int64_t i = 0; i < t; ++i)
      if (slots_[size_t(i)] < 0 || slots_[size_t(i)] >= capacity_)
        throw StatusError(SY_STATUS_INVALID_ARGUMENT,
                          "kv_cache_append: slot " + std::to_string(slots_[size_t(i)]) +
                              " of row " + std::to_string(i) + " is outside the pool's [0, " +
                              std::to_string(capacity_) + "); nothing was written");
  }

  size_t row_bytes_ = 0;
  int64_t capacity_ = 0;
  std::vector<int64_t> slots_;
};

// ---- copy --------------------------------------------------------------------------------

template <typename S, typename D>
__global__ void convert_kernel(const S* x, D* y, int64_t n) {
  SY_GRID_STRIDE(i, n) y[i] = from_f32<D>(to_f32(x[i]));
}

class Copy final : public CudaKernel {
 public:
  Copy(const OpCopy& op, const CudaContext& ctx) : CudaKernel(ctx) {
    from_ = op.inputs[0].dtype;
    to_ = op.outputs[0].dtype;
    n_ = op.inputs[0].elements();
  }
  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    n_ = elements_of(in[0]);
    if (n_ == 0) return;
    if (from_ == to_) {
      const void* src = data_of<const char>(in[0]);
      void* dst = data_of<char>(out[0]);
      if (src != dst && n_ > 0) {
        check_cuda(cudaMemcpyAsync(dst, src, size_t(n_) * sy_dtype_size(from_),
                                   cudaMemcpyDeviceToDevice, stream()),
                   "cudaMemcpyAsync(copy)");
        check_launch("cudaMemcpyAsync(copy)");
      }
      return;
    }
    dispatch_float(from_, [&](auto s) {
      using S = decltype(s);
      dispatch_float(to_, [&](auto d) {
        using D = decltype(d);
        convert_kernel<<<grid_for(n_, kBlock), kBlock, 0, stream()>>>(data_of<const S>(in[0]),
                                                                      data_of<D>(out[0]), n_);
      });
    });
    check_launch("convert_kernel");
  }

 private:
  sy_dtype from_, to_;
  int64_t n_ = 0;
};

// ---- slice -------------------------------------------------------------------------------

// y = x[..., start : start + n, ...]: `outer` runs of n·inner bytes, x's runs x_run bytes apart,
// from this execute's extents.
class Slice final : public CudaKernel {
 public:
  Slice(const OpCopy& op, const CudaContext& ctx)
      : CudaKernel(ctx),
        axis_(int(op.int_attr(SY_ATTR_AXIS, 0))),
        start_(op.int_attr(SY_ATTR_START, 0)),
        element_bytes_(int64_t(sy_dtype_size(op.inputs[0].dtype))) {}
  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    int64_t outer = 1, inner = element_bytes_;
    for (int i = 0; i < axis_; ++i) outer *= in[0]->shape[i];
    for (int i = axis_ + 1; i < in[0]->ndim; ++i) inner *= in[0]->shape[i];
    const size_t x_run = size_t(in[0]->shape[axis_] * inner),
                 y_run = size_t(out[0]->shape[axis_] * inner), offset = size_t(start_ * inner);
    if (y_run == 0 || outer == 0) return;
    check_cuda(cudaMemcpy2DAsync(data_of<char>(out[0]), y_run, data_of<const char>(in[0]) + offset,
                                 x_run, y_run, size_t(outer), cudaMemcpyDeviceToDevice, stream()),
               "cudaMemcpy2DAsync(slice)");
    check_launch("cudaMemcpy2DAsync(slice)");
  }

 private:
  int axis_;
  int64_t start_, element_bytes_;
};

}  // namespace

std::unique_ptr<CudaKernel> make_slice(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<Slice>(op, ctx);
}
std::unique_ptr<CudaKernel> make_embedding(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<Embedding>(op, ctx);
}
std::unique_ptr<CudaKernel> make_rms_norm(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<RowKernel>(op, ctx);
}
std::unique_ptr<CudaKernel> make_softmax(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<RowKernel>(op, ctx);
}
std::unique_ptr<CudaKernel> make_argmax(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<RowKernel>(op, ctx);
}
std::unique_ptr<CudaKernel> make_rope(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<Rope>(op, ctx);
}
std::unique_ptr<CudaKernel> make_gated(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<Elementwise>(op, ctx);
}
std::unique_ptr<CudaKernel> make_add(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<Elementwise>(op, ctx);
}
std::unique_ptr<CudaKernel> make_kv_cache_append(const OpCopy& op, const CudaContext& ctx) {
  if (op.int_attr(SY_ATTR_PAGED, 0)) return std::make_unique<PagedAppend>(op, ctx);
  return std::make_unique<KvCacheAppend>(op, ctx);
}
std::unique_ptr<CudaKernel> make_copy(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<Copy>(op, ctx);
}
std::unique_ptr<CudaKernel> make_softcap(const OpCopy& op, const CudaContext& ctx) {
  return std::make_unique<Softcap>(op, ctx);
}

}  // namespace sy::cuda
