#include "cpu_tier.hpp"

#include <cstdlib>
#include <cstring>

namespace sy::cpu {

CpuTier best_tier() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("fma"))
    return CpuTier::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    return CpuTier::avx2;
  return CpuTier::portable;
}

const char* tier_name(CpuTier tier) {
  switch (tier) {
    case CpuTier::avx512: return "avx512";
    case CpuTier::avx2: return "avx2";
    default: return "portable";
  }
}

TierChoice active_tier() {
  TierChoice c;
  c.tier = best_tier();
  const char* want = std::getenv("SWITCHYARD_CPU_ISA");
  if (want && *want) {
    CpuTier asked;
    if (!std::strcmp(want, "avx512"))
      asked = CpuTier::avx512;
    else if (!std::strcmp(want, "avx2"))
      asked = CpuTier::avx2;
    else if (!std::strcmp(want, "portable"))
      asked = CpuTier::portable;
    else {
      c.note = std::string("SWITCHYARD_CPU_ISA='") + want +
               "' is not avx512, avx2 or portable; it was ignored";
      asked = c.tier;
    }
    if (asked > c.tier)
      c.note = std::string("SWITCHYARD_CPU_ISA=") + want + " asks for more than this CPU has";
    else
      c.tier = asked;
  }
  __builtin_cpu_init();
  c.avx512_bf16 = c.tier == CpuTier::avx512 && __builtin_cpu_supports("avx512bf16");
  return c;
}

}  // namespace sy::cpu
