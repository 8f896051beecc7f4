// What cuda_flash does with a segment, decided on the host and so tested without a GPU: the
// fusion pass (segment_fusion.hpp) on the op order of a real decoder layer — with its q, k and
// v projections interleaved with their ropes and appends — and on cases where hoisting would
// break the dataflow; and the graph cache (segment_graphs.hpp) against a recording fake of
// the CUDA graph calls: a graph per decode bucket, captured once, re-captured only when the
// table's addresses change, prefill steps never captured.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_flash/segment_fusion.hpp"
#include "cuda_flash/segment_graphs.hpp"

namespace sy {
namespace {

using cuda::FusionEntry;
using cuda::WorkItem;
using cuda::WorkKind;
using edge::OpCopy;

// Operators built from C descriptions, owned by the builder.
class Ops {
 public:
  // An operator of kind `op`: inputs and outputs as (dtype, shape), int/float/string attrs.
  const OpCopy* make(sy_op_kind op, std::vector<std::pair<sy_dtype, std::vector<int64_t>>> in,
                     std::vector<std::pair<sy_dtype, std::vector<int64_t>>> out,
                     std::vector<sy_attr> attrs = {}) {
    auto keep = std::make_unique<Keep>();
    for (auto* list : {&in, &out})
      for (auto& [dt, shape] : *list) {
        keep->shapes.push_back(shape);
        sy_tensor_desc d{};
        d.struct_size = sizeof d;
        d.dtype = dt;
        d.ndim = int32_t(shape.size());
        d.memory = SY_MEMORY_DEVICE;
        keep->descs.push_back(d);
      }
    for (size_t i = 0; i < keep->descs.size(); ++i) keep->descs[i].shape = keep->shapes[i].data();
    std::vector<const sy_tensor_desc*> ins, outs;
    for (size_t i = 0; i < keep->descs.size(); ++i)
      (i < in.size() ? ins : outs).push_back(&keep->descs[i]);
    std::vector<const sy_attr*> attr_ptrs;
    for (auto& a : attrs) {
      a.struct_size = sizeof a;
      attr_ptrs.push_back(&a);
    }
    sy_op_desc d{};
    d.struct_size = sizeof d;
    d.op = op;
    d.inputs = ins.data();
    d.num_inputs = ins.size();
    d.outputs = outs.data();
    d.num_outputs = outs.size();
    d.attrs = attr_ptrs.data();
    d.num_attrs = attr_ptrs.size();
    keep->op = std::make_unique<OpCopy>(d);
    keeps_.push_back(std::move(keep));
    return keeps_.back()->op.get();
  }

