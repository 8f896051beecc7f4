#include "tier/cpu_tier.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace sy::cpu {
namespace {

bool cpu_has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("fma");
}

// Linux hands out AMX tile state only to a process that asks (since 5.16): without it the first
// tile instruction faults. Asked once; the answer holds for every thread of the process.
bool tiles_granted() {
  static const bool granted = [] {
    constexpr long kReqXcompPerm = 0x1023, kGetXcompPerm = 0x1022, kXtiledata = 18;
    if (syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) != 0) return false;
    unsigned long long mask = 0;
    return syscall(SYS_arch_prctl, kGetXcompPerm, &mask) == 0 && (mask >> kXtiledata) & 1;
  }();
  return granted;
}

bool cpu_has_amx() {
  return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
         __builtin_cpu_supports("avx512bf16");
}

}  // namespace

CpuTier best_tier() {
  __builtin_cpu_init();
  if (cpu_has_avx512()) return cpu_has_amx() && tiles_granted() ? CpuTier::amx : CpuTier::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("f16c"))
    return CpuTier::avx2;
  return CpuTier::portable;
}

const char* tier_name(CpuTier tier) {
  switch (tier) {
    case CpuTier::amx: return "amx";
    case CpuTier::avx512: return "avx512";
    case CpuTier::avx2: return "avx2";
    default: return "portable";
  }
}

TierChoice active_tier() {
  TierChoice c;
  c.tier = best_tier();
  // An AMX CPU whose kernel refused tile state runs avx512, and says so.
  if (c.tier == CpuTier::avx512 && cpu_has_amx())
    c.note =
        "this CPU has AMX but the kernel did not grant tile state "
        "(arch_prctl ARCH_REQ_XCOMP_PERM XTILEDATA); the amx tier is off";
  const char* want = std::getenv("SWITCHYARD_CPU_ISA");
  if (want && *want) {
    CpuTier asked = c.tier;
    bool known = true;
    if (!std::strcmp(want, "amx"))
      asked = CpuTier::amx;
    else if (!std::strcmp(want, "avx512"))
      asked = CpuTier::avx512;
    else if (!std::strcmp(want, "avx2"))
      asked = CpuTier::avx2;
    else if (!std::strcmp(want, "portable"))
      asked = CpuTier::portable;
    else
      known = false;
    if (!known)
      c.note = std::string("SWITCHYARD_CPU_ISA='") + want +
               "' is not amx, avx512, avx2 or portable; it was ignored";
    else if (asked > c.tier)
      c.note = std::string("SWITCHYARD_CPU_ISA=") + want + " asks for more than this CPU has" +
               (c.note.empty() ? "" : " (" + c.note + ")");
    else
      c.tier = asked, c.note.clear();
  }
  c.avx512_bf16 = has_avx512(c.tier) && __builtin_cpu_supports("avx512bf16");
  return c;
}

}  // namespace sy::cpu
