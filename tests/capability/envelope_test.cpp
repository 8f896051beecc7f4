// The host's envelope match and feature derivation, against hand-built expectations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/ops.hpp"
#include "switchyard/op_contract.h"

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

// The paged form (ABI 1.5) needs paged_kv and, with dynamic extents, varlen; several sequences
// are a batch; its sinks are counted before the three metadata inputs.
TEST(FeatureDerivation, PagedAttentionNeedsPagedKvVarlenAndBatch) {
  test::PagedSpec s;
  s.sinks = true;
  uint64_t f = test::paged_attention_op(s).required_features();
  for (sy_feature x : {SY_FEATURE_PAGED_KV, SY_FEATURE_VARLEN, SY_FEATURE_BATCH, SY_FEATURE_GQA,
                       SY_FEATURE_CAUSAL, SY_FEATURE_SINKS})
    EXPECT_TRUE(f & SY_FEATURE_BIT(x)) << sy_feature_name(x);
  s.sinks = false;
  s.sequences = 1;
  s.dynamic = false;
  f = test::paged_attention_op(s).required_features();
  EXPECT_FALSE(f & SY_FEATURE_BIT(SY_FEATURE_SINKS));
  EXPECT_FALSE(f & SY_FEATURE_BIT(SY_FEATURE_BATCH));
  EXPECT_FALSE(f & SY_FEATURE_BIT(SY_FEATURE_VARLEN));
  EXPECT_TRUE(f & SY_FEATURE_BIT(SY_FEATURE_PAGED_KV));
  f = test::paged_append_op(test::PagedSpec{}).required_features();
  EXPECT_EQ(f, SY_FEATURE_BIT(SY_FEATURE_PAGED_KV) | SY_FEATURE_BIT(SY_FEATURE_VARLEN));
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
  e.weight_dtypes = SY_DTYPE_BIT(SY_DTYPE_Q4_K) | SY_DTYPE_BIT(SY_DTYPE_Q8_0);
  nlohmann::json j = to_json(e);
  EXPECT_EQ(to_json(envelope_from_json(j)), j);
  EXPECT_THAT(j["dtypes"], ElementsAre("f16", "bf16"));
  EXPECT_THAT(j["weight_dtypes"], ElementsAre("q8_0", "q4_k"));
  j.erase("weight_dtypes");  // a manifest from before ABI 1.3
  EXPECT_EQ(envelope_from_json(j).weight_dtypes, 0u);
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

namespace sy {
namespace {

using ::testing::ElementsAre;

// matmul a f32 [3, K] · b [N, K] (transpose_b) -> c f32 [3, N], b of `weight` dtype.
OpDesc quantized_matmul(sy_dtype weight, int64_t k, int64_t n, int64_t transpose_b = 1) {
  OpDesc op;
  op.op = SY_OP_MATMUL;
  op.inputs = {{SY_DTYPE_F32, {3, k}, SY_MEMORY_HOST},
               {weight, transpose_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n},
                SY_MEMORY_HOST}};
  op.outputs = {{SY_DTYPE_F32, {3, n}, SY_MEMORY_HOST}};
  op.set(SY_ATTR_TRANSPOSE_B, transpose_b);
  return op;
}

std::vector<Refusal> contract_refusals(const OpDesc& op) {
  std::vector<Refusal> out;
  AbiOpView v(op);
  sy_op_contract_check(
      v.get(),
      [](void* ctx, const sy_refusal* r) {
        static_cast<std::vector<Refusal>*>(ctx)->push_back(
            {r->constraint, r->required, r->offered, r->text});
      },
      &out);
  return out;
}

Envelope cpu_matmul(uint64_t weight_dtypes) {
  Envelope e;
  e.kernel = "matmul";
  e.op = SY_OP_MATMUL;
  e.family = "generic";
  e.dtypes = SY_DTYPE_BIT(SY_DTYPE_F32) | SY_DTYPE_BIT(SY_DTYPE_BF16);
  e.features = SY_FEATURE_BIT(SY_FEATURE_TRANSPOSED_B);
  e.weight_dtypes = weight_dtypes;
  return e;
}

TEST(BlockQuantized, BytesAreWholeBlocksOfEachType) {
  struct Want {
    sy_dtype d;
    uint32_t elements, bytes;
    const char* name;
  };
  for (Want w : {Want{SY_DTYPE_Q8_0, 32, 34, "q8_0"}, Want{SY_DTYPE_Q4_0, 32, 18, "q4_0"},
                 Want{SY_DTYPE_Q4_1, 32, 20, "q4_1"}, Want{SY_DTYPE_Q4_K, 256, 144, "q4_k"},
                 Want{SY_DTYPE_Q5_K, 256, 176, "q5_k"}, Want{SY_DTYPE_Q6_K, 256, 210, "q6_k"},
                 // ABI 1.6; gguf.constants.GGML_QUANT_SIZES
                 Want{SY_DTYPE_Q5_0, 32, 22, "q5_0"}, Want{SY_DTYPE_Q5_1, 32, 24, "q5_1"},
                 Want{SY_DTYPE_IQ4_NL, 32, 18, "iq4_nl"}, Want{SY_DTYPE_IQ4_XS, 256, 136, "iq4_xs"},
                 Want{SY_DTYPE_Q2_K, 256, 84, "q2_k"}, Want{SY_DTYPE_Q3_K, 256, 110, "q3_k"},
                 // ABI 1.7; GGML_QUANT_SIZES[MXFP4]
                 Want{SY_DTYPE_MXFP4, 32, 17, "mxfp4"}}) {
    SCOPED_TRACE(w.name);
    EXPECT_STREQ(sy_dtype_name(w.d), w.name);
    EXPECT_TRUE(sy_dtype_is_blocked(w.d));
    EXPECT_EQ(sy_dtype_size(w.d), 0u);
    EXPECT_EQ(sy_dtype_block_elements(w.d), w.elements);
    EXPECT_EQ(sy_dtype_block_bytes(w.d), w.bytes);
    int64_t shape[2] = {5, 4 * int64_t(w.elements)};
    EXPECT_EQ(sy_tensor_bytes(w.d, 2, shape), 5 * 4 * int64_t(w.bytes));
    shape[1] = int64_t(w.elements) + 1;
    EXPECT_EQ(sy_tensor_bytes(w.d, 2, shape), -1);  // not whole blocks
    DLDataType dl = sy_dtype_to_dl(w.d);
    EXPECT_EQ(dl.code, kDLOpaqueHandle);
    EXPECT_EQ(dl.lanes, uint16_t(w.d));
    EXPECT_TRUE(sy_dtype_matches_dl(w.d, dl));
    EXPECT_FALSE(sy_dtype_matches_dl(SY_DTYPE_U8, dl));
  }
  int64_t plain[2] = {3, 7}, huge[2] = {int64_t(1) << 40, int64_t(1) << 40};
  EXPECT_EQ(sy_tensor_bytes(SY_DTYPE_BF16, 2, plain), 42);
  EXPECT_EQ(sy_tensor_bytes(SY_DTYPE_F32, 0, nullptr), 4);
  EXPECT_EQ(sy_tensor_bytes(SY_DTYPE_F64, 2, huge), -1);
  EXPECT_FALSE(sy_dtype_is_blocked(SY_DTYPE_U8));
}

TEST(BlockQuantized, WeightsNeedTheEnvelopesWeightDtypes) {
  OpDesc op = quantized_matmul(SY_DTYPE_Q4_K, 512, 8);
  EXPECT_TRUE(contract_refusals(op).empty());
  auto without = envelope_refusals(cpu_matmul(0), op, test::cpu_device());
  ASSERT_EQ(without.size(), 1u) << without[1].constraint << ": " << without[1].text;
  EXPECT_EQ(without[0].constraint, "dtype");
  EXPECT_EQ(without[0].required, "q4_k");
  EXPECT_EQ(without[0].text,
            "dtype q4_k of the weights (input 1) is outside the kernel's dtypes (f32,bf16)");
  auto other = envelope_refusals(cpu_matmul(SY_DTYPE_BIT(SY_DTYPE_Q8_0)), op, test::cpu_device());
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].offered, "q8_0");
  EXPECT_TRUE(
      envelope_refusals(cpu_matmul(SY_DTYPE_BIT(SY_DTYPE_Q4_K)), op, test::cpu_device()).empty());
}

