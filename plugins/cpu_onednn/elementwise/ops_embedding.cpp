// embedding: rows[..., :] = table[ids[...], :]. Every id is checked against [0, V) before
// anything is written; one outside is INVALID_ARGUMENT naming it.
#include <cstring>
#include <string>

#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

class EmbeddingKernel final : public CpuKernel {
 public:
  EmbeddingKernel(int64_t row_bytes, bool ids_i64, const CpuContext& ctx)
      : row_bytes_(row_bytes), ids_i64_(ids_i64), ctx_(ctx) {}

  // The table's rows may vary too: the step graph gathers the rows whose logits it computes
  // from the step's hidden states.
  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const int64_t vocab = in[0]->shape[0], count = elements_of(in[1]);
    const char* table = data_of<const char>(in[0]);
    const void* ids = data_of<const void>(in[1]);
    char* rows = data_of<char>(out[0]);
    const bool i64 = ids_i64_;
    auto id_at = [ids, i64](int64_t i) {
      return i64 ? static_cast<const int64_t*>(ids)[i]
                 : static_cast<int64_t>(static_cast<const int32_t*>(ids)[i]);
    };
    for (int64_t i = 0; i < count; ++i) {
      int64_t id = id_at(i);
      if (id < 0 || id >= vocab)
        throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                    "embedding: id " + std::to_string(id) + " at position " +
                                        std::to_string(i) + " is outside the table's [0, " +
                                        std::to_string(vocab) + ")");
    }
    const int64_t row_bytes = row_bytes_;
    parallel_for(ctx_, count, row_bytes / 4, [=](int64_t i) {
      std::memcpy(rows + i * row_bytes, table + id_at(i) * row_bytes, row_bytes);
    });
  }

 private:
  int64_t row_bytes_;
  bool ids_i64_;
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_embedding(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "embedding");
  if (sy_dtype_is_blocked(op.inputs[0].dtype)) return make_quant_embedding(op, ctx);
  const auto& table = op.inputs[0];
  int64_t row_bytes = table.shape[1] * static_cast<int64_t>(sy_dtype_size(table.dtype));
  return std::make_unique<EmbeddingKernel>(row_bytes, op.inputs[1].dtype == SY_DTYPE_I64, ctx);
}

}  // namespace sy::cpu
