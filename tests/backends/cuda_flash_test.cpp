// cuda_flash without a GPU: it loads, reports zero devices with the reason, and answers
// check for a described device, so plans for a GPU machine can be made here; prepare and
// alloc say UNAVAILABLE with the reason. With a GPU (CudaFlashGpu*): flash_attention over a
// grid against the double reference and against cpu_onednn, and every decoder op against a
// small double reference, through the plugin's alloc/copy and the host's PreparedKernel; the
// paged forms (ABI 1.5) with the step's actual extents below the prepared bounds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "core/capability/op.hpp"
#include "core/plugin/kernel.hpp"
#include "core/plugin/loader.hpp"
#include "support/attention_reference.hpp"
#include "support/expected.hpp"
#include "support/host_tensor.hpp"
#include "support/ops.hpp"
#include "support/paged_attention_case.hpp"
#include "support/scoped_env.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using test::attention_op;
using test::AttentionSpec;
using test::constraints;

class CudaFlash : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::kHaveCudaPlugin) GTEST_SKIP() << "nvcc was not found at configure time";
    auto out = load_plugin(test::kPluginDir / "cuda_flash.so", LoadOptions{});
    ASSERT_TRUE(out.plugin) << out.diagnostic->reason;
    plugin_ = std::move(out.plugin);
  }
  CheckResult check_flash(const OpDesc& op, const DeviceInfo& device) {
    return plugin_->check(0, device, op);
  }
  std::unique_ptr<Plugin> plugin_;
};

