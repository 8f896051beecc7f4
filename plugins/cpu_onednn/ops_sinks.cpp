// sinks_from_lse: attention sinks applied after an attention that ran without them and returned
// its LSE (docs/operators.md). Per row (b, s, h): o *= e^lse / (e^lse + e^sink), computed as
// 1 / (1 + e^(sink - lse)) in double, so a row without keys (lse = -inf) keeps o = 0 and a
// sink far above the scores cannot overflow.
#include <cmath>

#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

template <typename T>
class SinksFromLseKernel final : public CpuKernel {
 public:
  SinksFromLseKernel(const std::vector<int64_t>& o_shape, const CpuContext& ctx)
      : B_(o_shape[0]), S_(o_shape[1]), H_(o_shape[2]), D_(o_shape[3]), ctx_(ctx) {}

  void run(const DLTensor* const* inputs, const DLTensor* const* outputs) override {
    const float* lse = data_of<const float>(inputs[0]);
    const float* sinks = data_of<const float>(inputs[1]);
    T* o = data_of<T>(outputs[0]);
    parallel_for(ctx_, B_ * S_, H_ * D_, [&](int64_t bs) {
      const int64_t b = bs / S_, s = bs % S_;
      for (int64_t h = 0; h < H_; ++h) {
        const double l = lse[(b * H_ + h) * S_ + s];
        const float w = static_cast<float>(1.0 / (1.0 + std::exp(double(sinks[h]) - l)));
        T* row = o + (bs * H_ + h) * D_;
        for (int64_t d = 0; d < D_; ++d) row[d] = from_f32<T>(to_f32(row[d]) * w);
      }
    });
  }

 private:
  int64_t B_, S_, H_, D_;
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_sinks_from_lse(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "sinks_from_lse");
  return make_for_dtype<SinksFromLseKernel>(op.outputs[0].dtype, op.outputs[0].shape, ctx);
}

}  // namespace sy::cpu
