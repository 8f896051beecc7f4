// slice: y = x[..., start : start + n, ...] along one axis, as outer × (n · inner) bytes copied
// from outer strided runs of x. Any dtype: the bytes are copied, never converted.
#include <cstring>

#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

// Extents are this execute's (varlen): the runs are recomputed from the tensors each time.
class SliceKernel final : public CpuKernel {
 public:
  SliceKernel(int axis, int64_t start, int64_t element_bytes, const CpuContext& ctx)
      : axis_(axis), start_(start), element_bytes_(element_bytes), ctx_(ctx) {}

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const DLTensor& xt = *in[0];
    int64_t outer = 1, inner = element_bytes_;
    for (int i = 0; i < axis_; ++i) outer *= xt.shape[i];
    for (int i = axis_ + 1; i < xt.ndim; ++i) inner *= xt.shape[i];
    const char* x = data_of<const char>(in[0]);
    char* y = data_of<char>(out[0]);
    const int64_t x_run = xt.shape[axis_] * inner, y_run = out[0]->shape[axis_] * inner,
                  offset = start_ * inner;
    parallel_for(ctx_, outer, y_run / 4, [=](int64_t o) {
      std::memcpy(y + o * y_run, x + o * x_run + offset, size_t(y_run));
    });
  }

 private:
  int axis_;
  int64_t start_, element_bytes_;
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_slice(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "slice");
  return std::make_unique<SliceKernel>(int(op.int_attr(SY_ATTR_AXIS, 0)),
                                       op.int_attr(SY_ATTR_START, 0),
                                       int64_t(sy_dtype_size(op.inputs[0].dtype)), ctx);
}

}  // namespace sy::cpu