TEST_F(CudaFlash, ZeroDevicesComeWithAReason) {
  if (!plugin_->devices().empty()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_FALSE(plugin_->no_devices_reason().empty());
  EXPECT_THAT(plugin_->no_devices_reason(), ::testing::HasSubstr("cuda"));
}

TEST_F(CudaFlash, DevicesWhenPresentHaveArchAndMemory) {
  if (plugin_->devices().empty())
    GTEST_SKIP() << "no CUDA device: " << plugin_->no_devices_reason();
  for (const auto& d : plugin_->devices()) {
    EXPECT_THAT(d.arch, ::testing::StartsWith("sm_"));
    EXPECT_GT(d.memory_bytes, 0u);
    EXPECT_FALSE(d.memory_is_host);
  }
}

TEST_F(CudaFlash, FlashAcceptsBf16OnADescribedH200) {
  ASSERT_EQ(plugin_->kernels()[0].kernel, "flash_attention");
  AttentionSpec s;
  s.dtype = SY_DTYPE_BF16;
  s.memory = SY_MEMORY_DEVICE;
  s.causal = s.sinks = s.lse = true;
  s.q_heads = 64;
  s.kv_heads = 8;
  s.head_dim = 64;
  s.window_left = 128;
  auto r = check_flash(attention_op(s), test::described_gpu("sm_90"));
  EXPECT_TRUE(r.accepted) << (r.refusals.empty() ? "" : r.refusals[0].text);
}

TEST_F(CudaFlash, FlashRefusesF32AndOldArchAndOddHeadDimTogether) {
  AttentionSpec s;
  s.memory = SY_MEMORY_DEVICE;
  s.head_dim = 96;
  auto r = check_flash(attention_op(s), test::described_gpu("sm_75"));
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(constraints(r.refusals), (std::vector<std::string>{"dtype", "head_dim", "arch"}));
  EXPECT_EQ(r.refusals[0].required, "f32");
  EXPECT_EQ(r.refusals[0].offered, "f16,bf16");
}

TEST_F(CudaFlash, FlashRefusesCpuTensors) {
  AttentionSpec s;
  s.dtype = SY_DTYPE_F16;
  auto r = check_flash(attention_op(s), test::cpu_device());
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(r.refusals.at(0).constraint, "device_type");
}

// ---- without a device: prepare and alloc say UNAVAILABLE with the reason ------------------

TEST_F(CudaFlash, PrepareWithoutADeviceIsUnavailableWithTheReason) {
  if (!plugin_->devices().empty()) GTEST_SKIP() << "a CUDA device is present";
  ASSERT_NE(plugin_->api().prepare, nullptr);
  AttentionSpec s;
  s.dtype = SY_DTYPE_BF16;
  s.memory = SY_MEMORY_DEVICE;
  OpDesc op = attention_op(s);
  AbiOpView view(op);
  sy_prepare_args args{};
  args.struct_size = sizeof(args);
  args.plugin = plugin_->instance();
  args.kernel_index = 0;
  args.device_index = 0;
  args.op = view.get();
  ErrorText err;
  EXPECT_EQ(plugin_->api().prepare(&args, err.buffer()), SY_STATUS_UNAVAILABLE);
  EXPECT_EQ(args.kernel, nullptr);
  EXPECT_THAT(err.str(), ::testing::HasSubstr(plugin_->no_devices_reason()));
  // Through the host, too: no device 0, not a crash.
  auto prepared = prepare_kernel(*plugin_, 0, 0, op);
  ASSERT_FALSE(prepared);
  EXPECT_EQ(prepared.error().status, SY_STATUS_INVALID_ARGUMENT) << prepared.error().message;
}

TEST_F(CudaFlash, AllocAndCopyWithoutADeviceAreUnavailable) {
  if (!plugin_->devices().empty()) GTEST_SKIP() << "a CUDA device is present";
  ASSERT_NE(plugin_->api().alloc, nullptr);
  sy_alloc_args a{};
  a.struct_size = sizeof(a);
  a.plugin = plugin_->instance();
  a.size_bytes = 1024;
  ErrorText err;
  EXPECT_EQ(plugin_->api().alloc(&a, err.buffer()), SY_STATUS_UNAVAILABLE);
  EXPECT_EQ(a.data, nullptr);
  EXPECT_THAT(err.str(), ::testing::HasSubstr(plugin_->no_devices_reason()));
  char host[4] = {};
  sy_copy_args c{};
  c.struct_size = sizeof(c);
  c.plugin = plugin_->instance();
  c.direction = SY_COPY_HOST_TO_DEVICE;
  c.dst = host;
  c.src = host;
  c.size_bytes = 4;
  ErrorText err2;
  EXPECT_EQ(plugin_->api().copy(&c, err2.buffer()), SY_STATUS_UNAVAILABLE);
  plugin_->api().free_memory(plugin_->instance(), 0, nullptr);  // a no-op, never a crash
}

TEST_F(CudaFlash, PrepareRefusesExactlyWhatCheckRefuses) {
  if (plugin_->devices().empty())
    GTEST_SKIP() << "no CUDA device: " << plugin_->no_devices_reason();
  AttentionSpec s;  // f32: outside the envelope
  s.memory = SY_MEMORY_DEVICE;
  OpDesc op = attention_op(s);
  EXPECT_FALSE(plugin_->check(0, plugin_->devices()[0], op).accepted);
  auto prepared = prepare_kernel(*plugin_, 0, 0, op);
  ASSERT_FALSE(prepared);
  EXPECT_THAT(prepared.error().message, ::testing::StartsWith("UNSUPPORTED"));
}

// ---- with a device -----------------------------------------------------------------------

// A buffer in device memory through the plugin's alloc/copy/free_memory.
class DeviceTensor {
 public:
  DeviceTensor(const Plugin& p, sy_dtype dtype, std::vector<int64_t> shape)
      : plugin_(p), dtype_(dtype), shape_(std::move(shape)) {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    bytes_ = size_t(n) * sy_dtype_size(dtype);
    sy_alloc_args a{};
    a.struct_size = sizeof(a);
    a.plugin = p.instance();
    a.size_bytes = bytes_;
    ErrorText err;
    if (p.api().alloc(&a, err.buffer()) != SY_STATUS_OK)
      throw std::runtime_error("alloc: " + err.str());
    t_.data = a.data;
    t_.device = {kDLCUDA, 0};
    t_.ndim = int(shape_.size());
    t_.dtype = sy_dtype_to_dl(dtype);
    t_.shape = shape_.data();
  }
  ~DeviceTensor() { plugin_.api().free_memory(plugin_.instance(), 0, t_.data); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  const DLTensor* dl() const { return &t_; }
  void upload(test::HostTensor& h) { copy(SY_COPY_HOST_TO_DEVICE, t_.data, h.bytes()); }
  void download(test::HostTensor& h) { copy(SY_COPY_DEVICE_TO_HOST, h.bytes(), t_.data); }

 private:
  void copy(sy_copy_direction dir, void* dst, const void* src) {
    sy_copy_args c{};
    c.struct_size = sizeof(c);
    c.plugin = plugin_.instance();
    c.direction = dir;
    c.dst = dst;
    c.src = src;
    c.size_bytes = bytes_;
    ErrorText err;
    if (plugin_.api().copy(&c, err.buffer()) != SY_STATUS_OK)
      throw std::runtime_error("copy: " + err.str());
  }
  const Plugin& plugin_;
  sy_dtype dtype_;
  std::vector<int64_t> shape_;
  size_t bytes_ = 0;
  DLTensor t_{};
};

// Runs `op` (every operand in device memory) on kernel `kernel` of cuda_flash: uploads
// `ins`, runs, downloads into `outs` (which may hold initial values, e.g. a cache). Returns
// the error of execute or of the enqueued work ("" on success).
std::string run_on_gpu(const Plugin& p, size_t kernel, OpDesc op,
                       std::vector<test::HostTensor*> ins, std::vector<test::HostTensor*> outs) {
  for (auto& t : op.inputs) t.memory = SY_MEMORY_DEVICE;
  for (auto& t : op.outputs) t.memory = SY_MEMORY_DEVICE;
  auto prepared = prepare_kernel(p, kernel, 0, op);
  if (!prepared) return "prepare: " + prepared.error().message;
  std::vector<std::unique_ptr<DeviceTensor>> din, dout;
  std::vector<const DLTensor*> in_ptrs, out_ptrs;
  for (auto* h : ins) {
    din.push_back(std::make_unique<DeviceTensor>(p, h->dtype(), h->shape()));
    din.back()->upload(*h);
    in_ptrs.push_back(din.back()->dl());
  }
  for (auto* h : outs) {
    dout.push_back(std::make_unique<DeviceTensor>(p, h->dtype(), h->shape()));
    dout.back()->upload(*h);
    out_ptrs.push_back(dout.back()->dl());
  }
  std::optional<Error> err = (*prepared)->execute(in_ptrs, out_ptrs);
  if (!err) err = p.synchronize(0);  // execute only enqueued the work (ABI 1.2)
  for (size_t i = 0; i < outs.size(); ++i) dout[i]->download(*outs[i]);
  return test::why(err);
}

size_t kernel_named(const Plugin& p, const std::string& name) {
  for (size_t i = 0; i < p.kernels().size(); ++i)
    if (p.kernels()[i].kernel == name) return i;
  throw std::runtime_error("no kernel " + name);
}

struct FlashCase {
  sy_dtype dtype = SY_DTYPE_BF16;
  int64_t B = 1, Sq = 8, Skv = 8, Hq = 4, Hkv = 4, D = 64;
  bool causal = false, sinks = false, lse = true;
  int64_t window = -1;
  double softcap = 0, scale = 0;
  std::vector<int64_t> kv_len;

  std::string name() const {
    std::ostringstream s;
    s << sy_dtype_name(dtype) << "_B" << B << "_Sq" << Sq << "_Skv" << Skv << "_H" << Hq << "x"
      << Hkv << "_D" << D << (causal ? "_causal" : "") << (window >= 0 ? "_win" : "")
      << (sinks ? "_sinks" : "") << (softcap > 0 ? "_softcap" : "") << (lse ? "_lse" : "")
      << (kv_len.empty() ? "" : "_kvlen");
    return s.str();
  }
  OpDesc op(sy_memory_kind memory) const {
    OpDesc op;
    op.op = SY_OP_ATTENTION;
    op.inputs = {{dtype, {B, Sq, Hq, D}, memory},
                 {dtype, {B, Skv, Hkv, D}, memory},
                 {dtype, {B, Skv, Hkv, D}, memory}};
    if (sinks) op.inputs.push_back({SY_DTYPE_F32, {Hq}, memory});
    if (!kv_len.empty()) {
      op.inputs.push_back({SY_DTYPE_I64, {B}, memory});
      op.set(SY_ATTR_KV_LEN_INPUT, int64_t{1});
    }
    op.outputs = {{dtype, {B, Sq, Hq, D}, memory}};
    if (lse) op.outputs.push_back({SY_DTYPE_F32, {B, Hq, Sq}, memory});
    if (causal) op.set(SY_ATTR_CAUSAL, int64_t{1});
    if (window >= 0) op.set(SY_ATTR_WINDOW_LEFT, window);
    if (softcap > 0) op.set(SY_ATTR_SOFTCAP, softcap);
    if (scale != 0) op.set(SY_ATTR_SCALE, scale);
    return op;
  }
  test::AttentionProblem problem(unsigned seed) const {
    std::mt19937 rng(seed);
    test::AttentionProblem p{B, Sq, Skv, Hq, Hkv, D};
    p.causal = causal;
    p.window = window;
    p.softcap = softcap;
    p.scale = scale;
    p.q = test::uniform(size_t(B * Sq * Hq * D), rng, -2, 2);
    p.k = test::uniform(size_t(B * Skv * Hkv * D), rng, -2, 2);
    // Values away from zero mean and sinks near the scores' scale: averaged over a long cache,
    // zero-mean values would hide a dropped sink or a misweighted key inside the tolerance.
    p.v = test::uniform(size_t(B * Skv * Hkv * D), rng, 0, 2);
    if (sinks) p.sinks = test::uniform(size_t(Hq), rng, 2, 6);
    p.kv_len = kv_len;
    return p;
  }
};

// Runs the case on a plugin (`device` true: cuda_flash through device buffers; false: host
// tensors straight to the kernel), storing the converted inputs back into `p`.
test::AttentionResult run_flash(const Plugin& plugin, size_t kernel, bool device,
                                const FlashCase& c, test::AttentionProblem& p, std::string* error) {
  using test::HostTensor;
  OpDesc op = c.op(device ? SY_MEMORY_DEVICE : SY_MEMORY_HOST);
  HostTensor q(c.dtype, op.inputs[0].shape), k(c.dtype, op.inputs[1].shape),
      v(c.dtype, op.inputs[2].shape), sinks(SY_DTYPE_F32, {c.Hq}), kv(SY_DTYPE_I64, {c.B}),
      o(c.dtype, op.outputs[0].shape), lse(SY_DTYPE_F32, {c.B, c.Hq, c.Sq});
  p.q = q.set(p.q);
  p.k = k.set(p.k);
  p.v = v.set(p.v);
  std::vector<HostTensor*> ins = {&q, &k, &v}, outs = {&o};
  if (c.sinks) {
    p.sinks = sinks.set(p.sinks);
    ins.push_back(&sinks);
  }
  if (!c.kv_len.empty()) {
    kv.set(std::vector<double>(c.kv_len.begin(), c.kv_len.end()));
    ins.push_back(&kv);
  }
  if (c.lse) outs.push_back(&lse);
  if (device) {
    *error = run_on_gpu(plugin, kernel, op, ins, outs);
  } else {
    auto prepared = prepare_kernel(plugin, kernel, 0, op);
    if (!prepared) {
      *error = prepared.error().message;
      return {};
    }
    std::vector<const DLTensor*> i, o2;
    for (auto* h : ins) i.push_back(h->dl());
    for (auto* h : outs) o2.push_back(h->dl());
    *error = test::why((*prepared)->execute(i, o2));
  }
  return {o.get(), c.lse ? lse.get() : std::vector<double>{}};
}

// f16 and bf16 inputs are exact in the reference; the error is f32 accumulation plus the
// output's rounding (2^-9 relative for bf16, 2^-12 for f16, of |o| <= 1).
constexpr double kFlashOutTol = 1.2e-2, kFlashLseTol = 1e-4;

void expect_flash_close(const FlashCase& c, const test::AttentionResult& got,
                        const test::AttentionResult& want, double out_tol, double lse_tol) {
  ASSERT_EQ(got.o.size(), want.o.size()) << c.name();
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.o.size(); ++i)
    if (std::abs(got.o[i] - want.o[i]) > worst) worst = std::abs(got.o[i] - want.o[i]), at = i;
  EXPECT_LE(worst, out_tol) << c.name() << " o[" << at << "] " << got.o[at] << " vs " << want.o[at];
  if (!c.lse) return;
  ASSERT_EQ(got.lse.size(), want.lse.size()) << c.name();
  for (size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      EXPECT_TRUE(std::isinf(got.lse[i]) && got.lse[i] < 0) << c.name() << " lse[" << i << "]";
      continue;
    }
    ASSERT_NEAR(got.lse[i], want.lse[i], lse_tol * std::max(1.0, std::abs(want.lse[i])))
        << c.name() << " lse[" << i << "]";
  }
}

