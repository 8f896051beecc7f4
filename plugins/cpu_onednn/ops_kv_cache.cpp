// kv_cache_append: rows [B, T, Hkv, D] are written in place into the output cache
// [B, C, Hkv, D] at rows position … position+T−1, position read from its i64 [1] tensor at
// run time, so one prepared kernel serves every step. The rest of the cache is untouched.
// A position outside [0, C − T] is INVALID_ARGUMENT and writes nothing.
#include <cstring>
#include <string>

#include "kernel_factories.hpp"
#include "ops_common.hpp"

namespace sy::cpu {
namespace {

class KvCacheAppendKernel final : public CpuKernel {
 public:
  KvCacheAppendKernel(int64_t batch, int64_t t, int64_t capacity, int64_t row_bytes,
                      const CpuContext& ctx)
      : batch_(batch), t_(t), capacity_(capacity), row_bytes_(row_bytes), ctx_(ctx) {}

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const char* rows = data_of<const char>(in[0]);
    const int64_t position = *data_of<const int64_t>(in[1]);
    char* cache = data_of<char>(out[0]);
    if (position < 0 || position > capacity_ - t_)
      throw sy::edge::StatusError(
          SY_STATUS_INVALID_ARGUMENT,
          "kv_cache_append: position " + std::to_string(position) + " with " + std::to_string(t_) +
              " new rows " +
              (position < 0
                   ? std::string("is negative")
                   : "writes rows up to " + std::to_string(position + t_ - 1) +
                         ", past the cache's capacity of " + std::to_string(capacity_) + " rows") +
              " (valid positions: 0 to " + std::to_string(capacity_ - t_) + ")");
    const int64_t t = t_, capacity = capacity_, row_bytes = row_bytes_;
    parallel_for(ctx_, batch_ * t, row_bytes / 4, [=](int64_t i) {
      const int64_t b = i / t, r = i % t;
      std::memcpy(cache + (b * capacity + position + r) * row_bytes, rows + i * row_bytes,
                  row_bytes);
    });
  }

 private:
  int64_t batch_, t_, capacity_, row_bytes_;
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_kv_cache_append(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "kv_cache_append");
  const auto& rows = op.inputs[0];
  int64_t row_bytes =
      rows.shape[2] * rows.shape[3] * static_cast<int64_t>(sy_dtype_size(rows.dtype));
  return std::make_unique<KvCacheAppendKernel>(rows.shape[0], rows.shape[1], op.outputs[0].shape[1],
                                               row_bytes, ctx);
}

}  // namespace sy::cpu
