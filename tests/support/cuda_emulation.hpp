// A CPU model of the CUDA execution cuda_flash's flash kernels rely on, so their logic (tile
// ranges, pack-GQA rows, masks, online softmax, split-KV and its merge, every lane's shared-
// memory address) is tested on machines without a GPU. Include it, then the kernel header,
// with SY_CUDA_EMULATION defined.
//
// One OS thread per CUDA thread; a block's threads run together, blocks one after another.
// __syncthreads is a block barrier, __syncwarp a warp one; warp instructions (shuffles, ldmatrix,
// mma) are warp barriers around an exchange through shared slots. The instruction models follow the
// PTX ISA fragment layouts (ldmatrix: lanes 8m..8m+7 address the rows of matrix m, lane t receives
// row t/4, columns 2(t%4) and 2(t%4)+1, or the transpose; mma.m16n8k16: groupID = lane/4,
// threadID_in_group = lane%4). Each model checks what the hardware requires (16-byte aligned
// rows, addresses inside shared memory or a registered global buffer) and records a violation
// instead of crashing; launch() throws it afterwards. Shared memory starts filled with 0xFF
// bytes (NaN in f16/bf16), so a read of something never written shows in the results.
// cp.async is modelled as an immediate copy: it cannot find a missing wait (a GPU run must).
//
// sm_90a (the last section): mbarriers, named barriers, the TMA tile load with 128-byte swizzle,
// and wgmma.mma_async m64nNk16 with operands described by shared-memory matrix descriptors, after
// the PTX ISA's canonical layouts (K-major: ((8,m),(8,2)) : ((64,SBO),(1,8)) elements; MN-major:
// ((64,m),(8,k)) : ((1,LBO),(64,SBO)); the 128-byte swizzle XORs address bits 4-6 with bits 7-9
// of the shared-window address). Shared memory has window addresses here as on the device, and
// the dynamic region starts at window address kWindowBase, on purpose not 1024-aligned, so a
// kernel that forgets to align its swizzled buffers fails. The asynchronous instructions complete
// at once: a missing fence or wait is, again, left to a GPU run.
#pragma once

#ifndef SY_CUDA_EMULATION
#define SY_CUDA_EMULATION 1
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#undef __launch_bounds__
#define __launch_bounds__(...)
#undef __grid_constant__
#define __grid_constant__

inline thread_local uint3 threadIdx{};
inline thread_local uint3 blockIdx{};
inline thread_local dim3 blockDim{};
inline thread_local dim3 gridDim{};
using std::max;
using std::min;