std::vector<FlashCase> flash_grid() {
  struct Lengths {
    int64_t sq, skv;
  };
  // Sq = 1 (decode), tile multiples and not (16 packed rows per warp, 64 rows per block,
  // 64 keys per tile, 32 for D = 256).
  const Lengths lengths[] = {{1, 1}, {1, 77}, {13, 13}, {5, 100}, {33, 65}, {130, 130}, {37, 200}};
  const int64_t heads[][2] = {{4, 4}, {8, 2}, {8, 1}};  // GQA 1, 4, 8
  std::vector<FlashCase> out;
  int k = 0;
  for (sy_dtype dt : {SY_DTYPE_F16, SY_DTYPE_BF16})
    for (int64_t d : {64, 128, 256})
      for (const auto& len : lengths)
        for (const auto& h : heads) {
          FlashCase c;
          c.dtype = dt;
          c.D = d;
          c.Sq = len.sq;
          c.Skv = len.skv;
          c.Hq = h[0];
          c.Hkv = h[1];
          int bits = k++;
          c.causal = bits & 1;
          c.window = (bits >> 1) & 1 ? 17 : -1;
          c.sinks = (bits >> 2) & 1;
          c.softcap = (bits >> 3) & 1 ? 20.0 : 0.0;
          c.B = (bits % 5 == 0) ? 3 : 1;
          c.lse = (bits % 7) != 3;
          c.scale = (bits % 11 == 5) ? 0.3 : 0.0;
          if (bits % 6 == 4) {
            c.kv_len.assign(size_t(c.B), c.Skv);
            c.kv_len[0] = std::max<int64_t>(c.Sq, c.Skv / 2);  // shorter valid length
          }
          out.push_back(c);
        }
  // Long caches with few (batch, KV head) blocks: the kernel splits the keys and merges the
  // splits by LSE (docs/cuda_flash.md), with the sinks joining once in the merge.
  auto long_case = [&](sy_dtype dt, int64_t d, int64_t b, int64_t sq, int64_t skv, int64_t hq,
                       int64_t hkv) {
    FlashCase c;
    c.dtype = dt;
    c.D = d;
    c.B = b;
    c.Sq = sq;
    c.Skv = skv;
    c.Hq = hq;
    c.Hkv = hkv;
    return c;
  };
  FlashCase c = long_case(SY_DTYPE_BF16, 128, 1, 1, 3000, 8, 2);
  c.sinks = true;
  out.push_back(c);
  c = long_case(SY_DTYPE_F16, 64, 2, 1, 3001, 4, 4);
  c.window = 700;
  c.kv_len = {1500, 2999};
  out.push_back(c);
  c = long_case(SY_DTYPE_BF16, 256, 1, 1, 2100, 2, 1);
  c.causal = true;
  c.softcap = 30;
  c.sinks = true;
  out.push_back(c);
  c = long_case(SY_DTYPE_BF16, 128, 1, 4, 2049, 8, 1);  // 4 query positions x 8 heads
  c.causal = true;
  c.kv_len = {1000};
  out.push_back(c);
  c = long_case(SY_DTYPE_F16, 128, 1, 300, 300, 16, 4);  // several row blocks, causal skips
  c.causal = true;
  c.window = 150;
  out.push_back(c);
  return out;
}

