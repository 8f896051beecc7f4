// slice: y = x[..., start : start + n, ...] along one axis, as outer × (n · inner) bytes copied
// from outer strided runs of x. Any dtype: the bytes are copied, never converted.
#include <cstring>

#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

class SliceKernel final : public CpuKernel {
 public:
  SliceKernel(int64_t outer, int64_t x_run, int64_t y_run, int64_t offset, const CpuContext& ctx)
      : outer_(outer), x_run_(x_run), y_run_(y_run), offset_(offset), ctx_(ctx) {}

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const char* x = data_of<const char>(in[0]);
    char* y = data_of<char>(out[0]);
    const int64_t x_run = x_run_, y_run = y_run_, offset = offset_;
    parallel_for(ctx_, outer_, y_run / 4, [=](int64_t o) {
      std::memcpy(y + o * y_run, x + o * x_run + offset, size_t(y_run));
    });
  }

 private:
  int64_t outer_, x_run_, y_run_, offset_;  // bytes, but outer_
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_slice(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "slice");
  const auto& x = op.inputs[0].shape;
  const size_t axis = size_t(op.int_attr(SY_ATTR_AXIS, 0));
  const int64_t start = op.int_attr(SY_ATTR_START, 0);
  const int64_t n = op.outputs[0].shape[axis];
  const int64_t inner = product(x, axis + 1, x.size()) * int64_t(sy_dtype_size(op.inputs[0].dtype));
  return std::make_unique<SliceKernel>(product(x, 0, axis), x[axis] * inner, n * inner,
                                       start * inner, ctx);
}

}  // namespace sy::cpu
