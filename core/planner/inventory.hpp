// The devices a plan is made for: discovered live from the loaded plugins, or described by a
// target profile (examples/targets/*.json) for a machine that is not this one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/registry/registry.hpp"

namespace sy {

struct InventoryDevice {
  std::string id;  // "cpu:0", "cuda:0": type and index among devices of that type
  DeviceInfo info;
  std::vector<std::string> plugins;  // live: plugins that own this device; target: empty
  // Memory a plan may use there before anything is loaded: live, the free memory the owning
  // plugin's memory_info reports (a CPU: the host's MemAvailable); a target, its memory_bytes.
  // Unset when nothing says (memory_info missing and memory_bytes 0).
  std::optional<uint64_t> free_bytes;
  std::string free_source;  // "memory_info", "MemAvailable", "target profile", "memory_bytes"
};

struct Inventory {
  std::string name;        // "live" or the target's name
  bool described = false;  // true for a target profile: any plugin may be asked about any device
  std::vector<InventoryDevice> devices;
  const InventoryDevice* find(const std::string& id) const;
};

// Devices of the loaded plugins, one entry per (type, device id), owners listed.
Inventory live_inventory(const Registry& registry);
// Reads a target profile (schema switchyard.target/1); throws Error (Errc::bad_target, SY210).
Inventory load_target(const std::string& path);

}  // namespace sy
