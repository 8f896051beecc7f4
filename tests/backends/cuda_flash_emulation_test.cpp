// cuda_flash's flash kernels run on the CPU model of tests/support/cuda_emulation.hpp and are
// compared with the double-precision reference, so their tile ranges, pack-GQA rows, masks,
// online softmax, split-KV merge and every lane's fragment addressing are tested on machines
// without a GPU. What the model cannot show (a missing cp.async wait, timing, the real
// instructions' rounding) is left to the GPU tests of cuda_flash_test.cpp.
#define SY_CUDA_EMULATION 1
#include "support/cuda_emulation.hpp"
// The emulation header first: it stands in for the CUDA built-ins the kernel header uses.
#include "cuda_flash/flash_hopper.cuh"
#include "cuda_flash/flash_hopper.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "support/attention_reference.hpp"
#include "support/host_tensor.hpp"
#include "support/paged_attention_case.hpp"

namespace sy {
namespace {

namespace flash = sy::cuda::flash;

struct EmuCase {
  std::string name;
  sy_dtype dtype = SY_DTYPE_BF16;
  int B = 1, Sq = 1, Skv = 1, Hq = 1, Hkv = 1;  // the head dim is the template argument
  bool causal = false;
  int window = -1;
  double softcap = 0;
  bool sinks = false;
  std::vector<int64_t> kv_len;
  int sm_count = 132;       // a small count forces split-KV on a small problem
  bool want_split = false;  // the case exists to cover split-KV: it must split
  int arch = 90;            // the device's sm_<arch>: 86, 89 and 12x take the narrow rows form
  int want_row_warps = 0;   // the case exists to cover a rows form: its warps a block
  bool hopper = false;      // the rows calls take the sm_90a kernel (it must)
  bool pingpong = true;     // with hopper: its consumers take turns
};

EmuCase shape(std::string name, sy_dtype dtype, int B, int Sq, int Skv, int Hq, int Hkv) {
  EmuCase c;
  c.name = std::move(name);
  c.dtype = dtype;
  c.B = B, c.Sq = Sq, c.Skv = Skv, c.Hq = Hq, c.Hkv = Hkv;
  return c;
}

// The kernels' form and occupancy on a device of architecture sm_<arch> (flash_limits by shared
// memory: on sm_90 at D = 128 the wide rows form, three decode blocks and one rows block a
// multiprocessor; on sm_89 the narrow rows form).
flash::FlashLimits limits_on(int arch, int d) {
  return flash::flash_limits(flash::smem_limits(arch), d);
}

// The limits of an sm_<arch> device, with the sm_90a kernel taking the rows calls or not.
flash::FlashLimits limits_for(int arch, int d, bool hopper, bool pingpong) {
  const flash::FlashLimits l = limits_on(arch, d);
  return hopper ? flash::with_hopper(l, flash::smem_limits(arch), d, pingpong) : l;
}

// The arguments flash_hopper.cu launches with: the tensor maps it encodes for a call (its
// KvTensorShape, 128-byte swizzle), through the model of the driver's encoder and its checks,
// where the producer loads by TMA.
flash::HopperArgs hopper_args(const flash::FlashParams& p, int d, bool pingpong) {
  flash::HopperArgs m{};
  m.pingpong = pingpong;
  m.tma = flash::hopper_tma(p);
  if (!m.tma) return m;
  const flash::KvTensorShape t = flash::kv_tensor_shape(p, d);
  m.k = sy_emu::encode_tensor_map(p.k, 4, t.dims, t.strides, t.box, true);
  m.v = sy_emu::encode_tensor_map(p.v, 4, t.dims, t.strides, t.box, true);
  return m;
}

// Runs a call as flash_attention.cu launches it: the kernel its shape names over (row blocks,
// sequences × KV heads, splits), then the merge of the splits.
template <typename T, int D>
void launch_emulated(const flash::FlashParams& p, const flash::LaunchShape& s, unsigned sequences,
                     size_t rows) {
  const dim3 grid(unsigned(s.row_blocks), sequences * unsigned(p.Hkv), unsigned(s.splits));
  if (s.hopper) {
    if constexpr (flash::hopper_head_dim(D)) {
      const flash::HopperArgs args = hopper_args(p, D, s.pingpong);
      sy_emu::launch(grid, dim3(s.threads), s.smem,
                     [&] { flash::flash_hopper_kernel<T, D>(p, args); });
    }
  } else if (s.decode)
    sy_emu::launch(grid, dim3(s.threads), s.smem, [&] { flash::flash_decode_kernel<T, D>(p); });
  else
    flash::with_rows_kernel<T, D>(s.rows, [&](auto kernel) {
      sy_emu::launch(grid, dim3(s.threads), s.smem, [&] { kernel(p); });
    });
  if (s.splits > 1)
    sy_emu::launch(dim3(unsigned((rows + 3) / 4)), dim3(128), 0,
                   [&] { flash::combine_splits<T, D>(p); });
}

struct EmuResult {
  test::AttentionResult got;
  flash::LaunchShape shape;
};

template <typename T, int D>
EmuResult run_emulated(const EmuCase& c, test::AttentionProblem& ref) {
  using test::HostTensor;
  HostTensor q(c.dtype, {c.B, c.Sq, c.Hq, D}), k(c.dtype, {c.B, c.Skv, c.Hkv, D}),
      v(c.dtype, {c.B, c.Skv, c.Hkv, D}), o(c.dtype, {c.B, c.Sq, c.Hq, D});
  ref.q = q.set(ref.q);
  ref.k = k.set(ref.k);
  ref.v = v.set(ref.v);
  std::vector<float> sinks(ref.sinks.begin(), ref.sinks.end());
  for (size_t h = 0; h < sinks.size(); ++h) ref.sinks[h] = sinks[h];
  const size_t rows = size_t(c.B) * c.Hq * c.Sq;
  std::vector<float> lse(rows, 123.0f);
  sy_emu::forget_globals();
  for (HostTensor* t : {&q, &k, &v}) sy_emu::register_global(t->bytes(), t->size_bytes());

  flash::FlashParams p{};
  p.q = q.bytes();
  p.k = k.bytes();
  p.v = v.bytes();
  p.o = o.bytes();
  p.sinks = c.sinks ? sinks.data() : nullptr;
  p.kv_len = c.kv_len.empty() ? nullptr : c.kv_len.data();
  p.lse = lse.data();
  p.B = c.B, p.Sq = c.Sq, p.Skv = c.Skv, p.Hq = c.Hq, p.Hkv = c.Hkv;
  p.G = c.Hq / c.Hkv;
  p.M = c.Sq * p.G;
  p.scale = float(1.0 / std::sqrt(double(D)));
  p.softcap = float(c.softcap);
  p.causal = c.causal;
  p.window = c.window;

  EmuResult r;
  r.shape = flash::launch_shape<T, D>(p, c.sm_count, limits_for(c.arch, D, c.hopper, c.pingpong));
  p.splits = r.shape.splits;
  std::vector<float> part_o(r.shape.splits > 1 ? rows * r.shape.splits * D : 0, NAN),
      part_lse(r.shape.splits > 1 ? rows * r.shape.splits : 0, NAN);
  p.part_o = part_o.data();
  p.part_lse = part_lse.data();

  launch_emulated<T, D>(p, r.shape, unsigned(c.B), rows);
  r.got.o = o.get();
  r.got.lse.assign(lse.begin(), lse.end());
  return r;
}

template <typename T, int D>
void check_case(const EmuCase& c) {
  SCOPED_TRACE(c.name);
  std::mt19937 rng(7);
  test::AttentionProblem ref;
  ref.B = c.B, ref.Sq = c.Sq, ref.Skv = c.Skv, ref.Hq = c.Hq, ref.Hkv = c.Hkv, ref.D = D;
  ref.causal = c.causal;
  ref.window = c.window;
  ref.softcap = c.softcap;
  ref.q = test::uniform(size_t(c.B) * c.Sq * c.Hq * D, rng, -2, 2);
  ref.k = test::uniform(size_t(c.B) * c.Skv * c.Hkv * D, rng, -2, 2);
  // Values away from zero mean and sinks near the scores' scale, so an output that drops a
  // sink or weighs a key wrongly moves by far more than the tolerance.
  ref.v = test::uniform(size_t(c.B) * c.Skv * c.Hkv * D, rng, 0, 2);
  if (c.sinks) ref.sinks = test::uniform(size_t(c.Hq), rng, 2, 6);
  ref.kv_len = c.kv_len;

  EmuResult r;
  ASSERT_NO_THROW((r = run_emulated<T, D>(c, ref)));
  if (c.want_split) {
    EXPECT_GT(r.shape.splits, 1) << "the case no longer covers split-KV";
  }
  EXPECT_EQ(r.shape.hopper, c.hopper) << "the case no longer covers the sm_90a kernel";
  EXPECT_EQ(r.shape.pingpong, c.hopper && c.pingpong);
  if (c.want_row_warps) {
    EXPECT_FALSE(r.shape.decode);
    EXPECT_EQ(r.shape.rows.warps, c.want_row_warps) << "the case no longer covers its rows form";
  }
  const test::AttentionResult want = test::reference_attention(ref);

  // The same tolerances as the GPU tests: f32 accumulation, P rounded to the input type, the
  // output rounded once.
  constexpr double kOutTol = 1.2e-2, kLseTol = 1e-4;
  ASSERT_EQ(r.got.o.size(), want.o.size());
  for (size_t i = 0; i < want.o.size(); ++i)
    ASSERT_NEAR(r.got.o[i], want.o[i], kOutTol) << "o[" << i << "]";
  for (size_t i = 0; i < want.lse.size(); ++i) {
    if (std::isinf(want.lse[i])) {
      EXPECT_TRUE(std::isinf(r.got.lse[i]) && r.got.lse[i] < 0) << "lse[" << i << "]";
      continue;
    }
    ASSERT_NEAR(r.got.lse[i], want.lse[i], kLseTol * std::max(1.0, std::abs(want.lse[i])))
        << "lse[" << i << "]";
  }
}

TEST(CudaFlashEmulation, PrefillCausalGqaD64) {
  EmuCase c = shape("bf16 D64 Sq13 Skv77 GQA 4:2 causal", SY_DTYPE_BF16, 1, 13, 77, 4, 2);
  c.causal = true;
  check_case<__nv_bfloat16, 64>(c);
}

// A chunk of 150 queries after 20 cached keys, causal, on a device of sm_<arch>, whose rows kernel
// form must have `warps` warps a block.
EmuCase chunk_after_cache(std::string name, sy_dtype dtype, int Hq, int arch, int warps) {
  EmuCase c = shape(std::move(name), dtype, 1, 150, 170, Hq, 2);
  c.causal = true;
  c.arch = arch;
  c.want_row_warps = warps;
  return c;
}

// 300 packed rows: three blocks of 128 rows (the last one part-filled), heaviest first, each
// through three tiles of keys in the 3-stage pipeline with Q fragments held in registers.
TEST(CudaFlashEmulation, PrefillRowBlocksChunkAfterCacheD64) {
  check_case<__nv_bfloat16, 64>(
      chunk_after_cache("bf16 D64 Sq150 after 20 cached GQA 4:2", SY_DTYPE_BF16, 4, 90, 8));
}

// sm_89, whose blocks cannot have the wide form's 139 KiB at D = 128: three blocks of the narrow
// form's 64 rows, 2 stages.
TEST(CudaFlashEmulation, PrefillRowBlocksNarrowFormD128) {
  check_case<__half, 128>(
      chunk_after_cache("f16 D128 Sq150 after 20 cached, sm_89", SY_DTYPE_F16, 2, 89, 4));
}

TEST(CudaFlashEmulation, WindowSinksSoftcapF16D128) {
  EmuCase c = shape("f16 D128 Sq70 Skv70 window 17 sinks softcap", SY_DTYPE_F16, 1, 70, 70, 2, 2);
  c.causal = true;
  c.window = 17;
  c.sinks = true;
  c.softcap = 5.0;
  check_case<__half, 128>(c);
}

TEST(CudaFlashEmulation, DecodeSplitKvD256) {
  EmuCase c =
      shape("bf16 D256 decode MQA 8:1 kv_len 250 of 300, sinks", SY_DTYPE_BF16, 1, 1, 300, 8, 1);
  c.sinks = true;
  c.kv_len = {250};
  c.sm_count = 4;
  c.want_split = true;
  check_case<__nv_bfloat16, 256>(c);
}

TEST(CudaFlashEmulation, DecodeSplitKvWindowPerBatchLengths) {
  EmuCase c =
      shape("bf16 D128 decode B2 window 300 kv_len {600,1000}", SY_DTYPE_BF16, 2, 1, 1000, 4, 4);
  c.window = 300;
  c.sinks = true;
  c.kv_len = {600, 1000};
  c.sm_count = 4;
  c.want_split = true;
  check_case<__nv_bfloat16, 128>(c);
}

// 130 keys of a 4096-key cache over 16 splits: three get a tile, the rest none, and the merge
// must ignore the empty ones.
TEST(CudaFlashEmulation, DecodeShortFillOfLargeCache) {
  EmuCase c = shape("bf16 D64 decode kv_len 130 of 4096", SY_DTYPE_BF16, 1, 1, 4096, 8, 2);
  c.sinks = true;
  c.kv_len = {130};
  c.sm_count = 8;
  c.want_split = true;
  check_case<__nv_bfloat16, 64>(c);
}

// The decode kernel without a split: 16 heads a KV head fill the warps' 16 rows (tiles seen
// whole skip the mask), the 13 tiles of 200 keys fall 4, 3, 3, 3 to the four warps and the 9 of
// 131 keys 3, 2, 2, 2, and the warps' partial rows merge with the sink in one place.
TEST(CudaFlashEmulation, DecodeWarpsMergeWithoutSplit) {
  EmuCase c =
      shape("f16 D128 decode B2 GQA 16:1 kv_len {200,131}, sinks", SY_DTYPE_F16, 2, 1, 200, 16, 1);
  c.sinks = true;
  c.kv_len = {200, 131};
  check_case<__half, 128>(c);
}

TEST(CudaFlashEmulation, CausalPrefillSplitKv) {
  EmuCase c = shape("f16 D128 causal Sq24 Skv600 split", SY_DTYPE_F16, 1, 24, 600, 2, 1);
  c.causal = true;
  c.sm_count = 2;
  c.want_split = true;
  check_case<__half, 128>(c);
}

TEST(CudaFlashEmulation, EmptyCacheGivesZeroAndMinusInfinity) {
  EmuCase c = shape("bf16 D64 kv_len 0", SY_DTYPE_BF16, 1, 3, 40, 2, 1);
  c.sinks = true;
  c.kv_len = {0};
  check_case<__nv_bfloat16, 64>(c);
}

TEST(CudaFlashEmulation, CausalRowsWithoutKeys) {
  EmuCase c = shape("f16 D64 causal Sq20 > Skv8", SY_DTYPE_F16, 1, 20, 8, 2, 1);
  c.causal = true;
  check_case<__half, 64>(c);
}

// ---- the paged form: sequences packed along T, keys in a pool of blocks ----------------------

// Every sequence's rows against the reference run on that sequence alone (support/
// paged_attention_case.hpp builds the step: NaN-filled pool, blocks in a shuffled order).
template <typename T, int D>
void check_paged(const test::PagedAttentionCase& c, int sm_count = 132, bool want_split = false,
                 bool hopper = false, bool pingpong = true) {
  SCOPED_TRACE(c.name);
  test::PagedAttentionStep st(c, D, 11);
  std::vector<float> lse(size_t(c.Hq) * st.tokens, 123.0f);
  sy_emu::forget_globals();
  for (test::HostTensor* t : {st.q.get(), st.k_pool.get(), st.v_pool.get()})
    sy_emu::register_global(t->bytes(), t->size_bytes());
  test::HostTensor o(c.dtype, {1, st.tokens, c.Hq, D});

  flash::FlashParams p{};
  p.q = st.q->bytes(), p.k = st.k_pool->bytes(), p.v = st.v_pool->bytes(), p.o = o.bytes();
  p.sinks = c.sinks ? st.sinks.data() : nullptr;
  p.lse = lse.data();
  p.query_start = st.starts.data(), p.seq_lens = st.lens.data(), p.block_table = st.table.data();
  p.S = st.S, p.MB = st.MB, p.BS = c.BS;
  p.B = 1, p.Sq = st.tokens, p.Hq = c.Hq, p.Hkv = c.Hkv, p.G = c.Hq / c.Hkv;
  p.M = st.max_q * p.G;
  p.Skv = st.max_len;
  p.scale = float(1.0 / std::sqrt(double(D)));
  p.softcap = float(c.softcap);
  p.causal = c.causal;
  p.window = c.window;
  const flash::LaunchShape shape =
      flash::launch_shape<T, D>(p, sm_count, limits_for(90, D, hopper, pingpong));
  EXPECT_EQ(shape.hopper, hopper) << "the case no longer covers the sm_90a kernel";
  if (want_split) {
    EXPECT_GT(shape.splits, 1) << "the case no longer covers split-KV";
  }
  p.splits = shape.splits;
  const size_t rows = size_t(c.Hq) * st.tokens;
  std::vector<float> part_o(rows * shape.splits * D, NAN), part_lse(rows * shape.splits, NAN);
  p.part_o = part_o.data();
  p.part_lse = part_lse.data();
  ASSERT_NO_THROW((launch_emulated<T, D>(p, shape, unsigned(st.S), rows)));
  EXPECT_EQ(st.mismatch(o.get(), lse, 1.2e-2, 1e-4), "");
}

TEST(CudaFlashEmulation, PagedPrefillChunksAndDecodeRowsInOneStep) {
  test::PagedAttentionCase c;
  c.name = "bf16 D64 paged: a prefill of 21, a chunk of 9 after 40 cached, two decode rows";
  c.q_lens = {21, 9, 1, 1};
  c.lens = {21, 49, 70, 5};
  check_paged<__nv_bfloat16, 64>(c);
}

// An f16 step over blocks of 8 with a window, sinks and softcap.
test::PagedAttentionCase paged_f16_blocks_of_8(std::string name, std::vector<int> q_lens,
                                               std::vector<int> lens, int window) {
  test::PagedAttentionCase c;
  c.name = std::move(name);
  c.dtype = SY_DTYPE_F16;
  c.q_lens = std::move(q_lens);
  c.lens = std::move(lens);
  c.BS = 8;
  c.window = window;
  c.sinks = true;
  c.softcap = 5.0;
  return c;
}

TEST(CudaFlashEmulation, PagedWindowSinksSoftcapF16D128) {
  check_paged<__half, 128>(paged_f16_blocks_of_8(
      "f16 D128 paged window 12, sinks, softcap, blocks of 8", {5, 1, 17}, {30, 33, 17}, 12));
}

// Decode rows over blocks of 8: a tile of 16 keys spans two blocks, each key's block taken by
// shuffle from the lane that read it a tile ahead; sequences of 250, 77, 16 and 1 keys leave
// some warps several tiles and some none.
TEST(CudaFlashEmulation, PagedDecodeBlocksOfEightWindowSoftcap) {
  check_paged<__half, 128>(
      paged_f16_blocks_of_8("f16 D128 paged decode, blocks of 8, window 100, sinks, softcap",
                            {1, 1, 1, 1}, {250, 77, 16, 1}, 100));
}

TEST(CudaFlashEmulation, PagedDecodeSplitKv) {
  test::PagedAttentionCase c;
  c.name = "bf16 D64 paged decode of 3 sequences, split-KV";
  c.q_lens = {1, 1, 1};
  c.lens = {1100, 129, 2};
  c.Hq = 8, c.Hkv = 1;
  c.sinks = true;
  check_paged<__nv_bfloat16, 64>(c, 2, true);
}

// ---- the sm_90a kernel (flash_hopper.cuh): producer and consumer warpgroups, mbarriers, TMA
// and wgmma under the model's layouts ---------------------------------------------------------

// Contiguous, no kv_len: K and V by TMA. 300 packed rows over three blocks (the last with one
// live consumer warpgroup and one whose rows are all past the sequence), 170 keys over two tiles
// of 128, the second part outside the tensor (zeros).
TEST(CudaFlashEmulation, Sm90aChunkAfterCacheByTmaD64) {
  EmuCase c =
      chunk_after_cache("sm_90a bf16 D64 Sq150 after 20 cached GQA 4:2", SY_DTYPE_BF16, 4, 90, 8);
  c.hopper = true;
  check_case<__nv_bfloat16, 64>(c);
}

TEST(CudaFlashEmulation, Sm90aWindowSinksSoftcapByTmaF16D128) {
  EmuCase c = shape("sm_90a f16 D128 B2 Sq70 Skv300 window 100 sinks softcap", SY_DTYPE_F16, 2, 70,
                    300, 4, 2);
  c.causal = true;
  c.window = 100;
  c.sinks = true;
  c.softcap = 5.0;
  c.hopper = true;
  check_case<__half, 128>(c);
}

// 1000 keys without a split: eight tiles a block, so the three stages wrap round twice, each
// refill waiting on the release of the stage's use three tiles before (the barriers' parity).
// The consumers are slowed, so a refill that does not wait overwrites a tile still to be read.
TEST(CudaFlashEmulation, Sm90aLongCacheWrapsTheStagesByTma) {
  EmuCase c = shape("sm_90a bf16 D64 Sq64 Skv1000 GQA 8:2, one multiprocessor", SY_DTYPE_BF16, 1,
                    64, 1000, 8, 2);
  c.sinks = true;
  c.sm_count = 1;
  c.hopper = true;
  sy_emu::world().wgmma_delay_us = 2000;
  check_case<__nv_bfloat16, 64>(c);
  sy_emu::world().wgmma_delay_us = 0;
}

// The ping-pong: in each block the consumers' S = Q Kᵀ products (the wgmmas with A in shared
// memory) come in whole runs of one warpgroup, first consumer first, then strictly by turns, two
// a tile; and within a turn after the first tile, O += P V of the tile before (A in registers)
// follows at once. The consumers are slowed, and both wait on the same stage, so without the
// turns their products interleave or come out of order.
TEST(CudaFlashEmulation, Sm90aConsumersTakeTurns) {
  EmuCase c = shape("sm_90a f16 D128 Sq64 Skv700 GQA 8:2, turns", SY_DTYPE_F16, 1, 64, 700, 8, 2);
  c.sm_count = 1;
  c.hopper = true;
  auto& world = sy_emu::world();
  world.wgmma_log.clear();
  world.log_wgmma = true;
  world.wgmma_delay_us = 500;
  check_case<__half, 128>(c);
  world.log_wgmma = false;
  world.wgmma_delay_us = 0;
  std::map<unsigned, std::vector<sy_emu::World::WgmmaIssue>> blocks;
  for (const auto& issue : world.wgmma_log) blocks[issue.block].push_back(issue);
  // ceil(700 / 128) tiles; an S product is D / 16 wgmmas, a P V product 128 keys / 16.
  constexpr int kTiles = 6, kS = 128 / 16, kPV = 128 / 16;
  ASSERT_EQ(blocks.size(), 2u * 2u);  // 2 row blocks (256 packed rows) x 2 KV heads
  for (auto& [block, log] : blocks) {
    SCOPED_TRACE("block " + std::to_string(block));
    ASSERT_EQ(log.size(), size_t(2 * (kTiles * kS + kTiles * kPV)));
    // The first consumer's last P V is issued outside the turns, maybe amid the second's last
    // turn: set it aside (the second's comes after its own last turn, so last of all).
    int last_pv = kPV;
    for (size_t i = log.size(); i-- > 0 && last_pv > 0;)
      if (log[i].warpgroup == 1 && log[i].a_in_registers) {
        log.erase(log.begin() + long(i));
        --last_pv;
      }
    int turn = 0;
    for (size_t i = 0; i < log.size(); ++i) {
      if (log[i].a_in_registers) continue;  // S runs from here
      const int wg = 1 + turn % 2;
      ASSERT_EQ(log[i].warpgroup, wg) << "turn " << turn;
      ASSERT_LE(i + kS + (turn >= 2 ? kPV : 0), log.size()) << "turn " << turn;
      for (int k = 0; k < kS; ++k)
        ASSERT_TRUE(log[i + k].warpgroup == wg && !log[i + k].a_in_registers) << "turn " << turn;
      i += kS - 1;
      if (turn >= 2) {  // the tile before's P V in the same turn
        for (int k = 1; k <= kPV; ++k)
          ASSERT_TRUE(log[i + k].warpgroup == wg && log[i + k].a_in_registers) << "turn " << turn;
      }
      ++turn;
    }
    EXPECT_EQ(turn, 2 * kTiles);
  }
}

// kv_len: the producer loads by cp.async, zero-filling past each batch's keys; split-KV over
// the 128-key tiles (some splits of a batch without tiles), an empty cache, and rows with no
// causal key. Both consumers have rows (96 packed), so the case runs in both schedules: in
// ping-pong, and issuing freely (SWITCHYARD_CUDA_FLASH_SM90A=no-pingpong).
TEST(CudaFlashEmulation, Sm90aSplitKvPerBatchLengthsByCpAsyncInBothSchedules) {
  EmuCase c = shape("sm_90a bf16 D128 causal B3 Sq24 kv_len {600,0,333} split", SY_DTYPE_BF16, 3,
                    24, 700, 4, 1);
  c.causal = true;
  c.sinks = true;
  c.kv_len = {600, 0, 333};
  c.sm_count = 8;
  c.want_split = true;
  c.hopper = true;
  check_case<__nv_bfloat16, 128>(c);
  c.pingpong = false;
  check_case<__nv_bfloat16, 128>(c);
}

// A cache tensor with no keys: no tensor map (it cannot have an empty dimension), no tile.
TEST(CudaFlashEmulation, Sm90aCacheTensorWithoutKeys) {
  EmuCase c = shape("sm_90a bf16 D64 Sq40 Skv0, sinks", SY_DTYPE_BF16, 1, 40, 0, 2, 1);
  c.sinks = true;
  c.hopper = true;
  check_case<__nv_bfloat16, 64>(c);
}

TEST(CudaFlashEmulation, Sm90aCausalRowsWithoutKeys) {
  EmuCase c = shape("sm_90a f16 D64 causal Sq20 > Skv8", SY_DTYPE_F16, 1, 20, 8, 2, 1);
  c.causal = true;
  c.hopper = true;
  check_case<__half, 64>(c);
}

// The paged form: cp.async through the block table (blocks of 8, so a tile spans 16 of them),
// a prefill, a chunk after cached keys and decode rows in one step.
TEST(CudaFlashEmulation, Sm90aPagedPrefillChunksBlocksOfEight) {
  check_paged<__half, 128>(
      paged_f16_blocks_of_8("sm_90a f16 D128 paged, blocks of 8, window 40, sinks, softcap",
                            {21, 9, 1, 140}, {21, 49, 70, 200}, 40),
      132, false, true);
}

}  // namespace
}  // namespace sy

