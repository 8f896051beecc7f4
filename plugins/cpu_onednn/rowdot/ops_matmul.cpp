// matmul: c [..., M, N] = a [..., M, K] · b, with b [N, K] under transpose_b (Hugging Face
// linear weights: every projection a model's graph has) or [K, N]. a and c are views: K and N
// come from b, M = a's elements / K (leading dimensions fold into M), and M is this execute's
// (varlen: up to the prepared bound).
//
// b [N, K] runs rowdot.hpp's kernels for the active tier, for every weight dtype (f32, bf16,
// block-quantized) and every M: batch-invariant, so a row of c is bit-identical whether it is one
// decode token or a row of a batch or a prefill. The N rows are split over the threads in equal
// ranges of whole tiles; each element is computed by one thread.
//
// b [K, N] (no importer emits it) runs oneDNN's matmul, one primitive per M seen (made on first
// use, then reused), on an engine and stream the kernel owns. bf16 runs natively where oneDNN has
// an optimised bf16 matmul for this CPU; elsewhere the kernel converts to f32, multiplies with
// the f32 primitive and rounds the result. Its rows are not batch-invariant (oneDNN chooses its
// blocking by M).
#include <omp.h>

#include <dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernel_factories.hpp"
#include "ops_common.hpp"
#include "rowdot/rowdot.hpp"
#include "rowdot/rowdot_q8.hpp"
#include "switchyard/envelope_check.h"
#include "tier/tier_scratch.hpp"

namespace sy::cpu {
namespace {

using dnnl::memory;

// columns(n0, n1) over [0, N) split across up to `threads` OpenMP threads in ranges of whole
// units (one thread when `work` is small). Each column is computed by one thread, so the result
// does not depend on the split.
template <typename F>
void split_columns(int64_t work, int64_t N, int64_t unit, int threads, F&& columns) {
  if (work < kParallelWork) threads = 1;
  if (threads == 1) return columns(int64_t{0}, N);
  const int64_t units = (N + unit - 1) / unit;
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t n0 = std::min(N, units * t / nt * unit),
                  n1 = std::min(N, units * (t + 1) / nt * unit);
    if (n1 > n0) columns(n0, n1);
  }
}

class MatmulKernel final : public CpuKernel {
 public:
  MatmulKernel(int64_t m, int64_t k, int64_t n, bool bf16, const CpuContext& ctx)
      : k_(k),
        n_(n),
        bf16_(bf16),
        ctx_(ctx),
        engine_(dnnl::engine::kind::cpu, 0),
        stream_(engine_) {
    convert_ = bf16 && !native_bf16(m);
    if (convert_) {
      a32_.resize(static_cast<size_t>(m * k));
      b32_.resize(static_cast<size_t>(k * n));
      c32_.resize(static_cast<size_t>(m * n));
    }
    shape(m);  // the prepared bound's primitive, and an error now rather than at run time
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    omp_set_num_threads(ctx_.num_threads);  // oneDNN's OpenMP team for this thread
    const int64_t m = elements_of(in[0]) / k_;
    Shape& p = shape(m);
    if (!convert_) {
      p.a.set_data_handle(data_of<void>(in[0]));
      p.b.set_data_handle(data_of<void>(in[1]));
      p.c.set_data_handle(data_of<void>(out[0]));
      execute(p);
      return;
    }
    widen(data_of<const bf16_bits>(in[0]), a32_.data(), m * k_);
    widen(data_of<const bf16_bits>(in[1]), b32_.data(), k_ * n_);
    p.a.set_data_handle(a32_.data());
    p.b.set_data_handle(b32_.data());
    p.c.set_data_handle(c32_.data());
    execute(p);
    const float* c32 = c32_.data();
    bf16_bits* c = data_of<bf16_bits>(out[0]);
    parallel_chunks(ctx_, m * n_, [=](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) c[i] = from_f32<bf16_bits>(c32[i]);
    });
  }

 private:
  struct Shape {
    int64_t m;
    dnnl::matmul primitive;
    memory a, b, c;
    std::vector<dnnl_exec_arg_t> args;
  };

  // The primitive for m rows in `dt`; nullopt where oneDNN has none (e.g. bf16 on a CPU without
  // AVX-512).
  std::optional<dnnl::matmul::primitive_desc> describe(int64_t m, memory::data_type dt) const {
    memory::desc a({m, k_}, dt, memory::dims{k_, 1});
    memory::desc b({k_, n_}, dt, memory::dims{n_, 1});
    memory::desc c({m, n_}, dt, memory::dims{n_, 1});
    try {
      return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine_);
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
  }

