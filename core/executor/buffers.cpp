#include "core/executor/buffers.hpp"

#include <malloc.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>

#include "core/planner/memory.hpp"

namespace sy {
namespace {

// Large host buffers (weights, KV memory) are 2 MiB aligned, whole 2 MiB pages, and asked to be
// backed by transparent huge pages: a decode step streams every weight once, and on 4 KiB pages
// that is one TLB miss per page (65k pages per token for a 135M-parameter bf16 model).
void* host_alloc(size_t bytes) {
  if (bytes < size_t(kHostHugePage)) return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(size_t(kHostHugePage), bytes);
  if (p) ::madvise(p, bytes, MADV_HUGEPAGE);  // advice only: a refusal changes nothing
  return p;
}

}  // namespace

Error plan_bug(const std::string& what) {
  return Error(Errc::kernel_failed, "the plan " + what);
}

std::pair<const Plugin*, uint32_t> Memory::device_owner(const std::string& id) const {
  const InventoryDevice* dev = inventory_.find(id);
  if (!dev) throw plan_bug("names device " + id + ", which this machine lacks");
  for (const auto& name : dev->plugins) {
    const Plugin* p = registry_.find(name);
    if (!p || !p->has_device_memory()) continue;
    if (auto k = p->device_index(dev->info)) return {p, *k};
  }
  throw plan_bug("puts a value on " + id + ", but no plugin can allocate memory there");
}

Buffer Memory::allocate(const std::string& what, int64_t bytes, const std::string& location,
                        bool zero) const {
  Buffer b;
  b.bytes = bytes;
  b.location = location;
  if (location == kHostLocation) {
    const size_t size = size_t(host_allocation_bytes(bytes));
    b.data = host_alloc(size);
    if (!b.data)
      throw Error(Errc::device_out_of_memory,
                  "out of memory on host: " + std::to_string(size) + " bytes for " + what);
    if (zero) std::memset(b.data, 0, size);
    // The allocator's own size of the block, not the plan's arithmetic (host_allocation_bytes)
    // again: memory_report sets it beside the prediction, so the two must be able to differ.
    b.allocated = int64_t(::malloc_usable_size(b.data));
    return b;
  }
  auto [plugin, index] = device_owner(location);
  Expected<void*> data = plugin->alloc(index, uint64_t(bytes));
  if (!data) {
    Error e = data.error();
    Error out(e.code,
              "allocating " + std::to_string(bytes) + " bytes on " + location + ": " + e.message,
              what, e.hint);
    if (e.status) out.with_status(*e.status);
    throw out;
  }
  b.data = *data;
  b.plugin = plugin;
  b.device_index = index;
  b.allocated = bytes;
  return b;
}

void Memory::free(Buffer& b) const {
  if (!b.allocated || !b.data) return;
  if (b.plugin)
    b.plugin->free(b.device_index, b.data);
  else
    std::free(b.data);
  b.data = nullptr;
  b.allocated = 0;
}

void Memory::copy(const Buffer& src, const Buffer& dst, int64_t bytes, int64_t src_offset,
                  int64_t dst_offset) const {
  const char* from = static_cast<const char*>(src.data) + src_offset;
  char* to = static_cast<char*>(dst.data) + dst_offset;
  if (src.location == kHostLocation && dst.location == kHostLocation) {
    std::memcpy(to, from, size_t(bytes));
    return;
  }
  const Buffer& dev = src.location == kHostLocation ? dst : src;
  sy_copy_direction direction = src.location == kHostLocation   ? SY_COPY_HOST_TO_DEVICE
                                : dst.location == kHostLocation ? SY_COPY_DEVICE_TO_HOST
                                                                : SY_COPY_DEVICE_TO_DEVICE;
  if (auto e = dev.plugin->copy(dev.device_index, direction, to, from, uint64_t(bytes)))
    throw Error(e->code, "copy " + src.location + " -> " + dst.location + ": " + e->message)
        .with_status(e->status.value_or(SY_STATUS_INTERNAL));
}

DLDevice Memory::dl_device(const std::string& location) const {
  if (location == kHostLocation) return {kDLCPU, 0};
  const InventoryDevice* dev = inventory_.find(location);
  if (!dev) throw plan_bug("names device " + location + ", which this machine lacks");
  return {dev->info.type, dev->info.id};
}

}  // namespace sy