namespace sy_emu {

struct Warp {
  std::barrier<> sync{32};
  const void* ptr[32] = {};
  uint32_t regs[32][6] = {};
  float val[32] = {};
};

// A warpgroup's exchange for wgmma: every thread's A fragment (when A is in registers).
struct Warpgroup {
  std::barrier<> sync{128};
  uint32_t a[128][4] = {};
};

// An mbarrier's state: arrivals still expected in this phase, transaction bytes outstanding, and
// the phases completed.
struct MBarrier {
  int expected = 0, pending = 0;
  long long tx = 0;
  unsigned phase = 0;
};

// A named barrier's phase (bar.sync / bar.arrive with a thread count): the count its first
// arrival set, the arrivals so far, and the phases completed.
struct NamedBarrier {
  int count = 0, arrived = 0;
  unsigned phase = 0;
};

struct Block {
  explicit Block(unsigned threads, size_t smem_bytes) : sync(threads), smem_size(smem_bytes) {
    smem.reset(
        static_cast<unsigned char*>(std::aligned_alloc(128, (smem_bytes + 127) / 128 * 128 + 128)));
    std::memset(smem.get(), 0xFF, smem_bytes);
    for (unsigned w = 0; w < (threads + 31) / 32; ++w) warps.push_back(std::make_unique<Warp>());
    for (unsigned g = 0; g < threads / 128; ++g)
      warpgroups.push_back(std::make_unique<Warpgroup>());
  }
  std::vector<std::unique_ptr<Warpgroup>> warpgroups;
  std::mutex bar_mu;
  std::condition_variable bar_cv;
  std::map<const void*, MBarrier> bars;
  NamedBarrier named[16];  // under bar_mu, as the mbarriers
  std::barrier<> sync;
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, Free> smem;
  size_t smem_size;
  std::vector<std::unique_ptr<Warp>> warps;
};

struct World {
  std::mutex mu;
  std::string violation;
  std::atomic<bool> violated{false};  // a waiting thread gives up at once after the first
  std::vector<std::pair<const char*, size_t>> globals;
  // Each wgmma holds its warpgroup this long: slow consumers, so that a producer that refills a
  // stage before its release overwrites data still to be read, and the results show it.
  int wgmma_delay_us = 0;
  // Where set, each wgmma's issue in order (its warpgroup's first thread entering it), for a
  // test of the order the warpgroups take turns in.
  struct WgmmaIssue {
    unsigned block;  // blockIdx.x + gridDim.x (blockIdx.y + gridDim.y blockIdx.z)
    int warpgroup;
    bool a_in_registers;
  };
  bool log_wgmma = false;
  std::vector<WgmmaIssue> wgmma_log;  // under mu
};
inline World& world() {
  static World w;
  return w;
}
inline thread_local Block* t_block = nullptr;

inline void violate(const std::string& what) {
  std::lock_guard<std::mutex> lock(world().mu);
  world().violated = true;
  if (world().violation.empty())
    world().violation = what + " (block " + std::to_string(blockIdx.x) + "," +
                        std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) +
                        ", thread " + std::to_string(threadIdx.x) + ")";
}

// Global buffers a kernel may read: every cp.async source must lie inside one.
inline void forget_globals() {
  world().globals.clear();
}
inline void register_global(const void* p, size_t bytes) {
  world().globals.emplace_back(static_cast<const char*>(p), bytes);
}
inline bool in_global(const void* p, size_t n) {
  auto c = static_cast<const char*>(p);
  for (auto& [b, size] : world().globals)
    if (c >= b && c + n <= b + size) return true;
  return false;
}
inline bool in_shared(const void* p, size_t n) {
  auto c = static_cast<const unsigned char*>(p);
  return c >= t_block->smem.get() && c + n <= t_block->smem.get() + t_block->smem_size;
}

inline unsigned char* dynamic_shared() {
  return t_block->smem.get();
}
inline Warp& warp() {
  return *t_block->warps[threadIdx.x / 32];
}
inline int lane() {
  return int(threadIdx.x % 32);
}

inline void cp_async16(void* dst, const void* src, bool ok) {
  if (reinterpret_cast<uintptr_t>(dst) % 16 || !in_shared(dst, 16))
    return violate("cp.async destination outside shared memory or not 16-byte aligned");
  if (!ok) {
    std::memset(dst, 0, 16);
    return;
  }
  if (reinterpret_cast<uintptr_t>(src) % 16 || !in_global(src, 16))
    return violate("cp.async source outside the kernel's buffers or not 16-byte aligned");
  std::memcpy(dst, src, 16);
}

inline void ldmatrix_x4(uint32_t (&r)[4], const void* p, bool trans) {
  Warp& w = warp();
  const int t = lane();
  r[0] = r[1] = r[2] = r[3] = 0;
  w.ptr[t] = p;
  w.sync.arrive_and_wait();
  bool ok = true;
  for (int i = 0; i < 32; ++i)
    ok = ok && reinterpret_cast<uintptr_t>(w.ptr[i]) % 16 == 0 && in_shared(w.ptr[i], 16);
  if (!ok) violate("ldmatrix row address outside shared memory or not 16-byte aligned");
  for (int m = 0; m < 4 && ok; ++m) {
    auto row = [&](int rr) { return static_cast<const uint16_t*>(w.ptr[m * 8 + rr]); };
    uint16_t lo, hi;
    if (!trans) {
      lo = row(t / 4)[2 * (t % 4)];
      hi = row(t / 4)[2 * (t % 4) + 1];
    } else {
      lo = row(2 * (t % 4))[t / 4];
      hi = row(2 * (t % 4) + 1)[t / 4];
    }
    r[m] = uint32_t(lo) | (uint32_t(hi) << 16);
  }
  w.sync.arrive_and_wait();
}