  bool native_bf16(int64_t m) const {
    auto pd = describe(m, memory::data_type::bf16);
    return pd && std::string(pd->impl_info_str()).find("ref") == std::string::npos;
  }

  Shape& shape(int64_t m) {
    for (Shape& s : shapes_)
      if (s.m == m) return s;
    const auto dt = bf16_ && !convert_ ? memory::data_type::bf16 : memory::data_type::f32;
    std::optional<dnnl::matmul::primitive_desc> pd = describe(m, dt);
    if (!pd)
      throw sy::edge::StatusError(SY_STATUS_INTERNAL,
                                  "oneDNN has no matmul for M=" + std::to_string(m) +
                                      ", K=" + std::to_string(k_) + ", N=" + std::to_string(n_));
    Shape s{m,
            dnnl::matmul(*pd),
            memory(pd->src_desc(), engine_, DNNL_MEMORY_NONE),
            memory(pd->weights_desc(), engine_, DNNL_MEMORY_NONE),
            memory(pd->dst_desc(), engine_, DNNL_MEMORY_NONE),
            {}};
    // The C API with a fixed argument array: the C++ execute() builds a vector per call.
    s.args = {{DNNL_ARG_SRC, s.a.get()}, {DNNL_ARG_WEIGHTS, s.b.get()}, {DNNL_ARG_DST, s.c.get()}};
    shapes_.push_back(std::move(s));
    return shapes_.back();
  }

  void widen(const bf16_bits* x, float* y, int64_t n) const {
    parallel_chunks(ctx_, n, [=](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) y[i] = to_f32(x[i]);
    });
  }

  void execute(Shape& s) {
    dnnl_status_t st =
        dnnl_primitive_execute(s.primitive.get(), stream_.get(), int(s.args.size()), s.args.data());
    if (st == dnnl_success) st = dnnl_stream_wait(stream_.get());
    if (st != dnnl_success)
      throw sy::edge::StatusError(SY_STATUS_INTERNAL,
                                  "oneDNN matmul failed with status " + std::to_string(int(st)));
  }

  int64_t k_, n_;
  bool bf16_, convert_ = false;
  CpuContext ctx_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<Shape> shapes_;           // std::vector keeps Shape's memory handles valid on growth
  std::vector<float> a32_, b32_, c32_;  // the f32 fallback's operands
};

// c = a · bᵀ for b [N, K] of any weight dtype (rowdot.hpp).
class RowdotKernel final : public CpuKernel {
 public:
  RowdotKernel(int64_t m, int64_t k, int64_t n, sy_dtype wtype, bool bf16, const CpuContext& ctx)
      : tier_(rowdot_tier(active_tier())),
        ctx_(ctx),
        widen_(bf16 && !tier_.reads_bf16_x(wtype, bf16)),
        x32_(widen_ ? size_t(m * k) : 0) {
    args_.wtype = wtype;
    args_.y_bf16 = bf16;
    args_.K = k;
    args_.N = n;
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    RowdotArgs a = args_;
    a.M = elements_of(in[0]) / a.K;
    a.w = data_of<const void>(in[1]);
    a.y = data_of<void>(out[0]);
    if (widen_) {
      const bf16_bits* x = data_of<const bf16_bits>(in[0]);
      float* xf = x32_.data();
      parallel_chunks(ctx_, a.M * a.K, [=](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) xf[i] = to_f32(x[i]);
      });
      a.xf = xf;
    } else if (a.y_bf16) {
      a.xb = data_of<const uint16_t>(in[0]);
    } else {
      a.xf = data_of<const float>(in[0]);
    }
    rowdot_run(tier_, a, ctx_.num_threads);
  }

 private:
  const RowdotTier& tier_;
  CpuContext ctx_;
  RowdotArgs args_{};
  bool widen_;
  std::vector<float> x32_;  // bf16 x widened (tiers that read f32 x)
};

