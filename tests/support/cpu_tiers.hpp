// The instruction-set tiers of cpu_onednn's kernels (plugins/cpu_onednn/tier/cpu_tier.hpp), for
// tests that must pass on each: a tier the CPU has runs under SWITCHYARD_CPU_ISA; one it lacks
// is skipped with the reason, never dropped silently.
#pragma once

#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "support/scoped_env.hpp"

namespace sy::test {

inline std::vector<std::string> cpu_tiers() {
  return {"amx", "avx512", "avx2", "portable"};
}

// Whether Linux lets this process use AMX tile state (asked as the plugin asks; idempotent).
inline bool amx_tiles_granted() {
  constexpr long kReqXcompPerm = 0x1023, kGetXcompPerm = 0x1022, kXtiledata = 18;
  unsigned long long mask = 0;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtiledata) == 0 &&
         syscall(SYS_arch_prctl, kGetXcompPerm, &mask) == 0 && ((mask >> kXtiledata) & 1);
}

// Why this CPU cannot run `tier`, or "" when it can.
inline std::string cpu_tier_missing(const std::string& tier) {
  __builtin_cpu_init();
  if (tier == "amx") {
    if (!(__builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
          __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f")))
      return "this CPU has no AMX-BF16 tiles with AVX512-BF16";
    if (!amx_tiles_granted()) return "the kernel did not grant AMX tile state (arch_prctl)";
    return "";
  }
  if (tier == "avx512" &&
      !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")))
    return "this CPU has no AVX-512 F/BW/VL/DQ";
  if (tier == "avx2" && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c")))
    return "this CPU has no AVX2 + FMA + F16C";
  return "";
}

// SWITCHYARD_CPU_ISA=tier for the scope; kernels prepared inside it use that tier.
class ScopedCpuTier {
 public:
  explicit ScopedCpuTier(const std::string& tier) : env_("SWITCHYARD_CPU_ISA", tier) {}

 private:
  ScopedEnv env_;
};

inline std::string tier_test_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace sy::test

// In a tier-parameterised fixture's SetUp: skip, with the reason, a tier this CPU lacks.
#define SY_SKIP_UNLESS_CPU_TIER(tier)                                                   \
  do {                                                                                  \
    std::string sy_missing_ = ::sy::test::cpu_tier_missing(tier);                       \
    if (!sy_missing_.empty()) GTEST_SKIP() << "tier " << (tier) << ": " << sy_missing_; \
  } while (0)
