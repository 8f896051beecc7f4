// flash_attention: the kernel object of cuda_flash's flash attention. It checks the problem
// against the device at prepare (grid limits, shared memory), chooses the launch shape once,
// owns the split-KV workspace, and launches flash_kernel.cuh's kernels at execute.
#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "flash_kernel.cuh"

namespace sy::cuda {
namespace {

using flash::FlashParams;
using flash::LaunchShape;

// Above 48 KiB a kernel must opt in to its dynamic shared memory, once per device; done at
// prepare so execute only launches.
template <typename T, int D>
void allow_shared_memory(const LaunchShape& s) {
  auto kernel = s.warps == 1 ? flash::flash_mma_kernel<T, D, 1> : flash::flash_mma_kernel<T, D, 4>;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(s.smem)),
             "cudaFuncSetAttribute(flash_mma_kernel)");
}

template <typename T, int D, int NW>
void launch_main(const FlashParams& p, const LaunchShape& s) {
  dim3 grid(unsigned(s.row_blocks), unsigned(p.B * p.Hkv), unsigned(s.splits));
  flash::flash_mma_kernel<T, D, NW><<<grid, NW * 32, s.smem>>>(p);
  check_cuda(cudaGetLastError(), "flash_mma_kernel");
}

template <typename T, int D>
void launch(const FlashParams& p, const LaunchShape& s) {
  if (s.warps == 1)
    launch_main<T, D, 1>(p, s);
  else
    launch_main<T, D, 4>(p, s);
  if (s.splits > 1) {
    const size_t rows = size_t(p.B) * p.Hq * p.Sq;
    flash::combine_splits<T, D><<<unsigned((rows + 3) / 4), 128>>>(p);
  }
  check_launch("flash_attention");
}

// Calls f(T{}, std::integral_constant<int, D>{}) for the op's dtype and head dim.
template <typename F>
void dispatch(sy_dtype dtype, int d, F&& f) {
  auto with_d = [&](auto t) {
    switch (d) {
      case 64: f(t, std::integral_constant<int, 64>{}); return;
      case 128: f(t, std::integral_constant<int, 128>{}); return;
      case 256: f(t, std::integral_constant<int, 256>{}); return;
      default:
        throw sy::edge::StatusError(SY_STATUS_UNSUPPORTED,
                                    "head dim " + std::to_string(d) + " is not 64, 128 or 256");
    }
  };
  if (dtype == SY_DTYPE_F16)
    with_d(__half{});
  else
    with_d(__nv_bfloat16{});
}

int device_attribute(cudaDeviceAttr attr, int ordinal) {
  int v = 0;
  check_cuda(cudaDeviceGetAttribute(&v, attr, ordinal), "cudaDeviceGetAttribute");
  return v;
}

class FlashAttention final : public CudaKernel {
 public:
  FlashAttention(const sy::edge::OpCopy& op, const CudaContext& ctx) : ctx_(ctx) {
    const auto& q = op.inputs[0].shape;
    const auto& k = op.inputs[1].shape;
    dtype_ = op.inputs[0].dtype;
    d_ = int(q[3]);
    kv_len_input_ = op.int_attr(SY_ATTR_KV_LEN_INPUT, 0) != 0;
    const size_t operands = op.inputs.size() - (kv_len_input_ ? 1 : 0);
    sinks_ = operands > 3;
    lse_ = op.outputs.size() > 1;
    const int64_t G = k[2] > 0 ? q[2] / k[2] : 0;
    if (q[0] * k[2] > 65535)
      throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                  "flash_attention: batch x KV heads is limited to 65535");
    if (q[1] * G > (int64_t(1) << 30) || k[1] > (int64_t(1) << 30))
      throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                  "flash_attention: Sq x (Hq/Hkv) and Skv are limited to 2^30");
    p_.B = int(q[0]);
    p_.Sq = int(q[1]);
    p_.Hq = int(q[2]);
    p_.Skv = int(k[1]);
    p_.Hkv = int(k[2]);
    p_.G = int(G);
    p_.M = int(q[1] * G);
    double scale = op.float_attr(SY_ATTR_SCALE, 0.0);
    p_.scale = float(scale != 0.0 ? scale : 1.0 / std::sqrt(double(d_)));
    p_.softcap = float(op.float_attr(SY_ATTR_SOFTCAP, 0.0));
    p_.causal = op.int_attr(SY_ATTR_CAUSAL, 0) != 0;
    int64_t w = op.int_attr(SY_ATTR_WINDOW_LEFT, -1);
    p_.window = w < 0 ? -1 : int(w > (int64_t(1) << 30) ? (int64_t(1) << 30) : w);
    if (p_.B == 0 || p_.Sq == 0 || p_.Hq == 0) return;

    use_device(ctx_.ordinal);
    const int sms = device_attribute(cudaDevAttrMultiProcessorCount, ctx_.ordinal);
    const int smem_max = device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx_.ordinal);
    dispatch(dtype_, d_, [&](auto t, auto dc) {
      shape_ = flash::launch_shape<decltype(t), decltype(dc)::value>(p_, sms);
    });
    if (shape_.smem > size_t(smem_max))
      throw sy::edge::StatusError(SY_STATUS_UNSUPPORTED,
                                  "flash_attention: needs " + std::to_string(shape_.smem) +
                                      " bytes of shared memory per block, the device allows " +
                                      std::to_string(smem_max));
    dispatch(dtype_, d_, [&](auto t, auto dc) {
      allow_shared_memory<decltype(t), decltype(dc)::value>(shape_);
    });
    p_.splits = shape_.splits;
    if (shape_.splits > 1) {
      const size_t rows = size_t(p_.B) * p_.Hq * p_.Sq;
      workspace_ = std::make_unique<DeviceScratch>(rows * shape_.splits * (d_ + 1) * sizeof(float));
      p_.part_o = workspace_->as<float>();
      p_.part_lse = p_.part_o + rows * shape_.splits * d_;
    }
  }

  void run(const DLTensor* const* in, const DLTensor* const* out) override {
    use_device(ctx_.ordinal);
    FlashParams p = p_;
    p.q = data_of<void>(in[0]);
    p.k = data_of<void>(in[1]);
    p.v = data_of<void>(in[2]);
    p.sinks = sinks_ ? data_of<const float>(in[3]) : nullptr;
    p.kv_len = kv_len_input_ ? data_of<const int64_t>(in[sinks_ ? 4 : 3]) : nullptr;
    p.o = data_of<void>(out[0]);
    p.lse = lse_ ? data_of<float>(out[1]) : nullptr;
    if (p.B == 0 || p.Sq == 0 || p.Hq == 0) return;
    // cp.async moves 16-byte chunks; a tensor view at an odd offset cannot be read that way.
    for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.o)})
      if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
        throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                    "flash_attention: q, k, v and o must start 16-byte aligned");
    dispatch(dtype_, d_,
             [&](auto t, auto dc) { launch<decltype(t), decltype(dc)::value>(p, shape_); });
  }

 private:
  CudaContext ctx_;
  FlashParams p_{};
  LaunchShape shape_{};
  std::unique_ptr<DeviceScratch> workspace_;
  sy_dtype dtype_ = SY_DTYPE_F16;
  int d_ = 0;
  bool kv_len_input_ = false, sinks_ = false, lse_ = false;
};

}  // namespace

std::unique_ptr<CudaKernel> make_flash_attention(const sy::edge::OpCopy& op,
                                                 const CudaContext& ctx) {
  return std::make_unique<FlashAttention>(op, ctx);
}

}  // namespace sy::cuda