// c = a · bᵀ with a quantized to 16-bit blocks first (rowdot_q8.hpp: the activation_q16
// numerics, which the planner chooses under --numerics auto, the default, and fast).
class RowdotQ8Kernel final : public CpuKernel {
 public:
  RowdotQ8Kernel(int64_t k, int64_t n, sy_dtype wtype, uint32_t layout, bool bf16,
                 const CpuContext& ctx)
      : tier_(rowdot_q8_tier(active_tier())), ctx_(ctx) {
    args_.wtype = wtype;
    args_.layout = layout;  // the check admitted only the layout q16_weight_layout names
    args_.y_bf16 = bf16;
    args_.K = k;
    args_.N = n;
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    RowdotQ8Args a = args_;
    a.M = elements_of(in[0]) / a.K;
    a.w = data_of<const void>(in[1]);
    a.y = data_of<void>(out[0]);
    // The calling thread's scratch, shared by every matmul_q16 kernel it runs: one buffer per
    // kernel, sized for its prepared bound, tripled the resident memory of a quantized model.
    Q16Block* xq = static_cast<Q16Block*>(
        tier_scratch(ScratchSlot::q16_x, size_t(a.M * (a.K / 32)) * sizeof(Q16Block)));
    a.xq = xq;
    const float* xf = a.y_bf16 ? nullptr : data_of<const float>(in[0]);
    const uint16_t* xb = a.y_bf16 ? data_of<const uint16_t>(in[0]) : nullptr;
    const RowdotQ8Tier& tier = tier_;
    parallel_for(ctx_, a.M, a.K, [&](int64_t m) { tier.quantize(xf, xb, a.K, m, m + 1, xq); });
    if (tier.tile_x && a.M >= tier.tile_min_rows) {
      void* xt = tier_scratch(ScratchSlot::q16_tiles, size_t(q16_tile_x_bytes(a.M, a.K)));
      const int64_t tiles = (a.M + 15) / 16;
      parallel_for(ctx_, tiles, 16 * a.K, [&](int64_t t) { tier.tile_x(a, t, t + 1, xt); });
      a.xt = xt;
    }
    constexpr int64_t kUnit = 16;  // weight rows per share: the amx form's tile
    split_columns(a.M * a.N * a.K, a.N, kUnit, ctx_.num_threads,
                  [&](int64_t n0, int64_t n1) { tier.columns(a, n0, n1); });
  }

 private:
  const RowdotQ8Tier& tier_;
  CpuContext ctx_;
  RowdotQ8Args args_{};
};

}  // namespace

void rowdot_run(const RowdotTier& tier, const RowdotArgs& a, int threads) {
  split_columns(a.M * a.N * a.K, a.N, tier.row_multiple, threads,
                [&](int64_t n0, int64_t n1) { tier.columns(a, n0, n1); });
}

uint64_t matmul_workspace_bytes(const sy_op_desc* op) {
  if (op->num_inputs < 2 || !op->inputs[0] || !op->inputs[1] || op->inputs[1]->ndim != 2) return 0;
  if (op->inputs[0]->dtype != SY_DTYPE_BF16) return 0;
  const int64_t* b = op->inputs[1]->shape;
  const bool transpose_b = sy_op_int_attr(op, SY_ATTR_TRANSPOSE_B, 0) == 1;
  if (!transpose_b || b[1] <= 0) return 0;  // oneDNN's f32 fallback is decided at prepare
  if (rowdot_tier(active_tier()).reads_bf16_x(op->inputs[1]->dtype, true)) return 0;
  int64_t elements = 1;
  for (int i = 0; i < op->inputs[0]->ndim; ++i) elements *= op->inputs[0]->shape[i];
  return uint64_t(elements) * sizeof(float);  // x widened
}

std::unique_ptr<CpuKernel> make_matmul_q16(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "matmul_q16");
  const auto& b = op.inputs[1].shape;  // [N, K]: the envelope admits block-quantized b only
  return std::make_unique<RowdotQ8Kernel>(b[1], b[0], op.inputs[1].dtype, op.inputs[1].layout,
                                          op.inputs[0].dtype == SY_DTYPE_BF16, ctx);
}

std::unique_ptr<CpuKernel> make_matmul(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "matmul");
  const auto& b = op.inputs[1].shape;
  // The contract: block-quantized b is always [N, K] under transpose_b.
  const bool transpose_b = op.int_attr(SY_ATTR_TRANSPOSE_B, 0) == 1;
  const int64_t k = transpose_b ? b[1] : b[0];
  const int64_t n = transpose_b ? b[0] : b[1];
  const int64_t m = op.inputs[0].elements() / k;
  const bool bf16 = op.inputs[0].dtype == SY_DTYPE_BF16;
  if (transpose_b) return std::make_unique<RowdotKernel>(m, k, n, op.inputs[1].dtype, bf16, ctx);
  return std::make_unique<MatmulKernel>(m, k, n, bf16, ctx);
}

}  // namespace sy::cpu
