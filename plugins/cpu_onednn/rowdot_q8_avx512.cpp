// The vnni form of rowdot_q8.hpp, chosen on the avx512 tier of a CPU with AVX512-VNNI.
#include "rowdot_q8_vnni.hpp"

namespace sy::cpu {
namespace {

const RowdotQ8Tier kTier = make_q8_tier<VnniQ8>("q8_vnni");

}  // namespace

const RowdotQ8Tier& rowdot_q8_vnni() {
  return kTier;
}

}  // namespace sy::cpu
