// cpu_onednn's block-quantized kernels, through the real plugin on every tier, against values no
// one here computed: the rows of tests/fixtures/gguf/tiny.gguf as PyPI gguf 0.19.0 dequantizes
// them (gguf.quants.dequantize, recorded in tiny.expected.json by make_fixtures.py).
//   - embedding from a quantized table gives exactly those rows (f32), or them rounded (bf16);
//   - matmul with quantized weights (decode GEMV, M <= 8, and the chunked GEMM beyond) equals a
//     double-precision product with those rows, within f32 accumulation error.
// Weight matrices of N rows repeat the fixture's two rows (row n is fixture row n % 2).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "core/plugin/kernel.hpp"
#include "core/plugin/loader.hpp"
#include "support/cpu_tiers.hpp"
#include "support/expected.hpp"
#include "support/host_tensor.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using nlohmann::json;
using test::HostTensor;

struct FixtureTensor {
  sy_dtype dtype;
  int64_t row;                 // elements per row
  std::vector<uint8_t> bytes;  // 2 rows of blocks
  std::vector<double> values;  // the reference's dequantization, 2 rows
};

const json& fixture() {
  static const json j = [] {
    std::ifstream in(std::filesystem::path(SY_TEST_FIXTURES_DIR) / "gguf" / "tiny.expected.json");
    return json::parse(in);
  }();
  return j;
}

FixtureTensor fixture_tensor(sy_dtype dtype) {
  const json& t = fixture()["tensors"][sy_dtype_name(dtype)];
  FixtureTensor f{
      dtype, t["dims"][0].get<int64_t>(), {}, t["dequantized"].get<std::vector<double>>()};
  const std::string hex = t["bytes_hex"].get<std::string>();
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    f.bytes.push_back(uint8_t(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return f;
}

const sy_dtype kQuantTypes[] = {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0,   SY_DTYPE_Q4_1,   SY_DTYPE_Q5_0,
                                SY_DTYPE_Q5_1, SY_DTYPE_IQ4_NL, SY_DTYPE_IQ4_XS, SY_DTYPE_Q2_K,
                                SY_DTYPE_Q3_K, SY_DTYPE_Q4_K,   SY_DTYPE_Q5_K,   SY_DTYPE_Q6_K,
                                SY_DTYPE_MXFP4};

class CpuQuantTier : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    auto out = load_plugin(test::kPluginDir / "cpu_onednn.so", LoadOptions{});
    ASSERT_TRUE(out.plugin) << out.diagnostic->reason;
    plugin_ = out.plugin.release();
  }
  static void TearDownTestSuite() { delete plugin_; }
  void SetUp() override {
    SY_SKIP_UNLESS_CPU_TIER(GetParam());
    tier_.emplace(GetParam());
  }

  static size_t kernel_index(sy_op_kind op) {
    for (size_t i = 0; i < plugin_->kernels().size(); ++i)
      if (plugin_->kernels()[i].op == op) return i;
    return 0;
  }

  static void run(const OpDesc& op, std::vector<HostTensor*> in, std::vector<HostTensor*> out) {
    auto k = prepare_kernel(*plugin_, kernel_index(op.op), 0, op);
    ASSERT_TRUE(k) << test::why(k);
    std::vector<const DLTensor*> ins, outs;
    for (HostTensor* t : in) ins.push_back(t->dl());
    for (HostTensor* t : out) outs.push_back(t->dl());
    auto err = (*k)->execute(ins, outs);
    ASSERT_FALSE(err) << test::why(err);
  }

  static Plugin* plugin_;
  std::optional<test::ScopedCpuTier> tier_;
};
Plugin* CpuQuantTier::plugin_ = nullptr;

// A [n, row] weight of fixture rows repeated.
void fill_rows(HostTensor& w, const FixtureTensor& f, int64_t n) {
  const size_t row_bytes = f.bytes.size() / 2;
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(static_cast<uint8_t*>(w.bytes()) + r * row_bytes,
                f.bytes.data() + (r % 2) * row_bytes, row_bytes);
}

