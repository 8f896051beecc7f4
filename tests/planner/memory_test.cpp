// Memory in the plan (planner/memory.hpp, memory_fit.hpp): per-device needs against sums
// computed here from the config alone, the binding split of whole layers when a device is too
// small, SY011 under --strict with the numbers and the largest context that fits, and the
// activation arena's reuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "support/test_paths.hpp"

namespace sy {
namespace {

using ::testing::HasSubstr;

using test::kExampleModels;
const std::string kTargets = std::string(SY_TEST_EXAMPLES_DIR) + "/targets/";

// Llama-3.1-8B's shape (examples/models/llama-3.1-8b/config.json), written out here.
constexpr int64_t kVocab = 128256, kHidden = 4096, kInter = 14336, kLayers = 32, kKvHeads = 8,
                  kHeadDim = 128;

int64_t llama31_weight_bytes() {  // bf16: every projection, norm, the embedding and the head
  const int64_t layer = 2 * kHidden * kHidden + 2 * kHidden * kKvHeads * kHeadDim +
                        3 * kHidden * kInter + 2 * kHidden;
  return 2 * (2 * kVocab * kHidden + kLayers * layer + kHidden);
}

int64_t llama31_kv_bytes(int64_t context) {
  return 2 * kLayers * context * kKvHeads * kHeadDim * 2;  // k and v, bf16
}

class PlannerMemory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    registry_ = new Registry(Registry::discover({{test::kPluginDir}, "test"}, LoadOptions{}));
  }
  static void TearDownTestSuite() { delete registry_; }
  static Plan plan(const std::string& model, const std::string& target, Policy policy = {},
                   int64_t context = 4096) {
    if (policy.prefer.empty()) policy.prefer = {kDLCUDA, kDLCPU};
    ImportOptions opts;
    opts.kv_layout = KvLayout::contiguous;  // the contiguous caches' bytes (paged: plan_test)
    opts.max_batch_tokens = 512;
    opts.context = context;
    Graph g = import_hf_config(kExampleModels + model + "/config.json", opts);
    return plan_graph(g, *registry_, load_target(kTargets + target + ".json"), policy);
  }
  static int64_t sum(const Plan& p, int64_t LocationMemory::*field) {
    int64_t s = 0;
    for (const auto& l : p.memory.locations) s += l.*field;
    return s;
  }
  static Registry* registry_;
};
Registry* PlannerMemory::registry_ = nullptr;

// Each tensor is rounded up to 64 bytes plus 64 of slack: a few hundred tensors, under 1 MiB.
constexpr int64_t kRounding = int64_t(1) << 20;

TEST_F(PlannerMemory, Llama31OnOne8GiBGpuSplitsWholeLayersAndFits) {
  Plan p = plan("llama-3.1-8b", "gpu-8gb");
  ASSERT_TRUE(p.ok()) << p.error->message;
  // On the host, a tensor of 2 MiB or more takes whole 2 MiB pages (host_allocation_bytes):
  // at most 2 MiB more for each of the 9 tensors per layer and the embedding, 2 per layer's KV.
  const int64_t weights = sum(p, &LocationMemory::weights), kv = sum(p, &LocationMemory::kv_cache);
  EXPECT_GE(weights, llama31_weight_bytes());
  EXPECT_LE(weights, llama31_weight_bytes() + (9 * kLayers + 1) * kHostHugePage);
  EXPECT_GE(kv, llama31_kv_bytes(4096));
  EXPECT_LE(kv, llama31_kv_bytes(4096) + 2 * kLayers * kHostHugePage);
  const LocationMemory* gpu = p.memory.find("cuda:0");
  const LocationMemory* host = p.memory.find("host");
  ASSERT_TRUE(gpu && host);
  ASSERT_TRUE(gpu->capacity);
  EXPECT_EQ(*gpu->capacity, 7 * kGiB);  // 8 GiB less the default 1 GiB reserve
  EXPECT_LE(gpu->total(), *gpu->capacity);
  EXPECT_GT(gpu->total(), *gpu->capacity * 9 / 10);  // the split keeps the GPU nearly full
  EXPECT_GT(host->weights, 0);
  EXPECT_THAT(p.memory.split, HasSubstr("stay on cuda:0"));
  // Whole layers: a prefix on the CPU, the rest with the head on the GPU.
  int first_gpu_layer = int(kLayers);
  for (const auto& phase : p.phases)
    for (const auto& o : phase.ops)
      if (o.layer >= 0 && o.device == "cuda:0")
        first_gpu_layer = std::min(first_gpu_layer, o.layer);
  ASSERT_GT(first_gpu_layer, 0);
  ASSERT_LT(first_gpu_layer, kLayers);
  for (const auto& phase : p.phases)
    for (const auto& o : phase.ops) {
      if (o.layer >= 0) {
        EXPECT_EQ(o.device, o.layer < first_gpu_layer ? "cpu:0" : "cuda:0") << o.id;
      }
      if (o.id == "lm_head") {
        EXPECT_EQ(o.device, "cuda:0");
      }
    }
  // One hidden state crosses per token (plus the step's positions): bytes, not megabytes.
  EXPECT_GT(p.memory.copies_per_token, 0);
  EXPECT_LT(p.memory.copy_bytes_per_token, 64 * 1024);
}

