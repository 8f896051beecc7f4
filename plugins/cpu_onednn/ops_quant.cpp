// matmul with block-quantized weights (b [N, K] with transpose_b, docs/abi.md §5a) and embedding
// from a block-quantized table, by the active tier's loops (quant_tier.hpp).
//
// Decode-sized matmuls (M <= 8) dequantize each block into L1 and use it at once: the weights
// are read once, in their quantized bytes. Larger ones (prefill) dequantize kChunkRows rows of b
// at a time into an f32 scratch and multiply with oneDNN's f32 matmul, so a 512-token prefill
// runs at GEMM speed while the weights stay quantized in memory.
#include <omp.h>

#include <algorithm>
#include <dnnl.hpp>
#include <string>
#include <vector>

#include "elementwise_tier.hpp"
#include "kernel_factories.hpp"
#include "ops_common.hpp"
#include "quant_tier.hpp"

namespace sy::cpu {
namespace {

using dnnl::memory;

constexpr int64_t kChunkRows = 256;

// The f32 matmul of one chunk, a [M, K] · (w32 [nc, K])ᵀ -> c32 [M, nc], with its scratchpad in
// user mode: it lives in the calling thread's scratch (ThreadScratch) instead of oneDNN holding
// one per primitive out of sight.
dnnl::matmul::primitive_desc chunk_pd(const dnnl::engine& engine, int64_t m, int64_t k,
                                      int64_t nc) {
  memory::desc a({m, k}, memory::data_type::f32, memory::dims{k, 1});
  memory::desc b({k, nc}, memory::data_type::f32, memory::dims{1, k});
  memory::desc c({m, nc}, memory::data_type::f32, memory::dims{nc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, engine);
}

// What a prefill matmul needs only while it runs: a bf16 activation widened, the dequantized
// chunk, its product and oneDNN's scratchpad. One set per calling thread serves every kernel
// that thread runs (the ABI runs one kernel at a time per thread, and separate kernels on
// separate threads, each with its own set), sized by the largest so far: a model's prefill
// needs a few MiB of scratch, not a chunk per matmul (205 MiB for SmolLM2-135M at 37 tokens).
struct ThreadScratch {
  std::vector<float> a32, w32, c32;
  std::vector<uint8_t> pad;
};
ThreadScratch& thread_scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}
template <typename T>
T* at_least(std::vector<T>& v, int64_t n) {
  if (v.size() < size_t(n)) v.resize(size_t(n));
  return v.data();
}

// a [M, K] as f32: a itself, or widened from bf16 into `scratch`.
const float* as_f32(const DLTensor* a, bool bf16, int64_t count, std::vector<float>& scratch,
                    const CpuContext& ctx) {
  if (!bf16) return data_of<const float>(a);
  const bf16_bits* x = data_of<const bf16_bits>(a);
  float* y = scratch.data();
  parallel_chunks(ctx, count, [=](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) y[i] = to_f32(x[i]);
  });
  return y;
}

class QuantGemvKernel final : public CpuKernel {
 public:
  QuantGemvKernel(int64_t m, int64_t k, int64_t n, sy_dtype wtype, bool bf16, const CpuContext& ctx)
      : tier_(quant_tier(active_tier())),
        ctx_(ctx),
        bf16_(bf16),
        x32_(bf16 ? size_t(m * k) : 0),
        xsum_(size_t(m * (k / 32))) {
    args_ = {wtype, nullptr, nullptr, nullptr, bf16, int(m), k, n, xsum_.data()};
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    QuantGemvArgs a = args_;
    a.x = as_f32(in[0], bf16_, a.M * a.K, x32_, ctx_);
    for (int64_t i = 0; i < a.M * (a.K / 32); ++i) {
      float s = 0.f;
      for (int e = 0; e < 32; ++e) s += a.x[i * 32 + e];
      xsum_[size_t(i)] = s;
    }
    a.w = data_of<const uint8_t>(in[1]);
    a.y = data_of<void>(out[0]);
    const int64_t bytes = sy_tensor_bytes(a.wtype, 1, &a.K) * a.N;
    const int threads = bytes >= kParallelWork ? ctx_.num_threads : 1;
    if (threads == 1) return tier_.gemv_rows(a, 0, a.N);
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t n0 = a.N * t / nt, n1 = a.N * (t + 1) / nt;
      if (n1 > n0) tier_.gemv_rows(a, n0, n1);
    }
  }

