// The paged KV memory's bookkeeping (core/executor/kv_blocks.hpp), against hand-counted
// expectations: blocks per length, all-or-nothing reservations, copy-on-write after a fork,
// prefixes kept and reused by their exact tokens, least recently used evicted first.
#include <gtest/gtest.h>

#include <numeric>

#include "core/executor/kv_blocks.hpp"

namespace sy {
namespace {

using Grow = KvBlocks::Grow;
using Status = KvBlocks::GrowStatus;

std::vector<int64_t> iota(int64_t n, int64_t from = 0) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// Runs `tokens` into sequence `s` as one step: reserve, then commit.
void feed(KvBlocks& kv, KvBlocks::SeqId s, const std::vector<int64_t>& tokens) {
  KvBlocks::Reservation r;
  const Grow g{s, int64_t(tokens.size())};
  kv.reserve(std::span(&g, 1), r);
  ASSERT_TRUE(r.ok);
  kv.commit(s, tokens);
}

TEST(KvBlocks, ASequenceHoldsOneBlockPerBlockOfTokens) {
  KvBlocks kv(8, 4, 32);
  const auto s = kv.add();
  feed(kv, s, iota(5));
  EXPECT_EQ(kv.length(s), 5);
  EXPECT_EQ(kv.blocks(s).size(), 2u);
  EXPECT_EQ(kv.used_blocks(), 2);
  feed(kv, s, iota(3, 5));  // fills the second block: no third yet
  EXPECT_EQ(kv.blocks(s).size(), 2u);
  feed(kv, s, {8});
  EXPECT_EQ(kv.blocks(s).size(), 3u);
  EXPECT_EQ(kv.tokens(s), iota(9));
}

TEST(KvBlocks, AReservationIsAllOrNothingAndNamesWhoFailed) {
  KvBlocks kv(3, 4, 32);
  const auto a = kv.add(), b = kv.add();
  feed(kv, a, iota(4));  // one block
  KvBlocks::Reservation r;
  const Grow grows[] = {{a, 4}, {b, 9}};  // a needs 1 more, b needs 3: 4 > the 2 free
  kv.reserve(grows, r);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status[0], Status::ok);
  EXPECT_EQ(r.status[1], Status::pool_full);
  EXPECT_EQ(kv.used_blocks(), 1);  // nothing changed
  EXPECT_EQ(kv.blocks(a).size(), 1u);
  const Grow past[] = {{a, 29}};  // 33 tokens > the context of 32
  kv.reserve(past, r);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.status[0], Status::context_full);
  const Grow fits[] = {{a, 4}, {b, 4}};
  kv.reserve(fits, r);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(kv.used_blocks(), 3);
  kv.release(r);  // the step did not run
  EXPECT_EQ(kv.used_blocks(), 1);
  EXPECT_EQ(kv.blocks(a).size(), 1u);
  EXPECT_TRUE(kv.blocks(b).empty());
}

TEST(KvBlocks, AForkSharesBlocksAndCopiesTheLastOnWrite) {
  KvBlocks kv(8, 4, 32);
  const auto a = kv.add();
  feed(kv, a, iota(6));  // blocks: one full, one with 2 rows
  const auto f = kv.fork(a);
  EXPECT_EQ(kv.blocks(f), kv.blocks(a));
  EXPECT_EQ(kv.used_blocks(), 2);
  KvBlocks::Reservation r;
  const Grow g{f, 1};
  kv.reserve(std::span(&g, 1), r);
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.copies.size(), 1u);  // the shared partial block is copied, 2 rows of it
  EXPECT_EQ(r.copies[0].from, kv.blocks(a)[1]);
  EXPECT_EQ(r.copies[0].to, kv.blocks(f)[1]);
  EXPECT_EQ(r.copies[0].rows, 2);
  EXPECT_EQ(kv.blocks(f)[0], kv.blocks(a)[0]);  // the full block stays shared
  const std::vector<int64_t> hundred = {100};
  kv.commit(f, hundred);
  EXPECT_EQ(kv.used_blocks(), 3);
  // The original writes into its own partial block now: no copy.
  const Grow h{a, 1};
  kv.reserve(std::span(&h, 1), r);
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.copies.empty());
  kv.release(r);
  kv.remove(f);
  kv.remove(a);
  EXPECT_EQ(kv.used_blocks(), 0);
}

