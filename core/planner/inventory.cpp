#include "core/planner/inventory.hpp"

#include <fstream>
#include <map>
#include <sstream>

#include "core/capability/vocabulary.hpp"
#include "core/graph/graph.hpp"

namespace sy {

using nlohmann::json;

namespace {

// The host's MemAvailable (what the kernel could give without swapping), in bytes.
std::optional<uint64_t> host_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

void measure_free_memory(const Registry& registry, InventoryDevice& dev) {
  if (dev.info.memory_is_host) {
    if (auto b = host_available_bytes()) dev.free_bytes = *b, dev.free_source = "MemAvailable";
    return;
  }
  for (const auto& name : dev.plugins) {
    const Plugin* p = registry.find(name);
    if (auto k = p ? p->device_index(dev.info) : std::nullopt)
      if (auto m = p->memory_info(*k)) {
        dev.free_bytes = m->free_bytes;
        dev.free_source = "memory_info of " + name;
        return;
      }
  }
  if (dev.info.memory_bytes)
    dev.free_bytes = dev.info.memory_bytes, dev.free_source = "memory_bytes";
}

}  // namespace

const InventoryDevice* Inventory::find(const std::string& id) const {
  for (const auto& d : devices)
    if (d.id == id) return &d;
  return nullptr;
}

Inventory live_inventory(const Registry& registry) {
  Inventory inv;
  inv.name = "live";
  std::map<std::pair<int, int>, size_t> seen;  // (type, device id) -> index
  std::map<int, int> per_type;
  for (const auto& r : registry.records()) {
    if (!r.loaded()) continue;
    for (const auto& d : r.plugin->devices()) {
      auto key = std::make_pair(int(d.type), int(d.id));
      auto it = seen.find(key);
      if (it == seen.end()) {
        InventoryDevice dev;
        dev.id = device_type_name(d.type) + ":" + std::to_string(per_type[int(d.type)]++);
        dev.info = d;
        it = seen.emplace(key, inv.devices.size()).first;
        inv.devices.push_back(dev);
      }
      inv.devices[it->second].plugins.push_back(r.name);
    }
  }
  for (auto& dev : inv.devices) measure_free_memory(registry, dev);
  return inv;
}

namespace {

Inventory read_target(const std::string& path);

}  // namespace

Inventory load_target(const std::string& path) {
  try {
    return read_target(path);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
    throw Error(Errc::bad_target, std::string("invalid target profile: ") + e.what(), path);
  }
}

namespace {

Inventory read_target(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(Errc::bad_target, "cannot read the target profile", path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    throw Error(Errc::bad_target, std::string("invalid JSON: ") + e.what(), path);
  }
  auto fail = [&](const std::string& where, const std::string& what) {
    throw Error(Errc::bad_target, what, path + ":" + where);
  };
  if (!j.is_object() || j.value("schema", "") != "switchyard.target/1")
    fail("schema", "expected \"schema\": \"switchyard.target/1\"");
  if (!j.contains("devices") || !j["devices"].is_array() || j["devices"].empty())
    fail("devices", "expected a non-empty array of devices");
  Inventory inv;
  inv.name = j.value("name", path);
  inv.described = true;
  std::map<int, int> per_type;
  for (size_t i = 0; i < j["devices"].size(); ++i) {
    const json& d = j["devices"][i];
    std::string where = "devices[" + std::to_string(i) + "]";
    if (!d.is_object() || !d.contains("type") || !d["type"].is_string())
      fail(where + ".type", "expected a device type string (cpu, cuda, ...)");
    auto type = parse_device_type(d["type"].get<std::string>());
    if (!type) fail(where + ".type", "unknown device type '" + d["type"].get<std::string>() + "'");
    int count = d.value("count", 1);
    if (count < 1 || count > 64) fail(where + ".count", "expected 1..64");
    for (int c = 0; c < count; ++c) {
      InventoryDevice dev;
      dev.info.type = *type;
      dev.info.id = per_type[int(*type)];
      dev.id = device_type_name(*type) + ":" + std::to_string(per_type[int(*type)]++);
      dev.info.name = d.value("name", dev.id);
      dev.info.arch = d.value("arch", "");
      dev.info.memory_bytes = d.value("memory_bytes", uint64_t(0));
      dev.info.compute_units = d.value("compute_units", 0);
      dev.info.available = d.value("available", true);
      dev.info.memory_is_host = *type == kDLCPU;
      if (dev.info.memory_bytes)
        dev.free_bytes = dev.info.memory_bytes, dev.free_source = "target profile";
      inv.devices.push_back(dev);
    }
  }
  return inv;
}

}  // namespace

}  // namespace sy
