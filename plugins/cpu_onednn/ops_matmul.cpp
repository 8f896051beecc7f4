// matmul on oneDNN: c [..., M, N] = a [..., M, K] · b, with b [K, N], or [N, K] under
// transpose_b (read through a transposed memory descriptor, never copied). a and c are
// views: K and N come from b, M = a's elements / K (so leading dimensions fold into M).
// The primitive is created once, for the prepared shapes, on an engine and stream the
// kernel owns; each run only rebinds the data pointers.
//
// bf16 runs natively (f32 accumulation) where oneDNN has an optimised bf16 matmul for this
// CPU. Where it has none, or only its reference implementation (CPUs before AVX-512), the
// kernel instead converts to f32, multiplies with the f32 primitive and rounds the result
// to bf16.
//
// Decode-sized problems (M <= kGemvMaxRows, b stored [N, K]) skip oneDNN: its M=1 bf16 matmul
// ran at a fraction of the memory bandwidth. They run gemv.hpp's kernels for the active tier,
// one parallel region per call, the N rows split into equal contiguous ranges.
#include <omp.h>

#include <dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gemv.hpp"
#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

using dnnl::memory;

class MatmulKernel final : public CpuKernel {
 public:
  MatmulKernel(int64_t m, int64_t k, int64_t n, bool transpose_b, bool bf16, const CpuContext& ctx)
      : m_(m), k_(k), n_(n), ctx_(ctx), engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    std::optional<dnnl::matmul::primitive_desc> pd;
    if (bf16) {
      pd = describe(transpose_b, memory::data_type::bf16);
      if (pd && std::string(pd->impl_info_str()).find("ref") != std::string::npos) pd.reset();
      convert_ = !pd;
    }
    if (!pd) pd = describe(transpose_b, memory::data_type::f32);
    if (!pd)
      throw sy::edge::StatusError(SY_STATUS_INTERNAL,
                                  "oneDNN has no f32 matmul for M=" + std::to_string(m) +
                                      ", K=" + std::to_string(k) + ", N=" + std::to_string(n));
    if (convert_) {
      a32_.resize(static_cast<size_t>(m * k));
      b32_.resize(static_cast<size_t>(k * n));
      c32_.resize(static_cast<size_t>(m * n));
    }
    primitive_ = dnnl::matmul(*pd);
    a_ = memory(pd->src_desc(), engine_, DNNL_MEMORY_NONE);
    b_ = memory(pd->weights_desc(), engine_, DNNL_MEMORY_NONE);
    c_ = memory(pd->dst_desc(), engine_, DNNL_MEMORY_NONE);
    // The C API with a fixed argument array: the C++ execute() builds a vector per call, and
    // a decode step must not allocate.
    args_ = {{DNNL_ARG_SRC, a_.get()}, {DNNL_ARG_WEIGHTS, b_.get()}, {DNNL_ARG_DST, c_.get()}};
    if (convert_) {
      a_.set_data_handle(a32_.data());
      b_.set_data_handle(b32_.data());
      c_.set_data_handle(c32_.data());
    }
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    omp_set_num_threads(ctx_.num_threads);  // oneDNN's OpenMP team for this thread
    if (!convert_) {
      a_.set_data_handle(data_of<void>(in[0]));
      b_.set_data_handle(data_of<void>(in[1]));
      c_.set_data_handle(data_of<void>(out[0]));
      execute();
      return;
    }
    widen(data_of<const bf16_bits>(in[0]), a32_.data(), m_ * k_);
    widen(data_of<const bf16_bits>(in[1]), b32_.data(), k_ * n_);
    execute();
    const float* c32 = c32_.data();
    bf16_bits* c = data_of<bf16_bits>(out[0]);
    parallel_chunks(ctx_, m_ * n_, [=](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) c[i] = from_f32<bf16_bits>(c32[i]);
    });
  }

 private:
  // The primitive for these shapes in `dt`; nullopt where oneDNN has none (e.g. bf16 on
  // a CPU without AVX-512).
  std::optional<dnnl::matmul::primitive_desc> describe(bool transpose_b,
                                                       memory::data_type dt) const {
    memory::desc a({m_, k_}, dt, memory::dims{k_, 1});
    // b as logical [K, N]: row-major [K, N] has strides {N, 1}; [N, K] read transposed, {1, K}.
    memory::desc b({k_, n_}, dt, transpose_b ? memory::dims{1, k_} : memory::dims{n_, 1});
    memory::desc c({m_, n_}, dt, memory::dims{n_, 1});
    try {
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine_);
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  }

  void widen(const bf16_bits* x, float* y, int64_t n) const {
    parallel_chunks(ctx_, n, [=](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) y[i] = to_f32(x[i]);
    });
  }

  int64_t m_, k_, n_;
  CpuContext ctx_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul primitive_;
  memory a_, b_, c_;
  std::vector<dnnl_exec_arg_t> args_;

  void execute() {
    dnnl_status_t st =
        dnnl_primitive_execute(primitive_.get(), stream_.get(), int(args_.size()), args_.data());
    if (st == dnnl_success) st = dnnl_stream_wait(stream_.get());
    if (st != dnnl_success)
      throw sy::edge::StatusError(SY_STATUS_INTERNAL,
                                  "oneDNN matmul failed with status " + std::to_string(int(st)));
  }
  bool convert_ = false;
  std::vector<float> a32_, b32_, c32_;  // the f32 fallback's operands
};