TEST(BlockQuantized, AnEmbeddingsDtypeIsItsRowsWhenTheTableIsQuantized) {
  OpDesc op;
  op.op = SY_OP_EMBEDDING;
  op.inputs = {{SY_DTYPE_Q8_0, {100, 64}, SY_MEMORY_HOST}, {SY_DTYPE_I64, {5}, SY_MEMORY_HOST}};
  op.outputs = {{SY_DTYPE_BF16, {5, 64}, SY_MEMORY_HOST}};
  EXPECT_EQ(op.dtype(), SY_DTYPE_BF16);
  EXPECT_TRUE(contract_refusals(op).empty());
  op.outputs[0].dtype = SY_DTYPE_I32;
  auto r = contract_refusals(op);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].constraint, "block_dtype");
  EXPECT_TRUE(sy_contract_is_dtype_constraint("block_dtype"));
}

TEST(BlockQuantized, TheContractRefusesThemWhereTheyCannotBe) {
  auto only = [](const OpDesc& op) {
    std::vector<std::string> c;
    for (const Refusal& r : contract_refusals(op)) c.push_back(r.constraint + ": " + r.text);
    return c;
  };
  EXPECT_THAT(only(quantized_matmul(SY_DTYPE_Q4_0, 64, 8, 0)),
              ElementsAre("block_dtype: b is q4_0: block-quantized weights are stored as rows of "
                          "K ([N, K], transpose_b=1)"));
  EXPECT_THAT(only(quantized_matmul(SY_DTYPE_Q6_K, 320, 8)),
              ElementsAre("block_dtype: b is q6_k: its rows of 320 elements are not whole blocks "
                          "of 256"));
  OpDesc add;
  add.op = SY_OP_ADD;
  add.inputs = {{SY_DTYPE_Q8_0, {2, 32}, SY_MEMORY_HOST}, {SY_DTYPE_Q8_0, {2, 32}, SY_MEMORY_HOST}};
  add.outputs = {{SY_DTYPE_Q8_0, {2, 32}, SY_MEMORY_HOST}};
  EXPECT_EQ(only(add).size(), 3u);
  OpDesc copy;
  copy.op = SY_OP_COPY;
  copy.inputs = {{SY_DTYPE_Q4_K, {2, 256}, SY_MEMORY_HOST}};
  copy.outputs = {{SY_DTYPE_Q4_K, {2, 256}, SY_MEMORY_DEVICE}};
  EXPECT_TRUE(only(copy).empty());
}

