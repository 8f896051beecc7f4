// cuda_flash without a GPU: it loads, reports zero devices with the reason, and answers
// check for a described device, so plans for a GPU machine can be made here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/plugin/loader.hpp"
#include "support/ops.hpp"
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

}  // namespace
}  // namespace sy