class GemvKernel final : public CpuKernel {
 public:
  GemvKernel(int64_t m, int64_t k, int64_t n, bool bf16, const CpuContext& ctx)
      : tier_(gemv_tier(active_tier())),
        ctx_(ctx),
        x32_(bf16 && tier_.widen_x ? size_t(m * k) : 0) {
    args_.M = int(m);
    args_.K = k;
    args_.N = n;
    args_.bf16 = bf16;
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    GemvArgs a = args_;
    a.w = data_of<const void>(in[1]);
    a.y = data_of<void>(out[0]);
    if (a.bf16) {
      a.xb = data_of<const uint16_t>(in[0]);
      if (tier_.widen_x) tier_.widen_x(a.xb, x32_.data(), a.M * a.K, a.K);
      a.xf = x32_.data();
    } else {
      a.xf = data_of<const float>(in[0]);
    }
    const int threads = a.N * a.K >= kParallelWork ? ctx_.num_threads : 1;
    if (threads == 1) return tier_.rows(a, 0, a.N);
    // Equal ranges of whole 8-row blocks: the row kernels' widest tile.
    const int64_t blocks = (a.N + 7) / 8;
#pragma omp parallel num_threads(threads)
    {
      int t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t n0 = std::min(a.N, blocks * t / nt * 8),
              n1 = std::min(a.N, blocks * (t + 1) / nt * 8);
      if (n1 > n0) tier_.rows(a, n0, n1);
    }
  }

 private:
  const GemvTier& tier_;
  CpuContext ctx_;
  GemvArgs args_{};
  std::vector<float> x32_;  // bf16 x widened, in the tier's lane order
};

}  // namespace

uint64_t matmul_workspace_bytes(const sy_op_desc* op) {
  if (op->num_inputs < 2 || !op->inputs[0] || !op->inputs[1] || op->inputs[1]->ndim != 2) return 0;
  if (!sy_dtype_is_blocked(op->inputs[1]->dtype)) return 0;  // GEMV/oneDNN: nothing held
  const int64_t* b = op->inputs[1]->shape;                   // quantized weights are always [N, K]
  int64_t elements = 1;
  for (int i = 0; i < op->inputs[0]->ndim; ++i) elements *= op->inputs[0]->shape[i];
  return b[1] > 0 ? quant_matmul_workspace_bytes(elements / b[1], b[1], b[0],
                                                 op->inputs[0]->dtype == SY_DTYPE_BF16)
                  : 0;
}

std::unique_ptr<CpuKernel> make_matmul(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "matmul");
  const auto& b = op.inputs[1].shape;
  bool transpose_b = op.int_attr(SY_ATTR_TRANSPOSE_B, 0) == 1;
  int64_t k = transpose_b ? b[1] : b[0];
  int64_t n = transpose_b ? b[0] : b[1];
  int64_t m = op.inputs[0].elements() / k;
  const bool bf16 = op.inputs[0].dtype == SY_DTYPE_BF16;
  if (sy_dtype_is_blocked(op.inputs[1].dtype))  // the contract: transpose_b, whole blocks
    return make_quant_matmul(m, k, n, op.inputs[1].dtype, bf16, ctx);
  if (transpose_b && m <= kGemvMaxRows) return std::make_unique<GemvKernel>(m, k, n, bf16, ctx);
  return std::make_unique<MatmulKernel>(m, k, n, transpose_b, op.inputs[0].dtype == SY_DTYPE_BF16,
                                        ctx);
}

}  // namespace sy::cpu