template <typename T>
float half_to_float(uint16_t bits) {
  if constexpr (std::is_same_v<T, __half>) {
    __half_raw raw{};
    raw.x = bits;
    return __half2float(__half(raw));
  } else {
    __nv_bfloat16_raw raw{};
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
}

// d = a·b + c for one warp: A 16x16 (4 registers per lane), B 16x8 (2), C/D 16x8 f32 (4).
template <typename T>
void mma_m16n8k16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  Warp& w = warp();
  const int t = lane();
  for (int i = 0; i < 4; ++i) w.regs[t][i] = a[i];
  w.regs[t][4] = b0;
  w.regs[t][5] = b1;
  w.sync.arrive_and_wait();
  auto elem = [&](int ln, int reg, int k) {
    uint32_t v = w.regs[ln][reg];
    return half_to_float<T>(uint16_t(k % 2 ? v >> 16 : v & 0xFFFF));
  };
  auto A = [&](int r, int k) {
    return elem((r % 8) * 4 + (k % 8) / 2, (r >= 8) + 2 * (k >= 8), k);
  };
  auto B = [&](int k, int n) { return elem(n * 4 + (k % 8) / 2, 4 + (k >= 8), k); };
  const int gid = t / 4, tig = t % 4;
  for (int e = 0; e < 4; ++e) {
    const int r = gid + 8 * (e >= 2), n = 2 * tig + (e & 1);
    double sum = 0;
    for (int k = 0; k < 16; ++k) sum += double(A(r, k)) * double(B(k, n));
    c[e] += float(sum);
  }
  w.sync.arrive_and_wait();
}

// Runs `kernel` (a callable with no arguments that reads threadIdx & co.) over the grid.
template <typename F>
void launch(dim3 grid, dim3 block, size_t smem_bytes, F kernel) {
  world().violation.clear();
  world().violated = false;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block b(block.x, smem_bytes);
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < block.x; ++t)
          threads.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            blockIdx = {x, y, z};
            blockDim = block;
            gridDim = grid;
            t_block = &b;
            kernel();
          });
        for (auto& th : threads) th.join();
        for (int id = 0; id < 16; ++id)
          if (b.named[id].arrived != 0 && world().violation.empty())
            world().violation = "named barrier " + std::to_string(id) +
                                " left part-arrived at exit (block " + std::to_string(x) + "," +
                                std::to_string(y) + "," + std::to_string(z) + ")";
      }
  if (!world().violation.empty()) throw std::runtime_error(world().violation);
}

}  // namespace sy_emu

// Device math the host library lacks.
inline float rsqrtf(float x) {
  return 1.0f / std::sqrt(x);
}

inline void __syncthreads() {
  sy_emu::t_block->sync.arrive_and_wait();
}

inline float __shfl_xor_sync(unsigned, float v, int mask) {
  sy_emu::Warp& w = sy_emu::warp();
  const int t = sy_emu::lane();
  w.val[t] = v;
  w.sync.arrive_and_wait();
  float r = w.val[t ^ mask];
  w.sync.arrive_and_wait();
  return r;
}

// The value of lane `src` (its low 5 bits, as the hardware takes them).
inline int __shfl_sync(unsigned, int v, int src) {
  sy_emu::Warp& w = sy_emu::warp();
  const int t = sy_emu::lane();
  w.regs[t][0] = uint32_t(v);
  w.sync.arrive_and_wait();
  const int r = int(w.regs[src & 31][0]);
  w.sync.arrive_and_wait();
  return r;
}

inline void __syncwarp(unsigned = 0xffffffffu) {
  sy_emu::warp().sync.arrive_and_wait();
}