class CudaFlashGpu : public CudaFlash {
 protected:
  void SetUp() override {
    CudaFlash::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (plugin_->devices().empty())
      GTEST_SKIP() << "no CUDA device: " << plugin_->no_devices_reason();
  }
  // Runs a decoder op on the GPU; returns the outputs.
  std::vector<std::vector<double>> run_op(const std::string& kernel, const OpDesc& op,
                                          std::vector<test::HostTensor*> ins,
                                          std::vector<test::HostTensor*> outs) {
    std::string err = run_on_gpu(*plugin_, kernel_named(*plugin_, kernel), op, ins, outs);
    EXPECT_EQ(err, "") << kernel;
    std::vector<std::vector<double>> r;
    for (auto* h : outs) r.push_back(h->get());
    return r;
  }
};

TEST_F(CudaFlashGpu, FlashGridAgainstDoubleReference) {
  for (const FlashCase& c : flash_grid()) {
    SCOPED_TRACE(c.name());
    test::AttentionProblem p = c.problem(1);
    std::string err;
    test::AttentionResult got = run_flash(*plugin_, 0, true, c, p, &err);
    ASSERT_EQ(err, "") << c.name();
    expect_flash_close(c, got, test::reference_attention(p), kFlashOutTol, kFlashLseTol);
    if (HasFatalFailure()) return;
  }
}

TEST_F(CudaFlashGpu, FlashAgreesWithCpuOnednnInBf16) {
  auto cpu = load_plugin(test::kPluginDir / "cpu_onednn.so", LoadOptions{});
  ASSERT_TRUE(cpu.plugin) << cpu.diagnostic->reason;
  size_t sdpa = kernel_named(*cpu.plugin, "sdpa_attention");
  for (FlashCase c : flash_grid()) {
    if (c.dtype != SY_DTYPE_BF16) continue;
    SCOPED_TRACE(c.name());
    test::AttentionProblem p = c.problem(7), p2 = c.problem(7);
    std::string err;
    test::AttentionResult gpu = run_flash(*plugin_, 0, true, c, p, &err);
    ASSERT_EQ(err, "");
    test::AttentionResult host = run_flash(*cpu.plugin, sdpa, false, c, p2, &err);
    ASSERT_EQ(err, "");
    // Each is within the bf16 tolerance of the reference, so within twice of each other.
    expect_flash_close(c, gpu, host, 2 * kFlashOutTol, 2 * kFlashLseTol);
    if (HasFatalFailure()) return;
  }
}

