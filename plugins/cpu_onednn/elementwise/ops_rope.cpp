// Rotary position embedding on x [B, S, H, D] with positions [B, S] (i32 or i64) and, for a
// scaled rope, its frequency table inv_freq f32 [R/2], with the math of rope_math.hpp: cos and
// sin are computed once per position and shared by the H heads. y may be x.
#include <vector>

#include "elementwise/elementwise_tier.hpp"
#include "elementwise/rope_math.hpp"
#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

struct RopeShape {
  int64_t rows, heads, d, rotary;  // rows = B·S (prepared: the bound)
  bool interleaved, positions_i64;
  bool table;     // inv_freq comes from input 2
  double factor;  // on cos and sin
};

class RopeKernel final : public CpuKernel {
 public:
  RopeKernel(bool bf16, RopeShape s, std::vector<double> inv_freq, const CpuContext& ctx)
      : rope_head_(elementwise_tier(active_tier()).rope_head[bf16]),
        esize_(bf16 ? 2 : 4),
        s_(s),
        inv_freq_(std::move(inv_freq)),
        ctx_(ctx) {}

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const char* x = data_of<const char>(in[0]);
    const void* positions = data_of<const void>(in[1]);
    char* y = data_of<char>(out[0]);
    RopeShape s = s_;
    s.rows = in[0]->shape[0] * in[0]->shape[1];  // this execute's positions
    const int64_t half = s.rotary / 2;
    if (s.table) rope_table(data_of<const float>(in[2]), inv_freq_);
    const double* inv_freq = inv_freq_.data();
    parallel_for(ctx_, s.rows, s.heads * s.d + 8 * half,
                 [=, rope_head = rope_head_, esize = esize_](int64_t row) {
                   const double pos =
                       s.positions_i64
                           ? static_cast<double>(static_cast<const int64_t*>(positions)[row])
                           : static_cast<double>(static_cast<const int32_t*>(positions)[row]);
                   // The row's cos and sin, used by its heads only: the thread's, not memory
                   // the kernel holds (a table of the bound's rows, per rope op, was 8 MB
                   // resident for SmolLM2 that no plan declared).
                   thread_local std::vector<float> cos_sin;
                   if (cos_sin.size() < size_t(s.rotary)) cos_sin.resize(size_t(s.rotary));
                   float* cs = cos_sin.data();
                   float* sn = cs + half;
                   rope_cos_sin(pos, inv_freq, half, s.factor, cs, sn);
                   for (int64_t h = 0; h < s.heads; ++h) {
                     const size_t at = esize * size_t((row * s.heads + h) * s.d);
                     rope_head(x + at, y + at, s.d, s.rotary, s.interleaved, cs, sn);
                   }
                 });
  }

 private:
  RopeHeadLoop rope_head_;
  size_t esize_;
  RopeShape s_;
  std::vector<double> inv_freq_;
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_rope(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "rope");
  const auto& x = op.inputs[0].shape;
  RopeShape s{};
  s.rows = x[0] * x[1];
  s.heads = x[2];
  s.d = x[3];
  s.rotary = op.int_attr(SY_ATTR_ROTARY_DIM, s.d);
  s.interleaved = op.string_attr(SY_ATTR_ROPE_STYLE, "neox") == "interleaved";
  s.positions_i64 = op.inputs[1].dtype == SY_DTYPE_I64;
  s.table = op.inputs.size() == 3;
  s.factor = op.float_attr(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.0);
  const double theta = op.float_attr(SY_ATTR_ROPE_THETA, 10000.0);
  return std::make_unique<RopeKernel>(op.inputs[0].dtype == SY_DTYPE_BF16, s,
                                      rope_inv_freq(theta, s.rotary), ctx);
}

}  // namespace sy::cpu