// ---- sm_90a: shared-window addresses, mbarriers, TMA, wgmma ---------------------------------
namespace sy_emu {

// The window address of the dynamic region's first byte (16-byte aligned, as a device
// guarantees, and no more).
constexpr uint32_t kWindowBase = 0x90;

inline uint32_t shared_window(const void* p) {
  return kWindowBase + uint32_t(static_cast<const unsigned char*>(p) - t_block->smem.get());
}
inline unsigned char* from_window(uint32_t addr) {
  return t_block->smem.get() + (addr - kWindowBase);
}

// ---- mbarrier
inline void mbar_init(void* bar, unsigned count) {
  std::lock_guard<std::mutex> lock(t_block->bar_mu);
  if (reinterpret_cast<uintptr_t>(bar) % 8 || !in_shared(bar, 8))
    return violate("mbarrier outside shared memory or not 8-byte aligned");
  t_block->bars[bar] = MBarrier{int(count), int(count), 0, 0};
}

// Caller holds bar_mu.
inline MBarrier* find_bar(void* bar) {
  auto it = t_block->bars.find(bar);
  if (it == t_block->bars.end()) {
    violate("mbarrier used before mbarrier.init");
    return nullptr;
  }
  return &it->second;
}
inline void maybe_complete(MBarrier& b) {
  if (b.pending < 0 || b.tx < 0) violate("mbarrier phase over-arrived or over-completed");
  if (b.pending <= 0 && b.tx <= 0) {
    ++b.phase;
    b.pending = b.expected;
    b.tx = 0;
    t_block->bar_cv.notify_all();
  }
}
// arrive (and expect_tx: tx bytes more this phase before it completes).
inline void mbar_arrive(void* bar, long long expect_tx = 0) {
  std::lock_guard<std::mutex> lock(t_block->bar_mu);
  if (MBarrier* b = find_bar(bar)) {
    b->tx += expect_tx;
    --b->pending;
    maybe_complete(*b);
  }
}
inline void mbar_complete_tx(void* bar, long long bytes) {
  std::lock_guard<std::mutex> lock(t_block->bar_mu);
  if (MBarrier* b = find_bar(bar)) {
    b->tx -= bytes;
    maybe_complete(*b);
  }
}
// Waits (holding bar_mu through `lock`) until done(). A wait that a kernel's own logic would
// leave hanging on a GPU is reported after 20 s instead, as `what` never completing, and every
// wait after a violation gives up at once, so a broken pipeline fails, not hangs.
template <typename Done>
void wait_or_report(std::unique_lock<std::mutex>& lock, Done done, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (world().violated) return;
    if (std::chrono::steady_clock::now() > deadline)
      return violate(std::string(what) + " wait never completed (a deadlock on a GPU)");
    t_block->bar_cv.wait_for(lock, std::chrono::milliseconds(50));
  }
}

// Waits until the phase of this parity has completed (the current phase's parity differs).
inline void mbar_wait(void* bar, unsigned parity) {
  std::unique_lock<std::mutex> lock(t_block->bar_mu);
  MBarrier* b = find_bar(bar);
  if (!b) return;
  wait_or_report(
      lock, [&] { return (b->phase & 1u) != (parity & 1u); }, "mbarrier");
}

// ---- named barriers: bar.sync (wait) and bar.arrive (not) with a thread count. Id 0 is
// __syncthreads' and refused here; a count must be a multiple of the warp, the same in every
// arrival of a phase. Arrivals are counted by thread where the hardware counts whole warps: the
// same for warp-uniform calls, which the model does not check. A kernel must leave none
// part-arrived at exit (launch checks): stricter than the ISA asks, so that nothing rests on what a
// device makes of a dangling arrival.
inline void named_bar(int id, int threads, bool wait) {
  std::unique_lock<std::mutex> lock(t_block->bar_mu);
  if (id <= 0 || id >= 16) return violate("named barrier id outside 1..15");
  if (threads <= 0 || threads % 32) return violate("named barrier count not a multiple of 32");
  NamedBarrier& b = t_block->named[id];
  if (b.arrived == 0) b.count = threads;
  if (b.count != threads) return violate("named barrier arrivals with different counts");
  const unsigned phase = b.phase;
  if (++b.arrived == b.count) {
    b.arrived = 0;
    ++b.phase;
    t_block->bar_cv.notify_all();
    return;
  }
  if (wait)
    wait_or_report(
        lock, [&] { return b.phase != phase; }, "named barrier");
}