TEST_F(CudaFlashGpu, FlashKvLenZeroGivesZeroAndMinusInfinity) {
  FlashCase c;
  c.Sq = 3;
  c.Skv = 40;
  c.kv_len = {0};
  test::AttentionProblem p = c.problem(3);
  std::string err;
  auto got = run_flash(*plugin_, 0, true, c, p, &err);
  ASSERT_EQ(err, "");
  expect_flash_close(c, got, test::reference_attention(p), kFlashOutTol, kFlashLseTol);
}

// A value of SWITCHYARD_CUDA_FLASH_SM90A it does not know is refused at prepare on any device,
// naming the variable and the value, rather than taken as off (docs/cuda_flash.md).
TEST_F(CudaFlashGpu, UnknownSm90aValueIsRefusedAtPrepare) {
  FlashCase c;
  c.Sq = 3;
  c.Skv = 40;
  test::AttentionProblem p = c.problem(3);
  std::string err;
  {
    test::ScopedEnv yes("SWITCHYARD_CUDA_FLASH_SM90A", "yes");
    run_flash(*plugin_, 0, true, c, p, &err);
  }
  EXPECT_THAT(err, ::testing::HasSubstr("SWITCHYARD_CUDA_FLASH_SM90A=yes"));
}

// ---- decoder ops against small double references -----------------------------------------

using test::HostTensor;

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
        << what << " [" << i << "]";
}

double tol_of(sy_dtype d) {
  return d == SY_DTYPE_F32 ? 1e-5 : d == SY_DTYPE_F16 ? 2e-3 : 1e-2;
}

constexpr sy_dtype kFloats[] = {SY_DTYPE_F32, SY_DTYPE_F16, SY_DTYPE_BF16};

TEST_F(CudaFlashGpu, RmsNormWithWeightOffset) {
  std::mt19937 rng(1);
  for (sy_dtype dt : kFloats) {
    const int64_t rows = 5, h = 300;
    HostTensor x(dt, {rows, h}), w(dt, {h}), y(dt, {rows, h});
    auto xv = x.set(test::uniform(size_t(rows * h), rng, -2, 2));
    auto wv = w.set(test::uniform(size_t(h), rng));
    OpDesc op;
    op.op = SY_OP_RMS_NORM;
    op.inputs = {x.desc(), w.desc()};
    op.outputs = {y.desc()};
    op.set(SY_ATTR_EPS, 1e-5);
    op.set(SY_ATTR_WEIGHT_OFFSET, 1.0);
    auto got = run_op("rms_norm", op, {&x, &w}, {&y})[0];
    std::vector<double> want(xv.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < h; ++c) ss += xv[r * h + c] * xv[r * h + c];
      double inv = 1.0 / std::sqrt(ss / h + 1e-5);
      for (int64_t c = 0; c < h; ++c) want[r * h + c] = xv[r * h + c] * inv * (1.0 + wv[c]);
    }
    expect_near_all(got, want, tol_of(dt), "rms_norm");
  }
}

TEST_F(CudaFlashGpu, GatedActivationsAndAdd) {
  std::mt19937 rng(2);
  for (sy_dtype dt : kFloats) {
    const int64_t n = 1000;
    for (const char* which : {"silu_mul", "gelu_none", "gelu_tanh", "add"}) {
      std::string w = which;
      bool add = w == "add";
      HostTensor a(dt, {4, n / 4}),
          b(dt, add ? std::vector<int64_t>{n / 4} : std::vector<int64_t>{4, n / 4}),
          y(dt, {4, n / 4});
      auto av = a.set(test::uniform(size_t(n), rng, -4, 4));
      auto bv = b.set(test::uniform(size_t(b.elements()), rng, -2, 2));
      OpDesc op;
      op.op = add ? SY_OP_ADD : w == "silu_mul" ? SY_OP_SILU_MUL : SY_OP_GELU_MUL;
      op.inputs = {a.desc(), b.desc()};
      op.outputs = {y.desc()};
      if (w == "gelu_tanh") op.set(SY_ATTR_GELU_APPROX, std::string("tanh"));
      auto got = run_op(add               ? "add"
                        : w == "silu_mul" ? "silu_mul"
                                          : "gelu_mul",
                        op, {&a, &b}, {&y})[0];
      std::vector<double> want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        double g = av[i], u = bv[size_t(i % b.elements())];
        if (add)
          want[i] = g + u;
        else if (w == "silu_mul")
          want[i] = g / (1 + std::exp(-g)) * u;
        else if (w == "gelu_none")
          want[i] = 0.5 * g * (1 + std::erf(g / std::sqrt(2.0))) * u;
        else
          want[i] = 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g))) * u;
      }
      expect_near_all(got, want, tol_of(dt), w);
    }
  }
}

TEST_F(CudaFlashGpu, SoftmaxAndArgmax) {
  std::mt19937 rng(3);
  for (sy_dtype dt : kFloats) {
    const int64_t rows = 3, n = 1001;
    HostTensor x(dt, {rows, n}), y(dt, {rows, n}), idx(SY_DTYPE_I64, {rows});
    auto xv = x.set(test::uniform(size_t(rows * n), rng, -5, 5));
    OpDesc sm;
    sm.op = SY_OP_SOFTMAX;
    sm.inputs = {x.desc()};
    sm.outputs = {y.desc()};
    auto got = run_op("softmax", sm, {&x}, {&y})[0];
    std::vector<double> want(xv.size());
    std::vector<double> best(rows);
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      int64_t at = 0;
      for (int64_t c = 0; c < n; ++c)
        if (xv[r * n + c] > mx) mx = xv[r * n + c], at = c;
      best[r] = double(at);
      for (int64_t c = 0; c < n; ++c) sum += std::exp(xv[r * n + c] - mx);
      for (int64_t c = 0; c < n; ++c) want[r * n + c] = std::exp(xv[r * n + c] - mx) / sum;
    }
    expect_near_all(got, want, tol_of(dt), "softmax");
    OpDesc am;
    am.op = SY_OP_ARGMAX;
    am.inputs = {x.desc()};
    am.outputs = {idx.desc()};
    EXPECT_EQ(run_op("argmax", am, {&x}, {&idx})[0], best);
  }
}