 private:
  const QuantTier& tier_;
  CpuContext ctx_;
  bool bf16_;
  QuantGemvArgs args_{};
  std::vector<float> x32_, xsum_;
};

class QuantGemmKernel final : public CpuKernel {
 public:
  QuantGemmKernel(int64_t m, int64_t k, int64_t n, sy_dtype wtype, bool bf16, const CpuContext& ctx)
      : tier_(quant_tier(active_tier())),
        ctx_(ctx),
        m_(m),
        k_(k),
        n_(n),
        wtype_(wtype),
        bf16_(bf16),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_) {
    full_ = make_chunk(std::min(n, kChunkRows));
    if (n % kChunkRows != 0 && n > kChunkRows) tail_ = make_chunk(n % kChunkRows);
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    omp_set_num_threads(ctx_.num_threads);
    ThreadScratch& s = thread_scratch();
    const int64_t chunk = std::min(n_, kChunkRows);
    if (bf16_) at_least(s.a32, m_ * k_);
    float* w32 = at_least(s.w32, chunk * k_);
    float* c32 = at_least(s.c32, m_ * chunk);
    uint8_t* pad = at_least(s.pad, int64_t(pad_bytes_));
    const float* a = as_f32(in[0], bf16_, m_ * k_, s.a32, ctx_);
    const uint8_t* w = data_of<const uint8_t>(in[1]);
    for (int64_t n0 = 0; n0 < n_; n0 += kChunkRows) {
      const int64_t nc = std::min(kChunkRows, n_ - n0);
      dequantize(w, n0, nc, w32);
      Chunk& c = nc == chunk ? full_ : tail_;
      c.a.set_data_handle(const_cast<float*>(a));
      c.b.set_data_handle(w32);
      c.c.set_data_handle(c32);
      if (c.scratch) c.scratch.set_data_handle(pad);
      execute(c);
      scatter(c32, data_of<void>(out[0]), n0, nc);
    }
  }

 private:
  struct Chunk {
    dnnl::matmul primitive;
    memory a, b, c, scratch;
    std::vector<dnnl_exec_arg_t> args;
  };

  Chunk make_chunk(int64_t nc) {
    Chunk ch;
    auto pd = chunk_pd(engine_, m_, k_, nc);
    ch.primitive = dnnl::matmul(pd);
    ch.a = memory(pd.src_desc(), engine_, DNNL_MEMORY_NONE);
    ch.b = memory(pd.weights_desc(), engine_, DNNL_MEMORY_NONE);
    ch.c = memory(pd.dst_desc(), engine_, DNNL_MEMORY_NONE);
    ch.args = {
        {DNNL_ARG_SRC, ch.a.get()}, {DNNL_ARG_WEIGHTS, ch.b.get()}, {DNNL_ARG_DST, ch.c.get()}};
    const size_t scratch = pd.scratchpad_desc().get_size();
    if (scratch > 0) {  // the chunks run one after the other: one buffer serves both
      pad_bytes_ = std::max(pad_bytes_, scratch);
      ch.scratch = memory(pd.scratchpad_desc(), engine_, DNNL_MEMORY_NONE);
      ch.args.push_back({DNNL_ARG_SCRATCHPAD, ch.scratch.get()});
    }
    return ch;
  }

  void dequantize(const uint8_t* w, int64_t n0, int64_t nc, float* dst) const {
    const QuantTier& tier = tier_;
    const sy_dtype t = wtype_;
    const int64_t k = k_;
    parallel_for(ctx_, nc, k, [=, &tier](int64_t r) {
      tier.dequant_rows(t, w, k, n0 + r, n0 + r + 1, dst + r * k);
    });
  }

  void execute(Chunk& c) {
    dnnl_status_t st =
        dnnl_primitive_execute(c.primitive.get(), stream_.get(), int(c.args.size()), c.args.data());
    if (st == dnnl_success) st = dnnl_stream_wait(stream_.get());
    if (st != dnnl_success)
      throw sy::edge::StatusError(SY_STATUS_INTERNAL,
                                  "oneDNN matmul failed with status " + std::to_string(int(st)));
  }

  // c32 [M, nc] into columns [n0, n0 + nc) of c [M, N].
  void scatter(const float* src, void* c, int64_t n0, int64_t nc) const {
    const int64_t n = n_;
    const bool bf16 = bf16_;
    parallel_for(ctx_, m_, nc, [=](int64_t r) {
      const float* s = src + r * nc;
      if (bf16) {
        bf16_bits* d = static_cast<bf16_bits*>(c) + r * n + n0;
        for (int64_t i = 0; i < nc; ++i) d[i] = from_f32<bf16_bits>(s[i]);
      } else {
        std::copy(s, s + nc, static_cast<float*>(c) + r * n + n0);
      }
    });
  }

  const QuantTier& tier_;
  CpuContext ctx_;
  int64_t m_, k_, n_;
  sy_dtype wtype_;
  bool bf16_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  size_t pad_bytes_ = 0;  // the larger chunk matmul's oneDNN scratchpad
  Chunk full_, tail_;
};