// The fused decode block's three projections may be quantized (each rows of whole blocks); an
// envelope without their dtype refuses once per dtype, naming the first input that has it.
TEST(BlockQuantized, FusedDecodeProjectionsMayBeQuantized) {
  OpDesc op;
  op.op = SY_OP_FUSED_DECODE_ATTENTION;
  op.inputs = {{SY_DTYPE_F32, {1, 1, 64}, SY_MEMORY_HOST},
               {SY_DTYPE_Q4_1, {128, 64}, SY_MEMORY_HOST},
               {SY_DTYPE_Q4_1, {64, 64}, SY_MEMORY_HOST},
               {SY_DTYPE_Q8_0, {64, 64}, SY_MEMORY_HOST},
               {SY_DTYPE_I64, {1}, SY_MEMORY_HOST}};
  op.outputs = {{SY_DTYPE_F32, {1, 1, 2, 64}, SY_MEMORY_HOST},
                {SY_DTYPE_F32, {1, 16, 1, 64}, SY_MEMORY_HOST},
                {SY_DTYPE_F32, {1, 16, 1, 64}, SY_MEMORY_HOST}};
  EXPECT_TRUE(contract_refusals(op).empty());
  Envelope e;
  e.kernel = "fused_decode_attention";
  e.op = SY_OP_FUSED_DECODE_ATTENTION;
  e.family = "fused_decode";
  e.dtypes = SY_DTYPE_BIT(SY_DTYPE_F32);
  e.features = SY_FEATURE_BIT(SY_FEATURE_CAUSAL) | SY_FEATURE_BIT(SY_FEATURE_DECODE) |
               SY_FEATURE_BIT(SY_FEATURE_GQA) | SY_FEATURE_BIT(SY_FEATURE_ROPE_NEOX);
  std::vector<std::string> texts;
  for (const Refusal& r : envelope_refusals(e, op, test::cpu_device()))
    if (r.constraint == "dtype") texts.push_back(r.text);
  EXPECT_THAT(texts, ElementsAre("dtype q4_1 of the weights (input 1) is outside the kernel's "
                                 "dtypes (f32)",
                                 "dtype q8_0 of the weights (input 3) is outside the kernel's "
                                 "dtypes (f32)"));
  e.weight_dtypes = SY_DTYPE_BIT(SY_DTYPE_Q4_1) | SY_DTYPE_BIT(SY_DTYPE_Q8_0);
  for (const Refusal& r : envelope_refusals(e, op, test::cpu_device()))
    EXPECT_NE(r.constraint, "dtype") << r.text;
  op.inputs[2].shape = {64, 48};  // not whole blocks, and not [Hkv·D, H]
  bool whole_blocks = false;
  for (const Refusal& r : contract_refusals(op))
    whole_blocks |= r.text == "wk is q4_1: its rows of 48 elements are not whole blocks of 32";
  EXPECT_TRUE(whole_blocks);
}

}  // namespace
}  // namespace sy