// Three holders of one partial block write in the same step (n choices after their fork):
// the first two copy it, the last keeps it, and none is given a block its length does not need
// (the copy planned for the last was once left it as an extra block).
TEST(KvBlocks, HoldersOfASharedBlockWritingInOneStepCopyItOnceEachButTheLast) {
  KvBlocks kv(16, 4, 32);
  const auto a = kv.add();
  feed(kv, a, iota(6));
  const auto f1 = kv.fork(a), f2 = kv.fork(a);
  const int32_t shared = kv.blocks(a)[1];
  KvBlocks::Reservation r;
  const Grow grows[] = {{a, 1}, {f1, 1}, {f2, 1}};
  kv.reserve(grows, r);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.copies.size(), 2u);
  for (auto s : {a, f1, f2}) EXPECT_EQ(kv.blocks(s).size(), 2u) << s;
  EXPECT_EQ(kv.blocks(f2)[1], shared);
  EXPECT_EQ(kv.used_blocks(), 1 + 3);
  kv.release(r);  // undone: all three share it again
  for (auto s : {a, f1, f2}) EXPECT_EQ(kv.blocks(s)[1], shared) << s;
  EXPECT_EQ(kv.used_blocks(), 2);
}

TEST(KvBlocks, FinishedSequencesLeaveTheirFullBlocksAsAPrefix) {
  KvBlocks kv(8, 4, 32);
  const auto a = kv.add();
  feed(kv, a, iota(10));  // blocks [0..3], [4..7] full; [8, 9] partial
  kv.remove(a);
  EXPECT_EQ(kv.cached_blocks(), 2);  // the full ones; the partial one is free again
  EXPECT_EQ(kv.used_blocks(), 0);
  const auto b = kv.add();
  std::vector<int64_t> prompt = iota(12);
  EXPECT_EQ(kv.reuse_prefix(b, prompt), 8);
  EXPECT_EQ(kv.cached_blocks(), 0);
  EXPECT_EQ(kv.tokens(b), iota(8));
  // Another prefix: only a first block that matches exactly is reused.
  const auto c = kv.add();
  std::vector<int64_t> other = iota(12);
  other[5] = 99;
  EXPECT_EQ(kv.reuse_prefix(c, other), 4);
  EXPECT_EQ(kv.blocks(c)[0], kv.blocks(b)[0]);
  // At least one token is left to compute: a prompt of exactly the cached blocks reuses one less.
  const auto d = kv.add();
  EXPECT_EQ(kv.reuse_prefix(d, iota(8)), 4);
}

TEST(KvBlocks, TheLeastRecentlyUsedPrefixIsEvictedFirst) {
  KvBlocks kv(4, 4, 32);
  const auto a = kv.add(), b = kv.add();
  feed(kv, a, iota(4, 0));
  feed(kv, b, iota(4, 100));
  kv.remove(a);  // cached first: evicted first
  kv.remove(b);
  EXPECT_EQ(kv.cached_blocks(), 2);
  const auto c = kv.add();
  feed(kv, c, iota(12, 200));  // 3 blocks: the 2 free ones and the oldest cached one
  EXPECT_EQ(kv.cached_blocks(), 1);
  const auto d = kv.add(), e = kv.add();
  EXPECT_EQ(kv.reuse_prefix(d, iota(5, 0)), 0);    // a's block was evicted
  EXPECT_EQ(kv.reuse_prefix(e, iota(5, 100)), 4);  // b's is still there
}

TEST(KvBlocks, TruncateDropsBlocksAndUnindexesARewrittenOne) {
  KvBlocks kv(8, 4, 32);
  const auto a = kv.add();
  feed(kv, a, iota(8));
  kv.truncate(a, 6);  // into the second, full block, which a alone holds
  EXPECT_EQ(kv.length(a), 6);
  EXPECT_EQ(kv.blocks(a).size(), 2u);
  feed(kv, a, {50, 51});
  kv.remove(a);
  const auto b = kv.add();
  std::vector<int64_t> old = iota(9);
  EXPECT_EQ(kv.reuse_prefix(b, old), 4) << "the rewritten block no longer stands for 4..7";
}

}  // namespace
}  // namespace sy