 private:
  struct Keep {
    std::vector<std::vector<int64_t>> shapes;
    std::vector<sy_tensor_desc> descs;
    std::unique_ptr<OpCopy> op;
  };
  std::vector<std::unique_ptr<Keep>> keeps_;
};

sy_attr int_attr(const char* name, int64_t v) {
  sy_attr a{};
  a.name = name;
  a.type = SY_ATTR_INT;
  a.i = v;
  return a;
}

constexpr sy_dtype B = SY_DTYPE_BF16;
constexpr int64_t T = 4, H = 576, Q = 576, KV = 192, D = 64, I = 1536;

// SmolLM2's layer as the importer writes it (docs/graph-format.md), tensor ids:
// 0 x, 1 norm w, 2 xn, 3 wq, 4 q, 5 pos, 6 q_r, 7 wk, 8 k, 9 k_r, 10 slots, 11 kpool, 12 wv,
// 13 v, 14 vpool, 15 attn out, 16 wo, 17 o, 18 h, 19 norm2 w, 20 hn, 21 wg, 22 g, 23 wu, 24 u,
// 25 act, 26 wd, 27 down, 28 out, 29 next norm w, 30 next xn.
std::vector<FusionEntry> layer(Ops& ops) {
  auto mm = [&](int64_t n, int64_t k) {
    return ops.make(SY_OP_MATMUL, {{B, {T, k}}, {B, {n, k}}}, {{B, {T, n}}},
                    {int_attr(SY_ATTR_TRANSPOSE_B, 1)});
  };
  auto rope = [&](int64_t heads) {
    return ops.make(SY_OP_ROPE, {{B, {1, T, heads, D}}, {SY_DTYPE_I64, {T}}},
                    {{B, {1, T, heads, D}}});
  };
  auto append = [&]() {
    return ops.make(SY_OP_KV_CACHE_APPEND, {{B, {1, T, 3, D}}, {SY_DTYPE_I64, {T}}},
                    {{B, {64, 16, 3, D}}}, {int_attr(SY_ATTR_PAGED, 1)});
  };
  auto norm = ops.make(SY_OP_RMS_NORM, {{B, {T, H}}, {B, {H}}}, {{B, {T, H}}});
  auto add = ops.make(SY_OP_ADD, {{B, {T, H}}, {B, {T, H}}}, {{B, {T, H}}});
  auto act = ops.make(SY_OP_SILU_MUL, {{B, {T, I}}, {B, {T, I}}}, {{B, {T, I}}});
  auto attn = ops.make(SY_OP_ATTENTION, {{B, {1, T, 9, D}}}, {{B, {1, T, 9, D}}});
  return {
      {norm, {0, 1}, {2}},        {mm(Q, H), {2, 3}, {4}},    {rope(9), {4, 5}, {6}},
      {mm(KV, H), {2, 7}, {8}},   {rope(3), {8, 5}, {9}},     {append(), {9, 10}, {11}},
      {mm(KV, H), {2, 12}, {13}}, {append(), {13, 10}, {14}}, {attn, {6, 11, 14}, {15}},
      {mm(H, Q), {15, 16}, {17}}, {add, {0, 17}, {18}},       {norm, {18, 19}, {20}},
      {mm(I, H), {20, 21}, {22}}, {mm(I, H), {20, 23}, {24}}, {act, {22, 24}, {25}},
      {mm(H, I), {25, 26}, {27}}, {add, {18, 27}, {28}},      {norm, {28, 29}, {30}},
  };
}

TEST(CudaSegmentFusion, ADecoderLayerTakesTenLaunchesInsteadOfEighteen) {
  Ops ops;
  const std::vector<FusionEntry> es = layer(ops);
  const std::vector<WorkItem> work = cuda::plan_work(es);
  std::vector<std::pair<WorkKind, std::vector<size_t>>> got;
  for (const auto& w : work) got.push_back({w.kind, w.entries});
  const std::vector<std::pair<WorkKind, std::vector<size_t>>> want = {
      {WorkKind::kernel, {0}},                // input norm (no add before it here)
      {WorkKind::gemv, {1, 3, 6}},            // q, k, v hoisted past their ropes and appends
      {WorkKind::rope_append, {2, 4, 5, 7}},  // q rope; k rope + append; v append
      {WorkKind::kernel, {8}},                // attention
      {WorkKind::gemv, {9}},                  // o_proj
      {WorkKind::add_rms_norm, {10, 11}},     // residual + post-attention norm
      {WorkKind::gemv, {12, 13, 14}},         // gate, up and silu_mul
      {WorkKind::gemv, {15}},                 // down
      {WorkKind::add_rms_norm, {16, 17}},     // residual + the next layer's norm
  };
  EXPECT_EQ(got, want);
  EXPECT_TRUE(work[6].gated);
  EXPECT_EQ(work[6].gate, 0u);
  EXPECT_EQ(work[6].up, 1u);
  EXPECT_EQ(cuda::describe_work(work), "2 add_rms_norm, 1 rope_append, 4 gemv, 2 kernel");
}

// A matmul whose input is written between it and the group's first member is not hoisted; nor
// is one that writes what an entry between them reads.
TEST(CudaSegmentFusion, NothingIsHoistedPastAConflict) {
  Ops ops;
  auto mm = ops.make(SY_OP_MATMUL, {{B, {T, H}}, {B, {H, H}}}, {{B, {T, H}}},
                     {int_attr(SY_ATTR_TRANSPOSE_B, 1)});
  auto add = ops.make(SY_OP_ADD, {{B, {T, H}}, {B, {T, H}}}, {{B, {T, H}}});
  // 0: y0 = x·w0; 1: x = y0 + x (in place); 2: y1 = x·w1 reads the new x: not hoistable.
  std::vector<FusionEntry> es = {{mm, {0, 1}, {2}}, {add, {2, 0}, {0}}, {mm, {0, 3}, {4}}};
  std::vector<WorkItem> work = cuda::plan_work(es);
  ASSERT_EQ(work.size(), 3u);
  EXPECT_EQ(work[0].entries, std::vector<size_t>{0});
  // 0: y0 = x·w0; 1: z = y1 + x reads y1 before 2 writes it: 2 is not hoisted above 1.
  es = {{mm, {0, 1}, {2}}, {add, {5, 0}, {6}}, {mm, {0, 3}, {5}}};
  work = cuda::plan_work(es);
  ASSERT_EQ(work.size(), 3u);
  EXPECT_EQ(work[0].entries, std::vector<size_t>{0});
}

// f32 matmuls and weights not stored [N, K] stay cuBLAS's; an add with a broadcast does not
// fuse with the norm after it.
TEST(CudaSegmentFusion, OnlyWhatTheKernelsServeIsFused) {
  Ops ops;
  auto f32 = ops.make(SY_OP_MATMUL, {{SY_DTYPE_F32, {T, H}}, {SY_DTYPE_F32, {H, H}}},
                      {{SY_DTYPE_F32, {T, H}}}, {int_attr(SY_ATTR_TRANSPOSE_B, 1)});
  auto kn = ops.make(SY_OP_MATMUL, {{B, {T, H}}, {B, {H, H}}}, {{B, {T, H}}});
  auto bcast = ops.make(SY_OP_ADD, {{B, {T, H}}, {B, {H}}}, {{B, {T, H}}});
  auto norm = ops.make(SY_OP_RMS_NORM, {{B, {T, H}}, {B, {H}}}, {{B, {T, H}}});
  const std::vector<FusionEntry> es = {
      {f32, {0, 1}, {2}}, {kn, {3, 4}, {5}}, {bcast, {5, 6}, {7}}, {norm, {7, 8}, {9}}};
  for (const auto& w : cuda::plan_work(es)) EXPECT_EQ(w.kind, WorkKind::kernel);
}

// ---- graphs -----------------------------------------------------------------------------

class FakeGraphs : public cuda::GraphApi {
 public:
  void begin_capture() override { log += "begin;"; }
  uintptr_t end_capture() override {
    log += "end;";
    return fail_next ? (fail_next = false, 0) : ++made;
  }
  void abort_capture() override { log += "abort;"; }
  void launch(uintptr_t h) override { log += "launch " + std::to_string(h) + ";"; }
  void destroy(uintptr_t h) override { log += "destroy " + std::to_string(h) + ";"; }
  std::string log;
  uintptr_t made = 0;
  bool fail_next = false;
};

sy_step_info step(int64_t tokens, int64_t sequences, int64_t max_q, int64_t max_kv) {
  return {sizeof(sy_step_info), tokens, sequences, sequences, max_q, max_kv};
}

TEST(CudaSegmentGraphs, ADecodeBucketIsCapturedOnceAndReplayed) {
  FakeGraphs api;
  cuda::GraphCache cache(api);
  int eager = 0;
  auto work = [&] { ++eager; };
  // 8 sequences decoding at 100..103 keys: one bucket (kv 256), captured on first sight.
  for (int64_t kv = 100; kv < 104; ++kv) EXPECT_TRUE(cache.run(step(8, 8, 1, kv), 42, work));
  EXPECT_EQ(api.log, "begin;end;launch 1;launch 1;launch 1;launch 1;");
  EXPECT_EQ(eager, 1);  // the capture's enqueue only
  EXPECT_EQ(cache.captures(), 1u);
  // Another batch size, and a longer cache, are other buckets.
  EXPECT_TRUE(cache.run(step(4, 4, 1, 100), 42, work));
  EXPECT_TRUE(cache.run(step(8, 8, 1, 300), 42, work));
  EXPECT_EQ(cache.graphs(), 3u);
  // New addresses in a known bucket: re-captured, the old graph dropped.
  api.log.clear();
  EXPECT_TRUE(cache.run(step(8, 8, 1, 101), 43, work));
  EXPECT_EQ(api.log, "destroy 1;begin;end;launch 4;");
}

TEST(CudaSegmentGraphs, PrefillStepsRunEagerlyAndABucketThatWillNotCaptureStaysEager) {
  FakeGraphs api;
  cuda::GraphCache cache(api);
  int eager = 0;
  auto work = [&] { ++eager; };
  EXPECT_FALSE(cache.run(step(37, 2, 30, 30), 1, work));   // a prefill chunk
  EXPECT_FALSE(cache.run(step(300, 300, 1, 9), 1, work));  // more tokens than graphs take
  EXPECT_EQ(api.log, "");
  EXPECT_EQ(eager, 2);
  api.fail_next = true;
  EXPECT_FALSE(cache.run(step(2, 2, 1, 9), 1, work));  // captured nothing: run eagerly
  EXPECT_FALSE(cache.run(step(2, 2, 1, 9), 1, work));  // and never tried again
  EXPECT_EQ(api.log, "begin;end;");
  EXPECT_EQ(eager, 5);  // two eager, the failed capture's enqueue, then eager twice
}

TEST(CudaSegmentGraphs, AFailedCaptureLeavesCaptureModeAndKeepsTheError) {
  FakeGraphs api;
  cuda::GraphCache cache(api);
  EXPECT_THROW(cache.run(step(1, 1, 1, 5), 1, [] { throw std::runtime_error("launch"); }),
               std::runtime_error);
  EXPECT_EQ(api.log, "begin;abort;");
  // The bucket is tried again next time.
  EXPECT_TRUE(cache.run(step(1, 1, 1, 5), 1, [] {}));
}

}  // namespace
}  // namespace sy
