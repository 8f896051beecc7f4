// flash_attention: the kernel object of cuda_flash's flash attention. It checks the problem
// against the device at prepare (grid limits, shared memory), chooses the launch shape once,
// owns the split-KV workspace, and launches flash_kernel.cuh's kernels at execute. The paged
// form (PagedFlashAttention) reads the step's metadata back to the host first: every entry is
// checked before anything runs, and the launch is shaped for the longest sequence.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device_queue.hpp"
#include "flash_hopper.hpp"
#include "flash_kernel.cuh"

namespace sy::cuda {
namespace {

using flash::FlashParams;
using flash::LaunchShape;

int device_attribute(cudaDeviceAttr attr, int ordinal) {
  int v = 0;
  check_cuda(cudaDeviceGetAttribute(&v, attr, ordinal), "cudaDeviceGetAttribute");
  return v;
}

// The kernels' shape on this device: the rows kernel's form its shared memory allows, each
// kernel opted in to its dynamic shared memory (above 48 KiB a kernel must, once per device;
// done at prepare so execute only launches), and each kernel's resident blocks per
// multiprocessor from the occupancy API, capped at the bound of the device's architecture that
// check declared the workspace by (flash_shape.hpp's flash_limits), which the split of the keys
// is cut for; on sm_90 with SWITCHYARD_CUDA_FLASH_SM90A set, the sm_90a kernel takes the rows
// calls (flash_hopper.hpp). UNSUPPORTED when even the narrow form does not fit a block;
// INVALID_ARGUMENT for a value of SWITCHYARD_CUDA_FLASH_SM90A it does not know.
template <typename T, int D>
flash::FlashLimits prepare_kernels(int ordinal) {
  const flash::SmemLimits device{
      device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal),
      device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, ordinal)};
  const int sm = 10 * device_attribute(cudaDevAttrComputeCapabilityMajor, ordinal) +
                 device_attribute(cudaDevAttrComputeCapabilityMinor, ordinal);
  // Read for every head dim, so a value it does not know is refused wherever it is set.
  const flash::HopperMode mode = flash::hopper_mode(sm);
  flash::FlashLimits limits = flash::flash_limits(device, D);
  // check planned by the architecture's table: where it or the device says narrow, narrow (more
  // row blocks, so never more splits than check declared the workspace for).
  const flash::FlashLimits declared = flash::flash_limits(flash::smem_limits(sm), D);
  if (declared.rows.warps < limits.rows.warps) limits.rows = declared.rows;
  const size_t decode_smem = flash::decode_smem_bytes(D),
               rows_smem = flash::rows_smem_bytes(limits.rows, D);
  if (std::max(decode_smem, rows_smem) > size_t(device.per_block))
    throw sy::edge::StatusError(SY_STATUS_UNSUPPORTED,
                                "flash_attention: needs " +
                                    std::to_string(std::max(decode_smem, rows_smem)) +
                                    " bytes of shared memory per block, the device allows " +
                                    std::to_string(device.per_block));
  check_cuda(cudaFuncSetAttribute(flash::flash_decode_kernel<T, D>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, int(decode_smem)),
             "cudaFuncSetAttribute(flash_decode_kernel)");
  check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                 &limits.occupancy.decode, flash::flash_decode_kernel<T, D>,
                 32 * flash::decode_warps(D), decode_smem),
             "cudaOccupancyMaxActiveBlocksPerMultiprocessor(flash_decode_kernel)");
  flash::with_rows_kernel<T, D>(limits.rows, [&](auto kernel) {
    check_cuda(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(rows_smem)),
        "cudaFuncSetAttribute(flash_mma_kernel)");
    check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&limits.occupancy.rows, kernel,
                                                             32 * limits.rows.warps, rows_smem),
               "cudaOccupancyMaxActiveBlocksPerMultiprocessor(flash_mma_kernel)");
  });
  limits.occupancy.decode =
      std::max(1, std::min(limits.occupancy.decode, declared.occupancy.decode));
  limits.occupancy.rows = std::max(1, std::min(limits.occupancy.rows, declared.occupancy.rows));
  if constexpr (flash::hopper_head_dim(D)) {
    // The sm_90a kernel serves the wide form's rows, with no more blocks a multiprocessor.
    if (mode != flash::HopperMode::off && limits.rows.warps == flash::kRowsWide.warps) {
      limits = flash::with_hopper(limits, device, D, mode == flash::HopperMode::pingpong);
      limits.occupancy.rows =
          std::max(1, std::min(limits.occupancy.rows, flash::prepare_hopper<T, D>()));
    }
  }
  return limits;
}

