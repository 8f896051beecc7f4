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
  explicit SinksFromLseKernel(const CpuContext& ctx) : ctx_(ctx) {}

  void run(const DLTensor* const* inputs, const DLTensor* const* outputs) override {
    const float* lse = data_of<const float>(inputs[0]);
    const float* sinks = data_of<const float>(inputs[1]);
    T* o = data_of<T>(outputs[0]);
    const int64_t* shape = outputs[0]->shape;  // this execute's [B, S, H, D]
    const int64_t S = shape[1], H = shape[2], D = shape[3];
    parallel_for(ctx_, shape[0] * S, H * D, [&](int64_t bs) {
      const int64_t b = bs / S, s = bs % S;
      for (int64_t h = 0; h < H; ++h) {
        const double l = lse[(b * H + h) * S + s];
        const float w = static_cast<float>(1.0 / (1.0 + std::exp(double(sinks[h]) - l)));
        T* row = o + (bs * H + h) * D;
        for (int64_t d = 0; d < D; ++d) row[d] = from_f32<T>(to_f32(row[d]) * w);
      }
    });
  }

 private:
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_sinks_from_lse(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "sinks_from_lse");
  return make_for_dtype<SinksFromLseKernel>(op.outputs[0].dtype, ctx);
}

}  // namespace sy::cpu