namespace sy {
namespace {

std::vector<std::string> constraint_names(const OpDesc& op) {
  std::vector<std::string> out;
  AbiOpView view(op);
  sy_op_contract_check(
      view.get(),
      [](void* ctx, const sy_refusal* r) {
        static_cast<std::vector<std::string>*>(ctx)->push_back(r->constraint);
      },
      &out);
  return out;
}

// The paged forms' contracts (docs/abi.md, "Varlen and paged"): well-formed operators pass, and
// each malformed operand is refused by name.
TEST(PagedContract, WellFormedOperatorsPass) {
  test::PagedSpec s;
  s.sinks = s.lse = true;
  EXPECT_EQ(constraint_names(test::paged_attention_op(s)), std::vector<std::string>{});
  EXPECT_EQ(constraint_names(test::paged_append_op(s)), std::vector<std::string>{});
}

TEST(PagedContract, MalformedOperandsAreRefusedByName) {
  test::PagedSpec s;
  OpDesc op = test::paged_attention_op(s);
  op.inputs[3].dtype = SY_DTYPE_I64;  // query_start must be i32
  EXPECT_THAT(constraint_names(op), ::testing::Contains("index_dtype"));
  op = test::paged_attention_op(s);
  op.inputs[4].shape = {3};  // seq_lens of another S than query_start's S+1
  EXPECT_THAT(constraint_names(op), ::testing::Contains("shape_match"));
  op = test::paged_attention_op(s);
  op.inputs[0].shape[0] = 2;  // q must pack every token along one axis: [1, T, Hq, D]
  EXPECT_THAT(constraint_names(op), ::testing::Contains("shape"));
  op = test::paged_attention_op(s);
  op.set(SY_ATTR_KV_LEN_INPUT, int64_t{1});
  EXPECT_THAT(constraint_names(op), ::testing::Contains("attribute"));
  op = test::paged_attention_op(s);
  op.inputs.pop_back();
  EXPECT_THAT(constraint_names(op), ::testing::Contains("operands"));
  op = test::paged_append_op(s);
  op.inputs[1].shape = {s.tokens - 1};  // one slot per row
  EXPECT_THAT(constraint_names(op), ::testing::Contains("shape_match"));
  op = test::paged_append_op(s);
  op.outputs[0].shape[3] = 32;  // the pool's D must be the rows'
  EXPECT_THAT(constraint_names(op), ::testing::Contains("shape_match"));
  op = test::paged_append_op(s);
  op.set(SY_ATTR_PAGED, int64_t{2});
  EXPECT_THAT(constraint_names(op), ::testing::Contains("attribute"));
}

}  // namespace
}  // namespace sy
