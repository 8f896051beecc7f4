// The instruction-set tier the plugin's hand-written kernels run on, chosen at run time:
// avx512 (F/BW/VL/DQ; bf16 dots where the CPU has AVX512-BF16) → avx2 (AVX2 + FMA + F16C; bf16
// widened to f32 in registers) → portable (baseline x86-64, whatever the compiler vectorises).
// The best tier the CPU has is the default; SWITCHYARD_CPU_ISA=avx2|portable lowers it (a
// tier above what the CPU has is never taken). The device's arch string names the tier.
#pragma once

#include <string>

namespace sy::cpu {

enum class CpuTier { portable = 0, avx2 = 1, avx512 = 2 };

struct TierChoice {
  CpuTier tier = CpuTier::portable;
  bool avx512_bf16 = false;  // the avx512 tier may use vdpbf16ps
  std::string note;  // why the tier is lower than asked, or an unreadable request; "" if none
};

// The best tier this CPU supports.
CpuTier best_tier();
// The tier in force now: best_tier(), lowered by SWITCHYARD_CPU_ISA when set. Read on every
// call, so a test can switch tiers between prepares.
TierChoice active_tier();
const char* tier_name(CpuTier tier);

}  // namespace sy::cpu