TEST_F(CudaFlashGpu, EmbeddingAndBadIdWritesNothing) {
  std::mt19937 rng(4);
  const int64_t v = 50, h = 70;
  HostTensor table(SY_DTYPE_BF16, {v, h}), ids(SY_DTYPE_I32, {2, 3}),
      rows(SY_DTYPE_BF16, {2, 3, h});
  auto tv = table.set(test::uniform(size_t(v * h), rng));
  auto iv = ids.set({0, 49, 7, 7, 3, 12});
  OpDesc op;
  op.op = SY_OP_EMBEDDING;
  op.inputs = {table.desc(), ids.desc()};
  op.outputs = {rows.desc()};
  auto got = run_op("embedding", op, {&table, &ids}, {&rows})[0];
  std::vector<double> want;
  for (double id : iv)
    for (int64_t c = 0; c < h; ++c) want.push_back(tv[size_t(id) * h + c]);
  EXPECT_EQ(got, want);
  ids.set({0, 50, 7, 7, 3, 12});
  rows.set(std::vector<double>(size_t(6 * h), 0.0));
  std::string err =
      run_on_gpu(*plugin_, kernel_named(*plugin_, "embedding"), op, {&table, &ids}, {&rows});
  EXPECT_THAT(err, ::testing::StartsWith("INVALID_ARGUMENT"));
  EXPECT_EQ(rows.get(), std::vector<double>(size_t(6 * h), 0.0));
}

TEST_F(CudaFlashGpu, RopeNeoxInterleavedPartial) {
  std::mt19937 rng(5);
  const int64_t B = 2, S = 3, H = 2, D = 16;
  for (const char* style : {"neox", "interleaved"})
    for (int64_t rot : {int64_t{16}, int64_t{8}})
      for (sy_dtype pos_dt : {SY_DTYPE_I32, SY_DTYPE_I64}) {
        HostTensor x(SY_DTYPE_F32, {B, S, H, D}), pos(pos_dt, {B, S}),
            y(SY_DTYPE_F32, {B, S, H, D});
        auto xv = x.set(test::uniform(size_t(B * S * H * D), rng));
        auto pv = pos.set({0, 1, 5, 100, 2000, 70000});
        OpDesc op;
        op.op = SY_OP_ROPE;
        op.inputs = {x.desc(), pos.desc()};
        op.outputs = {y.desc()};
        op.set(SY_ATTR_ROPE_STYLE, std::string(style));
        op.set(SY_ATTR_ROTARY_DIM, rot);
        op.set(SY_ATTR_ROPE_THETA, 10000.0);
        auto got = run_op("rope", op, {&x, &pos}, {&y})[0];
        std::vector<double> want = xv;
        bool neox = std::string(style) == "neox";
        for (int64_t t = 0; t < B * S; ++t)
          for (int64_t hh = 0; hh < H; ++hh)
            for (int64_t p = 0; p < rot / 2; ++p) {
              double ang = pv[t] * std::pow(10000.0, -2.0 * p / rot);
              int64_t base = (t * H + hh) * D;
              int64_t i1 = neox ? p : 2 * p, i2 = neox ? p + rot / 2 : 2 * p + 1;
              double x1 = xv[base + i1], x2 = xv[base + i2];
              want[base + i1] = x1 * std::cos(ang) - x2 * std::sin(ang);
              want[base + i2] = x2 * std::cos(ang) + x1 * std::sin(ang);
            }
        expect_near_all(got, want, 1e-5, std::string("rope ") + style);
      }
}

// A scaled rope: the frequency table (input 2) replaces θ^(−2i/R), the attention factor
// multiplies cos and sin.
TEST_F(CudaFlashGpu, RopeFrequencyTableAndAttentionFactor) {
  std::mt19937 rng(6);
  const int64_t B = 1, S = 4, H = 2, D = 16, rot = 16;
  HostTensor x(SY_DTYPE_F32, {B, S, H, D}), pos(SY_DTYPE_I64, {B, S}),
      table(SY_DTYPE_F32, {rot / 2}), y(SY_DTYPE_F32, {B, S, H, D});
  auto xv = x.set(test::uniform(size_t(B * S * H * D), rng));
  auto pv = pos.set({0, 3, 500, 70000});
  std::vector<double> f;
  for (int64_t i = 0; i < rot / 2; ++i)
    f.push_back(std::pow(500000.0, -2.0 * double(i) / rot) * (i < rot / 4 ? 1.0 : 0.125));
  auto tv = table.set(f);
  OpDesc op;
  op.op = SY_OP_ROPE;
  op.inputs = {x.desc(), pos.desc(), table.desc()};
  op.outputs = {y.desc()};
  op.set(SY_ATTR_ROPE_ATTENTION_FACTOR, 1.2);
  auto got = run_op("rope", op, {&x, &pos, &table}, {&y})[0];
  std::vector<double> want = xv;
  for (int64_t t = 0; t < B * S; ++t)
    for (int64_t hh = 0; hh < H; ++hh)
      for (int64_t p = 0; p < rot / 2; ++p) {
        double ang = pv[t] * tv[p], c = 1.2 * std::cos(ang), sn = 1.2 * std::sin(ang);
        int64_t base = (t * H + hh) * D;
        double x1 = xv[base + p], x2 = xv[base + p + rot / 2];
        want[base + p] = x1 * c - x2 * sn;
        want[base + p + rot / 2] = x2 * c + x1 * sn;
      }
  expect_near_all(got, want, 1e-5, "scaled rope");
}

