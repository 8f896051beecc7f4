#include "apps/switchyard/bench_support.hpp"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <thread>

namespace sy::cli {
namespace {

// Large buffers are 2 MiB aligned and asked to be backed by huge pages, as a runtime's KV
// cache allocator would: a KV head's rows are a page apart, and 4 KiB pages would turn
// every row read into a TLB miss.
void* aligned_zeroed(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  size_t align = bytes >= kHuge ? kHuge : 64;
  size_t rounded = (bytes + align - 1) / align * align + align;
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
  if (align == kHuge) ::madvise(p, rounded, MADV_HUGEPAGE);
  std::memset(p, 0, rounded);
  return p;
}

}  // namespace

// Arrays far larger than the last-level cache, split evenly across `threads`; bytes counted as
// STREAM does (two reads, one write).
double triad_gbps(int threads, size_t n, int repeats) {
  std::vector<std::unique_ptr<float, void (*)(void*)>> arrays;
  for (int i = 0; i < 3; ++i)
    arrays.emplace_back(static_cast<float*>(aligned_zeroed(n * sizeof(float))), std::free);
  float *a = arrays[0].get(), *b = arrays[1].get(), *c = arrays[2].get();
  auto run = [&](auto body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { body(n * t / threads, n * (t + 1) / threads); });
    for (auto& th : pool) th.join();
  };
  run([&](size_t lo, size_t hi) {  // first touch by the thread that will use the pages
    for (size_t i = lo; i < hi; ++i) a[i] = 0.f, b[i] = 1.f, c[i] = 2.f;
  });
  Timing t = time_median(
      [&] {
        run([&](size_t lo, size_t hi) {
          for (size_t i = lo; i < hi; ++i) a[i] = b[i] + 3.f * c[i];
        });
      },
      1, repeats);
  return 3.0 * n * sizeof(float) / (t.median_ms * 1e-3) / 1e9;
}

double read_gbps(int threads, size_t bytes, int repeats) {
  const size_t n = std::max<size_t>(bytes / sizeof(uint64_t), size_t(threads) * 64);
  std::unique_ptr<uint64_t, void (*)(void*)> buf(
      static_cast<uint64_t*>(aligned_zeroed(n * sizeof(uint64_t))), std::free);
  uint64_t* p = buf.get();
  std::vector<uint64_t> sums(size_t(threads), 0);
  auto run = [&](auto body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        body(t, n * size_t(t) / size_t(threads), n * size_t(t + 1) / size_t(threads));
      });
    for (auto& th : pool) th.join();
  };
  run([&](int, size_t lo, size_t hi) {  // first touch by the thread that will read the pages
    for (size_t i = lo; i < hi; ++i) p[i] = i;
  });
  Timing t = time_median(
      [&] {
        run([&](int th, size_t lo, size_t hi) {
          uint64_t s = 0;  // integer sums: associative, so the loop vectorises
          for (size_t i = lo; i < hi; ++i) s += p[i];
          sums[size_t(th)] += s;
        });
      },
      1, repeats);
  volatile uint64_t sink = 0;  // the reads are used
  for (uint64_t s : sums) sink = sink + s;
  return double(n * sizeof(uint64_t)) / (t.median_ms * 1e-3) / 1e9;
}

std::string cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name = "CPU", family = "?", model = "?";
  auto value = [&] { return line.substr(line.find_first_not_of(" \t", line.find(':') + 1)); };
  while (std::getline(in, line) && !line.empty()) {
    if (line.find(':') == std::string::npos) continue;
    if (line.rfind("model name", 0) == 0)
      name = value();
    else if (line.rfind("cpu family", 0) == 0)
      family = value();
    else if (line.rfind("model", 0) == 0 && line.rfind("model name", 0) != 0)
      model = value();
  }
  return name + " (family " + family + ", model " + model + ")";
}

namespace {

double gemm_gflops(const Registry& reg, sy_dtype dtype, std::string& kernel_name) {
  const int64_t n = 2048;
  OpDesc op;
  op.op = SY_OP_MATMUL;
  op.inputs = {{dtype, {n, n}, SY_MEMORY_HOST}, {dtype, {n, n}, SY_MEMORY_HOST}};
  op.outputs = {{dtype, {n, n}, SY_MEMORY_HOST}};
  Choice choice = choose_kernel(reg, op, kDLCPU, "");
  if (!choice.plugin) return 0;
  BenchRun run = make_run(choice, op);
  if (!run.kernel) return 0;
  kernel_name = choice.plugin->name() + "/" + choice.plugin->kernels()[choice.kernel].kernel;
  Timing t = time_median([&] { run.execute(); }, 2, 7);
  return 2.0 * n * n * n / (t.median_ms * 1e-3) / 1e9;
}

}  // namespace