template <typename T, int D>
void launch_flash(const FlashParams& p, const LaunchShape& s, cudaStream_t stream) {
  const int sequences = p.query_start ? p.S : p.B;
  const dim3 grid(unsigned(s.row_blocks), unsigned(sequences * p.Hkv), unsigned(s.splits));
  if (s.hopper) {
    if constexpr (flash::hopper_head_dim(D))
      flash::launch_hopper<T, D>(p, grid, s.pingpong, stream);
  } else if (s.decode) {
    flash::flash_decode_kernel<T, D><<<grid, s.threads, s.smem, stream>>>(p);
    check_launch("flash_decode_kernel");
  } else {
    flash::with_rows_kernel<T, D>(s.rows, [&](auto kernel) {
      kernel<<<grid, s.threads, s.smem, stream>>>(p);
      check_launch("flash_mma_kernel");
    });
  }
  if (s.splits > 1) {
    const size_t rows = size_t(p.B) * p.Hq * p.Sq;
    flash::combine_splits<T, D><<<unsigned((rows + 3) / 4), 128, 0, stream>>>(p);
    check_launch("combine_splits");
  }
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

// Scale, softcap, causal and window of both forms (window capped where the kernel's int
// arithmetic ends: no sequence is longer).
void set_semantics(const sy::edge::OpCopy& op, int d, FlashParams& p) {
  const double scale = op.float_attr(SY_ATTR_SCALE, 0.0);
  p.scale = float(scale != 0.0 ? scale : 1.0 / std::sqrt(double(d)));
  p.softcap = float(op.float_attr(SY_ATTR_SOFTCAP, 0.0));
  p.causal = op.int_attr(SY_ATTR_CAUSAL, 0) != 0;
  const int64_t w = op.int_attr(SY_ATTR_WINDOW_LEFT, -1);
  p.window = w < 0 ? -1 : int(w > (int64_t(1) << 30) ? (int64_t(1) << 30) : w);
}

// The form line of a flash kernel whose rows calls take the sm_90a kernel.
std::string hopper_form(bool hopper, bool pingpong) {
  if (!hopper) return "";
  return pingpong ? "flash attention's rows calls on the sm_90a kernel, its consumers in "
                    "ping-pong (SWITCHYARD_CUDA_FLASH_SM90A=on)"
                  : "flash attention's rows calls on the sm_90a kernel, its consumers without "
                    "ping-pong (SWITCHYARD_CUDA_FLASH_SM90A=no-pingpong)";
}

class FlashAttention final : public CudaKernel {
 public:
  FlashAttention(const sy::edge::OpCopy& op, const CudaContext& ctx) : CudaKernel(ctx) {
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
    set_semantics(op, d_, p_);
    if (p_.B == 0 || p_.Sq == 0 || p_.Hq == 0) return;

    use_device(ctx_.ordinal);
    const int sms = device_attribute(cudaDevAttrMultiProcessorCount, ctx_.ordinal);
    dispatch(dtype_, d_, [&](auto t, auto dc) {
      using T = decltype(t);
      constexpr int D = decltype(dc)::value;
      shape_ = flash::launch_shape<T, D>(p_, sms, prepare_kernels<T, D>(ctx_.ordinal));
    });
    p_.splits = shape_.splits;
    if (shape_.splits > 1) {
      const size_t rows = size_t(p_.B) * p_.Hq * p_.Sq;
      workspace_ = std::make_unique<DeviceScratch>(rows * shape_.splits * (d_ + 1) * sizeof(float));
      p_.part_o = workspace_->as<float>();
      p_.part_lse = p_.part_o + rows * shape_.splits * d_;
    }
  }

  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
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
    dispatch(dtype_, d_, [&](auto t, auto dc) {
      launch_flash<decltype(t), decltype(dc)::value>(p, shape_, stream());
    });
  }
  std::string form() const override { return hopper_form(shape_.hopper, shape_.pingpong); }

 private:
  FlashParams p_{};
  LaunchShape shape_{};
  std::unique_ptr<DeviceScratch> workspace_;
  sy_dtype dtype_ = SY_DTYPE_F16;
  int d_ = 0;
  bool kv_len_input_ = false, sinks_ = false, lse_ = false;
};