TEST_F(CudaFlashGpu, SoftcapIsCapTimesTanh) {
  std::mt19937 rng(8);
  HostTensor x(SY_DTYPE_F32, {3, 257}), y(SY_DTYPE_F32, {3, 257});
  auto xv = x.set(test::uniform(size_t(3 * 257), rng, -100, 100));
  OpDesc op;
  op.op = SY_OP_SOFTCAP;
  op.inputs = {x.desc()};
  op.outputs = {y.desc()};
  op.set(SY_ATTR_SOFTCAP, 30.0);
  auto got = run_op("softcap", op, {&x}, {&y})[0];
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) want[i] = 30.0 * std::tanh(xv[i] / 30.0);
  expect_near_all(got, want, 1e-5, "softcap");
}

TEST_F(CudaFlashGpu, KvCacheAppendAndOverflowWritesNothing) {
  const int64_t B = 2, T = 3, Hkv = 2, D = 4, C = 8;
  HostTensor rows(SY_DTYPE_F16, {B, T, Hkv, D}), pos(SY_DTYPE_I64, {1}),
      cache(SY_DTYPE_F16, {B, C, Hkv, D});
  std::vector<double> rv(size_t(B * T * Hkv * D));
  for (size_t i = 0; i < rv.size(); ++i) rv[i] = double(i % 100) + 1;
  rows.set(rv);
  pos.set({4});
  cache.set(std::vector<double>(size_t(B * C * Hkv * D), 0.0));
  OpDesc op;
  op.op = SY_OP_KV_CACHE_APPEND;
  op.inputs = {rows.desc(), pos.desc()};
  op.outputs = {cache.desc()};
  auto got = run_op("kv_cache_append", op, {&rows, &pos}, {&cache})[0];
  std::vector<double> want(static_cast<size_t>(B * C * Hkv * D), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < Hkv * D; ++e)
        want[((b * C) + 4 + t) * Hkv * D + e] = rv[((b * T) + t) * Hkv * D + e];
  EXPECT_EQ(got, want);
  pos.set({6});  // 6 + 3 > 8
  cache.set(std::vector<double>(size_t(B * C * Hkv * D), 0.0));
  std::string err =
      run_on_gpu(*plugin_, kernel_named(*plugin_, "kv_cache_append"), op, {&rows, &pos}, {&cache});
  EXPECT_THAT(err, ::testing::StartsWith("INVALID_ARGUMENT"));
  EXPECT_EQ(cache.get(), std::vector<double>(size_t(B * C * Hkv * D), 0.0));
}

TEST_F(CudaFlashGpu, CopyConvertsBetweenFloats) {
  std::mt19937 rng(6);
  for (sy_dtype from : kFloats)
    for (sy_dtype to : kFloats) {
      HostTensor x(from, {3, 33}), y(to, {3, 33}), ref(to, {3, 33});
      auto xv = x.set(test::uniform(99, rng, -3, 3));
      OpDesc op;
      op.op = SY_OP_COPY;
      op.inputs = {x.desc()};
      op.outputs = {y.desc()};
      auto got = run_op("copy", op, {&x}, {&y})[0];
      EXPECT_EQ(got, ref.set(xv)) << sy_dtype_name(from) << " -> " << sy_dtype_name(to);
    }
}

TEST_F(CudaFlashGpu, MatmulTransposedBThroughCublas) {
  std::mt19937 rng(7);
  for (sy_dtype dt : kFloats)
    for (int64_t tb : {0, 1}) {
      const int64_t M = 5, K = 70, N = 33;
      HostTensor a(dt, {M, K}), b(dt, tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N}),
          c(dt, {M, N});
      auto av = a.set(test::uniform(size_t(M * K), rng));
      auto bv = b.set(test::uniform(size_t(K * N), rng));
      OpDesc op;
      op.op = SY_OP_MATMUL;
      op.inputs = {a.desc(), b.desc()};
      op.outputs = {c.desc()};
      op.set(SY_ATTR_TRANSPOSE_B, tb);
      auto got = run_op("matmul", op, {&a, &b}, {&c})[0];
      std::vector<double> want(static_cast<size_t>(M * N), 0.0);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t k = 0; k < K; ++k)
            want[m * N + n] += av[m * K + k] * (tb ? bv[n * K + k] : bv[k * N + n]);
      // f32 on Hopper may use TF32-free fp32 compute; allow K-scaled rounding.
      expect_near_all(got, want, dt == SY_DTYPE_F32 ? 1e-4 : 2e-2, "matmul");
    }
}