namespace sy {
namespace {

// SWITCHYARD_CUDA_FLASH_SM90A's values as docs/cuda_flash.md lists them.
TEST(FlashHopperMode, ValuesOfTheVariable) {
  namespace flash = sy::cuda::flash;
  using M = flash::HopperMode;
  EXPECT_EQ(flash::hopper_mode_of(nullptr, 90), M::off);
  for (const char* v : {"", "off", "0"}) EXPECT_EQ(flash::hopper_mode_of(v, 90), M::off) << v;
  for (const char* v : {"on", "1"}) EXPECT_EQ(flash::hopper_mode_of(v, 90), M::pingpong) << v;
  EXPECT_EQ(flash::hopper_mode_of("no-pingpong", 90), M::free);
  // Off on any other device, whatever it asks.
  for (int sm : {80, 89, 100, 120})
    for (const char* v : {"on", "no-pingpong"})
      EXPECT_EQ(flash::hopper_mode_of(v, sm), M::off) << v << " on sm_" << sm;
  // A value it does not know is refused, not taken as off, on every device.
  for (int sm : {80, 90})
    for (const char* v : {"ON", "yes", "true", "pingpong", " on", "on "})
      EXPECT_EQ(flash::hopper_mode_of(v, sm), std::nullopt) << "'" << v << "' on sm_" << sm;
}

// flash_shape.hpp's arithmetic against numbers worked by hand from CUDA's shared-memory tables.
TEST(FlashShape, FormsOccupancyAndSplitsByHand) {
  namespace flash = sy::cuda::flash;
  // D = 128. Decode: Q 16 · 136 · 2 = 4352 bytes, four warps' K and V double-buffered 4 · 4 · 16
  // · 136 · 2 = 69632. Rows, wide: (128 + 2 · 3 · 64) · 136 · 2 = 139264; narrow: (64 + 2 · 2 ·
  // 64) · 136 · 2 = 87040.
  EXPECT_EQ(flash::decode_smem_bytes(128), 73984u);
  EXPECT_EQ(flash::rows_smem_bytes(flash::kRowsWide, 128), 139264u);
  EXPECT_EQ(flash::rows_smem_bytes(flash::kRowsNarrow, 128), 87040u);
  // sm_90 (228 KiB a multiprocessor, 227 a block): the wide form; 233472 / (73984 + 1024) -> 3
  // decode blocks, 233472 / (139264 + 1024) -> 1 rows block.
  const flash::FlashLimits h100 = flash::flash_limits(flash::smem_limits(90), 128);
  EXPECT_EQ(h100.rows.warps, 8);
  EXPECT_EQ(h100.occupancy.decode, 3);
  EXPECT_EQ(h100.occupancy.rows, 1);
  // sm_89 (100 and 99 KiB): the wide form does not fit a block; 102400 / 88064 -> 1 rows block,
  // 102400 / 75008 -> 1 decode block.
  const flash::FlashLimits ada = flash::flash_limits(flash::smem_limits(89), 128);
  EXPECT_EQ(ada.rows.warps, 4);
  EXPECT_EQ(ada.occupancy.rows, 1);
  EXPECT_EQ(ada.occupancy.decode, 1);
  // Decode of one sequence, 8 KV heads, 32768 keys on 132 multiprocessors of sm_90: 8 blocks of
  // the 396 wanted -> 50 splits (32768 / 128 = 256 by length); on 4 multiprocessors -> 2.
  EXPECT_EQ(flash::flash_splits(4, 1, 8, 32768, 128, 132, h100), 50);
  EXPECT_EQ(flash::flash_splits(4, 1, 8, 32768, 128, 4, h100), 2);
  // A prefill of 4096 x 4 packed rows: 32 wide blocks per KV head, 256 blocks -> no split.
  EXPECT_EQ(flash::flash_splits(4096 * 4, 1, 8, 4096, 128, 132, h100), 1);
  // D = 256 fits an sm_89 block (101376 bytes) in both kernels: decode with 2 warps, 16 · 264 · 2
  // + 2 · 4 · 16 · 264 · 2 = 76032 bytes; rows narrow, (64 + 2 · 2 · 32) · 264 · 2 = 101376.
  EXPECT_EQ(flash::decode_smem_bytes(256), 76032u);
  EXPECT_EQ(flash::rows_smem_bytes(flash::kRowsNarrow, 256), 101376u);
  EXPECT_EQ(flash::flash_limits(flash::smem_limits(89), 256).rows.warps, 4);
  // The sm_90a kernel: 1 KiB of alignment, Q and three stages of K and V (128 rows of D 16-bit
  // elements each), 64 bytes of barriers. D = 128: 1024 + 7 · 32768 + 64 = 230464, within an
  // sm_90 block's 232448, one block a multiprocessor; D = 64: 1024 + 7 · 16384 + 64 = 115776,
  // 233472 / 116800 -> 1, below the wide form's 233472 / (73728 + 1024) -> 3.
  EXPECT_EQ(flash::hopper_smem_bytes(128), 230464u);
  EXPECT_EQ(flash::hopper_smem_bytes(64), 115776u);
  const auto sm90 = flash::smem_limits(90);
  EXPECT_LE(flash::hopper_smem_bytes(128), size_t(sm90.per_block));
  EXPECT_EQ(flash::with_hopper(flash::flash_limits(sm90, 128), sm90, 128, true).occupancy.rows, 1);
  EXPECT_EQ(flash::flash_limits(sm90, 64).occupancy.rows, 3);
  const flash::FlashLimits hopper64 =
      flash::with_hopper(flash::flash_limits(sm90, 64), sm90, 64, true);
  EXPECT_TRUE(hopper64.hopper);
  EXPECT_EQ(hopper64.occupancy.rows, 1);
}

}  // namespace
}  // namespace sy