BenchTensor::BenchTensor(const TensorDesc& desc, unsigned seed, const Plugin* owner,
                         uint32_t device)
    : desc_(desc), device_(device) {
  int64_t count = 1;
  for (int64_t d : desc_.shape) count *= d;
  // Block-quantized tensors stay zero: all-zero blocks are valid (scales 0), and decoding does
  // not depend on the values. mxfp4's zero byte is not a zero scale but 2^-127, whose subnormal
  // products would time the CPU's denormal assists: its scales are set to 2^0.
  const size_t bytes = size_t(std::max<int64_t>(
      0, sy_tensor_bytes(desc_.dtype, int32_t(desc_.shape.size()), desc_.shape.data())));
  std::unique_ptr<void, void (*)(void*)> host(aligned_zeroed(bytes), std::free);
  if (desc_.dtype == SY_DTYPE_MXFP4)
    for (size_t b = 0; b < bytes; b += 17) static_cast<uint8_t*>(host.get())[b] = 127;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < count; ++i) {
    if (desc_.dtype == SY_DTYPE_F32)
      static_cast<float*>(host.get())[i] = dist(rng);
    else if (desc_.dtype == SY_DTYPE_BF16 || desc_.dtype == SY_DTYPE_F16)
      static_cast<uint16_t*>(host.get())[i] =
          desc_.dtype == SY_DTYPE_BF16 ? sy_f32_to_bf16(dist(rng))
                                       : uint16_t((rng() & 0x83ff) | 0x3800);  // f16 in ±[0.5, 1)
  }
  t_.ndim = int(desc_.shape.size());
  t_.dtype = sy_dtype_to_dl(desc_.dtype);
  t_.shape = desc_.shape.data();
  if (desc_.memory != SY_MEMORY_DEVICE || !owner) {
    data_ = host.release();
    t_.data = data_;
    t_.device = {kDLCPU, 0};
    return;
  }
  Expected<void*> data = owner->alloc(device, bytes);
  if (!data)
    throw std::runtime_error("allocating " + std::to_string(bytes) + " bytes on " + owner->name() +
                             ": " + data.error().message);
  owner_ = owner;
  data_ = *data;
  t_.data = data_;
  t_.device = {owner->devices()[device].type, owner->devices()[device].id};
  if (auto e = owner->copy(device, SY_COPY_HOST_TO_DEVICE, data_, host.get(), bytes))
    throw std::runtime_error("filling a device buffer: " + e->message);
}

BenchTensor::~BenchTensor() {
  if (owner_)
    owner_->free(device_, data_);
  else
    std::free(data_);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

Timing time_median(const std::function<void()>& fn, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(ms_since(t0));
  }
  return {median(ms), *std::min_element(ms.begin(), ms.end()), repeats};
}

Choice choose_kernel(const Registry& reg, const OpDesc& op, DLDeviceType device_type,
                     const std::string& family, const std::string& kernel) {
  auto wanted = [&](const Envelope& e) {
    return e.op == op.op && (family.empty() || e.family == family) &&
           (kernel.empty() || e.kernel == kernel);
  };
  Choice c;
  for (const auto& r : reg.records()) {
    if (!r.loaded()) continue;
    const Plugin& p = *r.plugin;
    bool has_device = false;
    for (const auto& d : p.devices()) has_device = has_device || d.type == device_type;
    if (!has_device) {  // a kernel that would fit but has no device to run on says why not
      for (const Envelope& e : p.kernels())
        if (wanted(e) && e.device_type == device_type) {
          c.reasons += "\n  " + p.name() + "/" + e.kernel + ": no device: " +
                       (p.no_devices_reason().empty() ? "none found" : p.no_devices_reason());
          break;
        }
      continue;
    }
    for (uint32_t d = 0; d < p.devices().size(); ++d) {
      if (p.devices()[d].type != device_type) continue;
      for (size_t k = 0; k < p.kernels().size(); ++k) {
        const Envelope& e = p.kernels()[k];
        if (!wanted(e)) continue;
        CheckResult res = p.check(k, p.devices()[d], op);
        if (res.accepted && p.api().prepare) return {&p, k, d, ""};
        for (const auto& refusal : res.refusals)
          c.reasons += "\n  " + p.name() + "/" + e.kernel + ": " + refusal.text;
      }
    }
  }
  if (c.reasons.empty()) c.reasons = "\n  no loaded plugin has such a kernel on such a device";
  return c;
}

