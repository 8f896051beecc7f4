#include "tier/tier_scratch.hpp"

#include <cstdlib>
#include <new>

namespace sy::cpu {
namespace {

struct Slot {
  void* data = nullptr;
  size_t bytes = 0;
  ~Slot() { std::free(data); }
};

}  // namespace

void* tier_scratch(ScratchSlot slot, size_t bytes) {
  thread_local Slot slots[size_t(ScratchSlot::count)];
  Slot& s = slots[size_t(slot)];
  if (s.bytes < bytes) {
    const size_t want = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, want);
    if (!p) throw std::bad_alloc();
    std::free(s.data);
    s.data = p;
    s.bytes = want;
  }
  return s.data;
}

}  // namespace sy::cpu
