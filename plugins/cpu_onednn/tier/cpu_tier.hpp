// tier/ — which instruction-set tier runs (this header), the per-thread scratch and the
// helpers the tier files share, and the tier rule's check (check_tier_objects.sh).
//
// The instruction-set tier the plugin's hand-written kernels run on, chosen at run time:
// amx (AVX-512 with BF16, plus AMX-BF16 tiles the kernel lets this process use) → avx512
// (F/BW/VL/DQ; bf16 dots where the CPU has AVX512-BF16) → avx2 (AVX2 + FMA + F16C; bf16 widened
// to f32 in registers) → portable (baseline x86-64, whatever the compiler vectorises).
// The best tier the CPU has is the default; SWITCHYARD_CPU_ISA=amx|avx512|avx2|portable picks
// another (a tier above what the CPU has is never taken). The device's arch string names the
// tier, and the note says why a tier was not taken.
#pragma once

#include <string>

namespace sy::cpu {

enum class CpuTier { portable = 0, avx2 = 1, avx512 = 2, amx = 3 };

struct TierChoice {
  CpuTier tier = CpuTier::portable;
  bool avx512_bf16 = false;  // the avx512 and amx tiers may use vdpbf16ps
  std::string note;  // why the tier is lower than asked, or an unreadable request; "" if none
};

// The best tier this CPU supports (amx only where the kernel grants tile state).
CpuTier best_tier();
// The tier in force now: best_tier(), or SWITCHYARD_CPU_ISA's lower one when set. Read on every
// call, so a test can switch tiers between prepares.
TierChoice active_tier();
const char* tier_name(CpuTier tier);
// The vector tier under `tier`: amx runs everything but its tile kernels on the avx512 ones.
inline bool has_avx512(CpuTier tier) {
  return tier >= CpuTier::avx512;
}

}  // namespace sy::cpu