TEST_P(CpuQuantTier, EmbeddingGivesTheReferencesDequantizedRows) {
  for (sy_dtype dt : kQuantTypes)
    for (sy_dtype out_dt : {SY_DTYPE_F32, SY_DTYPE_BF16}) {
      SCOPED_TRACE(std::string(sy_dtype_name(dt)) + " -> " + sy_dtype_name(out_dt));
      const FixtureTensor f = fixture_tensor(dt);
      const int64_t vocab = 5;
      HostTensor table(dt, {vocab, f.row}), ids(SY_DTYPE_I64, {4}), rows(out_dt, {4, f.row});
      fill_rows(table, f, vocab);
      const std::vector<double> id = {3, 0, 4, 1};
      ids.set(id);
      OpDesc op;
      op.op = SY_OP_EMBEDDING;
      op.inputs = {table.desc(), ids.desc()};
      op.outputs = {rows.desc()};
      run(op, {&table, &ids}, {&rows});
      const std::vector<double> got = rows.get();
      for (size_t i = 0; i < id.size(); ++i)
        for (int64_t e = 0; e < f.row; ++e) {
          double want = f.values[size_t((int64_t(id[i]) % 2) * f.row + e)];
          if (out_dt == SY_DTYPE_BF16) want = sy_bf16_to_f32(sy_f32_to_bf16(float(want)));
          ASSERT_NEAR(got[i * f.row + e], want, 1e-6 * std::abs(want) + 1e-12)
              << "row " << i << " element " << e;
        }
    }
}

TEST_P(CpuQuantTier, MatmulWithQuantizedWeightsEqualsTheDequantizedProduct) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uni(-1, 1);
  for (sy_dtype dt : kQuantTypes)
    for (sy_dtype act : {SY_DTYPE_F32, SY_DTYPE_BF16})
      for (int64_t m : {1, 3, 8, 9, 40})
        for (int64_t n : {13, 300}) {
          const FixtureTensor f = fixture_tensor(dt);
          const int64_t k = f.row;
          SCOPED_TRACE(std::string(sy_dtype_name(dt)) + " a " + sy_dtype_name(act) +
                       " M=" + std::to_string(m) + " N=" + std::to_string(n));
          HostTensor a(act, {m, k}), b(dt, {n, k}), c(act, {m, n});
          std::vector<double> av(size_t(m * k));
          for (double& x : av) x = uni(rng);
          av = a.set(av);
          fill_rows(b, f, n);
          OpDesc op;
          op.op = SY_OP_MATMUL;
          op.inputs = {a.desc(), b.desc()};
          op.outputs = {c.desc()};
          op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
          run(op, {&a, &b}, {&c});
          const std::vector<double> got = c.get();
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
              double want = 0, mag = 0;
              for (int64_t e = 0; e < k; ++e) {
                double w = f.values[size_t((j % 2) * k + e)];
                want += av[size_t(i * k + e)] * w;
                mag += std::abs(av[size_t(i * k + e)] * w);
              }
              const double tol =
                  act == SY_DTYPE_BF16 ? 1e-2 * std::abs(want) + 2e-3 * mag : 1e-5 * mag + 1e-6;
              ASSERT_NEAR(got[size_t(i * n + j)], want, tol) << "c[" << i << "][" << j << "]";
            }
        }
}

