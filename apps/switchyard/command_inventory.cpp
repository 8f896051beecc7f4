// `plugins`, `devices`, `caps`: what was discovered, on which devices, serving what.
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/switchyard/commands.hpp"
#include "apps/switchyard/exit_codes.hpp"
#include "apps/switchyard/text_table.hpp"
#include "core/capability/vocabulary.hpp"
#include "core/errors/errors.hpp"
#include "core/planner/inventory.hpp"

namespace sy::cli {
namespace {

namespace po = boost::program_options;
using nlohmann::json;

struct ListingOptions {
  bool json = false;
  std::string plugin;  // only this plugin; exit 5 if it did not load
  std::string target;  // devices: a described machine instead of this one
};

// Parses the options every listing shares; returns false (after printing help) on --help.
bool parse_listing(const Args& args, const char* what, ListingOptions& out) {
  po::options_description desc(std::string("switchyard ") + what + " options");
  desc.add_options()("help,h", "show this help")("json", po::bool_switch(&out.json),
                                                 "machine-readable output")(
      "plugin", po::value<std::string>(&out.plugin), "only this plugin (exit 5 if it failed)");
  if (std::string(what) == "devices")
    desc.add_options()("target", po::value<std::string>(&out.target),
                       "the devices of a described machine (examples/targets/*.json) and the "
                       "plugins whose manifests declare kernels for each; no library is opened");
  auto vm = parse_command(args, desc);
  if (vm.count("help")) {
    std::cout << desc << "\n" << kExitCodeHelp;
    return false;
  }
  return true;
}

bool selected(const PluginRecord& r, const ListingOptions& o) {
  return o.plugin.empty() || r.name == o.plugin || r.path.stem() == o.plugin;
}

// Exit code for a listing: 5 when the plugin the user named is missing or failed.
int listing_exit(const Registry& reg, const ListingOptions& o) {
  if (o.plugin.empty()) return kExitOk;
  const PluginRecord* r = reg.find_record(o.plugin);
  if (r && r->loaded()) return kExitOk;
  std::cerr << "switchyard: plugin '" << o.plugin << "' "
            << (r ? std::string("failed at stage ") + load_stage_name(r->diagnostic->stage) + ": " +
                        r->diagnostic->reason
                  : std::string("was not found on the plugin search path"))
            << "\n";
  return kExitPluginError;
}

std::string abi_text(const Plugin& p) {
  return std::to_string(p.abi_major()) + "." + std::to_string(p.abi_minor());
}

std::string bytes_text(uint64_t bytes) {
  if (bytes == 0) return "-";
  double gib = static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", gib);
  return buf;
}

std::string devices_text(const Plugin& p) {
  if (p.devices().empty()) return "0 (" + p.no_devices_reason() + ")";
  std::string out = std::to_string(p.devices().size()) + ":";
  for (const auto& d : p.devices())
    out += " " + d.name + " [" + d.arch + (d.available ? "" : ", unavailable") + "]";
  return out;
}

}  // namespace

json plugin_json(const PluginRecord& r) {
  json j{{"name", r.name.empty() ? r.path.stem().string() : r.name},
         {"path", r.path.string()},
         {"status", r.loaded() ? "loaded" : "failed"}};
  if (!r.loaded()) {
    j["stage"] = load_stage_name(r.diagnostic->stage);
    j["reason"] = r.diagnostic->reason;
    j["hint"] = r.diagnostic->hint;
    j["devices"] = json::array();
    return j;
  }
  const Plugin& p = *r.plugin;
  j["abi_version"] = abi_text(p);
  j["abi_negotiated"] = std::to_string(p.abi_major()) + "." + std::to_string(p.negotiated_minor());
  j["plugin_version"] = p.version();
  json devices = json::array();
  for (const auto& d : p.devices()) devices.push_back(to_json(d));
  j["devices"] = devices;
  if (p.devices().empty()) j["devices_reason"] = p.no_devices_reason();
  j["kernels"] = p.kernels().size();
  j["sha256"] = p.verification().sha256;  // what a conformance report must name to count
  return j;
}

int run_plugins(const GlobalOptions& global, const Args& args) {
  ListingOptions o;
  if (!parse_listing(args, "plugins", o)) return kExitOk;
  Registry reg = discover_plugins(global, default_load_options());
  if (o.json) {
    json out = json::array();
    for (const auto& r : reg.records())
      if (selected(r, o)) out.push_back(plugin_json(r));
    std::cout << out.dump(2) << "\n";
    return listing_exit(reg, o);
  }
  std::cout << "Plugin search path (" << reg.search_path().source << "):";
  for (const auto& d : reg.search_path().dirs) std::cout << " " << d.string();
  std::cout << "\n\n";
  TextTable table({"PLUGIN", "STATUS", "ABI", "KERNELS", "DEVICES / FAILURE", "PATH"});
  for (const auto& r : reg.records()) {
    if (!selected(r, o)) continue;
    if (r.loaded())
      table.add_row({r.name, "loaded", abi_text(*r.plugin),
                     std::to_string(r.plugin->kernels().size()), devices_text(*r.plugin),
                     r.path.string()});
    else
      table.add_row({r.name.empty() ? r.path.stem().string() : r.name, "failed", "-", "-",
                     std::string("stage ") + load_stage_name(r.diagnostic->stage) + ": " +
                         r.diagnostic->reason + " (hint: " + r.diagnostic->hint + ")",
                     r.path.string()});
  }
  if (table.empty())
    std::cout << "No plugins found.\n";
  else
    table.print(std::cout);
  return listing_exit(reg, o);
}

// `devices --target`: the profile's devices and, from the manifests, the plugins that declare
// kernels for each device type.
int target_devices(const GlobalOptions& global, const ListingOptions& o) {
  Inventory inv;
  try {
    inv = load_target(o.target);
  } catch (const Error& e) {
    std::cerr << "switchyard devices: error " << code_text(e.code) << ": " << e.what() << "\n";
    return error_info(e.code).exit_code;
  }
  LoadOptions load = default_load_options();
  load.manifest_only = true;
  Registry reg = discover_plugins(global, load);
  json out = json::array();
  TextTable table({"DEVICE", "TYPE", "ARCH", "MEMORY", "PLUGINS (KERNELS)"});
  for (const InventoryDevice& d : inv.devices) {
    json plugins = json::object();
    std::string text;
    for (const auto& r : reg.records()) {
      if (!r.loaded() || !selected(r, o)) continue;
      int n = 0;
      for (const Envelope& e : r.plugin->kernels()) n += e.device_type == d.info.type;
      if (!n) continue;
      plugins[r.name] = {{"kernels", n}, {"source", r.plugin->source()}};
      text += (text.empty() ? "" : ", ") + r.name + " (" + std::to_string(n) + ")";
    }
    json j = to_json(d.info);
    j["id"] = d.id;
    j["plugins"] = plugins;
    out.push_back(j);
    table.add_row({d.id + " " + d.info.name, device_type_name(d.info.type), d.info.arch,
                   bytes_text(d.info.memory_bytes), text.empty() ? "none" : text});
  }
  if (o.json)
    std::cout << out.dump(2) << "\n";
  else
    table.print(std::cout);
  return kExitOk;
}

int run_devices(const GlobalOptions& global, const Args& args) {
  ListingOptions o;
  if (!parse_listing(args, "devices", o)) return kExitOk;
  if (!o.target.empty()) return target_devices(global, o);
  Registry reg = discover_plugins(global, default_load_options());
  // Free memory as the planner sees it (the plugin's memory_info; the host's MemAvailable).
  const Inventory inv = live_inventory(reg);
  auto free_of = [&](const DeviceInfo& d) -> const InventoryDevice* {
    for (const auto& dev : inv.devices)
      if (dev.info.type == d.type && dev.info.id == d.id && dev.free_bytes) return &dev;
    return nullptr;
  };
  json out = json::array();
  TextTable table({"PLUGIN", "DEVICE", "TYPE", "ARCH", "MEMORY", "FREE", "UNITS", "AVAILABLE"});
  for (const auto& r : reg.records()) {
    if (!r.loaded() || !selected(r, o)) continue;
    for (const auto& d : r.plugin->devices()) {
      json j = to_json(d);
      j["plugin"] = r.name;
      const InventoryDevice* live = free_of(d);
      if (live) j["free_bytes"] = *live->free_bytes, j["free_source"] = live->free_source;
      out.push_back(j);
      table.add_row({r.name, d.name, device_type_name(d.type), d.arch, bytes_text(d.memory_bytes),
                     live ? bytes_text(*live->free_bytes) : "-",
                     d.compute_units ? std::to_string(d.compute_units) : "-",
                     d.available ? "yes" : "no: " + d.unavailable_reason});
    }
    if (r.plugin->devices().empty())
      table.add_row(
          {r.name, "(none)", "-", "-", "-", "-", "-", "no: " + r.plugin->no_devices_reason()});
  }
  if (o.json)
    std::cout << out.dump(2) << "\n";
  else
    table.print(std::cout);
  return listing_exit(reg, o);
}

int run_caps(const GlobalOptions& global, const Args& args) {
  ListingOptions o;
  if (!parse_listing(args, "caps", o)) return kExitOk;
  // Declarations come from the manifests; no library is opened (`plugins` opens them).
  LoadOptions load = default_load_options();
  load.manifest_only = true;
  Registry reg = discover_plugins(global, load);
  json out = json::array();
  TextTable table({"PLUGIN", "KERNEL", "OP", "FAMILY", "DEVICE", "DTYPES", "FEATURES", "LIMITS",
                   "CONFORMANCE"});
  for (const auto& r : reg.records()) {
    if (!r.loaded() || !selected(r, o)) continue;
    for (const auto& e : r.plugin->kernels()) {
      json j = to_json(e);
      j["plugin"] = r.name;
      const KernelVerification v = r.plugin->verification().of(e.kernel);
      j["conformance"] = {{"state", verification_name(v.state)},
                          {"why", v.why},
                          {"sha256", r.plugin->verification().sha256}};
      out.push_back(j);
      std::string limits;
      if (e.op == SY_OP_ATTENTION || e.op == SY_OP_FUSED_DECODE_ATTENTION)
        limits = "head_dim " + e.head_dims_text() + "; gqa " +
                 (e.max_gqa_ratio ? "<=" + std::to_string(e.max_gqa_ratio) : "any");
      if (e.default_residency == SY_RESIDENCY_HOST)
        limits += std::string(limits.empty() ? "" : "; ") + "host-only operands";
      if (e.weight_dtypes)
        limits += std::string(limits.empty() ? "" : "; ") + "weights " +
                  join(dtype_names(e.weight_dtypes));
      table.add_row({r.name, e.kernel, sy_op_kind_name(e.op), e.family,
                     device_type_name(e.device_type), join(dtype_names(e.dtypes)),
                     join(feature_names(e.features)), limits.empty() ? "-" : limits,
                     verification_name(v.state)});
    }
  }
  if (o.json)
    std::cout << out.dump(2) << "\n";
  else
    table.print(std::cout);
  return listing_exit(reg, o);
}

po::variables_map parse_command(const Args& args, const po::options_description& desc,
                                const po::positional_options_description* positional) {
  po::command_line_parser parser(args);
  parser.options(desc).style(kOptionStyle);
  if (positional) parser.positional(*positional);
  po::variables_map vm;
  po::store(parser.run(), vm);
  po::notify(vm);
  return vm;
}

}  // namespace sy::cli
