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
#pragma once

#ifndef SY_CUDA_EMULATION
#define SY_CUDA_EMULATION 1
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

struct Block {
  explicit Block(unsigned threads, size_t smem_bytes) : sync(threads), smem_size(smem_bytes) {
    smem.reset(
        static_cast<unsigned char*>(std::aligned_alloc(128, (smem_bytes + 127) / 128 * 128 + 128)));
    std::memset(smem.get(), 0xFF, smem_bytes);
    for (unsigned w = 0; w < (threads + 31) / 32; ++w) warps.push_back(std::make_unique<Warp>());
  }
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
  std::vector<std::pair<const char*, size_t>> globals;
};
inline World& world() {
  static World w;
  return w;
}
inline thread_local Block* t_block = nullptr;

inline void violate(const std::string& what) {
  std::lock_guard<std::mutex> lock(world().mu);
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
