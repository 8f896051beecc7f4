// The host's envelope match and feature derivation, against hand-built expectations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/ops.hpp"

namespace sy {
namespace {

using test::attention_op;
using test::AttentionSpec;
using test::constraints;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// The candle-flash-attn shape: CUDA only, f16/bf16 only, no sinks, fixed head dims.
Envelope flash_like() {
  Envelope e;
  e.kernel = "flash";
  e.op = SY_OP_ATTENTION;
  e.family = "flash";
  e.device_type = kDLCUDA;
  e.dtypes = SY_DTYPE_BIT(SY_DTYPE_F16) | SY_DTYPE_BIT(SY_DTYPE_BF16);
  e.features = SY_FEATURE_BIT(SY_FEATURE_CAUSAL) | SY_FEATURE_BIT(SY_FEATURE_GQA);
  e.head_dims = {64, 128};
  return e;
}

TEST(FeatureDerivation, EachAttributeMapsToItsFeature) {
  AttentionSpec s;
  EXPECT_EQ(attention_op(s).required_features(), 0u);
  s.causal = true;
  s.window_left = 128;
  s.softcap = 30.0;
  s.sinks = true;
  s.lse = true;
  s.q_heads = 32;
  s.kv_heads = 8;
  s.batch = 3;
  s.q_len = 1;
  s.kv_len = 4096;
  s.scale = 0.5;
  uint64_t f = attention_op(s).required_features();
  for (sy_feature x : {SY_FEATURE_CAUSAL, SY_FEATURE_SLIDING_WINDOW, SY_FEATURE_SOFTCAP,
                       SY_FEATURE_SINKS, SY_FEATURE_LSE, SY_FEATURE_GQA, SY_FEATURE_BATCH,
                       SY_FEATURE_DECODE, SY_FEATURE_CUSTOM_SCALE})
    EXPECT_TRUE(f & SY_FEATURE_BIT(x)) << sy_feature_name(x);
  EXPECT_FALSE(f & SY_FEATURE_BIT(SY_FEATURE_PAGED_KV));
}

TEST(FeatureDerivation, NaturalScaleIsNotCustom) {
  AttentionSpec s;
  s.head_dim = 128;
  s.scale = 1.0 / std::sqrt(128.0);
  EXPECT_FALSE(attention_op(s).required_features() & SY_FEATURE_BIT(SY_FEATURE_CUSTOM_SCALE));
}

TEST(EnvelopeMatch, InsideTheEnvelopeHasNoRefusal) {
  AttentionSpec s;
  s.dtype = SY_DTYPE_BF16;
  s.causal = true;
  s.memory = SY_MEMORY_DEVICE;
  EXPECT_TRUE(envelope_refusals(flash_like(), attention_op(s), test::described_gpu()).empty());
}

TEST(EnvelopeMatch, ReportsEveryFailingConstraintNotOnlyTheFirst) {
  AttentionSpec s;  // f32, on the CPU, with sinks and LSE, head dim 96
  s.sinks = true;
  s.lse = true;
  s.head_dim = 96;
  auto refusals = envelope_refusals(flash_like(), attention_op(s), test::cpu_device());
  EXPECT_THAT(constraints(refusals),
              ElementsAre("device_type", "dtype", "feature:sinks", "feature:lse", "head_dim"));
  EXPECT_EQ(refusals[0].required, "cpu");
  EXPECT_EQ(refusals[0].offered, "cuda");
  EXPECT_EQ(refusals[1].required, "f32");
  EXPECT_EQ(refusals[1].offered, "f16,bf16");
  EXPECT_EQ(refusals[4].offered, "64,128");
}

TEST(EnvelopeMatch, GqaRatioLimit) {
  Envelope e = flash_like();
  e.max_gqa_ratio = 1;
  e.features &= ~SY_FEATURE_BIT(SY_FEATURE_GQA);
  AttentionSpec s;
  s.dtype = SY_DTYPE_F16;
  s.q_heads = 32;
  s.kv_heads = 8;
  s.memory = SY_MEMORY_DEVICE;
  auto refusals = envelope_refusals(e, attention_op(s), test::described_gpu());
  EXPECT_THAT(constraints(refusals), ElementsAre("feature:gqa", "gqa_ratio"));
  EXPECT_EQ(refusals[1].required, "4");
}

TEST(EnvelopeMatch, HostOnlyOperandsRefuseDeviceMemory) {
  Envelope e;
  e.kernel = "fused";
  e.op = SY_OP_ATTENTION;
  e.device_type = kDLCPU;
  e.dtypes = SY_DTYPE_BIT(SY_DTYPE_F32);
  e.default_residency = SY_RESIDENCY_HOST;
  OpDesc op = attention_op({});
  op.inputs[1].memory = SY_MEMORY_DEVICE;  // k lives on a GPU
  auto refusals = envelope_refusals(e, op, test::cpu_device());
  ASSERT_THAT(constraints(refusals), ElementsAre("residency"));
  EXPECT_EQ(refusals[0].required, "input 1 in device memory");
  EXPECT_EQ(refusals[0].offered, "input 1 in host memory");
}

TEST(EnvelopeMatch, UnavailableDeviceIsARefusal) {
  DeviceInfo d = test::described_gpu("sm_75");
  d.available = false;
  d.unavailable_reason = "driver too old";
  AttentionSpec s;
  s.dtype = SY_DTYPE_F16;
  s.memory = SY_MEMORY_DEVICE;
  auto refusals = envelope_refusals(flash_like(), attention_op(s), d);
  ASSERT_THAT(constraints(refusals), ElementsAre("device_available"));
  EXPECT_NE(refusals[0].text.find("driver too old"), std::string::npos);
}

TEST(EnvelopeMatch, HeadDimMultipleAndMaximum) {
  Envelope e;
  e.head_dim_multiple = 16;
  e.head_dim_max = 256;
  EXPECT_TRUE(e.accepts_head_dim(80));
  EXPECT_TRUE(e.accepts_head_dim(256));
  EXPECT_FALSE(e.accepts_head_dim(24));
  EXPECT_FALSE(e.accepts_head_dim(272));
  EXPECT_FALSE(e.accepts_head_dim(0));
}

TEST(EnvelopeJson, RoundTripsExactly) {
  Envelope e = flash_like();
  e.operand_residency = {SY_RESIDENCY_HOST, SY_RESIDENCY_ANY};
  e.max_gqa_ratio = 8;
  e.cost_hint = 0.25;
  nlohmann::json j = to_json(e);
  EXPECT_EQ(to_json(envelope_from_json(j)), j);
  EXPECT_THAT(j["dtypes"], ElementsAre("f16", "bf16"));
}

TEST(EnvelopeJson, UnknownNamesAreErrorsNamingTheField) {
  nlohmann::json j = to_json(flash_like());
  j["dtypes"] = {"f32", "f7"};
  try {
    envelope_from_json(j);
    FAIL() << "accepted an unknown dtype";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("dtypes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f7"), std::string::npos) << e.what();
  }
  j = to_json(flash_like());
  j.erase("family");
  EXPECT_THROW(envelope_from_json(j), std::runtime_error);
}

}  // namespace
}  // namespace sy
