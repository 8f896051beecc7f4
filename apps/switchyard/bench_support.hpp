// What `switchyard bench` needs besides the kernel under test: host buffers, a timer that
// reports medians, the machine's own ceilings measured in the same run (GEMM rate through
// the installed matmul kernel, memory bandwidth with a STREAM-style triad), and the choice
// of a kernel the way a plan would choose it.
#pragma once

#include <dlpack/dlpack.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/plugin/kernel.hpp"
#include "core/registry/registry.hpp"

namespace sy::cli {

// A tensor filled with uniform random values in [-1, 1] (integers: zeros). Host memory, or,
// when the description says device memory, memory of `owner`'s device `device` through the
// plugin's alloc and copy (filled on the host first).
class BenchTensor {
 public:
  BenchTensor(const TensorDesc& desc, unsigned seed, const Plugin* owner = nullptr,
              uint32_t device = 0);
  ~BenchTensor();
  BenchTensor(const BenchTensor&) = delete;
  BenchTensor& operator=(const BenchTensor&) = delete;
  const DLTensor* dl() const { return &t_; }

 private:
  TensorDesc desc_;
  const Plugin* owner_ = nullptr;  // set when the data is device memory
  uint32_t device_ = 0;
  void* data_ = nullptr;
  DLTensor t_{};
};

struct Timing {
  double median_ms = 0, min_ms = 0;
  int repeats = 0;
};
// Runs `fn` `warmup` times, then `repeats` times, timing each; returns the median.
Timing time_median(const std::function<void()>& fn, int warmup, int repeats);

// Milliseconds from `t0` to now on the steady clock.
double ms_since(std::chrono::steady_clock::time_point t0);
// The median of `v` (of an even count, the upper middle one); 0 when it is empty.
double median(std::vector<double> v);

struct Choice {
  const Plugin* plugin = nullptr;
  size_t kernel = 0;
  uint32_t device = 0;
  std::string reasons;  // why nothing was chosen, when plugin is null
};
// The first (plugin, kernel, device) of `device_type` whose check accepts `op` and that can
// run it; `family` (e.g. flash) and `kernel` (e.g. matmul_q16) restrict it when not empty.
Choice choose_kernel(const Registry& reg, const OpDesc& op, DLDeviceType device_type,
                     const std::string& family, const std::string& kernel = "");

// Prepared kernel plus its buffers, ready to time.
struct BenchRun {
  std::unique_ptr<PreparedKernel> kernel;
  std::vector<std::unique_ptr<BenchTensor>> inputs, outputs;
  std::vector<const DLTensor*> in_ptrs, out_ptrs;
  uint32_t device = 0;
  std::string error;  // why prepare failed (kernel is then null)
  void execute();     // runs to completion; throws std::runtime_error on a kernel failure
};
BenchRun make_run(const Choice& choice, const OpDesc& op);

struct MachineFigures {
  double gemm_f32_gflops = 0, gemm_bf16_gflops = 0;  // 0: no matmul kernel for that dtype
  double triad_gbps = 0;
  int threads = 1;
  std::string gemm_kernel;  // plugin/kernel that measured it
};
MachineFigures measure_machine(const Registry& reg, int threads);
// "machine (same run, N threads): f32 GEMM … GFLOP/s, bf16 GEMM …, triad … GB/s" on stdout.
void print_machine(const MachineFigures& m);

// The same ceilings for a device with its own memory, measured through the plugins:
// the bf16 GEMM rate of the first matmul kernel that accepts a large square problem on a
// device of `type`, and the copy bandwidth of `owner`'s device-to-device copy (bytes read
// plus bytes written, as CUDA's bandwidthTest counts them).
struct DeviceFigures {
  double gemm_bf16_gflops = 0, copy_gbps = 0;
  int64_t gemm_n = 8192, copy_bytes = int64_t(1) << 30;
  std::string gemm_kernel, device;
};
DeviceFigures measure_device(const Registry& reg, const Plugin& owner, uint32_t device);

// STREAM-style triad a[i] = b[i] + 3·c[i] over three arrays of `floats` floats each, on
// `threads` threads: bytes moved per second, in GB/s (median of `repeats`).
double triad_gbps(int threads, size_t floats = size_t(64) << 20, int repeats = 7);

// The rate at which `threads` threads read a buffer of `bytes` bytes (each its own slice, as a
// decode step's kernels split the weights), in GB/s (median of `repeats`). Sized like a model's
// weights it is the ceiling decode can reach where the weights sit in the last-level cache,
// which a triad over arrays far larger than that cache does not show.
double read_gbps(int threads, size_t bytes, int repeats = 9);

// "AMD EPYC 9B45 (family 26, model 2)": /proc/cpuinfo's model name, family and model.
std::string cpu_identity();

// Threads the CPU plugin uses: SWITCHYARD_NUM_THREADS, else this process's CPU count.
int bench_threads();

}  // namespace sy::cli