// The activation_q16 matmul (--numerics auto, the default) against a double product of the
// reference's dequantized rows with x quantized as vocabulary.h's SY_FEATURE_ACTIVATION_Q16 says
// (per block of 32: d = max|x| / 32258, Q = round-half-even(x · (1/d)), in f32): the rule is
// applied here, the products and sums are the kernel's own, within f32 accumulation error. The
// tolerance is far below what 8-bit activations would miss by (about 1/254 of a block's largest
// value).
TEST_P(CpuQuantTier, MatmulQ16EqualsTheProductWithQuantizedActivations) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<double> uni(-1, 1);
  size_t q16 = 0;
  for (size_t i = 0; i < plugin_->kernels().size(); ++i)
    if (plugin_->kernels()[i].kernel == "matmul_q16") q16 = i;
  ASSERT_NE(q16, 0u);
  EXPECT_TRUE(plugin_->kernels()[q16].features & SY_FEATURE_BIT(SY_FEATURE_ACTIVATION_Q16));
  for (sy_dtype dt :
       {SY_DTYPE_Q8_0, SY_DTYPE_Q4_0, SY_DTYPE_Q4_1, SY_DTYPE_Q5_0, SY_DTYPE_Q5_1, SY_DTYPE_Q4_K,
        SY_DTYPE_Q5_K, SY_DTYPE_Q6_K, SY_DTYPE_IQ4_NL, SY_DTYPE_IQ4_XS})
    for (sy_dtype act : {SY_DTYPE_F32, SY_DTYPE_BF16})
      for (int64_t m : {1, 4, 7, 40}) {  // 40: the amx tier's tiles (16 rows and more)
        const FixtureTensor f = fixture_tensor(dt);
        const int64_t k = f.row, n = 37;
        SCOPED_TRACE(std::string(sy_dtype_name(dt)) + " a " + sy_dtype_name(act) +
                     " M=" + std::to_string(m));
        HostTensor a(act, {m, k}), b(dt, {n, k}), c(act, {m, n});
        std::vector<double> av(size_t(m * k));
        for (double& x : av) x = uni(rng);
        av = a.set(av);
        std::vector<double> xq(av.size());  // d·Q per block of 32
        for (size_t b0 = 0; b0 < av.size(); b0 += 32) {
          float amax = 0.f;
          for (size_t e = b0; e < b0 + 32; ++e) amax = std::max(amax, std::fabs(float(av[e])));
          const float d = amax / 32258.f, id = d != 0.f ? 1.f / d : 0.f;
          for (size_t e = b0; e < b0 + 32; ++e)
            xq[e] = double(d) * std::nearbyint(float(av[e]) * id);
        }
        fill_rows(b, f, n);
        OpDesc op;
        op.op = SY_OP_MATMUL;
        op.inputs = {a.desc(), b.desc()};
        op.outputs = {c.desc()};
        op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
        auto kernel = prepare_kernel(*plugin_, q16, 0, op);
        ASSERT_TRUE(kernel) << test::why(kernel);
        const std::vector<const DLTensor*> ins = {a.dl(), b.dl()}, outs = {c.dl()};
        ASSERT_FALSE((*kernel)->execute(ins, outs));
        const std::vector<double> got = c.get();
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double want = 0, mag = 0;
            for (int64_t e = 0; e < k; ++e) {
              const double w = f.values[size_t((j % 2) * k + e)], x = xq[size_t(i * k + e)];
              want += w * x;
              mag += std::abs(w * x);
            }
            const double tol =
                act == SY_DTYPE_BF16 ? 8e-3 * std::abs(want) + 1e-5 * mag : 1e-5 * mag + 1e-6;
            ASSERT_NEAR(got[size_t(i * n + j)], want, tol) << "c[" << i << "][" << j << "]";
          }
      }
}

// A quantized weight whose rows are not whole blocks, or that is not transposed, is refused by
// check with the contract's block_dtype, never prepared.
TEST_P(CpuQuantTier, CheckRefusesQuantizedWeightsItCannotServe) {
  OpDesc op;
  op.op = SY_OP_MATMUL;
  op.inputs = {{SY_DTYPE_F32, {2, 64}, SY_MEMORY_HOST}, {SY_DTYPE_Q4_K, {8, 64}, SY_MEMORY_HOST}};
  op.outputs = {{SY_DTYPE_F32, {2, 8}, SY_MEMORY_HOST}};
  op.set(SY_ATTR_TRANSPOSE_B, int64_t{1});
  CheckResult r = plugin_->check(kernel_index(SY_OP_MATMUL), plugin_->devices()[0], op);
  EXPECT_FALSE(r.error);
  EXPECT_FALSE(r.accepted);
  bool block = false;
  for (const Refusal& x : r.refusals) block = block || x.constraint == "block_dtype";
  EXPECT_TRUE(block);
  EXPECT_FALSE(prepare_kernel(*plugin_, kernel_index(SY_OP_MATMUL), 0, op));
}

INSTANTIATE_TEST_SUITE_P(Tiers, CpuQuantTier, ::testing::ValuesIn(test::cpu_tiers()),
                         test::tier_test_name);

}  // namespace
}  // namespace sy
