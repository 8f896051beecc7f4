// Steady-state decode allocates nothing of ours: every global operator new in this process
// (host and C++ plugins alike resolve to the one below) is counted across 20 decode steps of a
// Context (its KV blocks filling and entering the prefix index included) and attributed by call
// stack. oneDNN's own bookkeeping inside dnnl_primitive_execute is library
// internal and reported, not asserted.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>

#include <cstring>
#include <new>

#include "core/executor/context.hpp"
#include "core/importer/importer.hpp"
#include "core/planner/planner.hpp"
#include "support/test_paths.hpp"

namespace {
std::atomic<long> g_ours{0}, g_onednn{0};
std::atomic<bool> g_counting{false};
thread_local bool t_inside = false;

// True when a frame of the current stack is in oneDNN's library.
bool from_onednn() {
  void* frames[32];
  int n = backtrace(frames, 32);
  for (int i = 1; i < n; ++i) {
    Dl_info info;
    if (dladdr(frames[i], &info) && info.dli_fname && std::strstr(info.dli_fname, "libdnnl"))
      return true;
  }
  return false;
}
}  // namespace

namespace {
void* counted_malloc(size_t n) {
  if (g_counting.load(std::memory_order_relaxed) && !t_inside) {
    t_inside = true;  // backtrace may allocate on first use
    (from_onednn() ? g_onednn : g_ours).fetch_add(1, std::memory_order_relaxed);
    t_inside = false;
  }
  return std::malloc(n ? n : 1);
}
}  // namespace

// This file's operator new is malloc, so its operator delete is free: GCC cannot see that pairing.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

// Every form that allocates with malloc is replaced, the nothrow one too (std::stable_sort's
// temporary buffer): a form left to the library would pair its allocator with the free below,
// which AddressSanitizer reports as an alloc-dealloc mismatch.
void* operator new(size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  return counted_malloc(n);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace sy {
namespace {

TEST(DecodeAllocations, SteadyStateDecodeStepsAllocateNothing) {
  Registry reg = Registry::discover({{test::kPluginDir}, "test"}, LoadOptions{});
  nlohmann::json config = {{"model_type", "llama"},    {"hidden_size", 64},
                           {"num_hidden_layers", 2},   {"num_attention_heads", 4},
                           {"num_key_value_heads", 2}, {"head_dim", 16},
                           {"intermediate_size", 96},  {"vocab_size", 128},
                           {"rms_norm_eps", 1e-5},     {"torch_dtype", "float32"}};
  Inventory inv = live_inventory(reg);
  Policy policy;
  policy.prefer = {kDLCPU};
  auto import = [&](KvLayout layout) {
    ImportOptions opts;
    opts.kv_layout = layout;
    opts.max_batch_tokens = 4;
    opts.context = 64;
    return import_hf_config_json(config, "tiny.json", opts);
  };
  LayoutPlan lp = plan_layouts(import, 1, reg, inv, policy);
  ASSERT_TRUE(lp.plan.ok()) << lp.plan.error->message;
  Model model(lp.graph, lp.plan, reg, inv, [](const Value& v, void* dst) -> std::optional<Error> {
    std::memset(dst, 0, size_t(v.bytes()));
    return std::nullopt;
  });
  Context context(model);
  const SeqId seq = context.add_sequence();
  Batch batch;
  batch.tokens.reserve(4);
  for (int64_t i = 0; i < 4; ++i) batch.add(1 + i, i, seq, i == 3);
  ASSERT_TRUE(context.decode(batch).ran);
  auto step = [&](int64_t token) {  // one decode step with the batch's own storage
    batch.clear();
    batch.add(token, context.sequence_length(seq), seq, true);
    return context.decode(batch).ran;
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(step(5));  // warm-up: first calls may set things up
  g_counting = true;
  bool ran = true;
  for (int i = 0; i < 20; ++i) ran = step(6) && ran;
  g_counting = false;
  EXPECT_TRUE(ran);
  EXPECT_EQ(g_ours.load(), 0) << "operator new calls of Switchyard code during 20 decode steps";
  std::printf("decode: %ld allocations in 20 steps inside oneDNN's primitive execution\n",
              g_onednn.load());
  ::testing::Test::RecordProperty("onednn_allocations_20_steps", int(g_onednn.load()));
}

}  // namespace
}  // namespace sy
