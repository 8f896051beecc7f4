// rms_norm (y = x / sqrt(mean(x²) + eps) · (w + weight_offset)) and layer_norm
// (y = (x − mean) / sqrt(var + eps) · w + b) over the last axis, by the active tier's loops
// (elementwise_tier.hpp). Row statistics are accumulated in double; y may be x.
#include "elementwise/elementwise_tier.hpp"

#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

struct NormShape {
  int64_t rows, h;
  double eps;
};

NormShape norm_shape(const sy::edge::OpCopy& op, double default_eps) {
  int64_t h = op.inputs[0].shape.back();
  return {op.inputs[0].elements() / h, h, op.float_attr(SY_ATTR_EPS, default_eps)};
}

class RmsNormKernel final : public CpuKernel {
 public:
  RmsNormKernel(bool bf16, NormShape s, float offset, const CpuContext& ctx)
      : loop_(elementwise_tier(active_tier()).rms_norm[bf16]), s_(s), offset_(offset), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const void* x = data_of<const void>(in[0]);
    const void* w = data_of<const void>(in[1]);
    void* y = data_of<void>(out[0]);
    NormShape s = s_;
    s.rows = elements_of(in[0]) / s.h;
    parallel_for(ctx_, s.rows, 2 * s.h, [=, f = loop_, offset = offset_](int64_t row) {
      f(x, w, y, s.h, s.eps, offset, row, row + 1);
    });
  }

 private:
  RmsNormLoop loop_;
  NormShape s_;
  float offset_;
  CpuContext ctx_;
};

class LayerNormKernel final : public CpuKernel {
 public:
  LayerNormKernel(bool bf16, NormShape s, const CpuContext& ctx)
      : loop_(elementwise_tier(active_tier()).layer_norm[bf16]), s_(s), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const void* x = data_of<const void>(in[0]);
    const void* w = data_of<const void>(in[1]);
    const void* b = data_of<const void>(in[2]);
    void* y = data_of<void>(out[0]);
    NormShape s = s_;
    s.rows = elements_of(in[0]) / s.h;
    parallel_for(ctx_, s.rows, 3 * s.h,
                 [=, f = loop_](int64_t row) { f(x, w, b, y, s.h, s.eps, row, row + 1); });
  }

 private:
  LayerNormLoop loop_;
  NormShape s_;
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_rms_norm(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "rms_norm");
  float offset = static_cast<float>(op.float_attr(SY_ATTR_WEIGHT_OFFSET, 0.0));
  return std::make_unique<RmsNormKernel>(op.inputs[0].dtype == SY_DTYPE_BF16, norm_shape(op, 1e-6),
                                         offset, ctx);
}

std::unique_ptr<CpuKernel> make_layer_norm(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "layer_norm");
  return std::make_unique<LayerNormKernel>(op.inputs[0].dtype == SY_DTYPE_BF16,
                                           norm_shape(op, 1e-5), ctx);
}

}  // namespace sy::cpu