// ---- TMA: cp.async.bulk.tensor tile load, 16-bit elements, optional 128-byte swizzle
struct TensorMap {
  const void* base = nullptr;
  int rank = 0;
  uint64_t dims[5] = {};
  uint64_t strides[5] = {};  // bytes, of dims 1..rank-1 (stride of dim 0 is the element)
  uint32_t box[5] = {};
  bool swizzle128 = false;
};

// A map as cuTensorMapEncodeTiled makes it, with the checks the driver API documents: base
// 16-byte aligned, every dim in [1, 2^32], strides (of dims 1..rank-1) multiples of 16 below
// 2^40, box dims in [1, 256], an inner box of at most 128 bytes under the 128-byte swizzle.
// Throws what the driver would refuse.
inline TensorMap encode_tensor_map(const void* base, int rank, const uint64_t* dims,
                                   const uint64_t* strides, const uint32_t* box, bool swizzle128) {
  auto refuse = [](const std::string& why) {
    throw std::runtime_error("cuTensorMapEncodeTiled would fail: " + why);
  };
  TensorMap m;
  m.base = base;
  m.rank = rank;
  m.swizzle128 = swizzle128;
  if (reinterpret_cast<uintptr_t>(base) % 16) refuse("base not 16-byte aligned");
  for (int d = 0; d < rank; ++d) {
    if (dims[d] == 0 || dims[d] > (uint64_t(1) << 32)) refuse("dim " + std::to_string(d));
    if (box[d] == 0 || box[d] > 256) refuse("box dim " + std::to_string(d));
    if (d > 0 && (strides[d - 1] % 16 || strides[d - 1] >= (uint64_t(1) << 40)))
      refuse("stride of dim " + std::to_string(d));
    m.dims[d] = dims[d];
    m.box[d] = box[d];
    if (d > 0) m.strides[d] = strides[d - 1];
  }
  if (swizzle128 && box[0] * 2 > 128) refuse("inner box over 128 bytes under the 128-byte swizzle");
  return m;
}

// The 128-byte swizzle of a shared-window address: the 16-byte chunk (bits 4-6) XOR the row in
// the 1024-byte atom (bits 7-9).
inline uint32_t swizzle128(uint32_t addr) {
  return addr ^ (((addr >> 7) & 7u) << 4);
}

// Copies the box at coordinates c into shared memory at dst (rows of box[0] elements, the outer
// dims flattened in order), zeros outside the tensor, then completes its bytes on bar.
inline void tma_load(void* dst, const TensorMap& m, const int* c, void* bar) {
  const uint32_t w = shared_window(dst);
  uint64_t rows = 1;
  for (int d = 1; d < m.rank; ++d) rows *= m.box[d];
  const uint64_t row_bytes = uint64_t(m.box[0]) * 2, bytes = rows * row_bytes;
  if (m.swizzle128 && (w % 1024 || row_bytes != 128))
    return violate("TMA 128-byte swizzle needs a 1024-byte aligned box of 128-byte rows");
  if (!in_shared(dst, bytes)) return violate("TMA box outside shared memory");
  for (uint64_t r = 0; r < rows; ++r) {
    uint64_t rest = r, off = 0;
    bool inside = true;
    for (int d = 1; d < m.rank; ++d) {
      const long long x = c[d] + (long long)(rest % m.box[d]);
      rest /= m.box[d];
      inside = inside && x >= 0 && uint64_t(x) < m.dims[d];
      off += uint64_t(x) * m.strides[d];
    }
    for (uint32_t e = 0; e < m.box[0]; ++e) {
      const long long x = c[0] + (long long)e;
      const bool ok = inside && x >= 0 && uint64_t(x) < m.dims[0];
      uint16_t v = 0;
      if (ok) {
        const char* src = static_cast<const char*>(m.base) + off + uint64_t(x) * 2;
        if (!in_global(src, 2)) return violate("TMA source outside the kernel's buffers");
        std::memcpy(&v, src, 2);
      }
      uint32_t a = w + uint32_t(r * row_bytes + e * 2);
      if (m.swizzle128) a = swizzle128(a);
      std::memcpy(from_window(a), &v, 2);
    }
  }
  mbar_complete_tx(bar, (long long)bytes);
}