TEST_F(PlannerMemory, StrictRefusesWithTheMemoryCodeAndTheNumbers) {
  Policy strict;
  strict.strict = true;
  Plan p = plan("llama-3.1-8b", "gpu-8gb", strict);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error->code, Errc::does_not_fit);
  EXPECT_THAT(p.error->message, HasSubstr("more memory than cuda:0 has"));
  EXPECT_THAT(p.error->message,
              HasSubstr("cuda:0 needs 15.5"));  // 14.96 GiB of weights + KV + the rest
  EXPECT_THAT(p.error->message, HasSubstr("of 7.00 GiB"));
  EXPECT_THAT(p.error->message, HasSubstr("no context fits"));  // the weights alone are too big
}

TEST_F(PlannerMemory, OnTheH200EverythingFitsOnCuda) {
  Plan p = plan("llama-3.1-8b", "h200");
  ASSERT_TRUE(p.ok()) << p.error->message;
  EXPECT_TRUE(p.memory.split.empty());
  const LocationMemory* gpu = p.memory.find("cuda:0");
  ASSERT_TRUE(gpu);
  EXPECT_NEAR(double(gpu->weights), double(llama31_weight_bytes()), kRounding);
  EXPECT_EQ(p.memory.find("host")->weights, 0);
}

TEST_F(PlannerMemory, MaxDeviceMemoryBindsTheH200) {
  Policy capped;
  capped.max_device_memory["cuda:0"] = 8 * kGiB;
  Plan p = plan("llama-3.1-8b", "h200", capped);
  ASSERT_TRUE(p.ok()) << p.error->message;
  EXPECT_FALSE(p.memory.split.empty());
  EXPECT_LE(p.memory.find("cuda:0")->total(), 8 * kGiB);
  EXPECT_THAT(p.memory.find("cuda:0")->capacity_rule, HasSubstr("--max-device-memory"));
}

// The KV caches outgrow the GPU: the error names the largest context, and that context fits.
TEST_F(PlannerMemory, TheLargestContextThatFitsIsNamedAndFits) {
  Policy strict;
  strict.strict = true;
  Plan big = plan("llama-3.2-1b", "gpu-8gb", strict, 200000);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error->code, Errc::does_not_fit);
  ASSERT_TRUE(big.memory.max_context);
  const int64_t fits = *big.memory.max_context;
  EXPECT_GT(fits, 4096);
  EXPECT_LT(fits, 200000);
  EXPECT_THAT(big.error->message, HasSubstr(std::to_string(fits) + " tokens"));
  Plan at = plan("llama-3.2-1b", "gpu-8gb", strict, fits);
  EXPECT_TRUE(at.ok()) << at.error->message;
  Plan over = plan("llama-3.2-1b", "gpu-8gb", strict, fits + fits / 20);
  EXPECT_FALSE(over.ok());
}

// cuda_flash declares the most split-KV workspace its prepare can allocate (ABI 1.4), from the
// device's description: on the H200 (sm_90: 228 KiB of shared memory a multiprocessor, 227 a
// block; 132 multiprocessors), Llama-3.2-1B (Hq 32, Hkv 8, D 64, 16 layers) at prompt 512 and
// context 4096. The rule (docs/cuda_flash.md): split the keys when the blocks do not fill every
// multiprocessor with as many as it holds of the kernel the call takes (by shared memory and
// threads, each block 1 KiB more), by that shortfall, at most one split per 2 tiles a warp of a
// full cache, at most 64; each split keeps D + 1 floats per query row.
TEST_F(PlannerMemory, CudaFlashDeclaresItsSplitKvWorkspace) {
  if (!test::kHaveCudaPlugin) GTEST_SKIP() << "cuda_flash is not built here (no nvcc)";
  Plan p = plan("llama-3.2-1b", "h200");
  ASSERT_TRUE(p.ok()) << p.error->message;
  // The rows kernel, wide (8 warps, 128 rows, 3 stages of 64 keys): (128 + 2·3·64) rows of
  // 64 + 8 halves = 73728 bytes, 233472 / 74752 -> 3 blocks a multiprocessor (2048 / 256
  // threads would allow 8). Prefill: 512 x 4 packed rows in 16 blocks per KV head, 128 blocks of
  // the 396 wanted -> 4 by occupancy, 2 by the length of its 512 keys (512 / (4 · 64)) -> 2.
  // The decode kernel (4 warps on 16 rows, tiles of 16 keys): 16 · 72 · 2 + 4 · 4 · 16 · 72 · 2 =
  // 39168 bytes, 233472 / 40192 -> 5 blocks. Decode: 8 blocks of the 660 wanted -> 83 by
  // occupancy, 32 by length (4096 / (2 · 4 · 16)) -> 32 splits.
  const int64_t prefill = 512LL * 32 * 2 * 65 * 4, decode = 32LL * 32 * 65 * 4;
  EXPECT_EQ(p.memory.find("cuda:0")->workspace, 16 * (prefill + decode));
}

// Activations whose lifetimes do not overlap share bytes: the arena is far below the sum of
// the prefill phase's activations, and at least its largest one.
TEST_F(PlannerMemory, TheArenaReusesActivationMemory) {
  Plan p = plan("llama-3.2-1b", "h200");
  ASSERT_TRUE(p.ok()) << p.error->message;
  int64_t all = 0, largest = 0;
  for (const auto& [key, slot] : p.memory.slots)
    if (key.rfind("prefill|", 0) == 0 && key.size() > 7 &&
        key.find("@cuda:0") != std::string::npos) {
      all += slot.bytes;
      largest = std::max(largest, slot.bytes);
    }
  const int64_t arena = p.memory.find("cuda:0")->activations;
  EXPECT_GE(arena, largest);
  EXPECT_LT(arena * 10, all);
}

}  // namespace
}  // namespace sy
