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

// The paged form: rows [1, T, Hkv, D] written at the pool rows slot_mapping names (block ·
// BS + offset, vLLM's slot mapping). Every slot is checked against this execute's pool before
// any row is written.
class PagedAppendKernel final : public CpuKernel {
 public:
  PagedAppendKernel(int64_t row_bytes, const CpuContext& ctx) : row_bytes_(row_bytes), ctx_(ctx) {}

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    const char* rows = data_of<const char>(in[0]);
    const int64_t* slots = data_of<const int64_t>(in[1]);
    char* pool = data_of<char>(out[0]);
    const int64_t T = in[0]->shape[1], capacity = out[0]->shape[0] * out[0]->shape[1];
    for (int64_t t = 0; t < T; ++t)
      if (slots[t] < 0 || slots[t] >= capacity)
        throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                    "kv_cache_append: slot " + std::to_string(slots[t]) +
                                        " of row " + std::to_string(t) +
                                        " is outside the pool's [0, " + std::to_string(capacity) +
                                        "); nothing was written");
    const int64_t row_bytes = row_bytes_;
    parallel_for(ctx_, T, row_bytes / 4, [=](int64_t t) {
      std::memcpy(pool + slots[t] * row_bytes, rows + t * row_bytes, size_t(row_bytes));
    });
  }

 private:
  int64_t row_bytes_;
  CpuContext ctx_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_kv_cache_append(const sy::edge::OpCopy& op, const CpuContext& ctx) {
  sy::edge::enforce_contract(op, "kv_cache_append");
  const auto& rows = op.inputs[0];
  if (op.int_attr(SY_ATTR_PAGED, 0))
    return std::make_unique<PagedAppendKernel>(
        rows.shape[2] * rows.shape[3] * static_cast<int64_t>(sy_dtype_size(rows.dtype)), ctx);
  int64_t row_bytes =
      rows.shape[2] * rows.shape[3] * static_cast<int64_t>(sy_dtype_size(rows.dtype));
  return std::make_unique<KvCacheAppendKernel>(rows.shape[0], rows.shape[1], op.outputs[0].shape[1],
                                               row_bytes, ctx);
}

}  // namespace sy::cpu