BenchRun make_run(const Choice& choice, const OpDesc& op) {
  BenchRun run;
  Expected<std::unique_ptr<PreparedKernel>> prepared =
      prepare_kernel(*choice.plugin, choice.kernel, choice.device, op);
  if (!prepared) {
    run.error = prepared.error().message;
    return run;
  }
  run.kernel = std::move(*prepared);
  run.device = choice.device;
  unsigned seed = 1;
  for (const auto& t : op.inputs) {
    run.inputs.push_back(std::make_unique<BenchTensor>(t, seed++, choice.plugin, choice.device));
    run.in_ptrs.push_back(run.inputs.back()->dl());
  }
  for (const auto& t : op.outputs) {
    run.outputs.push_back(std::make_unique<BenchTensor>(t, seed++, choice.plugin, choice.device));
    run.out_ptrs.push_back(run.outputs.back()->dl());
  }
  return run;
}

void BenchRun::execute() {
  if (auto e = kernel->execute(in_ptrs, out_ptrs)) throw std::runtime_error(e->message);
  // An asynchronous plugin (ABI 1.2) has only enqueued the work: time it to its end.
  if (auto e = kernel->plugin().synchronize(device)) throw std::runtime_error(e->message);
}

int bench_threads() {
  if (const char* env = std::getenv("SWITCHYARD_NUM_THREADS"); env && std::atoi(env) > 0)
    return std::atoi(env);
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

MachineFigures measure_machine(const Registry& reg, int threads) {
  MachineFigures m;
  m.threads = threads;
  m.gemm_f32_gflops = gemm_gflops(reg, SY_DTYPE_F32, m.gemm_kernel);
  m.gemm_bf16_gflops = gemm_gflops(reg, SY_DTYPE_BF16, m.gemm_kernel);
  m.triad_gbps = triad_gbps(threads);
  return m;
}

void print_machine(const MachineFigures& m) {
  std::printf(
      "machine (same run, %d threads): f32 GEMM %.1f GFLOP/s, bf16 GEMM %.1f GFLOP/s "
      "(%s, n=2048), triad %.1f GB/s\n",
      m.threads, m.gemm_f32_gflops, m.gemm_bf16_gflops, m.gemm_kernel.c_str(), m.triad_gbps);
}

DeviceFigures measure_device(const Registry& reg, const Plugin& owner, uint32_t device) {
  DeviceFigures f;
  const DeviceInfo& info = owner.devices()[device];
  f.device = owner.name() + ":" + std::to_string(device);
  OpDesc op;
  op.op = SY_OP_MATMUL;
  const int64_t n = f.gemm_n;
  op.inputs = {{SY_DTYPE_BF16, {n, n}, SY_MEMORY_DEVICE},
               {SY_DTYPE_BF16, {n, n}, SY_MEMORY_DEVICE}};
  op.outputs = {{SY_DTYPE_BF16, {n, n}, SY_MEMORY_DEVICE}};
  Choice choice = choose_kernel(reg, op, info.type, "");
  if (choice.plugin) {
    BenchRun run = make_run(choice, op);
    if (run.kernel) {
      f.gemm_kernel = choice.plugin->name() + "/" + choice.plugin->kernels()[choice.kernel].kernel;
      Timing t = time_median([&] { run.execute(); }, 2, 7);
      f.gemm_bf16_gflops = 2.0 * n * n * n / (t.median_ms * 1e-3) / 1e9;
    }
  }
  if (owner.has_device_memory()) {
    TensorDesc d{SY_DTYPE_BF16, {f.copy_bytes / 2}, SY_MEMORY_DEVICE};
    BenchTensor src(d, 1, &owner, device), dst(d, 2, &owner, device);
    Timing t = time_median(
        [&] {
          if (auto e = owner.copy(device, SY_COPY_DEVICE_TO_DEVICE, dst.dl()->data, src.dl()->data,
                                  uint64_t(f.copy_bytes)))
            throw std::runtime_error("device copy: " + e->message);
        },
        2, 7);
    f.copy_gbps = 2.0 * double(f.copy_bytes) / (t.median_ms * 1e-3) / 1e9;
  }
  return f;
}

}  // namespace sy::cli