// rows [..., H] = the table's rows at ids, dequantized (f32) or dequantized and rounded (bf16).
class QuantEmbeddingKernel final : public CpuKernel {
 public:
  QuantEmbeddingKernel(sy_dtype wtype, int64_t vocab, int64_t h, int64_t count, bool ids_i64,
                       bool bf16, const CpuContext& ctx)
      : tier_(quant_tier(active_tier())),
        ctx_(ctx),
        wtype_(wtype),
        vocab_(vocab),
        h_(h),
        count_(count),
        ids_i64_(ids_i64),
        bf16_(bf16),
        rows32_(bf16 ? size_t(count * h) : 0) {}

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const uint8_t* table = data_of<const uint8_t>(in[0]);
    const void* ids = data_of<const void>(in[1]);
    auto id_at = [=, i64 = ids_i64_](int64_t i) {
      return i64 ? static_cast<const int64_t*>(ids)[i] : static_cast<const int32_t*>(ids)[i];
    };
    for (int64_t i = 0; i < count_; ++i)
      if (id_at(i) < 0 || id_at(i) >= vocab_)
        throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                    "embedding: id " + std::to_string(id_at(i)) + " at position " +
                                        std::to_string(i) + " is outside the table's [0, " +
                                        std::to_string(vocab_) + ")");
    float* rows = bf16_ ? rows32_.data() : data_of<float>(out[0]);
    const QuantTier& tier = tier_;
    const sy_dtype t = wtype_;
    const int64_t h = h_;
    parallel_for(ctx_, count_, h, [=, &tier](int64_t i) {
      tier.dequant_rows(t, table, h, id_at(i), id_at(i) + 1, rows + i * h);
    });
    if (bf16_)
      elementwise_tier(active_tier()).convert[0](rows, data_of<void>(out[0]), 0, count_ * h);
  }

 private:
  const QuantTier& tier_;
  CpuContext ctx_;
  sy_dtype wtype_;
  int64_t vocab_, h_, count_;
  bool ids_i64_, bf16_;
  std::vector<float> rows32_;
};

}  // namespace

uint64_t quant_matmul_workspace_bytes(int64_t m, int64_t k, int64_t n, bool bf16) {
  (void)n;
  // The one-token kernel keeps x widened and its 32-element sums; the prefill kernel keeps
  // nothing of its own (its scratch is the calling thread's: ThreadScratch).
  if (m > kQuantGemvMaxRows) return 0;
  return uint64_t((bf16 ? m * k : 0) + m * (k / 32)) * sizeof(float);
}

std::unique_ptr<CpuKernel> make_quant_matmul(int64_t m, int64_t k, int64_t n, sy_dtype wtype,
                                             bool bf16, const CpuContext& ctx) {
  if (m <= kQuantGemvMaxRows) return std::make_unique<QuantGemvKernel>(m, k, n, wtype, bf16, ctx);
  return std::make_unique<QuantGemmKernel>(m, k, n, wtype, bf16, ctx);
}

std::unique_ptr<CpuKernel> make_quant_embedding(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  const auto& table = op.inputs[0];
  return std::make_unique<QuantEmbeddingKernel>(
      table.dtype, table.shape[0], table.shape[1], op.inputs[1].elements(),
      op.inputs[1].dtype == SY_DTYPE_I64, op.outputs[0].dtype == SY_DTYPE_BF16, ctx);
}

}  // namespace sy::cpu
