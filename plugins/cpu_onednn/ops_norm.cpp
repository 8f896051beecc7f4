// rms_norm (y = x / sqrt(mean(x²) + eps) · (w + weight_offset)) and layer_norm
// (y = (x − mean) / sqrt(var + eps) · w + b) over the last axis. Row statistics are
// accumulated in double; y may be x.
#include <cmath>

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

template <typename T>
class RmsNormKernel final : public CpuKernel {
 public:
  RmsNormKernel(NormShape s, float offset, const CpuContext& ctx)
      : s_(s), offset_(offset), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const T* x = data_of<const T>(in[0]);
    const T* w = data_of<const T>(in[1]);
    T* y = data_of<T>(out[0]);
    const int64_t h = s_.h;
    const double eps = s_.eps;
    const float offset = offset_;
    parallel_for(ctx_, s_.rows, 2 * h, [=](int64_t row) {
      const T* xr = x + row * h;
      T* yr = y + row * h;
      double ss = 0.0;
#pragma omp simd reduction(+ : ss)
      for (int64_t i = 0; i < h; ++i) {
        double v = to_f32(xr[i]);
        ss += v * v;
      }
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(h) + eps));
      for (int64_t i = 0; i < h; ++i)
        yr[i] = from_f32<T>(to_f32(xr[i]) * inv * (to_f32(w[i]) + offset));
    });
  }

 private:
  NormShape s_;
  float offset_;
  CpuContext ctx_;
};

template <typename T>
class LayerNormKernel final : public CpuKernel {
 public:
  LayerNormKernel(NormShape s, const CpuContext& ctx) : s_(s), ctx_(ctx) {}
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const T* x = data_of<const T>(in[0]);
    const T* w = data_of<const T>(in[1]);
    const T* b = data_of<const T>(in[2]);
    T* y = data_of<T>(out[0]);
    const int64_t h = s_.h;
    const double eps = s_.eps;
    parallel_for(ctx_, s_.rows, 3 * h, [=](int64_t row) {
      const T* xr = x + row * h;
      T* yr = y + row * h;
      double sum = 0.0;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = 0; i < h; ++i) sum += to_f32(xr[i]);
      const double mean = sum / static_cast<double>(h);
      double var = 0.0;
#pragma omp simd reduction(+ : var)
      for (int64_t i = 0; i < h; ++i) {
        double d = to_f32(xr[i]) - mean;
        var += d * d;
      }
      const float inv = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(h) + eps));
      const float m = static_cast<float>(mean);
      for (int64_t i = 0; i < h; ++i)
        yr[i] = from_f32<T>((to_f32(xr[i]) - m) * inv * to_f32(w[i]) + to_f32(b[i]));
    });
  }

 private:
  NormShape s_;
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_rms_norm(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "rms_norm");
  float offset = static_cast<float>(op.float_attr(SY_ATTR_WEIGHT_OFFSET, 0.0));
  return make_for_dtype<RmsNormKernel>(op.inputs[0].dtype, norm_shape(op, 1e-6), offset, ctx);
}

std::unique_ptr<CpuKernel> make_layer_norm(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "layer_norm");
  return make_for_dtype<LayerNormKernel>(op.inputs[0].dtype, norm_shape(op, 1e-5), ctx);
}

}  // namespace sy::cpu
