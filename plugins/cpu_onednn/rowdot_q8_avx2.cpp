// The avx2 tier of rowdot_q8.hpp: maddubs + madd (the same integers as VNNI's vpdpbusd).
#include "rowdot_q8_avx2.hpp"

namespace sy::cpu {
namespace {

const RowdotQ8Tier kTier = make_q8_tier<Avx2Q8>("q8_avx2");

}  // namespace

const RowdotQ8Tier& rowdot_q8_avx2() {
  return kTier;
}

}  // namespace sy::cpu
