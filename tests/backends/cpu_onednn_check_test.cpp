// cpu_onednn's declared envelopes and its check, through the real plugin.
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

class CpuOnednn : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto out = load_plugin(test::kPluginDir / "cpu_onednn.so", LoadOptions{});
    ASSERT_TRUE(out.plugin) << out.diagnostic->reason;
    plugin_ = out.plugin.release();
  }
  static void TearDownTestSuite() { delete plugin_; }
  size_t kernel(const std::string& name) {
    for (size_t i = 0; i < plugin_->kernels().size(); ++i)
      if (plugin_->kernels()[i].kernel == name) return i;
    throw std::runtime_error("no kernel " + name);
  }
  CheckResult check(const std::string& kernel_name, const OpDesc& op) {
    return plugin_->check(kernel(kernel_name), plugin_->devices().at(0), op);
  }
  static Plugin* plugin_;
};
Plugin* CpuOnednn::plugin_ = nullptr;

TEST_F(CpuOnednn, OneAvailableHostMemoryCpuDevice) {
  ASSERT_EQ(plugin_->devices().size(), 1u);
  const DeviceInfo& d = plugin_->devices()[0];
  EXPECT_EQ(d.type, kDLCPU);
  EXPECT_TRUE(d.available);
  EXPECT_TRUE(d.memory_is_host);
  EXPECT_GE(d.compute_units, 1);
  EXPECT_FALSE(d.arch.empty());
}

TEST_F(CpuOnednn, SdpaServesWhatOtherStacksRefuseOnCpu) {
  AttentionSpec s;
  s.causal = true;
  s.sinks = true;
  s.lse = true;
  s.window_left = 128;
  s.softcap = 30;
  s.q_heads = 64;
  s.kv_heads = 8;
  s.head_dim = 80;
  s.batch = 3;
  auto r = check("sdpa_attention", attention_op(s));
  EXPECT_TRUE(r.accepted) << (r.refusals.empty() ? "" : r.refusals[0].text);
  s.dtype = SY_DTYPE_BF16;
  EXPECT_TRUE(check("sdpa_attention", attention_op(s)).accepted);
}

TEST_F(CpuOnednn, SdpaRefusesWithEveryReason) {
  AttentionSpec s;
  s.dtype = SY_DTYPE_F16;
  s.head_dim = 24;
  s.q_heads = 6;
  s.kv_heads = 4;
  auto r = check("sdpa_attention", attention_op(s));
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(constraints(r.refusals),
            (std::vector<std::string>{"dtype", "head_dim", "gqa_divisible"}));
}

TEST_F(CpuOnednn, SdpaRefusesDeviceMemory) {
  AttentionSpec s;
  s.memory = SY_MEMORY_DEVICE;
  auto r = check("sdpa_attention", attention_op(s));
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(r.refusals.size(), 4u);  // q, k, v, o
  EXPECT_EQ(r.refusals[0].constraint, "residency");
}

TEST_F(CpuOnednn, FusedDecodeIsHostOnlyForEveryOperand) {
  const Envelope& e = plugin_->kernels()[kernel("fused_decode_attention")];
  EXPECT_EQ(e.default_residency, SY_RESIDENCY_HOST);
  EXPECT_TRUE(e.operand_residency.empty());
  EXPECT_EQ(e.family, "fused_decode");
}

}  // namespace
}  // namespace sy