// ---- wgmma
// Element (mn, k) of a 16-bit operand a shared-memory matrix descriptor describes (128-byte
// swizzle only, base offset 0, as the kernels use): K-major, or MN-major.
inline const uint16_t* desc_element(uint64_t desc, int mn, int k, bool mn_major) {
  const uint32_t start = uint32_t(desc & 0x3FFF) << 4;
  const uint32_t lbo = uint32_t((desc >> 16) & 0x3FFF) << 4;
  const uint32_t sbo = uint32_t((desc >> 32) & 0x3FFF) << 4;
  if ((desc >> 62) != 1 || ((desc >> 49) & 7) != 0) {
    violate("wgmma descriptor: only the 128-byte swizzle with base offset 0 is modelled");
    return nullptr;
  }
  const uint32_t off = mn_major ? uint32_t(mn % 64) * 2 + uint32_t(mn / 64) * lbo +
                                      uint32_t(k % 8) * 128 + uint32_t(k / 8) * sbo
                                : uint32_t(mn % 8) * 128 + uint32_t(mn / 8) * sbo + uint32_t(k) * 2;
  const uint32_t a = swizzle128(start + off);
  if (a < kWindowBase || !in_shared(from_window(a), 2)) {
    violate("wgmma operand outside shared memory");
    return nullptr;
  }
  return reinterpret_cast<const uint16_t*>(from_window(a));
}

inline Warpgroup& warpgroup() {
  return *t_block->warpgroups[threadIdx.x / 128];
}

// d (m64 x N, f32) += A (m64 x k16) · B (k16 x N) for one warpgroup. A from shared memory (K-major
// descriptor) when a_regs is null, else from every thread's four registers (the layout of
// mma.m16n8k16's A per warp, warp w holding rows 16w..16w+15); B K-major, or MN-major (trans_b).
// The accumulator: warp w, lane (gid, tig), fragment n: rows 16w + gid (+8), columns 8n + 2tig
// (+1).
template <typename T, int N>
void wgmma(float (&d)[N / 8][4], const uint32_t* a_regs, uint64_t desc_a, uint64_t desc_b,
           bool trans_b) {
  Warpgroup& g = warpgroup();
  const int t = int(threadIdx.x % 128);
  if (t == 0 && world().log_wgmma) {
    std::lock_guard<std::mutex> lock(world().mu);
    world().wgmma_log.push_back({blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z),
                                 int(threadIdx.x / 128), a_regs != nullptr});
  }
  if (a_regs)
    for (int i = 0; i < 4; ++i) g.a[t][i] = a_regs[i];
  g.sync.arrive_and_wait();
  auto A = [&](int r, int k) -> float {
    if (!a_regs) {
      const uint16_t* e = desc_element(desc_a, r, k, false);
      return e ? half_to_float<T>(*e) : NAN;
    }
    const uint32_t v = g.a[(r / 16) * 32 + (r % 8) * 4 + (k % 8) / 2][(r % 16 >= 8) + 2 * (k >= 8)];
    return half_to_float<T>(uint16_t(k % 2 ? v >> 16 : v & 0xFFFF));
  };
  auto B = [&](int k, int n) -> float {
    const uint16_t* e = desc_element(desc_b, n, k, trans_b);
    return e ? half_to_float<T>(*e) : NAN;
  };
  const int w = t / 32, gid = (t % 32) / 4, tig = t % 4;
  for (int n = 0; n < N / 8; ++n)
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * w + gid + 8 * (e >= 2), col = 8 * n + 2 * tig + (e & 1);
      double sum = 0;
      for (int k = 0; k < 16; ++k) sum += double(A(r, k)) * double(B(k, col));
      d[n][e] += float(sum);
    }
  if (t == 0 && world().wgmma_delay_us > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(world().wgmma_delay_us));
  g.sync.arrive_and_wait();
}

}  // namespace sy_emu