// The paged attention: sequences packed along T, a shuffled NaN-filled pool, every sequence's
// rows against the reference alone; prepared for more tokens and sequences than the step has.
TEST_F(CudaFlashGpu, PagedFlashAgainstTheReferenceOnActualExtents) {
  for (bool decode : {false, true}) {
    test::PagedAttentionCase c;
    c.name = decode ? "decode of 3, split-KV" : "prefill chunks and decode rows, window, sinks";
    SCOPED_TRACE(c.name);
    c.q_lens = decode ? std::vector<int>{1, 1, 1} : std::vector<int>{21, 9, 1, 1};
    c.lens = decode ? std::vector<int>{3000, 129, 2} : std::vector<int>{21, 49, 70, 5};
    c.Hq = 8, c.Hkv = 2;
    c.sinks = true;
    if (!decode) c.window = 30;
    const int D = 128;
    test::PagedAttentionStep st(c, D, 5);
    test::PagedAttentionOp p(st, c, D, SY_MEMORY_DEVICE, 7, 2);
    std::string err = run_on_gpu(*plugin_, kernel_named(*plugin_, "flash_attention"), p.op,
                                 p.inputs(), p.outputs());
    ASSERT_EQ(err, "");
    EXPECT_EQ(st.mismatch(p.o.get(), p.lse_values(), kFlashOutTol, kFlashLseTol), "");
    // A block table naming a block outside the pool is refused before anything runs.
    static_cast<int32_t*>(p.table.bytes())[0] = int32_t(st.NB);
    err = run_on_gpu(*plugin_, kernel_named(*plugin_, "flash_attention"), p.op, p.inputs(),
                     p.outputs());
    EXPECT_THAT(err, ::testing::HasSubstr("block table entry 0 of sequence 0"));
  }
}

TEST_F(CudaFlashGpu, PagedAppendWritesItsSlotsAndRefusesOneOutsideThePool) {
  const int64_t T = 5, Hkv = 2, D = 64, NB = 4, BS = 4;
  HostTensor rows(SY_DTYPE_BF16, {1, T, Hkv, D}), slots(SY_DTYPE_I64, {T}),
      pool(SY_DTYPE_BF16, {NB, BS, Hkv, D});
  std::vector<double> rv(size_t(T * Hkv * D));
  for (size_t i = 0; i < rv.size(); ++i) rv[i] = double(i % 50) + 1;
  rows.set(rv);
  const std::vector<double> where = {13, 2, 7, 0, 15};
  slots.set(where);
  pool.set(std::vector<double>(size_t(NB * BS * Hkv * D), 0.0));
  OpDesc op;
  op.op = SY_OP_KV_CACHE_APPEND;
  op.inputs = {{SY_DTYPE_BF16, {1, 8, Hkv, D}, SY_MEMORY_DEVICE, 2u},
               {SY_DTYPE_I64, {8}, SY_MEMORY_DEVICE, 1u}};
  op.outputs = {pool.desc()};
  op.set(SY_ATTR_PAGED, int64_t{1});
  auto got = run_op("kv_cache_append", op, {&rows, &slots}, {&pool})[0];
  std::vector<double> want(size_t(NB * BS * Hkv * D), 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < Hkv * D; ++e)
      want[size_t(where[size_t(t)]) * Hkv * D + e] = rv[size_t(t * Hkv * D + e)];
  EXPECT_EQ(got, want);
  slots.set({13, 2, 16, 0, 15});  // 16 = NB·BS: past the pool
  pool.set(std::vector<double>(size_t(NB * BS * Hkv * D), 0.0));
  std::string err =
      run_on_gpu(*plugin_, kernel_named(*plugin_, "kv_cache_append"), op, {&rows, &slots}, {&pool});
  EXPECT_THAT(err, ::testing::StartsWith("INVALID_ARGUMENT"));
  EXPECT_EQ(pool.get(), std::vector<double>(size_t(NB * BS * Hkv * D), 0.0));
}

// A decoder op prepared for 9 rows runs on the 4 an execute carries (varlen), and leaves the
// rest of its output alone.
TEST_F(CudaFlashGpu, VarlenRmsNormAndMatmulRunTheActualRows) {
  std::mt19937 rng(12);
  HostTensor x(SY_DTYPE_F32, {4, 64}), w(SY_DTYPE_F32, {64}), y(SY_DTYPE_F32, {4, 64}),
      b(SY_DTYPE_F32, {48, 64}), c(SY_DTYPE_F32, {4, 48});
  const auto xv = x.set(test::uniform(4 * 64, rng)), wv = w.set(test::uniform(64, rng));
  const auto bv = b.set(test::uniform(48 * 64, rng));
  OpDesc norm;
  norm.op = SY_OP_RMS_NORM;
  norm.inputs = {{SY_DTYPE_F32, {9, 64}, SY_MEMORY_DEVICE, 1u}, w.desc()};
  norm.outputs = {{SY_DTYPE_F32, {9, 64}, SY_MEMORY_DEVICE, 1u}};
  norm.set(SY_ATTR_EPS, 1e-5);
  auto got = run_op("rms_norm", norm, {&x, &w}, {&y})[0];
  for (int64_t r = 0; r < 4; ++r) {
    double ss = 0;
    for (int64_t e = 0; e < 64; ++e) ss += xv[size_t(r * 64 + e)] * xv[size_t(r * 64 + e)];
    const double inv = 1.0 / std::sqrt(ss / 64 + 1e-5);
    for (int64_t e = 0; e < 64; ++e)
      ASSERT_NEAR(got[size_t(r * 64 + e)], xv[size_t(r * 64 + e)] * inv * wv[size_t(e)], 1e-5);
  }
  OpDesc mm;
  mm.op = SY_OP_MATMUL;
  mm.inputs = {{SY_DTYPE_F32, {9, 64}, SY_MEMORY_DEVICE, 1u}, b.desc()};
  mm.outputs = {{SY_DTYPE_F32, {9, 48}, SY_MEMORY_DEVICE, 1u}};
  mm.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
  got = run_op("matmul", mm, {&x, &b}, {&c})[0];
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t n = 0; n < 48; ++n) {
      double want = 0;
      for (int64_t e = 0; e < 64; ++e) want += xv[size_t(r * 64 + e)] * bv[size_t(n * 64 + e)];
      ASSERT_NEAR(got[size_t(r * 48 + n)], want, 1e-4);
    }
}

}  // namespace
}  // namespace sy
