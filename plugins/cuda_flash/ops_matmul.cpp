// matmul through cuBLAS (loaded lazily, see cublas_loader.hpp): c = a·b or a·bᵀ with fp32
// compute for f32, f16 and bf16. Row-major operands are passed as their column-major
// transposes: cᵀ = bᵀ·aᵀ, so no data moves.
#include <cuda_runtime_api.h>

#include <climits>

#include "cublas_loader.hpp"
#include "cuda_kernel.hpp"
#include "device_queue.hpp"

namespace sy::cuda {
namespace {

cudaDataType data_type(sy_dtype d) {
  switch (d) {
    case SY_DTYPE_F16: return CUDA_R_16F;
    case SY_DTYPE_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

class Matmul final : public CudaKernel {
 public:
  Matmul(const sy::edge::OpCopy& op, const CudaContext& ctx)
      : CudaKernel(ctx), handle_(ctx.cublas->handle(*ctx.queue)) {
    const auto& b = op.inputs[1].shape;
    transpose_b_ = op.int_attr(SY_ATTR_TRANSPOSE_B, 0) == 1;
    k_ = transpose_b_ ? b[1] : b[0];
    n_ = transpose_b_ ? b[0] : b[1];
    m_ = op.inputs[0].elements() / k_;  // the bound
    if (m_ > INT_MAX || n_ > INT_MAX || k_ > INT_MAX)
      throw sy::edge::StatusError(SY_STATUS_UNSUPPORTED, "matmul dimensions beyond 2^31");
    type_ = data_type(op.inputs[0].dtype);
  }

  void launch(const DLTensor* const* in, const DLTensor* const* out, const sy_step_info*) override {
    cublasHandle_t h = handle_;
    const float alpha = 1.0f, beta = 0.0f;
    int64_t elements = 1;  // this execute's rows (varlen): a's elements / K
    for (int i = 0; i < in[0]->ndim; ++i) elements *= in[0]->shape[i];
    const int m = int(elements / k_), n = int(n_), k = int(k_);
    if (m == 0) return;
    // Column-major: C'[N,M] = op(B')[N,K] · A'[K,M], A' = a (ld K), C' = c (ld N).
    cublasStatus_t s = ctx_.cublas->gemm()(
        h, transpose_b_ ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha,
        data_of<void>(in[1]), type_, transpose_b_ ? k : n, data_of<void>(in[0]), type_, k, &beta,
        data_of<void>(out[0]), type_, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
      throw sy::edge::StatusError(SY_STATUS_INTERNAL,
                                  "cublasGemmEx returned status " + std::to_string(int(s)));
    check_launch("cublasGemmEx");
  }

 private:
  cublasHandle_t handle_;
  bool transpose_b_ = false;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  cudaDataType type_ = CUDA_R_32F;
};

}  // namespace

std::unique_ptr<CudaKernel> make_matmul(const sy::edge::OpCopy& op, const CudaContext& ctx) {
  if (!ctx.cublas) throw sy::edge::StatusError(SY_STATUS_INTERNAL, "cuBLAS not loaded");
  return std::make_unique<Matmul>(op, ctx);
}

}  // namespace sy::cuda
