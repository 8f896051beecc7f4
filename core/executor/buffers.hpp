// Memory the executor owns or maps, at a location of the plan ("host" or a device id): what
// Model (weights) and Context (KV memory, activation arena) allocate, and the copies between
// locations, through the plugin that owns a device's memory.
#pragma once

#include <cstdint>
#include <string>

#include "core/planner/inventory.hpp"
#include "core/planner/memory.hpp"
#include "core/registry/registry.hpp"

namespace sy {

struct Buffer {
  void* data = nullptr;
  int64_t bytes = 0;
  std::string location;
  const Plugin* plugin = nullptr;  // device memory: the plugin that allocated it
  uint32_t device_index = 0;
  // Bytes this buffer holds, as the allocator counts them (host: glibc's malloc_usable_size;
  // a device: what its plugin was asked for); 0 for a view or a mapping.
  int64_t allocated = 0;
  bool mapped = false;  // the model file's own bytes (weights)
};

// Allocates and frees buffers and copies between them, for one registry and inventory.
class Memory {
 public:
  Memory(const Registry& registry, const Inventory& inventory)
      : registry_(registry), inventory_(inventory) {}

  // `bytes` of new memory at `location` for `what` (named in errors: SY305). Host memory is
  // zeroed when `zero` (every page: what the plan counts is then resident), 2 MiB aligned
  // and in whole 2 MiB pages from 2 MiB on, with transparent huge pages asked for.
  Buffer allocate(const std::string& what, int64_t bytes, const std::string& location,
                  bool zero = true) const;
  void free(Buffer& b) const;
  // Copies `bytes` from `src` to `dst` (host or device, in either direction). Throws Error.
  void copy(const Buffer& src, const Buffer& dst, int64_t bytes, int64_t src_offset = 0,
            int64_t dst_offset = 0) const;
  DLDevice dl_device(const std::string& location) const;
  // The plugin and its device index that own inventory device `id`, for allocations and copies.
  std::pair<const Plugin*, uint32_t> device_owner(const std::string& id) const;
  const Registry& registry() const { return registry_; }
  const Inventory& inventory() const { return inventory_; }

 private:
  const Registry& registry_;
  const Inventory& inventory_;
};

// A plan that names something the executor does not have: the planner's fault (SY301).
Error plan_bug(const std::string& what);

}  // namespace sy
