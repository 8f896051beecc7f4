// embedding from a block-quantized table, by the active tier's dequantization (quant_tier.hpp).
// (matmul with block-quantized weights is rowdot.hpp's, in ops_matmul.cpp.)
#include <string>
#include <vector>

#include "elementwise/elementwise_tier.hpp"
#include "kernel_factories.hpp"
#include "ops_common.hpp"
#include "quant/quant_tier.hpp"

namespace sy::cpu {
namespace {

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
    const int64_t count = elements_of(in[1]);  // this execute's ids (varlen: up to count_)
    for (int64_t i = 0; i < count; ++i)
      if (id_at(i) < 0 || id_at(i) >= vocab_)
        throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                    "embedding: id " + std::to_string(id_at(i)) + " at position " +
                                        std::to_string(i) + " is outside the table's [0, " +
                                        std::to_string(vocab_) + ")");
    float* rows = bf16_ ? rows32_.data() : data_of<float>(out[0]);
    const QuantTier& tier = tier_;
    const sy_dtype t = wtype_;
    const int64_t h = h_;
    parallel_for(ctx_, count, h, [=, &tier](int64_t i) {
      tier.dequant_rows(t, table, h, id_at(i), id_at(i) + 1, rows + i * h);
    });
    if (bf16_)
      elementwise_tier(active_tier()).convert[0](rows, data_of<void>(out[0]), 0, count * h);
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

std::unique_ptr<CpuKernel> make_quant_embedding(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  const auto& table = op.inputs[0];
  return std::make_unique<QuantEmbeddingKernel>(
      table.dtype, table.shape[0], table.shape[1], op.inputs[1].elements(),
      op.inputs[1].dtype == SY_DTYPE_I64, op.outputs[0].dtype == SY_DTYPE_BF16, ctx);
}

}  // namespace sy::cpu