// The paged form: q [1, T, Hq, D], pools [NB, BS, Hkv, D], [sinks], query_start [S + 1],
// seq_lens [S], block_table [S, MB]; o [1, T, Hq, D], [lse [1, Hq, T]]. T and S are this
// execute's; the workspace is sized at prepare for the bounds.
class PagedFlashAttention final : public CudaKernel {
 public:
  PagedFlashAttention(const sy::edge::OpCopy& op, const CudaContext& ctx) : CudaKernel(ctx) {
    const auto& q = op.inputs[0].shape;
    const auto& pool = op.inputs[1].shape;
    const size_t n = op.inputs.size();
    dtype_ = op.inputs[0].dtype;
    d_ = int(q[3]);
    sinks_ = n == 7;
    lse_ = op.outputs.size() > 1;
    nb_ = pool[0];
    p_.B = 1;
    p_.Hq = int(q[2]);
    p_.Hkv = int(pool[2]);
    p_.G = p_.Hq / p_.Hkv;
    p_.BS = int(pool[1]);
    p_.MB = int(op.inputs[n - 1].shape[1]);
    const int64_t max_t = q[1], max_s = op.inputs[n - 2].shape[0];
    if (max_s * p_.Hkv > 65535 || max_t * p_.G > (int64_t(1) << 30) ||
        int64_t(p_.MB) * p_.BS > (int64_t(1) << 30))
      throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                  "flash_attention: sequences x KV heads is limited to 65535, "
                                  "tokens x (Hq/Hkv) and a sequence's keys to 2^30");
    set_semantics(op, d_, p_);
    use_device(ctx_.ordinal);
    sms_ = device_attribute(cudaDevAttrMultiProcessorCount, ctx_.ordinal);
    dispatch(dtype_, d_, [&](auto t, auto dc) {
      limits_ = prepare_kernels<decltype(t), decltype(dc)::value>(ctx_.ordinal);
    });
    // The most splits any step may take: one sequence's rows, the longest keys.
    max_splits_ = flash::flash_splits(p_.G, 1, p_.Hkv, int64_t(p_.MB) * p_.BS, d_, sms_, limits_);
    if (max_splits_ > 1) {
      const size_t rows = size_t(max_t) * p_.Hq;
      workspace_ = std::make_unique<DeviceScratch>(rows * max_splits_ * (d_ + 1) * sizeof(float));
    }
    metadata_.resize(size_t(2 * max_s + 1 + max_s * p_.MB));
  }

  void launch(const DLTensor* const* in, const DLTensor* const* out,
              const sy_step_info* step) override {
    const size_t n = sinks_ ? 7 : 6;
    FlashParams p = p_;
    const int T = int(in[0]->shape[1]), S = int(in[n - 2]->shape[0]);
    p.Sq = T;
    p.S = S;
    if (T == 0 || S == 0) return;
    // Op by op the metadata is read back and checked (blocking waits); in a segment the host
    // checked it and gives the maxima.
    const auto [max_q, max_l] =
        step ? std::pair<int, int>(int(step->max_query_len),
                                   int(std::min<long long>(flash::kv_bucket(step->max_kv_len),
                                                           int64_t(p_.MB) * p_.BS)))
             : read_metadata(in[n - 3], in[n - 2], in[n - 1], T, S);
    p.q = data_of<void>(in[0]);
    p.k = data_of<void>(in[1]);
    p.v = data_of<void>(in[2]);
    p.sinks = sinks_ ? data_of<const float>(in[3]) : nullptr;
    p.query_start = data_of<const int32_t>(in[n - 3]);
    p.seq_lens = data_of<const int32_t>(in[n - 2]);
    p.block_table = data_of<const int32_t>(in[n - 1]);
    p.o = data_of<void>(out[0]);
    p.lse = lse_ ? data_of<float>(out[1]) : nullptr;
    for (const void* ptr : {p.q, p.k, p.v, static_cast<const void*>(p.o)})
      if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
        throw sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT,
                                    "flash_attention: q, the pools and o must start 16-byte "
                                    "aligned");
    p.M = max_q * p.G;  // the longest sequence shapes the grid
    p.Skv = max_l;
    dispatch(dtype_, d_, [&](auto t, auto dc) {
      using T2 = decltype(t);
      constexpr int D = decltype(dc)::value;
      LaunchShape shape = flash::launch_shape<T2, D>(p, sms_, limits_);
      shape.splits = std::min(shape.splits, max_splits_);
      p.splits = shape.splits;
      if (shape.splits > 1) {
        p.part_o = workspace_->as<float>();
        p.part_lse = p.part_o + size_t(T) * p.Hq * shape.splits * D;
      }
      launch_flash<T2, D>(p, shape, stream());
    });
  }
  std::string form() const override { return hopper_form(limits_.hopper, limits_.pingpong); }

 private:
  // Copies the metadata to the host and checks it (INVALID_ARGUMENT, nothing launched):
  // query_start from 0 to T, non-decreasing; each sequence's queries within its length, its
  // length within its blocks, every block it reads inside the pool. Returns the most queries
  // and the most keys of a sequence.
  std::pair<int, int> read_metadata(const DLTensor* starts_t, const DLTensor* lens_t,
                                    const DLTensor* table_t, int T, int S) {
    int32_t* starts = metadata_.data();
    int32_t* lens = starts + S + 1;
    int32_t* table = lens + S;
    read_back(ctx_, starts, data_of<const int32_t>(starts_t), sizeof(int32_t) * (S + 1));
    read_back(ctx_, lens, data_of<const int32_t>(lens_t), sizeof(int32_t) * S);
    read_back(ctx_, table, data_of<const int32_t>(table_t), sizeof(int32_t) * S * p_.MB);
    auto invalid = [](const std::string& what) {
      return sy::edge::StatusError(SY_STATUS_INVALID_ARGUMENT, "flash_attention: " + what);
    };
    if (starts[0] != 0 || starts[S] != T)
      throw invalid("query_start must begin at 0 and end at T = " + std::to_string(T));
    int max_q = 0, max_l = 0;
    for (int s = 0; s < S; ++s) {
      const int q_len = starts[s + 1] - starts[s], L = lens[s];
      if (q_len < 0 || q_len > L || int64_t(L) > int64_t(p_.MB) * p_.BS)
        throw invalid("sequence " + std::to_string(s) + " has " + std::to_string(q_len) +
                      " query tokens and length " + std::to_string(L) +
                      "; queries must fit its length, and its length its " + std::to_string(p_.MB) +
                      " blocks of " + std::to_string(p_.BS));
      for (int b = 0; b < (L + p_.BS - 1) / p_.BS; ++b)
        if (table[s * p_.MB + b] < 0 || table[s * p_.MB + b] >= nb_)
          throw invalid("block table entry " + std::to_string(b) + " of sequence " +
                        std::to_string(s) + " names block " + std::to_string(table[s * p_.MB + b]) +
                        " of a pool of " + std::to_string(nb_));
      max_q = std::max(max_q, q_len);
      max_l = std::max(max_l, L);
    }
    return {max_q, max_l};
  }

  FlashParams p_{};
  flash::FlashLimits limits_;
  std::unique_ptr<DeviceScratch> workspace_;
  std::vector<int32_t> metadata_;
  sy_dtype dtype_ = SY_DTYPE_F16;
  int d_ = 0, sms_ = 1, max_splits_ = 1;
  int64_t nb_ = 0;
  bool sinks_ = false, lse_ = false;
};

}  // namespace

std::unique_ptr<CudaKernel> make_flash_attention(const sy::edge::OpCopy& op,
                                                 const CudaContext& ctx) {
  if (op.int_attr(SY_ATTR_PAGED, 0)) return std::make_unique<PagedFlashAttention>(op, ctx);
  return std::make_unique<FlashAttention>(op, ctx);
}

}  // namespace sy::cuda
